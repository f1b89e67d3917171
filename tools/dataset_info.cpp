// dataset_info: what a Megatron .bin/.idx dataset holds (counts, dtype, token id range, length
// distributions), optionally the token ids of one document and, given a tokenizer, its text
// (every byte of it, NULs included). Long flags may be abbreviated, as argparse allows.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>

#include "megatron/core/check.h"
#include "megatron/core/cli_app.h"
#include "megatron/core/tool_main.h"
#include "megatron/data/dataset_summary.h"
#include "megatron/data/indexed_dataset.h"
#include "megatron/tokenizer/tokenizer.h"
#include "megatron/tokenizer/tokenizer_flags.h"

namespace {

void print_document(const megatron::data::IndexedDataset& dataset, std::size_t document,
                    std::size_t max_ids, const megatron::tokenizer::Tokenizer* tokenizer) {
  MEGATRON_CHECK(document < dataset.num_documents(), "--document ", document,
                 " is out of range: ", dataset.prefix(), " has ", dataset.num_documents(),
                 " documents");
  const std::vector<std::int64_t> ids = dataset.read_document(document);
  std::printf("document %zu: %zu tokens\n", document, ids.size());
  const std::size_t shown = max_ids == 0 ? ids.size() : std::min(max_ids, ids.size());
  for (std::size_t i = 0; i < shown; ++i) {
    std::printf(i == 0 ? "%lld" : " %lld", static_cast<long long>(ids[i]));
  }
  if (shown < ids.size()) std::printf(" ... (%zu more; --max-ids 0 prints all)", ids.size() - shown);
  std::printf("\n");
  if (tokenizer == nullptr) return;
  std::vector<std::int32_t> narrow;
  narrow.reserve(ids.size());
  for (const std::int64_t id : ids) {
    MEGATRON_CHECK(id >= 0 && id <= std::numeric_limits<std::int32_t>::max(), "document ",
                   document, " holds token id ", id, ", which no tokenizer can decode");
    narrow.push_back(static_cast<std::int32_t>(id));
  }
  const std::string text = tokenizer->decode(narrow);
  std::printf("text:\n");
  std::fwrite(text.data(), 1, text.size(), stdout);  // not %s: a NUL token would end the text there
  std::printf("\n");
}

int run(int argc, char** argv) {
  CLI::App app{"Summarise a Megatron indexed dataset (P.bin + P.idx)", "dataset_info"};
  app.allow_extras();
  std::string prefix;
  std::int64_t document = 0;  // signed: -1 is refused, not wrapped to 2^64 - 1
  std::int64_t max_ids = 64;
  megatron::tokenizer::TokenizerFlags tokenizer_flags;
  app.add_option("prefix,--data-path", prefix, "Dataset prefix P of P.bin / P.idx")->required();
  CLI::Option* document_option =
      app.add_option("--document", document, "Also print the token ids of document N");
  app.add_option("--max-ids", max_ids, "Print at most N ids of the document (0: all)")
      ->capture_default_str();
  // Any tokenizer flag decodes --document to text.
  megatron::tokenizer::add_tokenizer_flags(app, tokenizer_flags);
  app.add_option("--vocab-extra-ids", tokenizer_flags.given.vocab_extra_ids, "SentencePieceTokenizer: <extra_id_i> tokens");
  std::vector<std::string> problems;
  if (const auto status = megatron::parse_command_line(app, argc, argv, "dataset_info", problems)) {
    return *status;  // --help
  }
  if (document < 0) problems.push_back("--document must be >= 0, got " + std::to_string(document));
  if (max_ids < 0) problems.push_back("--max-ids must be >= 0 (0 prints all), got " + std::to_string(max_ids));
  megatron::throw_if_problems("invalid command line", problems);

  bool decode = false;
  for (const char* flag : {"--tokenizer-type", "--vocab-file", "--merge-file", "--tokenizer-model"}) {
    decode = decode || app.count(flag) > 0;
  }
  MEGATRON_CHECK(!decode || document_option->count() > 0,
                 "the tokenizer flags decode one document; add --document N");
  const std::unique_ptr<megatron::tokenizer::Tokenizer> tokenizer =
      decode ? megatron::tokenizer::build_tokenizer(tokenizer_flags.options()) : nullptr;
  const megatron::data::IndexedDataset dataset(prefix);
  MEGATRON_CHECK(document_option->count() == 0 || static_cast<std::size_t>(document) < dataset.num_documents(),
                 "--document ", document, " is out of range: ", prefix, " has ",
                 dataset.num_documents(), " documents");
  std::fputs(megatron::data::format_summary(megatron::data::summarize(dataset)).c_str(), stdout);
  if (document_option->count() > 0) {
    print_document(dataset, static_cast<std::size_t>(document), static_cast<std::size_t>(max_ids), tokenizer.get());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return megatron::run_tool("dataset_info", [&] { return run(argc, argv); });
}
