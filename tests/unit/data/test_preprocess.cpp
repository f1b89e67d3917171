// The preprocess pipeline as a library: Megatron's bytes for the golden corpus at any worker
// count, input order across many batches, sentences, keys, invalid lines and progress output.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <sstream>

#include "megatron/core/check.h"
#include "megatron/data/indexed_dataset.h"
#include "megatron/data/preprocess.h"
#include "megatron/tokenizer/gpt2_bpe_tokenizer.h"
#include "test_support.h"

namespace megatron::data {
namespace {

namespace fs = std::filesystem;
using megatron::testing::read_file_bytes;

const tokenizer::Tokenizer& gpt2() {
  static const auto tok = tokenizer::Gpt2BpeTokenizer::from_files(megatron::testing::gpt2_vocab_file(),
                                                                   megatron::testing::gpt2_merges_file());
  return *tok;
}

class Preprocess : public ::testing::Test {
 protected:
  PreprocessOptions options(const std::vector<std::string>& inputs, const std::string& prefix) {
    PreprocessOptions o;
    o.inputs = inputs;
    o.output_prefix = dir_ / prefix;
    o.append_eod = true;
    return o;
  }

  PreprocessStats run(const PreprocessOptions& o) {
    out_.str("");
    err_.str("");
    return preprocess(gpt2(), o, out_, err_);
  }

