// A checkpoint's model in one process (see loaded_model.h).
#include "megatron/interop/loaded_model.h"

#include <filesystem>
#include <type_traits>

#include "megatron/checkpoint/checkpoint.h"
#include "megatron/checkpoint/reshard.h"
#include "megatron/core/check.h"
#include "megatron/parallel/pipeline_layout.h"

namespace megatron::interop {

LoadedModel load_model(const std::string& root, std::optional<std::int64_t> iteration) {
  LoadedModel out;
  out.root = root;
  if (iteration) {
    MEGATRON_CHECK(*iteration >= 0, "--ckpt-iteration ", *iteration, ": expected an iteration number >= 0");
    if (!std::filesystem::is_directory(checkpoint::iteration_folder(root, *iteration))) {
      const auto saved = checkpoint::saved_iterations(root);
      MEGATRON_FAIL("--ckpt-iteration ", *iteration, ": ", root, " has no checkpoint of iteration ", *iteration,
                    saved.empty() ? std::string(" (it holds none)")
                                  : " (it holds iteration" + std::string(saved.size() == 1 ? " " : "s ") +
                                        checkpoint::describe_iterations(saved) + ")");
    }
  }
  const auto tracker = iteration ? std::nullopt : checkpoint::read_tracker(root);
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
  // Every value is loaded below.
  out.model = std::make_unique<model::GptModel>(out.config, *out.pc, parallel::ParameterInit::loaded_later());
  const bool tied = !out.config.untie_embeddings_and_output_weights;
  const parallel::PipelineLayout one{out.config.num_layers, 1, 1, std::nullopt, std::nullopt};
  const checkpoint::CheckpointState state =
      checkpoint::load_resharded(root, out.iteration, {saved.tp, checkpoint::saved_pipeline_layout(saved.config, saved.pp), tied},
                     {out.model->named_parameters(), out.model->parameter_layouts(), 0, 1, 0, one}, false);
  checkpoint::load_parameters(out.model->named_parameters(), state.model, checkpoint::iteration_folder(root, out.iteration));
  return out;
}

namespace {

std::unique_ptr<tokenizer::Tokenizer> gpt2_tokenizer(const std::string& vocab_file, const std::string& merge_file) {
  tokenizer::TokenizerOptions options;
  options.vocab_file = vocab_file;
  options.merge_file = merge_file;
  return tokenizer::build_tokenizer(options);
}

// A key of the saved run's arguments, when it holds a value of type T.
template <typename T>
std::optional<T> saved_value(const nlohmann::json& run_config, const char* key) {
  const auto it = run_config.find(key);
  if (it == run_config.end()) return std::nullopt;
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return std::nullopt;
  } else {
    if (!it->is_number_integer()) return std::nullopt;
  }
  return it->get<T>();
}

}  // namespace

std::unique_ptr<tokenizer::Tokenizer> saved_run_tokenizer(const LoadedModel& loaded, std::string& vocab_file,
                                                          std::string& merge_file) {
  const std::string saved_vocab = saved_value<std::string>(loaded.run_config, "vocab_file").value_or("");
  const std::string saved_merge = saved_value<std::string>(loaded.run_config, "merge_file").value_or("");
  if (vocab_file.empty()) vocab_file = saved_vocab;
  if (merge_file.empty()) merge_file = saved_merge;
  MEGATRON_CHECK(!vocab_file.empty() && !merge_file.empty(),
                 "the saved run names no GPT-2 vocabulary; give --vocab-file and --merge-file");
  auto chosen = gpt2_tokenizer(vocab_file, merge_file);
  const auto tokens = static_cast<std::int64_t>(chosen->vocab_size());
  const std::int64_t rows = loaded.config.padded_vocab_size;
  const std::string trained_with =
      saved_vocab.empty() ? std::string("a tokenizer it does not name")
                          : "--vocab-file " + saved_vocab + " --merge-file " + saved_merge;
  const std::string tokenizer = "the tokenizer (--vocab-file " + vocab_file + " --merge-file " + merge_file + ")";
  const std::string advice = saved_vocab.empty() ? std::string("give the tokenizer it was trained with")
                                                 : "leave --vocab-file and --merge-file out to use those";
  MEGATRON_CHECK(tokens <= rows, tokenizer, " has ", tokens, " tokens but the model's vocabulary has ", rows,
                 " rows: this checkpoint was trained with ", trained_with, "; ", advice);
  // Another tokenizer than the recorded one: the model's vocabulary would be cut to it (an export)
  // or ids past it never drawn (generation). Its size must be the recorded tokenizer's.
  const bool other_files = vocab_file != saved_vocab || merge_file != saved_merge;
  if (other_files && !saved_vocab.empty() && std::filesystem::is_regular_file(saved_vocab) &&
      std::filesystem::is_regular_file(saved_merge)) {
    const auto trained = static_cast<std::int64_t>(gpt2_tokenizer(saved_vocab, saved_merge)->vocab_size());
    MEGATRON_CHECK(tokens == trained, tokenizer, " has ", tokens, " tokens but this checkpoint was trained with ",
                   trained_with, " (", trained, " tokens); ", advice);
    return chosen;
  }
  // The recorded files are gone (or were never named): Megatron's padding of the trained
  // vocabulary (--make-vocab-size-divisible-by x TP) must give the model's rows from this one too.
  const auto divisible_by = saved_value<std::int64_t>(loaded.run_config, "make_vocab_size_divisible_by");
  const auto tp = saved_value<std::int64_t>(loaded.run_config, "tensor_model_parallel_size");
  const bool padded_given = saved_value<std::int64_t>(loaded.run_config, "padded_vocab_size").has_value();
  if (divisible_by && tp && *divisible_by > 0 && *tp > 0 && !padded_given) {
    const std::int64_t padded =
        model::ModelConfig::padded_vocab_size_for(tokens, static_cast<int>(*divisible_by), static_cast<int>(*tp));
    MEGATRON_CHECK(padded == rows, tokenizer, " has ", tokens, " tokens, padded to ", padded,
                   " rows, but the model's vocabulary has ", rows, ": this checkpoint was trained with ", trained_with,
                   "; ", advice);
  }
  return chosen;
}

}  // namespace megatron::interop
