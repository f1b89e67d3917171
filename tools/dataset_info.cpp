// dataset_info: what a Megatron .bin/.idx dataset holds (counts, dtype, token id range, length
// distributions), and optionally the token ids of one document.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "megatron/core/check.h"
#include "megatron/data/dataset_summary.h"
#include "megatron/data/indexed_dataset.h"

int main(int argc, char** argv) {
  CLI::App app{"Summarise a Megatron indexed dataset (P.bin + P.idx)"};
  std::string prefix;
  std::size_t document = 0;
  app.add_option("prefix,--data-path", prefix, "Dataset prefix P of P.bin / P.idx")->required();
  CLI::Option* document_option =
      app.add_option("--document", document, "Also print the token ids of document N");
  CLI11_PARSE(app, argc, argv);

  try {
    const megatron::data::IndexedDataset dataset(prefix);
    std::fputs(megatron::data::format_summary(megatron::data::summarize(dataset)).c_str(), stdout);
    if (document_option->count() > 0) {
      MEGATRON_CHECK(document < dataset.num_documents(), "--document ", document,
                     " is out of range: ", prefix, " has ", dataset.num_documents(),
                     " documents (0..", dataset.num_documents() - 1, ")");
      const std::vector<std::int64_t> ids = dataset.read_document(document);
      std::printf("document %zu: %zu tokens\n", document, ids.size());
      for (std::size_t i = 0; i < ids.size(); ++i) {
        std::printf(i == 0 ? "%lld" : " %lld", static_cast<long long>(ids[i]));
      }
      std::printf("\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
