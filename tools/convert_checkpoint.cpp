// convert_checkpoint: checkpoints to and from HuggingFace, with the flags of Megatron's
// tools/checkpoint/convert.py (--model-type GPT --loader ... --saver ... --load-dir --save-dir).
//   --loader megatron --saver hf: a checkpoint of any TP x PP layout becomes a folder that
//   transformers' from_pretrained loads (GPT2LMHeadModel or LlamaForCausalLM, chosen by the
//   model's architecture; see megatron/interop/loaded_model.h).
//   --loader hf --saver megatron: a folder of one of those families becomes a model-only
//   checkpoint for --target-tensor-parallel-size x --target-pipeline-parallel-size (x
//   --target-expert-parallel-size for a mixture of experts); the matching megatron_train command
//   line is printed.
//   --loader megatron --saver megatron: a checkpoint (this build's or Megatron-Core's torch_dist) is
//   written again for the target layout, with its iteration, counters and scheduler (no optimizer
//   state).
//   --ckpt-format (with --saver megatron): megatron_cpp, this build's own format (the default), or
//   torch_dist, Megatron-Core's, which Megatron's load_checkpoint reads.
// Long flags may be abbreviated, as argparse allows.
#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "megatron/core/check.h"
#include "megatron/core/cli_app.h"
#include "megatron/core/file_io.h"
#include "megatron/core/log.h"
#include "megatron/core/strings.h"
#include "megatron/core/torch_errors.h"
#include "megatron/interop/hf_shard_size.h"
#include "megatron/interop/huggingface.h"
#include "megatron/interop/loaded_model.h"
#include "megatron/interop/model_checkpoint.h"
#include "megatron/tokenizer/tokenizer.h"

