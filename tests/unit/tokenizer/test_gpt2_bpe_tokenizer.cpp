// GPT-2 BPE against the reference encoder's ids in tests/data/gpt2_vectors.jsonl, decode
// round trips, the heap and low-memory BPE paths against the quadratic reference, file errors.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "megatron/core/check.h"
#include "megatron/tokenizer/gpt2_bpe_tokenizer.h"
#include "test_support.h"

namespace megatron::tokenizer {
namespace {

const std::string kVectors = megatron::testing::test_data_dir() + "/gpt2_vectors.jsonl";

const Gpt2BpeTokenizer& gpt2() {
  static const auto tokenizer =
      Gpt2BpeTokenizer::from_files(megatron::testing::gpt2_vocab_file(), megatron::testing::gpt2_merges_file());
  return *tokenizer;
}

struct Vector {
  std::string text;
  std::vector<std::int32_t> ids;
};

std::vector<Vector> load_vectors() {
  std::ifstream in(kVectors);
  EXPECT_TRUE(in.good()) << "cannot open " << kVectors;
  std::vector<Vector> vectors;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    vectors.push_back({j.at("text").get<std::string>(), j.at("ids").get<std::vector<std::int32_t>>()});
  }
  return vectors;
}

TEST(Gpt2BpeTokenizer, HasGpt2VocabularyAndEod) {
  EXPECT_EQ(gpt2().vocab_size(), 50257u);
  EXPECT_EQ(gpt2().eod(), 50256);
  EXPECT_EQ(gpt2().num_merges(), 50000u);
  EXPECT_EQ(gpt2().token_id(" the"), 262);
}

TEST(Gpt2BpeTokenizer, MatchesReferenceIdsForEveryVector) {
  const auto vectors = load_vectors();
  ASSERT_EQ(vectors.size(), 486u);
  auto encoder = gpt2().make_encoder();
  int mismatches = 0;
  for (std::size_t i = 0; i < vectors.size(); ++i) {
    std::vector<std::int32_t> ids;
    encoder->encode(vectors[i].text, ids);
    if (ids != vectors[i].ids && ++mismatches <= 10) {
      ADD_FAILURE() << "vector " << i << " " << nlohmann::json(vectors[i].text).dump()
                    << "\n  expected " << nlohmann::json(vectors[i].ids).dump()
                    << "\n  got      " << nlohmann::json(ids).dump();
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(Gpt2BpeTokenizer, CachedEncoderMatchesUncachedOnRepeats) {
  // The second pass is served from the piece cache and must agree with the first.
  const auto vectors = load_vectors();
  auto encoder = gpt2().make_encoder();
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& v : vectors) {
      std::vector<std::int32_t> ids;
      encoder->encode(v.text, ids);
      ASSERT_EQ(ids, v.ids) << "pass " << pass << ": " << nlohmann::json(v.text).dump();
    }
  }
}

TEST(Gpt2BpeTokenizer, EndOfTextInsideTextIsOrdinaryText) {
  EXPECT_EQ(gpt2().encode("<|endoftext|>"),
            (std::vector<std::int32_t>{27, 91, 437, 1659, 5239, 91, 29}));
}

TEST(Gpt2BpeTokenizer, DecodeRoundTripsEveryVector) {
  for (const auto& v : load_vectors()) {
    EXPECT_EQ(gpt2().decode(v.ids), v.text) << nlohmann::json(v.text).dump();
  }
}

TEST(Gpt2BpeTokenizer, DecodeReplacesInvalidUtf8LikePython) {
  // Token 447 is the lone byte 0xE2 (the first byte of a 3-byte sequence); 0xE2 followed by
  // ASCII decodes as U+FFFD then the ASCII, as bytes.decode("utf-8", "replace") does.
  const std::int32_t lone_e2 = gpt2().token_id("\xE2");
  ASSERT_GE(lone_e2, 0);
  const std::int32_t a = gpt2().token_id("a");
  EXPECT_EQ(gpt2().decode(std::vector<std::int32_t>{lone_e2, a}), "\xEF\xBF\xBD" "a");
  const std::int32_t byte_80 = gpt2().token_id("\x80");
  EXPECT_EQ(gpt2().decode(std::vector<std::int32_t>{lone_e2, byte_80}), "\xEF\xBF\xBD");
  EXPECT_THROW(gpt2().decode(std::vector<std::int32_t>{50257}), Error);
  EXPECT_THROW(gpt2().decode(std::vector<std::int32_t>{-1}), Error);
}

TEST(TextStream, HoldsBackCharactersSplitOverTokensAndJoinsToTheDecode) {
  // transformers' GPT2Tokenizer (5.24.0) spells "日本" as four tokens, each character as two byte
  // pieces (E6 97 + A5, E6 9C + AC), and " " plus the emoji as 30325 (the space and three of the
  // emoji's bytes) + 222.
  const std::vector<std::int32_t> nihon{33768, 98, 17312, 105};
  ASSERT_EQ(gpt2().encode("日本"), nihon);
  std::vector<std::int32_t> ids = gpt2().encode(" is Japan, \xF0\x9F\x98\x80 too.");  // an emoji: 4 bytes
  ids.insert(ids.begin(), nihon.begin(), nihon.end());
  TextStream stream(gpt2());
  std::string joined;
  std::vector<std::string> pieces;
  for (const std::int32_t id : ids) {
    pieces.push_back(stream.add(id));
    EXPECT_EQ(pieces.back().find("\xEF\xBF\xBD"), std::string::npos) << "piece " << pieces.size();
    joined += pieces.back();
  }
  joined += stream.finish();
  EXPECT_EQ(joined, "日本 is Japan, \xF0\x9F\x98\x80 too.");
  EXPECT_EQ(pieces[0], "");
  EXPECT_EQ(pieces[1], "日");
  EXPECT_EQ(pieces[2], "");
  EXPECT_EQ(pieces[3], "本");
  ASSERT_EQ(ids.size(), 11u);
  EXPECT_EQ(ids[7], 30325);
  EXPECT_EQ(pieces[7], " ");  // the space; the emoji's first three bytes are held back
  EXPECT_EQ(pieces[8], "\xF0\x9F\x98\x80");
}

TEST(TextStream, GivesTheReplacementCharacterWhenTheTextEndsInsideACharacter) {
  TextStream stream(gpt2());
  EXPECT_EQ(stream.add(gpt2().token_id("a")), "a");
  EXPECT_EQ(stream.add(gpt2().token_id("\xE2")), "");  // the first of three bytes
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");     // as decode() and Python's "replace" give
  TextStream broken(gpt2());
  EXPECT_EQ(broken.add(gpt2().token_id("\xE2")), "");
  EXPECT_EQ(broken.add(gpt2().token_id("a")), "\xEF\xBF\xBD" "a");  // never completed: out it goes
}

TEST(Gpt2BpeTokenizer, HeapBpeMatchesReferenceOnLongAndRandomPieces) {
  std::mt19937 rng(7);
  const std::string alphabet = "aaabbbcdeeenst ";
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t len = 1 + rng() % (trial < 200 ? 120 : 2000);
    std::string piece;
    for (std::size_t i = 0; i < len; ++i) piece += alphabet[rng() % (alphabet.size() - 1)];
    std::vector<std::int32_t> fast, reference;
    gpt2().bpe(piece, fast);
    gpt2().bpe_reference(piece, reference);
    ASSERT_EQ(fast, reference) << "piece of " << len << " bytes: " << piece.substr(0, 80);
  }
  // Repetitive pieces exercise the all-occurrences-per-round rule.
  for (const std::string unit : {"a", "ab", "aab", "\xE2\x80\x94", "=-"}) {
    std::string piece;
    while (piece.size() < 3000) piece += unit;
    std::vector<std::int32_t> fast, reference;
    gpt2().bpe(piece, fast);
    gpt2().bpe_reference(piece, reference);
    ASSERT_EQ(fast, reference) << "repeated " << unit;
  }
}

// The low-memory path (pieces over kMaxHeapPiece bytes) on any piece, against the reference.
TEST(Gpt2BpeTokenizer, LowMemoryBpeMatchesReference) {
  std::mt19937 rng(11);
  const std::vector<std::string> alphabets = {"aaabbbcdeeenst", "ab", "qwertyuiopasdfghjklzxcvbnm", "ei"};
  for (int trial = 0; trial < 300; ++trial) {
    const std::string& alphabet = alphabets[static_cast<std::size_t>(trial) % alphabets.size()];
    const std::size_t len = 1 + rng() % (trial < 200 ? 200 : 3000);
    std::string piece;
    for (std::size_t i = 0; i < len; ++i) piece += alphabet[rng() % alphabet.size()];
    std::vector<std::int32_t> low, reference;
    gpt2().bpe_low_memory(piece, low);
    gpt2().bpe_reference(piece, reference);
    ASSERT_EQ(low, reference) << "piece of " << len << " bytes: " << piece.substr(0, 80);
  }
  for (const std::string unit : {"a", "ab", "aab", "\xE2\x80\x94", "=-", "abc", "0"}) {
    for (const std::size_t size : {std::size_t{2}, std::size_t{3}, std::size_t{1000}, std::size_t{9000}}) {
      std::string piece;
      while (piece.size() < size) piece += unit;
      std::vector<std::int32_t> low, reference;
      gpt2().bpe_low_memory(piece, low);
      gpt2().bpe_reference(piece, reference);
      ASSERT_EQ(low, reference) << "repeated " << unit << " to " << size << " bytes";
    }
  }
}

// bpe() takes the low-memory path past kMaxHeapPiece bytes: same ids as the reference there.
TEST(Gpt2BpeTokenizer, LongPieceGivesReferenceIds) {
  std::mt19937 rng(3);
  std::string piece;
  for (std::size_t i = 0; i < Gpt2BpeTokenizer::kMaxHeapPiece + 5000; ++i) piece += static_cast<char>('a' + rng() % 26);
  std::vector<std::int32_t> fast, reference;
  gpt2().bpe(piece, fast);
  gpt2().bpe_reference(piece, reference);
  EXPECT_EQ(fast, reference);
}

// A merges file whose ranks do not follow the order in which symbols appear ("ab ab" ranks
// before "a b"): pairs made in a round can rank below that round's; the reference takes them next.
TEST(Gpt2BpeTokenizer, LowMemoryBpeFollowsRanksOfAnyMergesOrder) {
  const Gpt2BpeTokenizer toy(R"({"a": 0, "b": 1, "ab": 2, "ba": 3, "abab": 4, "bb": 5, "<|endoftext|>": 6})",
                             "#version: 0.2\nab ab\nb b\na b\nb a\n", "vocab", "merges");
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t len = 1 + rng() % 400;
    std::string piece;
    for (std::size_t i = 0; i < len; ++i) piece += "ab"[rng() % 2];
    std::vector<std::int32_t> low, reference;
    toy.bpe_low_memory(piece, low);
    toy.bpe_reference(piece, reference);
    ASSERT_EQ(low, reference) << piece;
  }
}

