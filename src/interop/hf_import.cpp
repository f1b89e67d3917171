// A HuggingFace model folder as a model-only checkpoint in a chosen layout (see huggingface.h).
#include <filesystem>
#include <map>

#include "hf_config.h"
#include "hf_family.h"
#include "megatron/checkpoint/checkpoint.h"
#include "megatron/checkpoint/reshard.h"
#include "megatron/checkpoint/saved_run.h"
#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "megatron/interop/huggingface.h"
#include "megatron/interop/model_checkpoint.h"
#include "megatron/model/gpt_model.h"
#include "megatron/parallel/parallel_state.h"
#include "megatron/parallel/pipeline_layout.h"
#include "megatron/tokenizer/tokenizer.h"
#include "megatron/tokenizer/tokenizer_files.h"

namespace megatron::interop {
namespace {

namespace fs = std::filesystem;
using detail::read_hf_tensors;

// Whether the file's output layer is the embedding, as transformers decides on load: config.json's
// tie_word_embeddings, unless the file holds an lm_head.weight that differs from the embedding
// (then both are kept, untied, and transformers warns). A tied file holding only lm_head.weight
// ties the other way: the embedding is that tensor.
bool resolve_tie(std::map<std::string, at::Tensor>& t, const std::string& embedding, bool config_tied,
                 std::vector<std::string>& notes) {
  const auto head = t.find("lm_head.weight");
  if (!config_tied) return false;
  if (head == t.end()) return true;
  const auto emb = t.find(embedding);
  if (emb == t.end()) {
    t.emplace(embedding, head->second);
    return true;
  }
  if (at::equal(emb->second, head->second)) return true;
  notes.push_back("config.json says tie_word_embeddings, but lm_head.weight differs from " + embedding +
                  ": imported untied (--untie-embeddings-and-output-weights), as transformers loads it");
  return false;
}


// The Megatron type of a folder's tokenizer.model. Our exports say it in tokenizer_config.json
// (hf_tokenizer_export.h): SentencePieceBackend with a BOS pattern is Llama2Tokenizer, with
// Megatron's <EOD> among its added tokens SentencePieceTokenizer (its <extra_id_i> counted into
// `vocab_extra_ids`), else GPTSentencePieceTokenizer. Any other folder is transformers'
// LlamaTokenizer over the model, a BOS before every text: Llama2Tokenizer.
tokenizer::TokenizerType sentencepiece_folder_type(const fs::path& dir, std::int64_t& vocab_extra_ids) {
  const fs::path path = dir / "tokenizer_config.json";
  using tokenizer::TokenizerType;
  if (!fs::exists(path)) return TokenizerType::kLlama2;
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(read_text_file(path.string(), "tokenizer_config.json"));
  } catch (const nlohmann::json::exception& e) {
    MEGATRON_FAIL(path.string(), ": not valid JSON (", e.what(), ")");
  }
  if (config.value("tokenizer_class", std::string()) != "SentencePieceBackend") return TokenizerType::kLlama2;
  if (config.value("special_tokens_pattern", std::string()) == "bos") return TokenizerType::kLlama2;
  bool eod = false;
  const nlohmann::json added = config.value("added_tokens_decoder", nlohmann::json::object());
  for (const auto& [id, token] : added.items()) {
    const std::string content = token.is_object() ? token.value("content", std::string()) : std::string();
    eod = eod || content == "<EOD>";
    if (content.starts_with("<extra_id_")) ++vocab_extra_ids;
  }
  if (eod) return TokenizerType::kSentencePiece;
  vocab_extra_ids = 0;
  return TokenizerType::kGptSentencePiece;
}

// Whether a tokenizer.json is of the kind the HuggingFaceTokenizer reads (a BPE model); a file that
// does not parse counts as one, for the tokenizer to report when it is built.
bool reads_as_bpe(const fs::path& path) {
  try {
    const nlohmann::json j = nlohmann::json::parse(read_text_file(path.string(), "tokenizer.json"));
    return !j.contains("model") || !j.at("model").is_object() || j.at("model").value("type", std::string("BPE")) == "BPE";
  } catch (const nlohmann::json::exception&) {
    return true;
  }
}

}  // namespace

