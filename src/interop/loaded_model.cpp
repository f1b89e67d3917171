// A checkpoint's model in one process (see loaded_model.h).
#include "megatron/interop/loaded_model.h"

#include <ATen/CPUGeneratorImpl.h>

#include "megatron/checkpoint/checkpoint.h"
#include "megatron/checkpoint/reshard.h"
#include "megatron/core/check.h"
#include "megatron/parallel/pipeline_layout.h"

namespace megatron::interop {

LoadedModel load_model(const std::string& root, std::optional<std::int64_t> iteration) {
  LoadedModel out;
  out.root = root;
  const auto tracker = checkpoint::read_tracker(root);
  MEGATRON_CHECK(iteration || tracker, root, ": no checkpoint (no ", checkpoint::kTrackerFile, ")");
  out.iteration = iteration ? *iteration : *tracker;
  const checkpoint::SavedLayout saved = checkpoint::read_layout(root, out.iteration);
  MEGATRON_CHECK(saved.config.is_object(), checkpoint::iteration_folder(root, out.iteration),
                 ": the checkpoint records no run configuration");
  out.saved_tp = saved.tp;
  out.saved_pp = saved.pp;
  out.run_config = saved.config;
  out.config = checkpoint::saved_model_config(saved.config, checkpoint::iteration_folder(root, out.iteration));
  out.config.sequence_parallel = false;  // one process
  out.config.recompute_granularity = model::RecomputeGranularity::kNone;

  out.comm = parallel::make_single_process_communicator();
  out.state = std::make_unique<parallel::ParallelState>(parallel::ParallelConfig{}, 0);
  out.pc = std::make_unique<parallel::ParallelContext>(parallel::ParallelContext::create(*out.state, *out.comm));
  at::Generator init = at::make_generator<at::CPUGeneratorImpl>(0);  // every value is overwritten below
  out.model = std::make_unique<model::GptModel>(out.config, *out.pc, init);
  const bool tied = !out.config.untie_embeddings_and_output_weights;
  const parallel::PipelineLayout one{out.config.num_layers, 1, 1, std::nullopt, std::nullopt};
  const checkpoint::CheckpointState state =
      checkpoint::load_resharded(root, out.iteration, {saved.tp, checkpoint::saved_pipeline_layout(saved.config, saved.pp), tied},
                     {out.model->named_parameters(), out.model->parameter_layouts(), 0, 1, 0, one}, false);
  checkpoint::load_parameters(out.model->named_parameters(), state.model, checkpoint::iteration_folder(root, out.iteration));
  return out;
}

std::unique_ptr<tokenizer::Tokenizer> saved_run_tokenizer(const LoadedModel& loaded, std::string& vocab_file,
                                                          std::string& merge_file) {
  const auto saved = [&](const char* key) {
    const auto it = loaded.run_config.find(key);
    return it != loaded.run_config.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (vocab_file.empty()) vocab_file = saved("vocab_file");
  if (merge_file.empty()) merge_file = saved("merge_file");
  MEGATRON_CHECK(!vocab_file.empty() && !merge_file.empty(),
                 "the saved run names no GPT-2 vocabulary; give --vocab-file and --merge-file");
  tokenizer::TokenizerOptions options;
  options.vocab_file = vocab_file;
  options.merge_file = merge_file;
  return tokenizer::build_tokenizer(options);
}

}  // namespace megatron::interop
