// The hand-written pre-tokenizer against pieces the GPT-2 regex gives (worked out by hand from
// its alternatives), and the ICU-derived character classes.
#include <gtest/gtest.h>
#include <unicode/uchar.h>

#include "megatron/core/check.h"
#include "megatron/tokenizer/pretokenizer.h"

namespace megatron::tokenizer {
namespace {

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  pretokenize(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

using P = std::vector<std::string>;

TEST(Pretokenizer, SplitsWordsWithLeadingSpace) {
  EXPECT_EQ(pieces("Hello world"), (P{"Hello", " world"}));
  EXPECT_EQ(pieces("a1b"), (P{"a", "1", "b"}));
  EXPECT_EQ(pieces(" 123 abc!?"), (P{" 123", " abc", "!?"}));
}

TEST(Pretokenizer, ContractionsAreLowercaseOnly) {
  EXPECT_EQ(pieces("don't"), (P{"don", "'t"}));
  EXPECT_EQ(pieces("we'll they've I'm you're he'd it's"),
            (P{"we", "'ll", " they", "'ve", " I", "'m", " you", "'re", " he", "'d", " it", "'s"}));
  EXPECT_EQ(pieces("DON'T"), (P{"DON", "'", "T"}));
  EXPECT_EQ(pieces("x 's"), (P{"x", " '", "s"}));
  EXPECT_EQ(pieces("?'s"), (P{"?'", "s"}));
  EXPECT_EQ(pieces("'"), (P{"'"}));
  EXPECT_EQ(pieces("'l"), (P{"'", "l"}));
}

TEST(Pretokenizer, WhitespaceRunsLeaveTheLastSpaceToTheNextWord) {
  EXPECT_EQ(pieces("a  b"), (P{"a", " ", " b"}));
  EXPECT_EQ(pieces("a   b"), (P{"a", "  ", " b"}));
  EXPECT_EQ(pieces("a \n b"), (P{"a", " \n", " b"}));
  EXPECT_EQ(pieces("a\nb"), (P{"a", "\n", "b"}));
  EXPECT_EQ(pieces("a \nb"), (P{"a", " ", "\n", "b"}));
  EXPECT_EQ(pieces("a  "), (P{"a", "  "}));
  EXPECT_EQ(pieces("\n\n"), (P{"\n\n"}));
  EXPECT_EQ(pieces(" "), (P{" "}));
  EXPECT_EQ(pieces("\t!"), (P{"\t", "!"}));
}

TEST(Pretokenizer, UnicodeClassesDecideRuns) {
  // U+00E9 letter, U+0663 Arabic-Indic digit three, U+3000 ideographic space, U+2014 dash.
  EXPECT_EQ(pieces("caf\xC3\xA9 \xD9\xA3\xD9\xA3"), (P{"caf\xC3\xA9", " \xD9\xA3\xD9\xA3"}));
  EXPECT_EQ(pieces("a\xE3\x80\x80" "b"), (P{"a", "\xE3\x80\x80", "b"}));
  EXPECT_EQ(pieces("a \xE2\x80\x94\xE2\x80\x94"), (P{"a", " \xE2\x80\x94\xE2\x80\x94"}));
}

TEST(Pretokenizer, PiecesConcatenateToTheInput) {
  const std::string text = "  Mixed\t\ttext,\xE6\x97\xA5\xE6\x9C\xAC  42\r\n 'quoted' \xF0\x9F\x98\x80!";
  std::string joined;
  for (const auto& p : pieces(text)) joined += p;
  EXPECT_EQ(joined, text);
}

TEST(Pretokenizer, RejectsInvalidUtf8) {
  EXPECT_THROW(pieces("ok \xC3"), Error);
  EXPECT_THROW(pieces("\xC0\xAF"), Error);  // overlong '/'
}

TEST(CharClass, AgreesWithIcuOnEveryCodePoint) {
  int mismatches = 0;
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    const auto c = static_cast<UChar32>(cp);
    CharClass expected = CharClass::kOther;
    if (U_GET_GC_MASK(c) & U_GC_L_MASK) expected = CharClass::kLetter;
    else if (U_GET_GC_MASK(c) & U_GC_N_MASK) expected = CharClass::kNumber;
    else if (u_isUWhiteSpace(c)) expected = CharClass::kSpace;
    if (char_class(cp) != expected && ++mismatches < 5) ADD_FAILURE() << "U+" << std::hex << static_cast<std::uint32_t>(cp);
  }
  EXPECT_EQ(mismatches, 0);
}

// The TikTokenizer patterns' flags on characters whose categories are known: upper (Lu), title
// (Lt), lower (Ll), modifier (Lm), other letters (Lo), marks (Mn, Mc), numbers, spaces, line breaks.
TEST(CharClass, TiktokenFlagsOfKnownCharacters) {
  using namespace flags;
  EXPECT_EQ(code_point_flags(U'A'), kLetter | kUpper);
  EXPECT_EQ(code_point_flags(0x01C5), kLetter | kUpper);          // Dž, title case
  EXPECT_EQ(code_point_flags(U'a'), kLetter | kLower);
  EXPECT_EQ(code_point_flags(0x02B0), kLetter | kUpper | kLower);  // modifier letter small h
  EXPECT_EQ(code_point_flags(0x4E2D), kLetter | kUpper | kLower);  // 中
  EXPECT_EQ(code_point_flags(0x0301), kUpper | kLower);            // combining acute: a mark, not a letter
  EXPECT_EQ(code_point_flags(0x0903), kUpper | kLower);            // Devanagari visarga (Mc)
  EXPECT_EQ(code_point_flags(U'7'), kNumber);
  EXPECT_EQ(code_point_flags(0x2160), kNumber);                    // Roman numeral one (Nl)
  EXPECT_EQ(code_point_flags(U'\n'), kSpace | kLineBreak);
  EXPECT_EQ(code_point_flags(U'\r'), kSpace | kLineBreak);
  EXPECT_EQ(code_point_flags(0x85), kSpace);
  EXPECT_EQ(code_point_flags(0x3000), kSpace);
  EXPECT_EQ(code_point_flags(0x1C), 0);
  EXPECT_EQ(code_point_flags(U'/'), 0);
  EXPECT_EQ(code_point_flags(0x110000), 0);
}

TEST(CharClass, WhiteSpaceIsTheUnicodeProperty) {
  EXPECT_EQ(char_class(0x85), CharClass::kSpace);
  EXPECT_EQ(char_class(0xA0), CharClass::kSpace);
  EXPECT_EQ(char_class(0x2028), CharClass::kSpace);
  EXPECT_EQ(char_class(0x1C), CharClass::kOther);   // a separator control, not White_Space
  EXPECT_EQ(char_class(0x200B), CharClass::kOther); // zero width space is Cf
  EXPECT_EQ(char_class(0xB2), CharClass::kNumber);  // superscript two (No)
  EXPECT_EQ(char_class(0x2160), CharClass::kNumber);  // Roman numeral one (Nl)
}

}  // namespace
}  // namespace megatron::tokenizer