  megatron::testing::TempDir dir_;
  std::ostringstream out_, err_;
};

TEST_F(Preprocess, GoldenCorpusIsByteIdenticalForAnyWorkerCount) {
  const std::string golden = megatron::testing::golden_dataset_prefix();
  for (const int workers : {1, 3}) {
    auto o = options({megatron::testing::golden_corpus()}, std::string("w").append(std::to_string(workers)));
    o.workers = workers;
    const auto stats = run(o);
    const std::string prefix = output_prefix_for_key(o.output_prefix, "text");
    EXPECT_EQ(read_file_bytes(prefix + ".bin"), read_file_bytes(golden + ".bin"))
        << workers << " workers";
    EXPECT_EQ(read_file_bytes(prefix + ".idx"), read_file_bytes(golden + ".idx"))
        << workers << " workers";
    EXPECT_EQ(stats.documents, 525u);
    EXPECT_EQ(stats.tokens, fs::file_size(golden + ".bin") / 2);
  }
}

TEST_F(Preprocess, KeepsInputOrderAcrossManyBatches) {
  // 5000 documents, some of 300 KB, so batches split on both line count and size.
  std::string jsonl;
  std::vector<std::string> texts;
  for (int i = 0; i < 5000; ++i) {
    std::string text = "document " + std::to_string(i) + " says hello";
    if (i % 997 == 0) text += std::string(300000, 'z');
    texts.push_back(text);
    jsonl += "{\"text\": \"" + text + "\"}\n";
  }
  const std::string input = dir_.write("many.jsonl", jsonl);
  auto one = options({input}, "one");
  one.workers = 1;
  auto four = options({input}, "four");
  four.workers = 4;
  run(one);
  run(four);
  const std::string p1 = output_prefix_for_key(one.output_prefix, "text");
  const std::string p4 = output_prefix_for_key(four.output_prefix, "text");
  EXPECT_EQ(read_file_bytes(p1 + ".bin"), read_file_bytes(p4 + ".bin"));
  EXPECT_EQ(read_file_bytes(p1 + ".idx"), read_file_bytes(p4 + ".idx"));
  const IndexedDataset ds(p4);
  ASSERT_EQ(ds.num_documents(), 5000u);
  for (const int i : {0, 1, 996, 997, 1023, 1024, 2500, 4999}) {
    std::vector<std::int32_t> expected = gpt2().encode(texts[static_cast<std::size_t>(i)]);
    expected.push_back(gpt2().eod());
    const auto got = ds.read_document(static_cast<std::size_t>(i));
    EXPECT_EQ(std::vector<std::int32_t>(got.begin(), got.end()), expected) << "document " << i;
  }
}

TEST_F(Preprocess, ListsBecomeOneSequencePerSentence) {
  const std::string input = dir_.write("s.jsonl",
                                       "{\"text\": [\"Hello there.\", \"\", \" Second one.\"]}\n"
                                       "{\"text\": []}\n"
                                       "{\"text\": \"\"}\n"
                                       "{\"text\": \"single\"}\n");
  const auto o = options({input}, "s");
  const auto stats = run(o);
  EXPECT_EQ(stats.documents, 4u);
  EXPECT_EQ(stats.empty_documents, 2u);
  const IndexedDataset ds(output_prefix_for_key(o.output_prefix, "text"));
  const auto hello = gpt2().encode("Hello there.");
  const auto second = gpt2().encode(" Second one.");
  ASSERT_EQ(ds.num_sequences(), 3u);  // the empty sentence and the empty documents add none
  EXPECT_EQ(ds.sequence_lengths()[0], static_cast<std::int32_t>(hello.size()));
  EXPECT_EQ(ds.sequence_lengths()[1], static_cast<std::int32_t>(second.size() + 1));  // + EOD
  EXPECT_EQ(std::vector<std::int64_t>(ds.document_indices().begin(), ds.document_indices().end()),
            (std::vector<std::int64_t>{0, 2, 2, 2, 3}));
  EXPECT_EQ(ds.read_sequence(1).back(), gpt2().eod());
}

TEST_F(Preprocess, WithoutAppendEodNoEodIsStored) {
  const std::string input = dir_.write("n.jsonl", "{\"text\": \"abc def\"}\n");
  auto o = options({input}, "n");
  o.append_eod = false;
  run(o);
  const IndexedDataset ds(output_prefix_for_key(o.output_prefix, "text"));
  const auto ids = ds.read_document(0);
  EXPECT_EQ(std::vector<std::int32_t>(ids.begin(), ids.end()), gpt2().encode("abc def"));
}

TEST_F(Preprocess, EachKeyGetsItsOwnDataset) {
  const std::string input = dir_.write("k.jsonl", "{\"title\": \"A title\", \"text\": \"Body text\"}\n");
  auto o = options({input}, "k");
  o.json_keys = {"text", "title"};
  const auto stats = run(o);
  ASSERT_EQ(stats.output_prefixes.size(), 2u);
  const IndexedDataset text(output_prefix_for_key(o.output_prefix, "text"));
  const IndexedDataset title(output_prefix_for_key(o.output_prefix, "title"));
  EXPECT_EQ(text.read_document(0).size(), gpt2().encode("Body text").size() + 1);
  EXPECT_EQ(title.read_document(0).size(), gpt2().encode("A title").size() + 1);
}

TEST_F(Preprocess, InvalidLineNamesFileAndLineAndLeavesNoOutput) {
  std::string jsonl;
  for (int i = 0; i < 3000; ++i) jsonl += "{\"text\": \"line " + std::to_string(i) + "\"}\n";
  jsonl += "{\"text\": \"broken}\n";
  const std::string input = dir_.write("bad.jsonl", jsonl);
  const auto o = options({input}, "bad");
  try {
    run(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bad.jsonl:3001: invalid JSON (unterminated string"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--skip-invalid-lines"), std::string::npos) << msg;
  }
  EXPECT_EQ(dir_.files(), std::vector<std::string>{"bad.jsonl"});
}

TEST_F(Preprocess, SkipInvalidLinesWarnsAndCounts) {
  const std::string bad = dir_.write("mixed.jsonl",
                                     "{\"text\": \"good one\"}\n"
                                     "not json\n"
                                     "\n"
                                     "{\"other\": \"no text key\"}\n"
                                     "{\"text\": 7}\n"
                                     "{\"text\": \"good two\"}\n");
  const std::string clean = dir_.write("clean.jsonl", "{\"text\": \"good one\"}\n{\"text\": \"good two\"}\n");
  auto o = options({bad}, "mixed");
  o.skip_invalid_lines = true;
  const auto stats = run(o);
  EXPECT_EQ(stats.lines_skipped, 3u);
  EXPECT_EQ(stats.blank_lines, 1u);
  EXPECT_EQ(stats.documents, 2u);
  const std::string warnings = err_.str();
  EXPECT_NE(warnings.find("mixed.jsonl:2: invalid JSON"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("mixed.jsonl:4: no \"text\" key"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("mixed.jsonl:5: \"text\" is a number"), std::string::npos) << warnings;
  run(options({clean}, "clean"));
  EXPECT_EQ(read_file_bytes(output_prefix_for_key(dir_ / "mixed", "text") + ".bin"),
            read_file_bytes(output_prefix_for_key(dir_ / "clean", "text") + ".bin"));
  EXPECT_EQ(read_file_bytes(output_prefix_for_key(dir_ / "mixed", "text") + ".idx"),
            read_file_bytes(output_prefix_for_key(dir_ / "clean", "text") + ".idx"));
}

TEST_F(Preprocess, PrintsMegatronProgressLines) {
  std::string jsonl;
  for (int i = 0; i < 250; ++i) jsonl += "{\"text\": \"d\"}\n";
  auto o = options({dir_.write("p.jsonl", jsonl)}, "p");
  o.log_interval = 100;
  run(o);
  const std::regex line(R"(Processed (\d+) documents \([0-9.e+-]+ docs/s, [0-9.e+-]+ MB/s\)\.)");
  std::istringstream err(err_.str());
  std::vector<std::string> counts;
  for (std::string l; std::getline(err, l);) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(l, m, line)) << l;
    counts.push_back(m[1]);
  }
  EXPECT_EQ(counts, (std::vector<std::string>{"100", "200"}));
  const std::string out = out_.str();
  EXPECT_EQ(out.rfind("Opening " + (dir_ / "p.jsonl") + "\nTime to startup: ", 0), 0u) << out;
  EXPECT_NE(out.find("\nProcessing data with 1 workers.\n"), std::string::npos) << out;
}

// Python's text mode ends lines at a lone CR too: a CR-only file is the LF file's documents.
TEST_F(Preprocess, CarriageReturnOnlyFileGivesSameDatasetAsLfFile) {
  const std::string lf = "{\"text\": \"one\\r\\ntwo\"}\n{\"text\": \"three\"}\n\n{\"text\": \"four\"}\n";
  std::string cr = lf;
  std::replace(cr.begin(), cr.end(), '\n', '\r');
  run(options({dir_.write("lf.jsonl", lf)}, "lf"));
  const auto stats = run(options({dir_.write("cr.jsonl", cr)}, "cr"));
  EXPECT_EQ(stats.documents, 3u);
  EXPECT_EQ(stats.blank_lines, 1u);
  for (const char* ext : {".bin", ".idx"}) {
    EXPECT_EQ(read_file_bytes(output_prefix_for_key(dir_ / "cr", "text") + ext),
              read_file_bytes(output_prefix_for_key(dir_ / "lf", "text") + ext));
  }
}

TEST_F(Preprocess, RefusesInputThatIsOneOfTheOutputsNamingIt) {
  auto first = options({dir_.write("a.jsonl", "{\"text\": \"x\", \"title\": \"y\"}\n")}, "p");
  first.json_keys = {"text", "title"};
  run(first);
  const std::string bin = output_prefix_for_key(dir_ / "p", "text") + ".bin";
  const std::string idx = output_prefix_for_key(dir_ / "p", "title") + ".idx";
  fs::create_symlink(bin, dir_ / "link.jsonl");
  auto o = options({dir_ / "a.jsonl", bin}, "p");
  EXPECT_EQ(o.validate().size(), 1u);
  const std::string bin_other_spelling = dir_ / "." / fs::path(bin).filename();
  o = options({dir_ / "link.jsonl", bin_other_spelling, idx}, "p");
  o.json_keys = {"text", "title"};
  const auto problems = o.validate();
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_NE(problems[0].find("--input " + (dir_ / "link.jsonl") + " is the output file " + bin), std::string::npos)
      << problems[0];
  EXPECT_NE(problems[2].find(idx), std::string::npos) << problems[2];
  EXPECT_THROW(run(o), Error);
  o.output_prefix = dir_ / "q";
  EXPECT_TRUE(o.validate().empty());
}

TEST_F(Preprocess, RefusesAbsurdWorkerCount) {
  auto o = options({dir_.write("a.jsonl", "{\"text\": \"x\"}\n")}, "p");
  o.workers = 100000;
  const auto problems = o.validate();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("--workers 100000"), std::string::npos) << problems[0];
  o.workers = 1024;
  EXPECT_TRUE(o.validate().empty());
}

TEST_F(Preprocess, OptionsReportEveryProblem) {
  PreprocessOptions o;
  o.workers = 0;
  o.json_keys = {"a", "a"};
  const auto problems = o.validate();
  EXPECT_EQ(problems.size(), 4u);  // no input, no prefix, duplicate key, workers
}

}  // namespace
}  // namespace megatron::data
