// JsonDocumentParser against Python's json.loads: every accepted line gives the strings
// json.loads(line)[key] would give, every line json.loads rejects is rejected with its reason and
// column (1-based, as in Python's messages), and lone surrogate escapes in the extracted texts
// are rejected on purpose.
// Expected values were taken from CPython 3.11's json module.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "megatron/data/json_document.h"

namespace megatron::data {
namespace {

using Sentences = std::vector<std::string>;

// The sentences of every key after a successful parse; fails the test if the parse fails.
std::vector<Sentences> parse_ok(std::string_view line, std::vector<std::string> keys = {"text"}) {
  JsonDocumentParser parser(std::move(keys));
  std::string error;
  EXPECT_TRUE(parser.parse(line, error)) << "line: " << line << "\nerror: " << error;
  std::vector<Sentences> out;
  for (std::size_t k = 0; k < parser.num_keys(); ++k) {
    Sentences sentences;
    for (const std::string_view s : parser.sentences(k)) sentences.emplace_back(s);
    out.push_back(std::move(sentences));
  }
  return out;
}

// The error message of a parse that must fail.
std::string parse_error(std::string_view line, std::vector<std::string> keys = {"text"}) {
  JsonDocumentParser parser(std::move(keys));
  std::string error;
  EXPECT_FALSE(parser.parse(line, error)) << "accepted: " << line;
  EXPECT_FALSE(error.empty()) << line;
  return error;
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

TEST(JsonDocument, ReturnsStringValue) {
  EXPECT_EQ(parse_ok(R"({"text": "hello world"})"), (std::vector<Sentences>{{"hello world"}}));
}

TEST(JsonDocument, ReturnsUnescapedStringAsViewIntoLine) {
  const std::string line = R"({"id": 1, "text": "plain é text"})";
  JsonDocumentParser parser({"text"});
  std::string error;
  ASSERT_TRUE(parser.parse(line, error)) << error;
  ASSERT_EQ(parser.sentences(0).size(), 1u);
  EXPECT_EQ(parser.sentences(0)[0], "plain é text");
  EXPECT_EQ(parser.sentences(0)[0].data(), line.data() + line.find("plain"));
}

TEST(JsonDocument, DecodesEveryEscape) {
  const auto got = parse_ok(R"({"text": "a\n\t\"\\\/\b\f\r\u00e9\u00C9\u0041\ud83d\ude00z"})");
  EXPECT_EQ(got, (std::vector<Sentences>{{"a\n\t\"\\/\b\f\r\xC3\xA9\xC3\x89" "A\xF0\x9F\x98\x80z"}}));
}

TEST(JsonDocument, DecodesEscapedNulAndBmpEdges) {
  const auto got = parse_ok(R"({"text": "\u0000|\u007f|\u07ff|\u0800|\uffff|\udbff\udfff"})");
  constexpr char kWant[] = "\0|\x7F|\xDF\xBF|\xE0\xA0\x80|\xEF\xBF\xBF|\xF4\x8F\xBF\xBF";
  const std::string want(kWant, sizeof(kWant) - 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].size(), 1u);
  EXPECT_EQ(got[0][0], want);
}

TEST(JsonDocument, ReturnsEachStringOfList) {
  EXPECT_EQ(parse_ok(R"({"text": ["first", "se\"cond", "", "third"]})"),
            (std::vector<Sentences>{{"first", "se\"cond", "", "third"}}));
}

TEST(JsonDocument, EmptyListGivesNoSentences) {
  EXPECT_EQ(parse_ok(R"({"text": []})"), (std::vector<Sentences>{{}}));
  EXPECT_EQ(parse_ok(R"({"text": [ ]})"), (std::vector<Sentences>{{}}));
}

TEST(JsonDocument, EmptyStringGivesOneEmptySentence) {
  EXPECT_EQ(parse_ok(R"({"text": ""})"), (std::vector<Sentences>{{""}}));
}

TEST(JsonDocument, LastDuplicateKeyWins) {
  EXPECT_EQ(parse_ok(R"({"text": "first", "id": 1, "text": "second"})"), (std::vector<Sentences>{{"second"}}));
  EXPECT_EQ(parse_ok(R"({"text": ["a", "b\n"], "text": "c"})"), (std::vector<Sentences>{{"c"}}));
  EXPECT_EQ(parse_ok(R"({"text": "c\n", "text": ["a", "b"]})"), (std::vector<Sentences>{{"a", "b"}}));
}

