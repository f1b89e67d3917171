// The HuggingFaceTokenizer against transformers' AutoTokenizer (hf_reference.py, through
// MEGATRON_PYTHON): tokenizer folders made as model authors make them (byte-level BPE in GPT-2,
// Llama-3 and Qwen2 configurations, a SentencePiece model with byte fallback converted by
// transformers, Llama-2's legacy normalizer, and two folders that exercise the other
// components), on the GPT-2 edge cases, the corpus and texts that stress each part (added-token
// text inside documents, Unicode spaces and line breaks, marks, long words and numbers). Ids,
// decoded text, vocabulary size and end-of-document id must equal AutoTokenizer's. Also the
// errors: hub names, unimplemented components and broken files, each named.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "megatron/core/check.h"
#include "hf_components.h"
#include "megatron/tokenizer/hf_tokenizer.h"
#include "megatron/tokenizer/unicode.h"
#include "test_paths.h"
#include "test_support.h"

namespace megatron::tokenizer {
namespace {

namespace fs = std::filesystem;

// hf_reference.py's output: the CTest fixture hf_tokenizer_reference writes it before these run.
const fs::path& reference() { return testing::fixture_reference("hf_reference", "hf_tokenizer_reference"); }

std::string escaped(const std::string& text) { return nlohmann::json(text).dump().substr(0, 300); }

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

class HfTokenizerParity : public ::testing::TestWithParam<std::string> {};

TEST_P(HfTokenizerParity, EncodesDecodesAndCountsAsAutoTokenizer) {
  ASSERT_TRUE(fs::exists(reference() / "done"));
  const std::string name = GetParam();
  const auto tokenizer = make_hf_tokenizer((reference() / name).string());
  const auto meta = read_json(reference() / (name + ".meta.json"));
  EXPECT_EQ(tokenizer->type(), "HuggingFaceTokenizer");
  EXPECT_EQ(tokenizer->vocab_size(), meta["vocab_size"].get<std::size_t>());
  EXPECT_EQ(tokenizer->eod(), meta["eod"].get<std::int32_t>());
  auto encoder = tokenizer->make_encoder();  // one encoder for all texts: its cache is exercised
  std::ifstream cases(reference() / (name + ".jsonl"));
  std::string line;
  int texts = 0, mismatches = 0;
  while (std::getline(cases, line)) {
    const auto c = nlohmann::json::parse(line);
    const std::string text = c["text"].get<std::string>();
    const auto expected = c["ids"].get<std::vector<std::int32_t>>();
    std::vector<std::int32_t> got;
    encoder->encode(text, got);
    if (got != expected && ++mismatches <= 5) {
      std::size_t at = 0;
      while (at < got.size() && at < expected.size() && got[at] == expected[at]) ++at;
      ADD_FAILURE() << name << ": text " << texts << " " << escaped(text) << " differs at token " << at << " of "
                    << expected.size() << " (AutoTokenizer " << (at < expected.size() ? expected[at] : -1)
                    << ", ours " << (at < got.size() ? got[at] : -1) << ", " << got.size() << " tokens)";
    }
    const std::string decoded = tokenizer->decode(expected);
    if (decoded != c["decoded"].get<std::string>() && ++mismatches <= 5) {
      ADD_FAILURE() << name << ": text " << texts << " decodes to " << escaped(decoded) << ", AutoTokenizer "
                    << escaped(c["decoded"].get<std::string>());
    }
    ++texts;
  }
  EXPECT_EQ(mismatches, 0) << name;
  EXPECT_GT(texts, 1000);
}

INSTANTIATE_TEST_SUITE_P(Folders, HfTokenizerParity,
                         ::testing::Values("gpt2", "llama3", "qwen2", "llama2", "llama2_legacy", "metaspace",
                                           "whitespace", "config_flags", "eos_map", "renumbered"));

// The library's Unicode data is older than ICU's (Punctuation: Unicode 8.0; StripAccents: 9.0;
// normalization: 11.0): every code point alone splits, strips and normalizes as it does there.
TEST(HfTokenizerUnicode, EveryCodePointAsTheLibraryTreatsIt) {
  const nlohmann::json u = read_json(reference() / "unicode.json");
  const std::set<std::int64_t> punctuation(u.at("punctuation").begin(), u.at("punctuation").end());
  const std::set<std::int64_t> marks(u.at("marks").begin(), u.at("marks").end());
  const auto nfkc = hf::parse_normalizer({{"type", "NFKC"}}, "test");
  const auto nfd = hf::parse_normalizer({{"type", "NFD"}}, "test");
  const auto strip = hf::parse_normalizer({{"type", "StripAccents"}}, "test");
  const auto split = hf::parse_pre_tokenizer({{"type", "Punctuation"}, {"behavior", "Isolated"}}, "test");
  int wrong = 0;
  for (char32_t cp = 0; cp <= 0x10FFFF && wrong < 20; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string c;
    append_utf8(c, cp);
    const std::string key = std::to_string(cp);
    std::vector<hf::Piece> pieces{{"a" + c + "a", 0}};
    split->split(pieces);
    std::string stripped = "a" + c, by_nfkc = c, by_nfd = c;
    std::size_t origin = 0;
    strip->normalize(stripped, origin);
    nfkc->normalize(by_nfkc, origin);
    nfd->normalize(by_nfd, origin);
    const std::string want_nfkc = u.at("nfkc").value(key, c), want_nfd = u.at("nfd").value(key, c);
    const bool ok = (pieces.size() == 3) == punctuation.contains(cp) && (stripped == "a") == marks.contains(cp) &&
                    by_nfkc == want_nfkc && by_nfd == want_nfd;
    if (!ok) ++wrong;
    EXPECT_TRUE(ok) << "U+" << std::hex << static_cast<std::uint32_t>(cp) << std::dec << ": punctuation "
                    << (pieces.size() == 3) << " (library " << punctuation.contains(cp) << "), mark " << (stripped == "a")
                    << " (library " << marks.contains(cp) << "), NFKC " << (by_nfkc == want_nfkc ? "same" : "differs")
                    << ", NFD " << (by_nfd == want_nfd ? "same" : "differs");
  }
}

std::string error_of(const std::string& path) {
  try {
    make_hf_tokenizer(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// A scratch folder for the broken files, removed when the test ends.
struct Scratch {
  fs::path path = fs::temp_directory_path() / ("megatron-hf-errors-" + std::to_string(::getpid()));
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};
const fs::path& scratch() {
  static Scratch s;
  return s.path;
}

// A copy of a reference folder's tokenizer.json with `edit` applied, in a folder of its own.
std::string edited(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = read_json(reference() / "gpt2" / "tokenizer.json");
  edit(j);
  const fs::path folder = scratch() / name;
  fs::create_directories(folder);
  std::ofstream(folder / "tokenizer.json") << j.dump();
  return folder.string();
}

TEST(HfTokenizerErrors, NameTheFileTheJsonPathAndWhatIsMissing) {
  ASSERT_TRUE(fs::exists(reference() / "done"));
  EXPECT_NE(error_of("meta-llama/Llama-3.1-8B").find("not a local folder"), std::string::npos);
  EXPECT_NE(error_of("meta-llama/Llama-3.1-8B").find("--tokenizer-model DIR"), std::string::npos);
  // Only what could be a hub id gets the download hint; a missing local path is said to be missing.
  for (const std::string missing : {"some/path/does_not_exist", "/abs/missing", "./rel", "a/../b", "x--y"}) {
    const std::string e = error_of(missing);
    EXPECT_NE(e.find("--tokenizer-model " + missing + " does not exist"), std::string::npos) << e;
    EXPECT_EQ(e.find("hf download"), std::string::npos) << e;
  }
  // A SentencePiece model given as a tokenizer.json names the types that read it.
  const fs::path sp = scratch() / "sp" / "tokenizer.model";
  fs::create_directories(sp.parent_path());
  std::ofstream(sp, std::ios::binary) << std::string("\x0a\x05\x0a\x01a", 5);
  EXPECT_NE(error_of(sp.string()).find("is a SentencePiece model, not a tokenizer.json: take --tokenizer-type Llama2Tokenizer"),
            std::string::npos) << error_of(sp.string());

  const fs::path slow = reference() / "work" / "llama2-slow";  // tokenizer.model only
  const std::string no_json = error_of(slow.string());
  EXPECT_NE(no_json.find("has no tokenizer.json"), std::string::npos) << no_json;
  EXPECT_NE(no_json.find("Llama2Tokenizer"), std::string::npos) << no_json;

  const std::string unigram = error_of(edited("unigram", [](nlohmann::json& j) { j["model"]["type"] = "Unigram"; }));
  EXPECT_NE(unigram.find("tokenizer.json: model is a Unigram model"), std::string::npos) << unigram;
  const std::string wordpiece = error_of(edited("decoder", [](nlohmann::json& j) {
    j["decoder"] = {{"type", "Sequence"}, {"decoders", {{{"type", "Fuse"}}, {{"type", "WordPiece"}}}}};
  }));
  EXPECT_NE(wordpiece.find("decoder.decoders[1] is a WordPiece decoder"), std::string::npos) << wordpiece;
  const std::string split = error_of(edited("split", [](nlohmann::json& j) {
    j["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}},
                                              {"behavior", "Isolated"}, {"invert", false}}}}};
  }));
  EXPECT_NE(split.find("pre_tokenizer.pretokenizers[0]: the regex (unclosed does not compile"), std::string::npos)
      << split;
  const std::string merge = error_of(edited("merge", [](nlohmann::json& j) {
    j["model"]["merges"].push_back(nlohmann::json::array({"qqqzz", "y"}));
  }));
  EXPECT_NE(merge.find("model.merges["), std::string::npos) << merge;
  EXPECT_NE(merge.find("\"qqqzz\" is not in the vocabulary"), std::string::npos) << merge;
  const std::string dropout = error_of(edited("dropout", [](nlohmann::json& j) { j["model"]["dropout"] = 0.1; }));
  EXPECT_NE(dropout.find("model.dropout is 0.1"), std::string::npos) << dropout;

  // A value of the wrong JSON type names the file and the part, not only nlohmann's message.
  const std::string content = error_of(edited("content-type", [](nlohmann::json& j) { j["added_tokens"][0]["content"] = 5; }));
  EXPECT_NE(content.find("tokenizer.json: added_tokens[0]: a value of the wrong JSON type or shape (type must be string, but is number)"),
            std::string::npos) << content;
  const std::string flag = error_of(edited("flag-type", [](nlohmann::json& j) { j["pre_tokenizer"]["add_prefix_space"] = "yes"; }));
  EXPECT_NE(flag.find("tokenizer.json: pre_tokenizer: a value of the wrong JSON type or shape"), std::string::npos) << flag;

  // Files the tokenizers library refuses are refused here too.
  const auto metaspace = [](nlohmann::json& j) -> nlohmann::json& {
    j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", true}};
    return j["pre_tokenizer"];
  };
  const std::string contradiction = error_of(edited("prefix-space", [&](nlohmann::json& j) { metaspace(j)["add_prefix_space"] = false; }));
  EXPECT_NE(contradiction.find("pre_tokenizer.add_prefix_space false does not match prepend_scheme first"), std::string::npos)
      << contradiction;
  const std::string replacement = error_of(edited("replacement", [&](nlohmann::json& j) { metaspace(j)["replacement"] = "ab"; }));
  EXPECT_NE(replacement.find("pre_tokenizer.replacement \"ab\" is not one character"), std::string::npos) << replacement;
  const std::string never_ok = error_of(edited("never", [&](nlohmann::json& j) {
    metaspace(j)["add_prefix_space"] = false;
    j["pre_tokenizer"]["prepend_scheme"] = "never";
  }));
  EXPECT_EQ(never_ok.find("add_prefix_space"), std::string::npos) << never_ok;

  const fs::path broken = scratch() / "broken";
  fs::create_directories(broken);
  std::ofstream(broken / "tokenizer.json") << "{\"model\": ";
  const std::string bad_json = error_of(broken.string());
  EXPECT_NE(bad_json.find("tokenizer.json (--tokenizer-model) is not valid JSON"), std::string::npos) << bad_json;

  // No eos_token anywhere: the tokenizer loads and encodes; it has no end of document (Megatron's
  // eos_token_id None), which only --append-eod needs.
  const auto no_eos = make_hf_tokenizer(edited("no-eos", [](nlohmann::json&) {}));
  EXPECT_EQ(no_eos->eod(), -1);
  EXPECT_FALSE(no_eos->encode("hello world").empty());
}

}  // namespace
}  // namespace megatron::tokenizer