// Each "c" beside a run of "a" queues a pair of a late rank every time the run doubles: the
// stale entries outgrow the live pairs, so the low-memory path rebuilds its lists midway.
TEST(Gpt2BpeTokenizer, LowMemoryBpeMatchesReferenceWhenStaleEntriesPile) {
  const Gpt2BpeTokenizer toy(
      R"({"a": 0, "c": 1, "aa": 2, "aaaa": 3, "aaaaaaaa": 4, "ca": 5, "caa": 6, "caaaa": 7, "caaaaaaaa": 8,)"
      R"( "ac": 9, "aac": 10, "aaaac": 11, "aaaaaaaac": 12, "<|endoftext|>": 13})",
      "#version: 0.2\na a\naa aa\naaaa aaaa\nc a\nc aa\nc aaaa\nc aaaaaaaa\na c\naa c\naaaa c\naaaaaaaa c\n",
      "vocab", "merges");
  for (const std::size_t segments : {std::size_t{1}, std::size_t{40}, std::size_t{500}}) {
    std::string piece;
    for (std::size_t s = 0; s < segments; ++s) piece += "caaaaaaaa";
    piece += "c";
    std::vector<std::int32_t> low, reference;
    toy.bpe_low_memory(piece, low);
    toy.bpe_reference(piece, reference);
    ASSERT_EQ(low, reference) << segments << " segments";
    EXPECT_EQ(low.size(), segments + 1);
  }
}