// json.loads('{"text": 1, "text": "ok"}') == {"text": "ok"}: an earlier value of the wrong type
// is overwritten, so the line is a document.
TEST(JsonDocument, LastDuplicateKeyWinsOverEarlierValueOfWrongType) {
  EXPECT_EQ(parse_ok(R"({"text": 1, "text": "ok"})"), (std::vector<Sentences>{{"ok"}}));
  EXPECT_EQ(parse_ok(R"({"text": ["a", null], "text": ["b"]})"), (std::vector<Sentences>{{"b"}}));
  EXPECT_TRUE(contains(parse_error(R"({"text": "ok", "text": 1})"), "\"text\" is a number"));
}

TEST(JsonDocument, ExtractsSeveralKeys) {
  const auto got = parse_ok(R"({"title": "T\u0021", "id": 7, "text": ["x", "y"], "url": "u"})",
                            {"text", "title", "url"});
  EXPECT_EQ(got, (std::vector<Sentences>{{"x", "y"}, {"T!"}, {"u"}}));
}

TEST(JsonDocument, IgnoresKeysOfNestedObjects) {
  EXPECT_EQ(parse_ok(R"({"meta": {"text": "inner"}, "text": "outer", "more": [{"text": 1}]})"),
            (std::vector<Sentences>{{"outer"}}));
  EXPECT_EQ(parse_error(R"({"meta": {"text": "inner"}})"), "no \"text\" key");
}

TEST(JsonDocument, SkipsNestedValuesOfOtherKeys) {
  EXPECT_EQ(parse_ok(R"({"a": [[[]]], "b": {"c": {"d": [1, {"e": null}, "s\u00e9"]}}, "text": "t", "z": {}})"),
            (std::vector<Sentences>{{"t"}}));
}

TEST(JsonDocument, ValidatesNestedValuesOfOtherKeys) {
  EXPECT_TRUE(contains(parse_error(R"({"text": "t", "b": {"c": [1, 2,]}})"), "expecting value at column 32"));
  EXPECT_TRUE(contains(parse_error(R"({"text": "t", "b": {"c" 1}})"), "expecting ':' delimiter at column 25"));
  EXPECT_TRUE(contains(parse_error(R"({"text": "t", "b": ["x\qy"]})"), "invalid \\escape at column 23"));
  EXPECT_TRUE(contains(parse_error("{\"text\": \"t\", \"b\": {\"c\": \"\xC3\"}}"), "invalid UTF-8"));
}

TEST(JsonDocument, AcceptsPythonNumberAndLiteralForms) {
  const std::string line =
      R"({"a": NaN, "b": Infinity, "c": -Infinity, "d": 1.5e-3, "e": -0, "f": 2E+10, "g": 0.25, )"
      R"("h": -12.5E-07, "i": 1e5, "j": true, "k": false, "l": null, "m": [NaN,-Infinity,0], "text": "t"})";
  EXPECT_EQ(parse_ok(line), (std::vector<Sentences>{{"t"}}));
}

TEST(JsonDocument, AcceptsWhitespaceAroundTokens) {
  EXPECT_EQ(parse_ok(" \t{ \"text\" :\t[ \"a\" ,\r\"b\"\n] , \"n\" : 1 } \r\n"),
            (std::vector<Sentences>{{"a", "b"}}));
}

TEST(JsonDocument, MatchesKeyWrittenWithEscapes) {
  EXPECT_EQ(parse_ok(R"({"te\u0078t": "v"})"), (std::vector<Sentences>{{"v"}}));
  EXPECT_EQ(parse_ok(R"({"\u00e9t\u00e9": "summer"})", {"\xC3\xA9t\xC3\xA9"}), (std::vector<Sentences>{{"summer"}}));
}

TEST(JsonDocument, KeyMatchIsExact) {
  EXPECT_EQ(parse_error(R"({"Text": "a", "text ": "b", "tex": "c"})"), "no \"text\" key");
}

