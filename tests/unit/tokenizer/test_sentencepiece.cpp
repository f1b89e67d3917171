// Megatron's SentencePiece tokenizers against Megatron's own classes run on the PyPI sentencepiece
// package (sentencepiece_reference.py, through MEGATRON_PYTHON): five models trained there (BPE
// with byte fallback, Unigram, a pad piece, user-defined and control pieces, no BOS/EOS), each as
// all three --tokenizer-type names, on stress texts, GPT-2's edge-case strings and the corpus: the
// ids, vocab_size, eod and the decoded text. Also the added ids, the BOS rule, byte pieces, threads
// sharing one tokenizer, and every error naming the file and the flag.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "megatron/core/check.h"
#include "megatron/tokenizer/sentencepiece_tokenizer.h"
#include "test_paths.h"
#include "test_support.h"

namespace megatron::tokenizer {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<std::int32_t>;

fs::path scratch(const std::string& name) {
  return fs::temp_directory_path() / ("megatron-sentencepiece-" + std::to_string(::getpid()) + name);
}

// sentencepiece_reference.py's output: the CTest fixture sentencepiece_reference writes it before
// these run.
const fs::path& reference() { return testing::fixture_reference("sentencepiece_reference", "sentencepiece_reference"); }

std::string model(const std::string& name) { return (reference() / (name + ".model")).string(); }

std::string escaped(const std::string& text) { return nlohmann::json(text).dump().substr(0, 300); }

// "<model>/<type>[+<extra ids>]" as the reference names its tokenizers.
std::unique_ptr<Tokenizer> make(const std::string& key) {
  const std::size_t slash = key.find('/');
  const std::size_t plus = key.find('+');
  const std::string type = key.substr(slash + 1, plus == std::string::npos ? std::string::npos : plus - slash - 1);
  const std::int64_t extra = plus == std::string::npos ? 0 : std::stoll(key.substr(plus + 1));
  return make_sentencepiece_tokenizer(type, model(key.substr(0, slash)), extra);
}

std::vector<nlohmann::json> read_cases() {
  std::vector<nlohmann::json> cases;
  std::ifstream in(reference() / "cases.jsonl");
  std::string line;
  while (std::getline(in, line)) cases.push_back(nlohmann::json::parse(line));
  return cases;
}

// The sum of the model's scores of `ids` (Megatron's added ids score 0), in double.
double path_score(const Ids& ids, const std::vector<double>& scores) {
  double sum = 0;
  for (const std::int32_t id : ids) sum += static_cast<std::size_t>(id) < scores.size() ? scores[id] : 0.0;
  return sum;
}

// Unigram models only: this SentencePiece (Debian's 0.1.97) and the PyPI one (0.2.3) pick
// different segmentations when two score the same up to float rounding ("00|0" or "0|00"): 0.1.97
// compares a double candidate with the float best, 0.2.3 floats throughout (and re-bases the
// scores of long texts). Such a pair decodes to the same text with the same total score up to float
// rounding (seen: 3e-7 of the total on 47k-token texts, 2e-6 allowed); anything else is a real
// difference.
bool is_tie(const Ids& ours, const Ids& megatron, const std::vector<double>& scores, const Tokenizer& tokenizer) {
  const double a = path_score(ours, scores);
  const double b = path_score(megatron, scores);
  return tokenizer.decode(ours) == tokenizer.decode(megatron) &&
         std::abs(a - b) <= 2e-6 * std::max(std::abs(a), std::abs(b)) + 1e-4;
}

TEST(SentencePiece, EveryTextEncodesAndDecodesAsMegatronDoes) {
  ASSERT_TRUE(fs::exists(reference() / "done"));
  const auto expected = nlohmann::json::parse(std::ifstream(reference() / "tokenizers.json"));
  const auto cases = read_cases();
  ASSERT_GT(cases.size(), 500u);
  int mismatches = 0;
  for (const auto& [key, facts] : expected.items()) {
    const auto tokenizer = make(key);
    EXPECT_EQ(tokenizer->type(), key.substr(key.find('/') + 1, key.find('+') - key.find('/') - 1));
    EXPECT_EQ(tokenizer->vocab_size(), facts["vocab_size"].get<std::size_t>()) << key;
    EXPECT_EQ(tokenizer->eod(), facts["eod"].get<std::int32_t>()) << key;
    const bool unigram = facts["unigram"].get<bool>();
    const auto scores = facts["scores"].get<std::vector<double>>();
    const auto encoder = tokenizer->make_encoder();
    int ties = 0;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const std::string text = cases[i]["text"].get<std::string>();
      const auto want = cases[i][key].get<Ids>();
      Ids got;
      encoder->encode(text, got);
      if (got != want && unigram && is_tie(got, want, scores, *tokenizer)) {
        ++ties;
      } else if (got != want && ++mismatches <= 5) {
        std::size_t at = 0;
        while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
        ADD_FAILURE() << key << ": text " << i << " " << escaped(text) << " differs at token " << at << " of "
                      << want.size() << " (Megatron " << (at < want.size() ? want[at] : -2) << ", ours "
                      << (at < got.size() ? got[at] : -2) << ")";
      }
      const std::string decoded = cases[i].value(key + ":decoded", text);
      if (tokenizer->decode(want) != decoded && ++mismatches <= 5) {
        ADD_FAILURE() << key << ": text " << i << " decodes to " << escaped(tokenizer->decode(want))
                      << ", Megatron's detokenize gives " << escaped(decoded);
      }
    }
    if (ties > 0) {
      std::cout << key << ": " << ties << " of " << cases.size() << " texts segmented differently at equal scores "
                << "(SentencePiece 0.1.97 against 0.2.3, Unigram ties)\n";
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(SentencePiece, ThreadsShareOneTokenizerEachWithItsEncoder) {
  const auto cases = read_cases();
  const std::string key = "bpe_user/SentencePieceTokenizer";
  const auto tokenizer = make(key);
  std::vector<int> wrong(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const auto encoder = tokenizer->make_encoder();
      for (std::size_t i = static_cast<std::size_t>(t); i < cases.size() * 2; i += 2) {  // overlapping halves
        const auto& c = cases[i % cases.size()];
        Ids got;
        encoder->encode(c["text"].get<std::string>(), got);
        wrong[static_cast<std::size_t>(t)] += got != c[key].get<Ids>();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong, std::vector<int>(4, 0));
}

TEST(SentencePiece, SentencePieceTokenizerAddsMegatronsSpecialTokensAfterThePieces) {
  // unigram_pad: unk 0, <s> 1, </s> 2, <pad> 3, then 1996 pieces; Megatron adds <CLS> <SEP> <EOD>
  // <MASK> (the pad, BOS and EOS are pieces), then the extra ids.
  const auto t = make_sentencepiece_tokenizer("SentencePieceTokenizer", model("unigram_pad"), 2);
  constexpr std::int32_t n = 2000;
  EXPECT_EQ(t->vocab_size(), static_cast<std::size_t>(n + 6));
  EXPECT_EQ(t->eod(), n + 2);
  EXPECT_EQ(t->encode("<CLS><SEP><EOD><MASK><pad><s></s><extra_id_0><extra_id_1>"),
            (Ids{n, n + 1, n + 2, n + 3, 3, 1, 2, n + 4, n + 5}));
  EXPECT_EQ(t->decode(Ids{n + 2}), " <EOD> ");
  EXPECT_EQ(t->decode(Ids{n, 1, n + 5}), " <CLS>  <s>  <extra_id_1> ");
  // Without extra ids <extra_id_0> is text; without a pad piece <PAD> is added (no_bos_eos: also
  // <BOS> and <EOS>, at the next ids).
  EXPECT_NE(make_sentencepiece_tokenizer("SentencePieceTokenizer", model("unigram_pad"))->encode("<extra_id_0>"),
            Ids{n + 4});
  const auto none = make_sentencepiece_tokenizer("SentencePieceTokenizer", model("no_bos_eos"));
  constexpr std::int32_t m = 1500;
  EXPECT_EQ(none->vocab_size(), static_cast<std::size_t>(m + 7));
  EXPECT_EQ(none->encode("<PAD><BOS><EOS>"), (Ids{m + 4, m + 5, m + 6}));
  // bpe_user: <EOD> and <CLS> are user-defined pieces 4 and 5, <MASK> the control piece 3.
  const auto user = make_sentencepiece_tokenizer("SentencePieceTokenizer", model("bpe_user"));
  EXPECT_EQ(user->eod(), 4);
  EXPECT_EQ(user->encode("<MASK><EOD><CLS><SEP>"), (Ids{3, 4, 5, 2000}));
}

TEST(SentencePiece, Llama2TokenizerPutsBosBeforeEveryTextAndTheOthersNever) {
  const auto llama = make_sentencepiece_tokenizer("Llama2Tokenizer", model("llama_bpe"));
  const auto gpt = make_sentencepiece_tokenizer("GPTSentencePieceTokenizer", model("llama_bpe"));
  const auto sp = make_sentencepiece_tokenizer("SentencePieceTokenizer", model("llama_bpe"));
  EXPECT_EQ(llama->encode(""), Ids{1});
  EXPECT_EQ(gpt->encode(""), Ids{});
  EXPECT_EQ(sp->encode(""), Ids{});
  Ids text = gpt->encode("Hello world");
  text.insert(text.begin(), 1);
  EXPECT_EQ(llama->encode("Hello world"), text);
  EXPECT_EQ(llama->eod(), 2);
  EXPECT_EQ(gpt->eod(), 2);
  EXPECT_EQ(llama->vocab_size(), 3000u);
  // The control pieces vanish in decoding, and their text is ordinary text to these two.
  EXPECT_EQ(llama->decode(Ids{1, 2}), "");
  EXPECT_EQ(gpt->decode(gpt->encode("<s></s>")), "<s></s>");
  EXPECT_EQ(sp->encode("<s></s>"), (Ids{1, 2}));
}

TEST(SentencePiece, BytePiecesDecodeToTheirBytes) {
  // llama_bpe: unk, <s>, </s>, then the 256 byte pieces <0x00>..<0xFF> at ids 3..258.
  const auto t = make_sentencepiece_tokenizer("GPTSentencePieceTokenizer", model("llama_bpe"));
  const auto byte = [](int b) { return static_cast<std::int32_t>(3 + b); };
  EXPECT_EQ(t->decode(Ids{byte(0x41), byte(0xE4), byte(0xB8), byte(0xAD)}), "A\xE4\xB8\xAD");
  EXPECT_EQ(t->decode(Ids{byte(0xE4)}), "\xEF\xBF\xBD");  // half a character
  EXPECT_EQ(t->decode(Ids{byte(0x00)}), std::string(1, '\0'));
  // A character outside the model's coverage falls back to its bytes.
  const std::string rare = "\xF0\x9F\xA6\x9C";  // U+1F99C, in no training text
  EXPECT_EQ(t->encode(rare).back(), byte(0x9C));
  EXPECT_EQ(t->decode(t->encode(rare)), rare);
}

TEST(SentencePiece, ModelWithoutBosOrEos) {
  const auto gpt = make_sentencepiece_tokenizer("GPTSentencePieceTokenizer", model("no_bos_eos"));
  EXPECT_EQ(gpt->eod(), -1);
  try {
    make_sentencepiece_tokenizer("Llama2Tokenizer", model("no_bos_eos"));
    ADD_FAILURE() << "Llama2Tokenizer accepted a model without BOS";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--tokenizer-model " + model("no_bos_eos") + " has no BOS piece"),
              std::string::npos)
        << e.what();
  }
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SentencePiece, ErrorsNameTheFileAndTheFlag) {
  const std::string missing = scratch("-missing.model").string();
  const std::string missing_error = error_of([&] { make_sentencepiece_tokenizer("Llama2Tokenizer", missing); });
  EXPECT_NE(missing_error.find("--tokenizer-model " + missing), std::string::npos) << missing_error;
  const std::string folder_error =
      error_of([&] { make_sentencepiece_tokenizer("SentencePieceTokenizer", reference().string()); });
  EXPECT_NE(folder_error.find("--tokenizer-model " + reference().string() + " is not a regular file"),
            std::string::npos)
      << folder_error;
  for (const std::string& content : {std::string("not a model\n"), std::string(), std::string("\x0a\x05\xff\xff", 4)}) {
    const fs::path bad = scratch("-bad.model");
    std::ofstream(bad, std::ios::binary) << content;
    const std::string error =
        error_of([&] { make_sentencepiece_tokenizer("GPTSentencePieceTokenizer", bad.string()); });
    EXPECT_NE(error.find("--tokenizer-model " + bad.string() + " is not a SentencePiece model"), std::string::npos)
        << escaped(content) << ": " << error;
    fs::remove(bad);
  }
  EXPECT_NE(error_of([] { make_sentencepiece_tokenizer("Llama2Tokenizer", ""); })
                .find("--tokenizer-type Llama2Tokenizer needs --tokenizer-model"),
            std::string::npos);
  EXPECT_NE(error_of([] { make_sentencepiece_tokenizer("SentencePieceTokenizer", model("unigram"), -1); })
                .find("--vocab-extra-ids must be at least 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { make_sentencepiece_tokenizer("SentencePieceTokenizer", model("unigram"), 1LL << 31); })
                .find("--vocab-extra-ids 2147483648 is too large"),
            std::string::npos);
  TokenizerOptions options;
  options.type = TokenizerType::kGptSentencePiece;
  EXPECT_NE(error_of([&] { build_tokenizer(options); }).find("needs --tokenizer-model"), std::string::npos);

  const auto t = make_sentencepiece_tokenizer("SentencePieceTokenizer", model("unigram"));
  EXPECT_NE(error_of([&] { t->decode(Ids{5, 3005}); }).find("token id 3005 is outside the vocabulary of 3005"),
            std::string::npos);
  EXPECT_NE(error_of([&] { t->decode(Ids{-1}); }).find("token id -1"), std::string::npos);
  EXPECT_NE(error_of([&] { t->encode("ok \xC3"); }).find("invalid UTF-8 at byte 3"), std::string::npos);
}

TEST(SentencePiece, BuildTokenizerKnowsTheThreeTypes) {
  const auto types = supported_tokenizer_types();
  for (const char* type : {"SentencePieceTokenizer", "GPTSentencePieceTokenizer", "Llama2Tokenizer"}) {
    EXPECT_NE(std::find(types.begin(), types.end(), type), types.end()) << type;
    TokenizerOptions options;
    options.type = parse_tokenizer_type(type);
    options.tokenizer_model = model("unigram");
    options.vocab_extra_ids = 4;
    const auto t = build_tokenizer(options);
    EXPECT_EQ(t->type(), type);
    // Only SentencePieceTokenizer takes the extra ids (and Megatron's four special tokens, the pad).
    EXPECT_EQ(t->vocab_size(), std::string(type) == "SentencePieceTokenizer" ? 3009u : 3000u) << type;
  }
  EXPECT_NE(error_of([&] { parse_tokenizer_type("BertWordPieceCase"); }).find("supported: GPT2BPETokenizer, HuggingFaceTokenizer, TikTokenizer, NullTokenizer, "
                                                          "SentencePieceTokenizer, GPTSentencePieceTokenizer, "
                                                          "Llama2Tokenizer"),
            std::string::npos);
}

}  // namespace
}  // namespace megatron::tokenizer
