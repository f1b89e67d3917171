// The TikTokenizer against tiktoken itself (tiktoken_reference.py, through MEGATRON_PYTHON): a
// vocabulary in Megatron's JSON format built from GPT-2's merges, both of Megatron's patterns and a
// cut vocabulary, with the pieces also against the `regex` module's matches of the same patterns;
// on the GPT-2 edge-case strings, the real-text corpus and texts that stress the patterns (case
// changes, marks, line breaks, Unicode spaces, special-token text). Also the special tokens,
// decoding, and every check Megatron makes of a vocabulary file, each named.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "megatron/core/check.h"
#include "megatron/tokenizer/tiktoken_tokenizer.h"
#include "test_paths.h"
#include "test_support.h"

namespace megatron::tokenizer {
namespace {

namespace fs = std::filesystem;
constexpr std::int64_t kNumSpecial = 1000;
constexpr std::int64_t kTokens = 50256;  // 256 bytes + GPT-2's 50000 merges
constexpr std::int64_t kCut = 20000;     // tiktoken_reference.py's CUT

// tiktoken_reference.py's output: the CTest fixture tiktoken_reference writes it before these run.
const fs::path& reference() { return testing::fixture_reference("tiktoken_reference", "tiktoken_reference"); }

std::unique_ptr<Tokenizer> make(TiktokenPattern pattern, std::int64_t vocab_size = kTokens + kNumSpecial) {
  TiktokenOptions options;
  options.path = (reference() / "vocab.json").string();
  options.pattern = pattern;
  options.vocab_size = vocab_size;
  options.num_special_tokens = kNumSpecial;
  return make_tiktoken_tokenizer(options);
}

std::string escaped(const std::string& text) { return nlohmann::json(text).dump().substr(0, 300); }

TEST(Tiktoken, EveryTextEncodesAsTiktokenDoes) {
  ASSERT_TRUE(fs::exists(reference() / "done"));
  const auto v1 = make(TiktokenPattern::kV1);
  const auto v2 = make(TiktokenPattern::kV2);
  const auto v2_cut = make(TiktokenPattern::kV2, kCut + kNumSpecial);
  const std::vector<std::pair<std::string, const Tokenizer*>> encoders = {
      {"v1", v1.get()}, {"v2", v2.get()}, {"v2_cut", v2_cut.get()}};
  std::ifstream cases(reference() / "cases.jsonl");
  std::string line;
  int texts = 0, mismatches = 0;
  while (std::getline(cases, line)) {
    const auto c = nlohmann::json::parse(line);
    const std::string text = c["text"].get<std::string>();
    for (const auto& [name, tokenizer] : encoders) {
      const auto expected = c[name].get<std::vector<std::int32_t>>();
      const auto got = tokenizer->encode(text);
      if (got != expected && ++mismatches <= 5) {
        std::size_t at = 0;
        while (at < got.size() && at < expected.size() && got[at] == expected[at]) ++at;
        ADD_FAILURE() << name << ": text " << texts << " " << escaped(text) << " differs at token " << at << " of "
                      << expected.size() << " (tiktoken " << (at < expected.size() ? expected[at] : -1) << ", ours "
                      << (at < got.size() ? got[at] : -1) << ")";
      }
    }
    for (const auto& [name, pattern] : {std::pair{"v1", TiktokenPattern::kV1}, std::pair{"v2", TiktokenPattern::kV2}}) {
      std::vector<std::string> pieces;
      detail::split_tiktoken(text, pattern, [&](std::string_view piece) { pieces.emplace_back(piece); });
      const auto expected = c[std::string(name) + "_pieces"].get<std::vector<std::string>>();
      if (pieces != expected && ++mismatches <= 5) {
        std::size_t at = 0;
        while (at < pieces.size() && at < expected.size() && pieces[at] == expected[at]) ++at;
        ADD_FAILURE() << name << " pieces: text " << texts << " " << escaped(text) << " differs at piece " << at
                      << " (regex " << (at < expected.size() ? escaped(expected[at]) : "none") << ", ours "
                      << (at < pieces.size() ? escaped(pieces[at]) : "none") << ")";
      }
    }
    EXPECT_EQ(v2->decode(v2->encode(text)), text) << escaped(text);
    ++texts;
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(texts, 1000);
}

TEST(Tiktoken, SpecialTokensComeFirstAndTheEndOfDocumentIsTheirThird) {
  const auto t = make(TiktokenPattern::kV2);
  EXPECT_EQ(t->type(), "TikTokenizer");
  EXPECT_EQ(t->vocab_size(), static_cast<std::size_t>(kTokens + kNumSpecial));
  EXPECT_EQ(t->eod(), 2);
  const std::vector<std::int32_t> specials = {0, 1, 2, 3, 999};
  EXPECT_EQ(t->decode(specials), "<unk><s></s><SPECIAL_3><SPECIAL_999>");
  // Special-token text is ordinary text (encode_ordinary): "</s>" is not id 2.
  const auto ids = t->encode("</s>");
  EXPECT_GT(ids.size(), 1u);
  for (const std::int32_t id : ids) EXPECT_GE(id, kNumSpecial);
  // Byte b is id b + the special tokens; a lone continuation byte decodes to U+FFFD.
  EXPECT_EQ(t->encode("A"), std::vector<std::int32_t>{'A' + kNumSpecial});
  EXPECT_EQ(t->decode(std::vector<std::int32_t>{0x80 + kNumSpecial}), "\xEF\xBF\xBD");
  EXPECT_THROW(t->decode(std::vector<std::int32_t>{static_cast<std::int32_t>(kTokens + kNumSpecial)}), Error);

  TiktokenOptions custom;
  custom.path = (reference() / "vocab.json").string();
  custom.vocab_size = kTokens + 8;
  custom.num_special_tokens = 8;
  custom.special_tokens = {"<s>", "<unk>", "<pad>", "</s>"};
  const auto c = make_tiktoken_tokenizer(custom);
  EXPECT_EQ(c->eod(), 3);
  EXPECT_EQ(c->decode(std::vector<std::int32_t>{0, 3, 4, 7}), "<s></s><SPECIAL_4><SPECIAL_7>");
}

// Writes `entries` as a vocabulary file and returns the error make_tiktoken_tokenizer gives.
std::string error_for(const nlohmann::json& entries, std::int64_t vocab_size, const std::string& name = "v.json") {
  const fs::path path = fs::temp_directory_path() / ("megatron-tiktoken-bad-" + std::to_string(::getpid()) + name);
  std::ofstream(path) << entries.dump();
  TiktokenOptions options;
  options.path = path.string();
  options.vocab_size = vocab_size;
  options.num_special_tokens = 3;
  std::string message;
  try {
    make_tiktoken_tokenizer(options);
  } catch (const Error& e) {
    message = e.what();
  }
  fs::remove(path);
  return message;
}

nlohmann::json byte_entries(int count) {
  nlohmann::json entries = nlohmann::json::array();
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int b = 0; b < count; ++b) {
    // base64 of the single byte b: two characters and "==".
    std::string encoded = {kAlphabet[(b >> 2) & 63], kAlphabet[(b & 3) << 4], '=', '='};
    entries.push_back({{"rank", b}, {"token_bytes", encoded}, {"token_str", "x"}});
  }
  return entries;
}

TEST(Tiktoken, EachProblemOfAVocabularyFileIsNamed) {
  nlohmann::json good = byte_entries(256);
  good.push_back({{"rank", 256}, {"token_bytes", "YWI="}, {"token_str", "ab"}});  // "ab"
  EXPECT_EQ(error_for(good, 257 + 3), "");
  EXPECT_NE(error_for(good, 258 + 3).find("has 257 tokens; --vocab-size 261 less 3 special tokens needs 258"),
            std::string::npos);

  nlohmann::json wrong_rank = good;
  wrong_rank[256]["rank"] = 300;
  EXPECT_NE(error_for(wrong_rank, 260).find("entry 256: rank must be 256, got 300"), std::string::npos);
  nlohmann::json extra_key = good;
  extra_key[10]["id"] = 10;
  EXPECT_NE(error_for(extra_key, 260).find("entry 10: needs exactly the keys rank, token_bytes and token_str"),
            std::string::npos);
  nlohmann::json not_bytes = good;
  not_bytes[65]["token_bytes"] = "QkM=";  // "BC" where byte 65 belongs
  EXPECT_NE(error_for(not_bytes, 260).find("entry 65: the first 256 tokens must be the single bytes"),
            std::string::npos);
  nlohmann::json bad_base64 = good;
  bad_base64[256]["token_bytes"] = "Y*I=";
  EXPECT_NE(error_for(bad_base64, 260).find("entry 256: token_bytes is not base64"), std::string::npos);
  nlohmann::json twice = good;
  twice[256]["token_bytes"] = "QQ==";  // "A" again
  EXPECT_NE(error_for(twice, 260).find("entry 256: the same bytes as an earlier token"), std::string::npos);
  EXPECT_NE(error_for(nlohmann::json::object(), 260).find("a TikTokenizer vocabulary is a JSON list"),
            std::string::npos);
  EXPECT_NE(error_for(good, 260, "v.txt").find("a TikTokenizer vocabulary is a .json file"), std::string::npos);
  EXPECT_NE(error_for(good, 3).find("--tiktoken-num-special-tokens 3 must be at least the 3 special tokens and below "
                                    "--vocab-size 3"),
            std::string::npos);
  // The vocabulary is cut before it is checked, as Megatron cuts it: a bad entry past the cut is
  // never read.
  EXPECT_EQ(error_for(wrong_rank, 256 + 3), "");
  // A --vocab-size that cuts into the 256 single bytes is refused at the start, not at the first
  // text with a byte outside them.
  const std::string cut = error_for(good, 200 + 3);
  EXPECT_NE(cut.find("--vocab-size 203 less 3 special tokens keeps 200 tokens of "), std::string::npos) << cut;
  EXPECT_NE(cut.find("fewer than its 256 single bytes, which every text needs"), std::string::npos) << cut;
  EXPECT_NE(cut.find("give --vocab-size at least 259"), std::string::npos) << cut;

  TiktokenOptions no_eos;
  no_eos.path = "v.json";
  no_eos.special_tokens = {"<unk>", "<s>"};
  EXPECT_THROW(make_tiktoken_tokenizer(no_eos), Error);
  EXPECT_THROW(parse_tiktoken_pattern("v3"), Error);
}

}  // namespace
}  // namespace megatron::tokenizer