TEST(JsonDocument, ReusesParserAcrossLines) {
  JsonDocumentParser parser({"text"});
  std::string error;
  ASSERT_TRUE(parser.parse(R"({"text": ["a\n", "b"]})", error)) << error;
  EXPECT_EQ(parser.sentences(0).size(), 2u);
  EXPECT_FALSE(parser.parse(R"({"other": "x"})", error));
  EXPECT_EQ(error, "no \"text\" key");
  EXPECT_FALSE(parser.parse(R"({"text": "unterminated)", error));
  const std::string line = R"({"text": "c\td"})";
  ASSERT_TRUE(parser.parse(line, error)) << error;
  ASSERT_EQ(parser.sentences(0).size(), 1u);
  EXPECT_EQ(parser.sentences(0)[0], "c\td");
}

TEST(JsonDocument, RejectsUnterminatedString) {
  const std::string error = parse_error(R"({"text": "abc)");
  EXPECT_TRUE(contains(error, "unterminated string starting at column 10")) << error;
  EXPECT_TRUE(contains(parse_error(R"({"text": "abc\)"), "unterminated string starting at column 10"));
  EXPECT_TRUE(contains(parse_error(R"({"text": "abc\")"), "unterminated string starting at column 10"));
  EXPECT_TRUE(contains(parse_error(R"({"te)"), "unterminated string starting at column 2"));
}

// json.loads refuses a leading U+FEFF ("Unexpected UTF-8 BOM"); the reader drops it only at the
// start of a file, so one here comes from a later line (files concatenated with their BOMs).
TEST(JsonDocument, RejectsByteOrderMarkSayingBom) {
  const std::string error = parse_error("\xEF\xBB\xBF{\"text\": \"x\"}");
  EXPECT_TRUE(contains(error, "byte-order mark (BOM")) << error;
  EXPECT_TRUE(contains(parse_error(" \xEF\xBB\xBF{\"text\": \"x\"}"), "expecting value at column 2"));
}

TEST(JsonDocument, RejectsMissingComma) {
  const std::string error = parse_error(R"({"a": 1 "text": "x"})");
  EXPECT_TRUE(contains(error, "expecting ',' delimiter at column 9")) << error;
  EXPECT_TRUE(contains(parse_error(R"({"text": ["a" "b"]})"), "expecting ',' delimiter at column 15"));
}

TEST(JsonDocument, RejectsMissingColon) {
  EXPECT_TRUE(contains(parse_error(R"({"text" "x"})"), "expecting ':' delimiter at column 9"));
}

TEST(JsonDocument, RejectsTrailingComma) {
  const std::string error = parse_error(R"({"a":1,})");
  EXPECT_TRUE(contains(error, "expecting property name enclosed in double quotes at column 8")) << error;
  EXPECT_TRUE(contains(parse_error(R"({"text": ["a",]})"), "expecting value at column 15"));
}

TEST(JsonDocument, RejectsUnquotedOrSingleQuotedKeys) {
  EXPECT_TRUE(contains(parse_error(R"({text: "a"})"), "expecting property name enclosed in double quotes at column 2"));
  EXPECT_TRUE(contains(parse_error(R"({'text': "a"})"), "expecting property name enclosed in double quotes at column 2"));
}

TEST(JsonDocument, RejectsExtraDataAfterObject) {
  EXPECT_TRUE(contains(parse_error(R"({"text": "a"} x)"), "extra data at column 15"));
  EXPECT_TRUE(contains(parse_error(R"({"text": "a"}{"b": 2})"), "extra data at column 14"));
  EXPECT_TRUE(contains(parse_error(R"({"text": "a"}})"), "extra data at column 14"));
}

TEST(JsonDocument, RejectsUnclosedObject) {
  EXPECT_TRUE(contains(parse_error(R"({"text": "a")"), "expecting ',' delimiter at column 13"));
  EXPECT_TRUE(contains(parse_error("{"), "expecting property name enclosed in double quotes at column 2"));
}

TEST(JsonDocument, RejectsEmptyAndBlankLines) {
  EXPECT_TRUE(contains(parse_error(""), "expecting value at column 1"));
  EXPECT_TRUE(contains(parse_error("  \t"), "expecting value at column 4"));
}

TEST(JsonDocument, RejectsTopLevelValueThatIsNotObject) {
  for (const char* line : {R"(["x"])", R"("text")", "3", "null", "NaN", " [] "}) {
    const std::string error = parse_error(line);
    EXPECT_TRUE(contains(error, "not a JSON object")) << line << ": " << error;
  }
}

TEST(JsonDocument, ReportsSyntaxErrorOfMalformedTopLevelValue) {
  EXPECT_TRUE(contains(parse_error(R"(["x")"), "expecting ',' delimiter at column 5"));
  EXPECT_TRUE(contains(parse_error(R"(["x"] 1)"), "extra data at column 7"));
  EXPECT_TRUE(contains(parse_error("hello"), "expecting value at column 1"));
}

TEST(JsonDocument, RejectsMissingKey) {
  EXPECT_EQ(parse_error(R"({"content": "x"})"), "no \"text\" key");
  EXPECT_EQ(parse_error("{}"), "no \"text\" key");
  EXPECT_EQ(parse_error(R"({"text": "x"})", {"text", "title"}), "no \"title\" key");
}

TEST(JsonDocument, RejectsValueThatIsNotStringOrList) {
  EXPECT_EQ(parse_error(R"({"text": 12.5})"), "\"text\" is a number, not a string or a list of strings");
  EXPECT_EQ(parse_error(R"({"text": -Infinity})"), "\"text\" is a number, not a string or a list of strings");
  EXPECT_EQ(parse_error(R"({"text": null})"), "\"text\" is null, not a string or a list of strings");
  EXPECT_EQ(parse_error(R"({"text": true})"), "\"text\" is a boolean, not a string or a list of strings");
  EXPECT_EQ(parse_error(R"({"text": {"a": "b"}})"), "\"text\" is an object, not a string or a list of strings");
  EXPECT_EQ(parse_error(R"({"body": 1})", {"body"}), "\"body\" is a number, not a string or a list of strings");
}

TEST(JsonDocument, RejectsListElementThatIsNotStringNamingIndex) {
  EXPECT_EQ(parse_error(R"({"text": [["a"]]})"), "\"text\"[0] is a list, not a string");
  EXPECT_EQ(parse_error(R"({"text": ["a", 1]})"), "\"text\"[1] is a number, not a string");
  EXPECT_EQ(parse_error(R"({"text": ["a", "b", null, 3]})"), "\"text\"[2] is null, not a string");
  EXPECT_EQ(parse_error(R"({"text": ["a", {}]})"), "\"text\"[1] is an object, not a string");
}

// Python would report the syntax error: the whole line is checked before the value's type.
TEST(JsonDocument, ReportsSyntaxErrorBeforeTypeError) {
  EXPECT_TRUE(contains(parse_error(R"({"text": 1, "a": })"), "expecting value at column 18"));
  EXPECT_TRUE(contains(parse_error(R"({"text": [1], "a" 2})"), "expecting ':' delimiter at column 19"));
}

TEST(JsonDocument, RejectsInvalidUtf8InString) {
  EXPECT_TRUE(contains(parse_error("{\"text\": \"a\xFF" "b\"}"), "invalid UTF-8 at column 12"));
  EXPECT_TRUE(contains(parse_error("{\"text\": \"\xC0\x80\"}"), "invalid UTF-8"));      // overlong NUL
  EXPECT_TRUE(contains(parse_error("{\"text\": \"\xED\xA0\x80\"}"), "invalid UTF-8"));  // encoded surrogate
  EXPECT_TRUE(contains(parse_error("{\"text\": \"\xF4\x90\x80\x80\"}"), "invalid UTF-8"));  // past U+10FFFF
  EXPECT_TRUE(contains(parse_error("{\"text\": \"\xC3\"}"), "invalid UTF-8"));  // cut by the quote
  EXPECT_TRUE(contains(parse_error("{\"t\xE9xt\": \"a\"}"), "invalid UTF-8"));  // Latin-1 in a key
}

TEST(JsonDocument, AcceptsValidMultibyteUtf8) {
  EXPECT_EQ(parse_ok("{\"text\": \"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\x7F\"}"),
            (std::vector<Sentences>{{"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\x7F"}}));
}

TEST(JsonDocument, RejectsLoneSurrogateEscapes) {
  const std::string high = parse_error(R"({"text": "a\ud800b"})");
  EXPECT_TRUE(contains(high, "lone surrogate")) << high;
  EXPECT_TRUE(contains(high, "column 12")) << high;
  EXPECT_TRUE(contains(parse_error(R"({"text": "\udc00"})"), "lone surrogate"));
  EXPECT_TRUE(contains(parse_error(R"({"text": "\udfff\ud800"})"), "lone surrogate"));  // pair in wrong order
  EXPECT_TRUE(contains(parse_error(R"({"text": "\ud800\u0041"})"), "lone surrogate"));
  EXPECT_TRUE(contains(parse_error(R"({"text": "\ud800\ud800"})"), "lone surrogate"));
  EXPECT_TRUE(contains(parse_error(R"({"text": ["ok", "\uDBFF"]})"), "lone surrogate"));
}

TEST(JsonDocument, AcceptsLoneSurrogatesOutsideTheExtractedTexts) {
  // Python decodes them and Megatron never encodes these fields, so the line is a document.
  EXPECT_EQ(parse_ok(R"({"meta": "\ud800", "\udc00": 1, "text": "ok", "more": ["\udbff"]})"),
            (std::vector<Sentences>{{"ok"}}));
}

TEST(JsonDocument, RejectsRawControlCharacterInString) {
  EXPECT_TRUE(contains(parse_error("{\"text\": \"a\tb\"}"), "invalid control character at column 12"));
  EXPECT_TRUE(contains(parse_error(std::string("{\"text\": \"a\0b\"}", 15)), "invalid control character at column 12"));
  EXPECT_TRUE(contains(parse_error("{\"text\": \"a\x1F\"}"), "invalid control character"));
  EXPECT_TRUE(contains(parse_error("{\"te\nxt\": \"a\"}"), "invalid control character at column 5"));
}

TEST(JsonDocument, RejectsInvalidEscapes) {
  EXPECT_TRUE(contains(parse_error(R"({"text": "a\x41"})"), "invalid \\escape at column 12"));
  EXPECT_TRUE(contains(parse_error(R"({"text": "\U00e9"})"), "invalid \\escape"));
  EXPECT_TRUE(contains(parse_error(R"({"text": "\'"})"), "invalid \\escape"));
  EXPECT_TRUE(contains(parse_error(R"({"text": "\u12"})"), "invalid \\uXXXX escape at column 12"));
  EXPECT_TRUE(contains(parse_error(R"({"text": "\u12g4"})"), "invalid \\uXXXX escape"));
  EXPECT_TRUE(contains(parse_error(R"({"text": "\u+123"})"), "invalid \\uXXXX escape"));
}

TEST(JsonDocument, RejectsMalformedNumbers) {
  // Python's scanner stops the number early, so the leftover is a delimiter error.
  EXPECT_TRUE(contains(parse_error(R"({"a":01, "text": "t"})"), "expecting ',' delimiter at column 7"));
  EXPECT_TRUE(contains(parse_error(R"({"a":-01, "text": "t"})"), "expecting ',' delimiter at column 8"));
  EXPECT_TRUE(contains(parse_error(R"({"a":1., "text": "t"})"), "expecting ',' delimiter at column 7"));
  EXPECT_TRUE(contains(parse_error(R"({"a":1.e5, "text": "t"})"), "expecting ',' delimiter at column 7"));
  EXPECT_TRUE(contains(parse_error(R"({"a":1e, "text": "t"})"), "expecting ',' delimiter at column 7"));
  EXPECT_TRUE(contains(parse_error(R"({"a":1e+, "text": "t"})"), "expecting ',' delimiter at column 7"));
  EXPECT_TRUE(contains(parse_error(R"({"a":.5, "text": "t"})"), "expecting value at column 6"));
  EXPECT_TRUE(contains(parse_error(R"({"a":+1, "text": "t"})"), "expecting value at column 6"));
  EXPECT_TRUE(contains(parse_error(R"({"a":-, "text": "t"})"), "expecting value at column 6"));
  EXPECT_TRUE(contains(parse_error(R"({"a":- 1, "text": "t"})"), "expecting value at column 6"));
}

TEST(JsonDocument, RejectsMisspelledLiterals) {
  for (const char* value : {"tru", "True", "nul", "nan", "-NaN", "infinity", "-Inf", "undefined"}) {
    const std::string error = parse_error(std::string(R"({"text": "t", "a": )") + value + "}");
    EXPECT_TRUE(contains(error, "expecting value at column 20")) << value << ": " << error;
  }
  EXPECT_TRUE(contains(parse_error(R"({"a": truex, "text": "t"})"), "expecting ',' delimiter at column 11"));
}

std::string nested(int levels) {
  return R"({"text": "t", "a": )" + std::string(static_cast<std::size_t>(levels), '[') +
         std::string(static_cast<std::size_t>(levels), ']') + "}";
}

TEST(JsonDocument, AcceptsDeepNestingUpToLimit) {
  EXPECT_EQ(parse_ok(nested(900)), (std::vector<Sentences>{{"t"}}));
  std::string objects = R"({"text": "t", "a": )";
  for (int i = 0; i < 900; ++i) objects += R"({"a": )";
  objects += "1" + std::string(901, '}');
  EXPECT_EQ(parse_ok(objects), (std::vector<Sentences>{{"t"}}));
}

TEST(JsonDocument, RejectsNestingDeeperThan1000Levels) {
  EXPECT_TRUE(contains(parse_error(nested(1001)), "nesting deeper than 1000 levels"));
  // Far deeper than any stack would allow for plain recursion: still an error, not a crash.
  EXPECT_TRUE(contains(parse_error(nested(1'000'000)), "nesting deeper than 1000 levels"));
  std::string objects = R"({"text": "t", "a": )";
  for (int i = 0; i < 1001; ++i) objects += R"({"a": )";
  EXPECT_TRUE(contains(parse_error(objects), "nesting deeper than 1000 levels"));
}

}  // namespace
}  // namespace megatron::data
