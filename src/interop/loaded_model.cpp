// A checkpoint's model in one process (see loaded_model.h).
#include "megatron/interop/loaded_model.h"

#include <filesystem>

#include "megatron/checkpoint/checkpoint.h"
#include "megatron/checkpoint/reshard.h"
#include "megatron/checkpoint/torch_dist.h"
#include "megatron/core/check.h"
#include "megatron/parallel/pipeline_layout.h"
#include "megatron/tokenizer/tokenizer_files.h"

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
  const std::string folder = checkpoint::iteration_folder(root, out.iteration);
  out.run = checkpoint::SavedRun::from_json(saved.config, folder);
  out.config = out.run.model_config(folder);
  out.config.sequence_parallel = false;  // one process
  out.config.recompute_granularity = model::RecomputeGranularity::kNone;

  out.comm = parallel::make_single_process_communicator();
  out.state = std::make_unique<parallel::ParallelState>(parallel::ParallelConfig{}, 0);
  out.pc = std::make_unique<parallel::ParallelContext>(parallel::ParallelContext::create(*out.state, *out.comm));
  // Every value is loaded below.
  out.model = std::make_unique<model::GptModel>(out.config, *out.pc, parallel::ParameterInit::loaded_later());
  const bool tied = !out.config.untie_embeddings_and_output_weights;
  const parallel::PipelineLayout one{out.config.num_layers, 1, 1, std::nullopt, std::nullopt};
  const parallel::NamedTensors tensors = out.model->checkpoint_tensors();
  const auto layouts = out.model->checkpoint_layouts();
  const checkpoint::ReshardTarget whole{tensors, layouts, 0, 1, 0, one};
  checkpoint::CheckpointState state =
      saved.format == checkpoint::CheckpointFormat::kTorchDist
          ? checkpoint::load_torch_dist(root, out.iteration, whole)
          : checkpoint::load_resharded(root, out.iteration,
                                       {saved.tp, out.run.pipeline.layout(saved.pp), tied, saved.ep, saved.etp}, whole,
                                       false);
  checkpoint::load_parameters(tensors, state.model, checkpoint::iteration_folder(root, out.iteration));
  state.model.clear();
  out.saved = std::move(state);
  return out;
}

RunTokenizer saved_run_tokenizer(const LoadedModel& loaded, const tokenizer::TokenizerChoice& given) {
  MEGATRON_CHECK(loaded.run.tokenizer_problem.empty(), checkpoint::iteration_folder(loaded.root, loaded.iteration),
                 ": the tokenizer this checkpoint records cannot be built here: ", loaded.run.tokenizer_problem);
  const tokenizer::TokenizerOptions& recorded = loaded.run.tokenizer;
  const bool gpt2 = recorded.reads_vocab_and_merges(), null = recorded.reads_no_files();
  const bool names_files = recorded.names_files();
  const std::string trained_with = names_files || null ? recorded.describe() : "a tokenizer it does not name";
  // Files for another type than the run's cannot stand in for its tokenizer.
  const bool given_gpt2 = !given.vocab_file.empty() || !given.merge_file.empty();
  MEGATRON_CHECK(!(given_gpt2 && !gpt2), "--vocab-file and --merge-file name GPT-2 files, but this checkpoint was "
                 "trained with ", trained_with,
                 null ? "; give neither" : "; give --tokenizer-model instead, or neither");
  MEGATRON_CHECK(!(!given.tokenizer_model.empty() && (gpt2 || null)),
                 "--tokenizer-model names a tokenizer file, but this checkpoint was trained with ", trained_with,
                 gpt2 ? "; give --vocab-file and --merge-file instead, or neither" : "");
  RunTokenizer out;
  const std::string copies =
      (std::filesystem::path(checkpoint::iteration_folder(loaded.root, loaded.iteration)) / checkpoint::kTokenizerFolder)
          .string();
  const bool user_chose = given_gpt2 || !given.tokenizer_model.empty();
  if (user_chose) {
    out.options = recorded;
    if (!given.vocab_file.empty()) out.options.vocab_file = given.vocab_file;
    if (!given.merge_file.empty()) out.options.merge_file = given.merge_file;
    if (!given.tokenizer_model.empty()) out.options.tokenizer_model = given.tokenizer_model;
    out.source = "the tokenizer (" + out.options.describe() + ")";
  } else if (const auto copied = tokenizer::options_reading_copies(recorded, copies);
             !loaded.root.empty() && !null && copied.files_exist()) {
    out.options = copied;
    out.source = "the checkpoint's copy of its tokenizer (" + copies + ")";
  } else {
    const std::string flags = gpt2 ? "--vocab-file and --merge-file" : "--tokenizer-model";
    MEGATRON_CHECK(names_files || null, "the saved run names no tokenizer files and ",
                   copies, " holds no copy; give ", flags);
    MEGATRON_CHECK(recorded.files_exist(), "this checkpoint was trained with ", trained_with,
                   ", which is no longer there, and ", copies, " holds no copy; give ", flags);
    out.options = recorded;
    out.source = "the tokenizer (" + out.options.describe() + ")";
  }
  try {
    out.tokenizer = tokenizer::build_tokenizer(out.options);
  } catch (const Error& e) {
    if (user_chose) throw;
    // The files are the checkpoint's or the recorded run's, not a flag the user gave.
    std::string why = e.what();
    for (auto at = why.find(" (--tokenizer-model)"); at != std::string::npos; at = why.find(" (--tokenizer-model)")) {
      why.erase(at, 20);
    }
    MEGATRON_FAIL(out.source, " cannot be built: ", why, "; give ",
                  gpt2 ? "--vocab-file and --merge-file" : "--tokenizer-model", " to use the tokenizer it was trained with");
  }
  const auto tokens = static_cast<std::int64_t>(out.tokenizer->vocab_size());
  const std::int64_t rows = loaded.config.padded_vocab_size;
  const std::string advice = user_chose && names_files
                                 ? std::string("leave ") + (gpt2 ? "--vocab-file and --merge-file" : "--tokenizer-model") +
                                       " out to use that one"
                                 : std::string("give the tokenizer it was trained with");
  MEGATRON_CHECK(tokens <= rows, out.source, " has ", tokens, " tokens but the model's vocabulary has ", rows,
                 " rows: this checkpoint was trained with ", trained_with, "; ", advice);
  if (!user_chose) return out;
  // Another tokenizer than the recorded one: the model's vocabulary would be cut to it (an export)
  // or ids past it never drawn (generation). Its size must be the recorded tokenizer's.
  if (names_files && out.options.describe() != recorded.describe() && recorded.files_exist()) {
    const auto trained = static_cast<std::int64_t>(tokenizer::build_tokenizer(recorded)->vocab_size());
    MEGATRON_CHECK(tokens == trained, out.source, " has ", tokens, " tokens but this checkpoint was trained with ",
                   trained_with, " (", trained, " tokens); ", advice);
    return out;
  }
  // The recorded files are gone (or were never named): Megatron's padding of the trained
  // vocabulary (--make-vocab-size-divisible-by x TP) must give the model's rows from this one too.
  if (const auto& padding = loaded.run.vocab_padding) {
    const std::int64_t padded =
        model::ModelConfig::padded_vocab_size_for(tokens, padding->divisible_by, padding->tp);
    MEGATRON_CHECK(padded == rows, out.source, " has ", tokens, " tokens, padded to ", padded,
                   " rows, but the model's vocabulary has ", rows, ": this checkpoint was trained with ", trained_with,
                   "; ", advice);
  }
  return out;
}

}  // namespace megatron::interop
