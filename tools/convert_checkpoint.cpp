// convert_checkpoint: checkpoints to and from HuggingFace, with the flags of Megatron's
// tools/checkpoint/convert.py (--model-type GPT --loader ... --saver ... --load-dir --save-dir).
//   --loader megatron --saver hf: a checkpoint of any TP x PP layout becomes a folder that
//   transformers' from_pretrained loads (GPT2LMHeadModel or LlamaForCausalLM, chosen by the
//   model's architecture; see megatron/interop/loaded_model.h).
//   --loader hf --saver megatron: a folder of one of those families becomes a model-only
//   checkpoint for --target-tensor-parallel-size x --target-pipeline-parallel-size (x
//   --target-expert-parallel-size for a mixture of experts); the matching megatron_train command
//   line is printed.
// Long flags may be abbreviated, as argparse allows.
#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdio>
#include <iostream>
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
#include "megatron/tokenizer/tokenizer.h"

namespace {

int run(int argc, char** argv) {
  megatron::install_temp_file_cleanup();  // SIGINT/SIGTERM/SIGHUP remove the half-written folder
  CLI::App app{"Convert GPT checkpoints between megatron-cpp and HuggingFace", "convert_checkpoint"};
  app.allow_extras();
  std::string model_type = "GPT", loader, saver, load_dir, save_dir, vocab_file, merge_file, tokenizer_model;
  std::string dtype = "float32";
  std::string max_shard = "5GB";
  std::int64_t iteration = 0;
  int target_tp = 1, target_pp = 1, target_ep = 1;
  app.add_option("--model-type", model_type, "Model type (GPT)")->capture_default_str();
  app.add_option("--loader", loader, "Format of --load-dir: megatron or hf")->required();
  app.add_option("--saver", saver, "Format of --save-dir: hf or megatron")->required();
  app.add_option("--target-tensor-parallel-size", target_tp, "--saver megatron: tensor-parallel size")
      ->capture_default_str();
  app.add_option("--target-pipeline-parallel-size", target_pp, "--saver megatron: pipeline-parallel size")
      ->capture_default_str();
  app.add_option("--target-expert-parallel-size", target_ep, "--saver megatron: expert-parallel size (MoE models)")
      ->capture_default_str();
  app.add_option("--load-dir", load_dir, "Checkpoint folder to read (its latest iteration)")->required();
  app.add_option("--save-dir", save_dir, "Folder to write; must not exist")->required();
  app.add_option("--ckpt-iteration", iteration, "Read this iteration instead of the tracker's");
  app.add_option("--vocab-file", vocab_file,
                 "GPT-2 vocab.json (default: the checkpoint's copy, else the saved run's --vocab-file; the HF folder's vocab.json)");
  app.add_option("--merge-file", merge_file,
                 "GPT-2 merges.txt (default: the checkpoint's copy, else the saved run's --merge-file; the HF folder's merges.txt)");
  app.add_option("--tokenizer-model", tokenizer_model,
                 "--loader hf: a folder with tokenizer.json (default: the HF folder's own tokenizer files); "
                 "--loader megatron: the file or folder of a tokenizer other than GPT-2's (default: the checkpoint's "
                 "copy, else the saved run's)");
  app.add_option("--hf-dtype", dtype, "Weights' type in the HF files: float32, bfloat16 or float16")
      ->capture_default_str();
  app.add_option("--max-shard-size", max_shard, "Split model.safetensors past this size (with an index)")
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
  if (model_type != "GPT") problems.push_back("--model-type " + model_type + ": only GPT is supported");
  const bool to_hf = loader == "megatron" && saver == "hf";
  const bool from_hf = loader == "hf" && saver == "megatron";
  if (!to_hf && !from_hf) {
    problems.push_back("--loader " + loader + " --saver " + saver +
                       ": supported are --loader megatron --saver hf and --loader hf --saver megatron");
  }
  // Flags of the other direction would be silently without effect: refuse them instead.
  auto given = [&](const char* flag) { return app.count(flag) > 0; };
  for (const char* flag :
       {"--target-tensor-parallel-size", "--target-pipeline-parallel-size", "--target-expert-parallel-size"}) {
    if (to_hf && given(flag)) problems.push_back(std::string(flag) + ": only for --saver megatron");
  }
  for (const char* flag : {"--ckpt-iteration", "--hf-dtype", "--max-shard-size"}) {
    if (from_hf && given(flag)) problems.push_back(std::string(flag) + ": only for --loader megatron --saver hf");
  }
  if (target_tp < 1) problems.push_back("--target-tensor-parallel-size must be >= 1");
  if (target_pp < 1) problems.push_back("--target-pipeline-parallel-size must be >= 1");
  if (target_ep < 1) problems.push_back("--target-expert-parallel-size must be >= 1");
  const at::ScalarType type = dtype == "float32"    ? at::kFloat
                              : dtype == "bfloat16" ? at::kBFloat16
                              : dtype == "float16"  ? at::kHalf
                                                    : at::kFloat;
  if (dtype != "float32" && dtype != "bfloat16" && dtype != "float16") {
    problems.push_back("--hf-dtype " + dtype + ": expected float32, bfloat16 or float16");
  }
  megatron::throw_if_problems("invalid command line", problems);
  const megatron::Log log(std::cerr, "convert_checkpoint");
  for (const char* flag : {"--megatron-path", "--max-queue-size", "--no-checking"}) {
    if (given(flag)) {
      log.note(std::string(flag) + " is a flag of Megatron-LM's Python convert.py; this tool has no use for it");
    }
  }
  const std::uint64_t shard_bytes = megatron::interop::parse_shard_size(max_shard);
  if (from_hf) {
    const auto tokenizer = megatron::interop::hf_folder_tokenizer(load_dir, {vocab_file, merge_file, tokenizer_model});
    const megatron::interop::HfImport imported =
        megatron::interop::import_hf(load_dir, save_dir, target_tp, target_pp, target_ep, tokenizer);
    for (const auto& note : imported.notes) std::printf("note: %s\n", note.c_str());
    // A command line to paste into a shell: each word quoted as the shell needs.
    std::vector<std::string> words = imported.model_flags;
    const std::vector<std::string> tokenizer_flags = tokenizer.flags();
    words.insert(words.end(), tokenizer_flags.begin(), tokenizer_flags.end());
    std::string flags;
    for (const auto& word : words) flags += " " + megatron::shell_word(word);
    const std::string expert_layout = target_ep > 1 ? " x expert-parallel " + std::to_string(target_ep) : "";
    std::string layout_flags = " --tensor-model-parallel-size " + std::to_string(target_tp);
    // Megatron requires sequence parallelism with experts under TP.
    if (target_tp > 1 && imported.has_experts) layout_flags += " --sequence-parallel";
    layout_flags += " --pipeline-model-parallel-size " + std::to_string(target_pp);
    if (target_ep > 1) layout_flags += " --expert-model-parallel-size " + std::to_string(target_ep);
    std::printf("converted %s (HuggingFace %s) to %s for tensor-parallel %d x pipeline-parallel %d%s, iteration 0, "
                "model only\ntrain from it with: megatron_train%s%s --load %s --finetune ...\n",
                load_dir.c_str(), megatron::interop::hf_architecture(imported.family), save_dir.c_str(), target_tp,
                target_pp, expert_layout.c_str(), flags.c_str(), layout_flags.c_str(),
                megatron::shell_word(save_dir).c_str());
    return 0;
  }

  const megatron::interop::LoadedModel loaded =
      megatron::interop::load_model(load_dir, given("--ckpt-iteration") ? std::optional(iteration) : std::nullopt);
  const auto run_tokenizer = megatron::interop::saved_run_tokenizer(loaded, {vocab_file, merge_file, tokenizer_model});
  const megatron::tokenizer::Tokenizer* tokenizer = run_tokenizer.tokenizer.get();
  const auto family = megatron::interop::hf_family_of(loaded.config);
  const megatron::interop::HfExport out =
      megatron::interop::to_hf(loaded.config, loaded.model->named_parameters(), tokenizer->eod(),
                             static_cast<std::int64_t>(tokenizer->vocab_size()), type, tokenizer->bos());
  megatron::interop::write_hf_folder(save_dir, out, run_tokenizer.options, loaded.config.seq_length, shard_bytes);
  std::printf("converted %s iteration %lld (saved at tensor-parallel %d x pipeline-parallel %d) to %s in "
              "HuggingFace's %s format, %s weights\n",
              load_dir.c_str(), static_cast<long long>(loaded.iteration), loaded.saved_tp, loaded.saved_pp,
              save_dir.c_str(), megatron::interop::hf_architecture(family),
              dtype.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return megatron::run_torch_tool("convert_checkpoint", [&] { return run(argc, argv); });
}