TEST(Gpt2BpeTokenizer, RejectsInvalidUtf8) {
  EXPECT_THROW(gpt2().encode("ab\xFF" "cd"), Error);
  EXPECT_THROW(gpt2().encode("\xED\xA0\x80"), Error);  // an encoded surrogate
}

// Tokenizer files written to a temporary folder.
class Gpt2BpeFiles : public ::testing::Test {
 protected:
  std::string error_of(const std::string& vocab, const std::string& merges) {
    try {
      Gpt2BpeTokenizer::from_files(vocab, merges);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  megatron::testing::TempDir dir_;
};

TEST_F(Gpt2BpeFiles, MissingVocabFileNamesFlagAndPath) {
  const auto msg = error_of(dir_ / "nope.json", megatron::testing::gpt2_merges_file());
  EXPECT_NE(msg.find("--vocab-file"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nope.json"), std::string::npos) << msg;
}

TEST_F(Gpt2BpeFiles, MalformedMergeLineNamesFileAndLine) {
  const auto merges = dir_.write("merges.txt", "#version: 0.2\na b\nc d e\n");
  const auto vocab = dir_.write("vocab.json", R"({"a":0,"b":1,"c":2,"d":3,"ab":4,"<|endoftext|>":5})");
  const auto msg = error_of(vocab, merges);
  EXPECT_NE(msg.find("merges.txt:3"), std::string::npos) << msg;
}

TEST_F(Gpt2BpeFiles, VocabWithoutEndOfTextIsRejected) {
  const auto merges = dir_.write("merges.txt", "#version: 0.2\na b\n");
  const auto vocab = dir_.write("vocab.json", R"({"a":0,"b":1,"ab":2})");
  EXPECT_NE(error_of(vocab, merges).find("<|endoftext|>"), std::string::npos);
}

TEST_F(Gpt2BpeFiles, NotJsonVocabIsRejected) {
  const auto merges = dir_.write("merges.txt", "#version: 0.2\na b\n");
  const auto vocab = dir_.write("vocab.json", "{\"a\": 0,");
  EXPECT_NE(error_of(vocab, merges).find("not a valid vocab.json"), std::string::npos);
}

TEST_F(Gpt2BpeFiles, TinyVocabularyMergesByRank) {
  // Ranks: (a,b)=0, (ab,c)=1, (b,c)=2: "abc" -> "abc"; "bc" -> "bc"; "cab" -> c, ab.
  const auto merges = dir_.write("merges.txt", "#version: 0.2\na b\nab c\nb c\n");
  const auto vocab = dir_.write(
      "vocab.json", R"({"a":0,"b":1,"c":2,"ab":3,"abc":4,"bc":5,"<|endoftext|>":6,"Ġ":7})");
  const auto tok = Gpt2BpeTokenizer::from_files(vocab, merges);
  EXPECT_EQ(tok->encode("abc"), (std::vector<std::int32_t>{4}));
  EXPECT_EQ(tok->encode("bc"), (std::vector<std::int32_t>{5}));
  EXPECT_EQ(tok->encode("cab"), (std::vector<std::int32_t>{2, 3}));
  EXPECT_EQ(tok->vocab_size(), 8u);
  EXPECT_EQ(tok->eod(), 6);
  // "d" is not in this vocabulary: a clear error, not a silent id.
  EXPECT_THROW(tok->encode("d"), Error);
}

}  // namespace
}  // namespace megatron::tokenizer
