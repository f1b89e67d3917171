// Test helper: the first N samples of the train split exactly as megatron_train reads them for the
// same flags (its data and tokenizer flags, resolved as the trainer resolves them, the same dataset
// builder and index caches), written as a safetensors file (tokens, labels, loss_mask: [N, S]) for
// a Python reference to train on. megatron_train consumes sample k in iteration
// k / global-batch-size (Megatron's pretraining sampler: no reordering after the dataset's own
// shuffle). Usage: train_samples N OUT.safetensors MEGATRON_TRAIN_FLAGS...
#include <cstdio>
#include <cstdlib>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "megatron/checkpoint/safetensors.h"
#include "megatron/core/check.h"
#include "megatron/core/tool_main.h"
#include "megatron/train/arguments.h"
#include "megatron/train/run_plan.h"
#include "trainer_parts.h"

int main(int argc, char** argv) {
  return megatron::run_tool("train_samples", [&] {
    if (argc < 4) {
      std::fprintf(stderr, "usage: train_samples N OUT.safetensors MEGATRON_TRAIN_FLAGS...\n");
      return 2;
    }
    const auto n = std::strtoll(argv[1], nullptr, 10);
    MEGATRON_CHECK(n > 0, "N must be a positive number of samples, not ", argv[1]);
    std::vector<std::string> flags;
    for (int i = 3; i < argc; ++i) flags.emplace_back(argv[i]);
    const megatron::train::RunPlan plan = megatron::train::make_run_plan(megatron::train::parse_arguments(flags));
    const auto tokenizer = megatron::tokenizer::build_tokenizer(plan.tokenizer);
    std::ostringstream log;
    const megatron::data::GptDatasets datasets =
        megatron::train::build_run_datasets(plan.data, plan.tokenizer, *tokenizer, false, log);
    const megatron::data::SampleDataset* train = datasets.train();
    MEGATRON_CHECK(train != nullptr && train->size() >= static_cast<std::uint64_t>(n), "the train split has ",
                   train ? train->size() : 0, " samples; ", n, " were asked for");
    const std::int64_t s = train->sequence_length();
    at::Tensor tokens = at::empty({n, s}, at::kLong), labels = at::empty({n, s}, at::kLong);
    at::Tensor loss_mask = at::empty({n, s}, at::kFloat), positions = at::empty({n, s}, at::kLong);
    const auto size = static_cast<std::size_t>(s);
    for (std::int64_t k = 0; k < n; ++k) {
      const auto longs = [&](at::Tensor& t) { return std::span(t[k].data_ptr<std::int64_t>(), size); };
      train->read_sample(static_cast<std::uint64_t>(k), {longs(tokens), longs(labels),
                                                         std::span(loss_mask[k].data_ptr<float>(), size),
                                                         longs(positions)});
    }
    megatron::checkpoint::write_safetensors(argv[2], {{"tokens", tokens}, {"labels", labels}, {"loss_mask", loss_mask}});
    return 0;
  });
}