namespace {

// The command line, as convert.py's flags name it.
struct ConvertOptions {
  std::string model_type = "GPT", loader, saver, load_dir, save_dir, vocab_file, merge_file, tokenizer_model;
  std::string dtype = "float32";
  std::string ckpt_format = "megatron_cpp";
  std::string max_shard = "5GB";
  std::optional<std::int64_t> iteration;  // --ckpt-iteration
  int target_tp = 1, target_pp = 1, target_ep = 1;
  bool from_hf() const { return loader == "hf" && saver == "megatron"; }
  bool to_hf() const { return loader == "megatron" && saver == "hf"; }
  bool resave() const { return loader == "megatron" && saver == "megatron"; }
  megatron::interop::CheckpointTarget target() const {
    return {target_tp, target_pp, target_ep,
            ckpt_format == "torch_dist" ? megatron::checkpoint::CheckpointFormat::kTorchDist
                                        : megatron::checkpoint::CheckpointFormat::kNative};
  }
  megatron::tokenizer::TokenizerChoice tokenizer() const { return {vocab_file, merge_file, tokenizer_model}; }
};

// Every problem of the command line (flags of the other direction would be silently without
// effect: refused instead).
std::vector<std::string> check(const ConvertOptions& o, const CLI::App& app) {
  std::vector<std::string> problems;
  if (o.model_type != "GPT") problems.push_back("--model-type " + o.model_type + ": only GPT is supported");
  if (!o.to_hf() && !o.from_hf() && !o.resave()) {
    problems.push_back("--loader " + o.loader + " --saver " + o.saver +
                       ": supported are --loader megatron or hf with --saver megatron or hf (not hf to hf)");
  }
  if (o.ckpt_format != "megatron_cpp" && o.ckpt_format != "torch_dist") {
    problems.push_back("--ckpt-format " + o.ckpt_format + ": expected torch_dist or megatron_cpp" +
                       (o.ckpt_format == "torch" ? " (Megatron's legacy torch format is not written yet)" : ""));
  }
  if (o.to_hf() && app.count("--ckpt-format") > 0) problems.push_back("--ckpt-format: only for --saver megatron");
  auto given = [&](const char* flag) { return app.count(flag) > 0; };
  for (const char* flag :
       {"--target-tensor-parallel-size", "--target-pipeline-parallel-size", "--target-expert-parallel-size"}) {
    if (o.to_hf() && given(flag)) problems.push_back(std::string(flag) + ": only for --saver megatron");
  }
  for (const char* flag : {"--hf-dtype", "--max-shard-size"}) {
    if (!o.to_hf() && given(flag)) problems.push_back(std::string(flag) + ": only for --loader megatron --saver hf");
  }
  if (o.from_hf() && given("--ckpt-iteration")) problems.push_back("--ckpt-iteration: only for --loader megatron");
  if (o.target_tp < 1) problems.push_back("--target-tensor-parallel-size must be >= 1");
  if (o.target_pp < 1) problems.push_back("--target-pipeline-parallel-size must be >= 1");
  if (o.target_ep < 1) problems.push_back("--target-expert-parallel-size must be >= 1");
  if (o.dtype != "float32" && o.dtype != "bfloat16" && o.dtype != "float16") {
    problems.push_back("--hf-dtype " + o.dtype + ": expected float32, bfloat16 or float16");
  }
  return problems;
}

// --loader hf --saver megatron: the import, and the megatron_train command line that trains from it
// (each word quoted as a shell needs).
void import_from_hf(const ConvertOptions& o) {
  const auto tokenizer = megatron::interop::hf_folder_tokenizer(o.load_dir, o.tokenizer());
  const megatron::interop::HfImport imported = megatron::interop::import_hf(
      o.load_dir, o.save_dir, o.target_tp, o.target_pp, o.target_ep, tokenizer, o.target().format);
  for (const auto& note : imported.notes) std::printf("note: %s\n", note.c_str());
  std::vector<std::string> words = imported.model_flags;
  const std::vector<std::string> tokenizer_flags = tokenizer.flags();
  words.insert(words.end(), tokenizer_flags.begin(), tokenizer_flags.end());
  std::string flags;
  for (const auto& word : words) flags += " " + megatron::shell_word(word);
  const std::string expert_layout = o.target_ep > 1 ? " x expert-parallel " + std::to_string(o.target_ep) : "";
  std::string layout_flags = " --tensor-model-parallel-size " + std::to_string(o.target_tp);
  // Megatron requires sequence parallelism with experts under TP.
  if (o.target_tp > 1 && imported.has_experts) layout_flags += " --sequence-parallel";
  layout_flags += " --pipeline-model-parallel-size " + std::to_string(o.target_pp);
  if (o.target_ep > 1) layout_flags += " --expert-model-parallel-size " + std::to_string(o.target_ep);
  std::printf("converted %s (HuggingFace %s) to %s for tensor-parallel %d x pipeline-parallel %d%s, iteration 0, "
              "model only\ntrain from it with: megatron_train%s%s --load %s --finetune ...\n",
              o.load_dir.c_str(), megatron::interop::hf_architecture(imported.family), o.save_dir.c_str(), o.target_tp,
              o.target_pp, expert_layout.c_str(), flags.c_str(), layout_flags.c_str(),
              megatron::shell_word(o.save_dir).c_str());
}

// --loader megatron --saver hf: the checkpoint in one process, written as an HF folder with the
// tokenizer it was trained with.
void export_to_hf(const ConvertOptions& o) {
  const std::uint64_t shard_bytes = megatron::interop::parse_shard_size(o.max_shard);
  const at::ScalarType type = o.dtype == "bfloat16" ? at::kBFloat16 : o.dtype == "float16" ? at::kHalf : at::kFloat;
  const megatron::interop::LoadedModel loaded = megatron::interop::load_model(o.load_dir, o.iteration);
  const auto run_tokenizer = megatron::interop::saved_run_tokenizer(loaded, o.tokenizer());
  const megatron::tokenizer::Tokenizer* tokenizer = run_tokenizer.tokenizer.get();
  const auto family = megatron::interop::hf_family_of(loaded.config);
  // The tokenizer's rows, and the model's own past them (an imported model's vocab_size).
  const std::int64_t rows = std::max(static_cast<std::int64_t>(tokenizer->vocab_size()), loaded.run.model_vocab_rows.value_or(0));
  const megatron::interop::HfExport out =
      megatron::interop::to_hf(loaded.config, loaded.model->named_parameters(), tokenizer->eod(), rows, type, tokenizer->bos());
  megatron::interop::write_hf_folder(o.save_dir, out, run_tokenizer.options, loaded.config.seq_length, shard_bytes);
  std::printf("converted %s iteration %lld (saved at tensor-parallel %d x pipeline-parallel %d) to %s in "
              "HuggingFace's %s format, %s weights\n",
              o.load_dir.c_str(), static_cast<long long>(loaded.iteration), loaded.saved_tp, loaded.saved_pp,
              o.save_dir.c_str(), megatron::interop::hf_architecture(family), o.dtype.c_str());
}

// --loader megatron --saver megatron: the checkpoint in one process, written for the target layout
// and format with its counters, scheduler, run record and tokenizer copies.
void resave(const ConvertOptions& o) {
  megatron::interop::LoadedModel loaded = megatron::interop::load_model(o.load_dir, o.iteration);
  megatron::checkpoint::CheckpointState common = loaded.saved;
  megatron::checkpoint::SavedRun run = loaded.run;
  run.pipeline = {loaded.config.num_layers, 1, std::nullopt, std::nullopt, std::nullopt};
  common.config = run.to_json();
  // The run's tokenizer (its copies in the checkpoint, else the files it names or --vocab-file ...),
  // checked against the model and carried into the new checkpoint.
  const auto tokenizer = megatron::interop::saved_run_tokenizer(loaded, o.tokenizer());
  common.tokenizer_files = std::make_shared<const megatron::checkpoint::AssetFiles>(
      megatron::tokenizer::read_tokenizer_files(tokenizer.options));
  megatron::interop::write_model_checkpoint(o.save_dir, *loaded.model, common, o.target());
  std::printf("converted %s iteration %lld (saved at tensor-parallel %d x pipeline-parallel %d) to %s in %s format "
              "for tensor-parallel %d x pipeline-parallel %d%s, model, counters and scheduler (no optimizer state)\n",
              o.load_dir.c_str(), static_cast<long long>(loaded.iteration), loaded.saved_tp, loaded.saved_pp,
              o.save_dir.c_str(), o.ckpt_format.c_str(), o.target_tp, o.target_pp,
              o.target_ep > 1 ? (" x expert-parallel " + std::to_string(o.target_ep)).c_str() : "");
}

int run(int argc, char** argv) {
  megatron::install_temp_file_cleanup();  // SIGINT/SIGTERM/SIGHUP remove the half-written folder
  CLI::App app{"Convert GPT checkpoints between megatron-cpp, Megatron-Core torch_dist and HuggingFace", "convert_checkpoint"};
  app.allow_extras();
  ConvertOptions o;
  std::int64_t iteration = 0;
  app.add_option("--model-type", o.model_type, "Model type (GPT)")->capture_default_str();
  app.add_option("--loader", o.loader, "Format of --load-dir: megatron or hf")->required();
  app.add_option("--saver", o.saver, "Format of --save-dir: hf or megatron")->required();
  app.add_option("--target-tensor-parallel-size", o.target_tp, "--saver megatron: tensor-parallel size")
      ->capture_default_str();
  app.add_option("--target-pipeline-parallel-size", o.target_pp, "--saver megatron: pipeline-parallel size")
      ->capture_default_str();
  app.add_option("--target-expert-parallel-size", o.target_ep, "--saver megatron: expert-parallel size (MoE models)")
      ->capture_default_str();
  app.add_option("--load-dir", o.load_dir, "Checkpoint folder to read (its latest iteration)")->required();
  app.add_option("--save-dir", o.save_dir, "Folder to write; must not exist")->required();
  app.add_option("--ckpt-iteration", iteration, "Read this iteration instead of the tracker's");
  app.add_option("--vocab-file", o.vocab_file,
                 "GPT-2 vocab.json (default: the checkpoint's copy, else the saved run's --vocab-file; the HF folder's vocab.json)");
  app.add_option("--merge-file", o.merge_file,
                 "GPT-2 merges.txt (default: the checkpoint's copy, else the saved run's --merge-file; the HF folder's merges.txt)");
  app.add_option("--tokenizer-model", o.tokenizer_model,
                 "--loader hf: a folder with tokenizer.json (default: the HF folder's own tokenizer files); "
                 "--loader megatron: the file or folder of a tokenizer other than GPT-2's (default: the checkpoint's "
                 "copy, else the saved run's)");
  app.add_option("--ckpt-format", o.ckpt_format,
                 "--saver megatron: megatron_cpp (this build's format) or torch_dist (Megatron-Core's)")
      ->capture_default_str();
  app.add_option("--hf-dtype", o.dtype, "Weights' type in the HF files: float32, bfloat16 or float16")
      ->capture_default_str();
  app.add_option("--max-shard-size", o.max_shard, "Split model.safetensors past this size (with an index)")
      ->capture_default_str();
  // Flags of Megatron's convert.py that locate or tune its Python: accepted, noted as without effect.
  std::string megatron_path;
  int max_queue_size = 50;
  bool no_checking = false;
  app.add_option("--megatron-path", megatron_path, "Megatron-LM's convert.py: its source folder (not needed here)");
  app.add_option("--max-queue-size", max_queue_size, "Megatron-LM's convert.py: its loader-saver queue (none here)");
  app.add_flag("--no-checking", no_checking, "Megatron-LM's convert.py: skip its queue checks (none here)");
  std::vector<std::string> problems;
  if (const auto status = megatron::parse_command_line(app, argc, argv, "convert_checkpoint", problems)) {
    return *status;  // --help
  }
  if (app.count("--ckpt-iteration") > 0) o.iteration = iteration;
  for (auto& problem : check(o, app)) problems.push_back(std::move(problem));
  megatron::throw_if_problems("invalid command line", problems);
  const megatron::Log log(std::cerr, "convert_checkpoint");
  for (const char* flag : {"--megatron-path", "--max-queue-size", "--no-checking"}) {
    if (app.count(flag) > 0) {
      log.note(std::string(flag) + " is a flag of Megatron-LM's Python convert.py; this tool has no use for it");
    }
  }
  if (o.from_hf()) {
    import_from_hf(o);
  } else if (o.resave()) {
    resave(o);
  } else {
    export_to_hf(o);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return megatron::run_torch_tool("convert_checkpoint", [&] { return run(argc, argv); });
}