tokenizer::TokenizerOptions hf_folder_tokenizer(const std::string& hf_dir, const tokenizer::TokenizerChoice& given) {
  const fs::path dir(hf_dir);
  // Saved with the checkpoint's arguments: absolute, so that generate or an export finds them
  // from any folder.
  const auto absolute = [](const fs::path& path) { return fs::absolute(path).lexically_normal().string(); };
  tokenizer::TokenizerOptions o;
  const bool gpt2_given = !given.vocab_file.empty() || !given.merge_file.empty();
  MEGATRON_CHECK(!(gpt2_given && !given.tokenizer_model.empty()),
                 "give either --vocab-file and --merge-file (GPT-2) or --tokenizer-model, not both");
  if (!given.tokenizer_model.empty()) {
    o.type = tokenizer::TokenizerType::kHuggingFace;
    o.tokenizer_model = absolute(given.tokenizer_model);
  } else if (gpt2_given || (fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt"))) {
    o.type = tokenizer::TokenizerType::kGpt2Bpe;
    o.vocab_file = absolute(given.vocab_file.empty() ? dir / "vocab.json" : fs::path(given.vocab_file));
    o.merge_file = absolute(given.merge_file.empty() ? dir / "merges.txt" : fs::path(given.merge_file));
  } else if (fs::exists(dir / "tokenizer.json") &&
             (!fs::exists(dir / "tokenizer.model") || reads_as_bpe(dir / "tokenizer.json"))) {
    // A Unigram (or other) tokenizer.json beside tokenizer.model: the SentencePiece model reads it.
    o.type = tokenizer::TokenizerType::kHuggingFace;
    o.tokenizer_model = absolute(dir);
  } else if (fs::exists(dir / "tokenizer.model")) {
    o.type = sentencepiece_folder_type(dir, o.vocab_extra_ids);
    o.tokenizer_model = absolute(dir / "tokenizer.model");
  } else {
    MEGATRON_FAIL(hf_dir, " holds no tokenizer (tokenizer.json, vocab.json and merges.txt, or tokenizer.model); "
                  "give --tokenizer-model (a folder with tokenizer.json) or --vocab-file and --merge-file");
  }
  return o;
}

HfImport import_hf(const std::string& hf_dir, const std::string& save_dir, int tp, int pp, int ep,
                   const tokenizer::TokenizerOptions& tokenizer_options, checkpoint::CheckpointFormat format) {
  const fs::path dir(hf_dir);
  const std::string config_path = (dir / "config.json").string();
  nlohmann::json hf;
  try {
    hf = nlohmann::json::parse(read_text_file(config_path, "HF config"));
  } catch (const nlohmann::json::exception& e) {
    MEGATRON_FAIL(config_path, ": not valid JSON (", e.what(), ")");
  }
  MEGATRON_CHECK(!fs::exists(fs::path(save_dir) / checkpoint::kTrackerFile), "--save-dir ", save_dir,
                 " already holds a checkpoint; choose a new folder");
  // The model, as megatron_train's flags would resolve it.
  const detail::HfConfig read = detail::read_hf_config(hf, config_path);
  HfImport result;
  result.family = read.family;
  model::ModelConfig c = read.model;
  const std::int64_t vocab = read.vocab_size;
  // Megatron splits the vocabulary evenly over TP: pad to its usual multiple where needed.
  c.padded_vocab_size = vocab % tp == 0 ? vocab : model::ModelConfig::padded_vocab_size_for(vocab, 128, tp);
  // What megatron_train would refuse at this layout.
  std::vector<std::string> problems = c.validate();
  const auto divides = [&](std::int64_t value, int by, const std::string& what, const char* flag) {
    if (by > 1 && value % by != 0) problems.push_back(str_cat(what, " ", value, " is not divisible by ", flag, " ", by));
  };
  divides(c.num_attention_heads, tp, "the attention heads", "--target-tensor-parallel-size");
  divides(c.num_query_groups, tp, "the key/value heads", "--target-tensor-parallel-size");
  divides(c.ffn_hidden_size, tp, "the MLP size", "--target-tensor-parallel-size");
  if (c.moe.enabled()) divides(c.moe.expert_ffn_hidden_size(c.ffn_hidden_size), tp, "the experts' MLP size", "--target-tensor-parallel-size");
  divides(c.num_layers, pp, "the layer count", "--target-pipeline-parallel-size");
  if (ep > 1 && !c.moe.enabled()) {
    problems.push_back(str_cat("--target-expert-parallel-size ", ep, ": this model has no experts"));
  } else if (ep > 1) {
    divides(c.moe.num_experts, ep, "the experts", "--target-expert-parallel-size");
  }
  throw_if_problems(config_path + ": this model cannot be imported", problems, ProblemHeading::kList);
  const auto tokens = static_cast<std::int64_t>(tokenizer::build_tokenizer(tokenizer_options)->vocab_size());
  const std::string tokenizer_path =
      tokenizer_options.reads_vocab_and_merges() ? tokenizer_options.vocab_file : tokenizer_options.tokenizer_model;
  MEGATRON_CHECK(vocab >= tokens, config_path, ": vocab_size ", vocab, " is smaller than the tokenizer's ", tokens,
                 " tokens (", tokenizer_path, "): the model was trained with another tokenizer");

  // The tensors against config.json, before anything is reshaped.
  const detail::HfFamilySpec& spec = detail::hf_family(read.family);
  std::map<std::string, at::Tensor> t = read_hf_tensors(dir, read.family);
  detail::split_fused_experts(t, read.family);
  const std::int64_t layers = detail::hf_layers_in(t, read.family);
  MEGATRON_CHECK(layers == c.num_layers, hf_dir, ": config.json's ", spec.layers_key, " is ", c.num_layers,
                 " but the safetensors files hold ", layers, " layers; correct config.json");
  const bool tied = resolve_tie(t, spec.embedding, read.tie_word_embeddings, result.notes);
  c.untie_embeddings_and_output_weights = !tied;
  const detail::HfTensorMap map = spec.tensor_map(spec, c, vocab);
  detail::check_hf_tensors(t, map, hf_dir);
  result.model_flags = c.flags();
  result.has_experts = c.moe.enabled();
  const model::ModelConfig& config = c;

  // HF names to Megatron's full (single-process) parameters (every name passed check_hf_tensors).
  std::vector<std::pair<std::string, at::Tensor>> full;
  for (const detail::HfTensorRule& rule : map) {
    std::vector<at::Tensor> tensors;
    for (const std::string& name : rule.hf) tensors.push_back(t.at(name));
    full.emplace_back(rule.megatron, detail::from_hf_tensors(rule, tensors, config).contiguous());
  }

  // Into the single-process model: every name and shape is checked against what it holds.
  auto comm = parallel::make_single_process_communicator();
  const parallel::ParallelState state(parallel::ParallelConfig{}, 0);
  const parallel::ParallelContext pc = parallel::ParallelContext::create(state, *comm);
  const model::GptModel model(config, pc, parallel::ParameterInit::loaded_later());
  checkpoint::load_parameters(model.named_parameters(), full, hf_dir);

  checkpoint::CheckpointState common;
  common.iteration = 0;
  // What --load and the single-process tools read: the model, its layer split, the tokenizer.
  checkpoint::SavedRun run;
  run.model = config;
  run.pipeline = {config.num_layers, 1, std::nullopt, std::nullopt, std::nullopt};
  run.tokenizer = tokenizer_options;
  if (vocab > tokens) run.model_vocab_rows = vocab;  // the model's own rows, for an export to give back
  common.config = run.to_json();
  // The checkpoint carries copies of the tokenizer's files, as a trained one does.
  common.tokenizer_files = std::make_shared<const checkpoint::AssetFiles>(tokenizer::read_tokenizer_files(tokenizer_options));
  write_model_checkpoint(save_dir, model, common, {tp, pp, ep, format});
  return result;
}

}  // namespace megatron::interop
