// A checkpoint's model in one process, and HuggingFace's GPT-2 and Llama formats (model_io.h).
// The HF names, the Conv1D [in, out] layout of GPT-2, Llama's separate q/k/v and gate/up
// projections and the config.json keys follow what transformers' GPT2LMHeadModel and
// LlamaForCausalLM read; the tests load every export with transformers itself.
#include "megatron/train/model_io.h"

#include <unistd.h>

#include <ATen/CPUGeneratorImpl.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "megatron/checkpoint/checkpoint.h"
#include "megatron/checkpoint/safetensors.h"
#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "megatron/parallel/pipeline_layout.h"
#include "megatron/tokenizer/tokenizer.h"
#include "trainer_parts.h"

namespace megatron::train {
namespace {

namespace fs = std::filesystem;
using Named = std::vector<std::pair<std::string, at::Tensor>>;

const at::Tensor& get(const std::map<std::string, at::Tensor>& m, const std::string& name) {
  const auto it = m.find(name);
  MEGATRON_CHECK(it != m.end(), "the model has no parameter ", name);
  return it->second;
}

// Megatron's fused QKV rows are grouped by query group: [q heads of the group; k; v] per group.
struct Qkv {
  at::Tensor q, k, v;
};
Qkv split_qkv(const at::Tensor& w, const model::ModelConfig& c) {
  const std::int64_t ng = c.num_query_groups, hn = c.kv_channels, per = c.num_attention_heads / ng;
  const auto rest = w.sizes().slice(1).vec();  // [h] for weights, [] for biases
  std::vector<std::int64_t> grouped{ng, (per + 2) * hn};
  grouped.insert(grouped.end(), rest.begin(), rest.end());
  const at::Tensor g = w.reshape(grouped);
  auto rows = [&](std::int64_t begin, std::int64_t count, std::int64_t heads) {
    std::vector<std::int64_t> shape{heads * hn};
    shape.insert(shape.end(), rest.begin(), rest.end());
    return g.narrow(1, begin, count).reshape(shape).contiguous();
  };
  return {rows(0, per * hn, ng * per), rows(per * hn, hn, ng), rows((per + 1) * hn, hn, ng)};
}

// Inverse of split_qkv.
at::Tensor join_qkv(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const model::ModelConfig& c) {
  const std::int64_t ng = c.num_query_groups, hn = c.kv_channels, per = c.num_attention_heads / ng;
  const auto rest = q.sizes().slice(1).vec();
  auto grouped = [&](const at::Tensor& t, std::int64_t rows) {
    std::vector<std::int64_t> shape{ng, rows};
    shape.insert(shape.end(), rest.begin(), rest.end());
    return t.reshape(shape);
  };
  std::vector<std::int64_t> shape{c.qkv_size()};
  shape.insert(shape.end(), rest.begin(), rest.end());
  return at::cat({grouped(q, per * hn), grouped(k, hn), grouped(v, hn)}, 1).reshape(shape).contiguous();
}

// Every tensor of an HF folder (one model.safetensors, or the shards its index names), as fp32.
std::map<std::string, at::Tensor> read_hf_tensors(const fs::path& dir) {
  std::vector<std::string> files;
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_text_file(index.string(), "HF index"));
      std::set<std::string> unique;
      for (const auto& [name, file] : j.at("weight_map").items()) unique.insert(file.get<std::string>());
      files.assign(unique.begin(), unique.end());
    } catch (const nlohmann::json::exception& e) {
      MEGATRON_FAIL(index.string(), ": not a safetensors index (", e.what(), ")");
    }
  } else {
    MEGATRON_CHECK(fs::exists(dir / "model.safetensors"), dir.string(),
                   " has neither model.safetensors nor model.safetensors.index.json (save with "
                   "save_pretrained(..., safe_serialization=True))");
    files.push_back("model.safetensors");
  }
  std::map<std::string, at::Tensor> out;
  for (const auto& file : files) {
    for (auto& [name, t] : checkpoint::read_safetensors((dir / file).string()).tensors) {
      out[name] = t.to(at::kFloat).contiguous();
    }
  }
  return out;
}

}  // namespace

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
  nlohmann::json args_json = saved.config;
  const std::int64_t padded = args_json.value("padded_vocab_size_resolved", std::int64_t{0});
  MEGATRON_CHECK(padded > 0, checkpoint::iteration_folder(root, out.iteration),
                 ": the saved configuration has no padded vocabulary size");
  args_json.erase("padded_vocab_size_resolved");
  out.args = from_json(args_json.dump());
  out.config = to_model_config(out.args, padded);
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
      load_resharded(root, out.iteration, {saved.tp, saved_pipeline_layout(saved.config, saved.pp), tied},
                     {out.model->named_parameters(), out.model->parameter_layouts(), 0, 1, 0, one}, false);
  load_parameters(out.model->named_parameters(), state.model, checkpoint::iteration_folder(root, out.iteration));
  return out;
}

std::unique_ptr<tokenizer::Tokenizer> saved_run_tokenizer(const LoadedModel& loaded, std::string& vocab_file,
                                                          std::string& merge_file) {
  if (vocab_file.empty()) vocab_file = loaded.args.tokenizer.vocab_file.value_or("");
  if (merge_file.empty()) merge_file = loaded.args.tokenizer.merge_file.value_or("");
  MEGATRON_CHECK(!vocab_file.empty() && !merge_file.empty(),
                 "the saved run names no GPT-2 vocabulary; give --vocab-file and --merge-file");
  tokenizer::TokenizerOptions options;
  options.vocab_file = vocab_file;
  options.merge_file = merge_file;
  return tokenizer::build_tokenizer(options);
}

HfFamily hf_family_of(const model::ModelConfig& c) {
  const bool rope = c.position_embedding == model::PositionEmbedding::kRope;
  const bool rms = c.normalization == model::Normalization::kRmsNorm;
  std::vector<std::string> problems;
  if (!rope && !rms && !c.swiglu) {
    if (c.num_query_groups != c.num_attention_heads) {
      problems.push_back("--group-query-attention --num-query-groups " + std::to_string(c.num_query_groups) +
                         ": GPT-2 has one key/value head per query head");
    }
    if (c.kv_channels * c.num_attention_heads != c.hidden_size) {
      problems.push_back("--kv-channels " + std::to_string(c.kv_channels) +
                         ": GPT-2's head size is --hidden-size / --num-attention-heads");
    }
    if (problems.empty()) return HfFamily::kGpt2;
  } else if (rope && rms && c.swiglu) {
    if (c.rotary_percent != 1.0) {
      problems.push_back("--rotary-percent " + std::to_string(c.rotary_percent) + ": Llama rotates whole heads");
    }
    if (c.rotary_interleaved) problems.push_back("--rotary-interleaved: Llama rotates halves, not pairs");
    if (problems.empty()) return HfFamily::kLlama;
  } else {
    problems.push_back(std::string("--position-embedding-type ") + (rope ? "rope" : "learned_absolute") +
                       ", --normalization " + (rms ? "RMSNorm" : "LayerNorm") + (c.swiglu ? ", --swiglu" : ", GeLU") +
                       ": HuggingFace's GPT-2 takes learned_absolute + LayerNorm + GeLU and Llama rope + RMSNorm + "
                       "--swiglu; this mix is neither");
  }
  std::string message = "this model cannot be written in HuggingFace's format:";
  for (const auto& p : problems) message += "\n  " + p;
  MEGATRON_FAIL(message);
}

HfExport to_hf(const model::ModelConfig& c, const Named& params, std::int64_t eod, std::int64_t vocab_size,
               at::ScalarType dtype) {
  HfExport out;
  out.family = hf_family_of(c);
  MEGATRON_CHECK(vocab_size > 0 && vocab_size <= c.padded_vocab_size, "the tokenizer has ", vocab_size,
                 " tokens but the model's vocabulary has ", c.padded_vocab_size,
                 " rows: this checkpoint was trained with another tokenizer (--vocab-file)");
  std::map<std::string, at::Tensor> p;
  for (const auto& [name, t] : params) p.emplace(name, t.detach());
  const bool tied = !c.untie_embeddings_and_output_weights;
  auto put = [&](const std::string& name, const at::Tensor& t) {
    out.tensors.emplace_back(name, t.to(dtype).contiguous());
  };
  auto layer = [](int i, const char* rest) { return "decoder.layers." + std::to_string(i) + "." + rest; };
  auto vocab_rows = [&](const char* name) { return get(p, name).narrow(0, 0, vocab_size); };
  const std::string dtype_name = dtype == at::kBFloat16 ? "bfloat16" : dtype == at::kHalf ? "float16" : "float32";
  if (out.family == HfFamily::kGpt2) {
    put("transformer.wte.weight", vocab_rows("embedding.word_embeddings.weight"));
    put("transformer.wpe.weight", get(p, "embedding.position_embeddings.weight"));
    for (int i = 0; i < c.num_layers; ++i) {
      const std::string h = "transformer.h." + std::to_string(i) + ".";
      auto bias_or_zeros = [&](const std::string& name, std::int64_t n) {
        const auto it = p.find(name);
        return it != p.end() ? it->second : at::zeros({n});  // GPT-2 always has biases: zero is exact
      };
      put(h + "ln_1.weight", get(p, layer(i, "input_layernorm.weight")));
      put(h + "ln_1.bias", get(p, layer(i, "input_layernorm.bias")));
      const Qkv w = split_qkv(get(p, layer(i, "self_attention.linear_qkv.weight")), c);
      put(h + "attn.c_attn.weight", at::cat({w.q, w.k, w.v}, 0).t());  // Conv1D: [in, out]
      const Qkv b = split_qkv(bias_or_zeros(layer(i, "self_attention.linear_qkv.bias"), c.qkv_size()), c);
      put(h + "attn.c_attn.bias", at::cat({b.q, b.k, b.v}, 0));
      put(h + "attn.c_proj.weight", get(p, layer(i, "self_attention.linear_proj.weight")).t());
      put(h + "attn.c_proj.bias", bias_or_zeros(layer(i, "self_attention.linear_proj.bias"), c.hidden_size));
      put(h + "ln_2.weight", get(p, layer(i, "pre_mlp_layernorm.weight")));
      put(h + "ln_2.bias", get(p, layer(i, "pre_mlp_layernorm.bias")));
      put(h + "mlp.c_fc.weight", get(p, layer(i, "mlp.linear_fc1.weight")).t());
      put(h + "mlp.c_fc.bias", bias_or_zeros(layer(i, "mlp.linear_fc1.bias"), c.ffn_hidden_size));
      put(h + "mlp.c_proj.weight", get(p, layer(i, "mlp.linear_fc2.weight")).t());
      put(h + "mlp.c_proj.bias", bias_or_zeros(layer(i, "mlp.linear_fc2.bias"), c.hidden_size));
    }
    put("transformer.ln_f.weight", get(p, "decoder.final_layernorm.weight"));
    put("transformer.ln_f.bias", get(p, "decoder.final_layernorm.bias"));
    if (!tied) put("lm_head.weight", vocab_rows("output_layer.weight"));
    out.config = {{"architectures", {"GPT2LMHeadModel"}},
                  {"model_type", "gpt2"},
                  {"vocab_size", vocab_size},
                  {"n_positions", c.max_position_embeddings},
                  {"n_ctx", c.max_position_embeddings},
                  {"n_embd", c.hidden_size},
                  {"n_layer", c.num_layers},
                  {"n_head", c.num_attention_heads},
                  {"n_inner", c.ffn_hidden_size},
                  // Megatron's fused bias-GeLU is the tanh approximation (HF's gelu_new); unfused is erf.
                  {"activation_function", c.bias_activation_fusion ? "gelu_new" : "gelu"},
                  {"resid_pdrop", c.hidden_dropout},
                  {"embd_pdrop", c.hidden_dropout},
                  {"attn_pdrop", c.attention_dropout},
                  {"layer_norm_epsilon", c.norm_epsilon},
                  {"initializer_range", c.init_method_std},
                  {"scale_attn_weights", true},
                  {"use_cache", true},
                  {"bos_token_id", eod},
                  {"eos_token_id", eod},
                  {"tie_word_embeddings", tied},
                  {"dtype", dtype_name}};
  } else {
    put("model.embed_tokens.weight", vocab_rows("embedding.word_embeddings.weight"));
    for (int i = 0; i < c.num_layers; ++i) {
      const std::string h = "model.layers." + std::to_string(i) + ".";
      put(h + "input_layernorm.weight", get(p, layer(i, "input_layernorm.weight")));
      const Qkv w = split_qkv(get(p, layer(i, "self_attention.linear_qkv.weight")), c);
      put(h + "self_attn.q_proj.weight", w.q);
      put(h + "self_attn.k_proj.weight", w.k);
      put(h + "self_attn.v_proj.weight", w.v);
      put(h + "self_attn.o_proj.weight", get(p, layer(i, "self_attention.linear_proj.weight")));
      const at::Tensor fc1 = get(p, layer(i, "mlp.linear_fc1.weight"));  // [gate; up]
      put(h + "mlp.gate_proj.weight", fc1.narrow(0, 0, c.ffn_hidden_size));
      put(h + "mlp.up_proj.weight", fc1.narrow(0, c.ffn_hidden_size, c.ffn_hidden_size));
      put(h + "mlp.down_proj.weight", get(p, layer(i, "mlp.linear_fc2.weight")));
      if (c.add_bias_linear) {
        const Qkv b = split_qkv(get(p, layer(i, "self_attention.linear_qkv.bias")), c);
        put(h + "self_attn.q_proj.bias", b.q);
        put(h + "self_attn.k_proj.bias", b.k);
        put(h + "self_attn.v_proj.bias", b.v);
        put(h + "self_attn.o_proj.bias", get(p, layer(i, "self_attention.linear_proj.bias")));
        const at::Tensor fc1_bias = get(p, layer(i, "mlp.linear_fc1.bias"));
        put(h + "mlp.gate_proj.bias", fc1_bias.narrow(0, 0, c.ffn_hidden_size));
        put(h + "mlp.up_proj.bias", fc1_bias.narrow(0, c.ffn_hidden_size, c.ffn_hidden_size));
        put(h + "mlp.down_proj.bias", get(p, layer(i, "mlp.linear_fc2.bias")));
      }
      put(h + "post_attention_layernorm.weight", get(p, layer(i, "pre_mlp_layernorm.weight")));
    }
    put("model.norm.weight", get(p, "decoder.final_layernorm.weight"));
    if (!tied) put("lm_head.weight", vocab_rows("output_layer.weight"));
    out.config = {{"architectures", {"LlamaForCausalLM"}},
                  {"model_type", "llama"},
                  {"vocab_size", vocab_size},
                  {"hidden_size", c.hidden_size},
                  {"intermediate_size", c.ffn_hidden_size},
                  {"num_hidden_layers", c.num_layers},
                  {"num_attention_heads", c.num_attention_heads},
                  {"num_key_value_heads", c.num_query_groups},
                  {"head_dim", c.kv_channels},
                  {"hidden_act", "silu"},
                  {"max_position_embeddings", c.max_position_embeddings},
                  {"rms_norm_eps", c.norm_epsilon},
                  {"rope_theta", c.rotary_base},
                  {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", c.rotary_base}}},
                  {"attention_bias", c.add_bias_linear},
                  {"mlp_bias", c.add_bias_linear},
                  {"attention_dropout", c.attention_dropout},
                  {"initializer_range", c.init_method_std},
                  {"use_cache", true},
                  {"bos_token_id", eod},
                  {"eos_token_id", eod},
                  {"tie_word_embeddings", tied},
                  {"dtype", dtype_name}};
  }
  out.generation_config = {{"bos_token_id", eod}, {"eos_token_id", eod}, {"pad_token_id", eod},
                           {"max_length", c.seq_length}};
  return out;
}

void write_hf_folder(const std::string& dir, const HfExport& model, const std::string& vocab_file,
                     const std::string& merge_file, std::int64_t model_max_length, std::uint64_t max_shard_bytes) {
  MEGATRON_CHECK(!fs::exists(dir), "--save-dir ", dir, " already exists; choose a new folder");
  check_readable_file(vocab_file, "--vocab-file");
  check_readable_file(merge_file, "--merge-file");
  const fs::path target(dir);
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  TemporaryFolder temp(dir + ".tmp." + std::to_string(::getpid()));
  const fs::path tmp(temp.path());
  auto write_json = [&](const char* name, const nlohmann::ordered_json& j) {
    AtomicFile file((tmp / name).string());
    const std::string text = j.dump(2) + "\n";
    file.write(text.data(), text.size());
    file.commit();
  };
  // Shards in parameter order, each up to max_shard_bytes (a larger tensor gets one to itself).
  std::vector<checkpoint::NamedTensors> shards(1);
  std::uint64_t in_shard = 0, total = 0;
  for (const auto& [name, t] : model.tensors) {
    const std::uint64_t bytes = t.nbytes();
    if (in_shard > 0 && in_shard + bytes > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().emplace_back(name, t);
    in_shard += bytes;
    total += bytes;
  }
  const std::map<std::string, std::string> metadata{{"format", "pt"}};
  if (shards.size() == 1) {
    checkpoint::write_safetensors((tmp / "model.safetensors").string(), shards[0], metadata);
  } else {
    nlohmann::ordered_json map = nlohmann::ordered_json::object();
    for (std::size_t i = 0; i < shards.size(); ++i) {
      char name[64];
      std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
      checkpoint::write_safetensors((tmp / name).string(), shards[i], metadata);
      for (const auto& [tensor, t] : shards[i]) map[tensor] = name;
    }
    write_json("model.safetensors.index.json", {{"metadata", {{"total_size", total}}}, {"weight_map", map}});
  }
  write_json("config.json", model.config);
  write_json("generation_config.json", model.generation_config);
  fs::copy_file(vocab_file, tmp / "vocab.json");
  fs::copy_file(merge_file, tmp / "merges.txt");
  const std::string eod = "<|endoftext|>";
  write_json("tokenizer_config.json", {{"tokenizer_class", "GPT2Tokenizer"},
                                       {"model_max_length", model_max_length},
                                       {"bos_token", eod},
                                       {"eos_token", eod},
                                       {"unk_token", eod},
                                       {"add_prefix_space", false}});
  write_json("special_tokens_map.json", {{"bos_token", eod}, {"eos_token", eod}, {"unk_token", eod}});
  fs::rename(tmp, target);
  temp.release();
  fsync_parent_folder(dir);
}

HfImport import_hf(const std::string& hf_dir, const std::string& save_dir, int tp, int pp,
                   const std::string& given_vocab_file, const std::string& given_merge_file) {
  const fs::path dir(hf_dir);
  // Saved with the checkpoint's arguments: absolute, so that generate or an export finds them
  // from any folder.
  const std::string vocab_file = fs::absolute(given_vocab_file).lexically_normal().string();
  const std::string merge_file = fs::absolute(given_merge_file).lexically_normal().string();
  const std::string config_path = (dir / "config.json").string();
  nlohmann::json hf;
  try {
    hf = nlohmann::json::parse(read_text_file(config_path, "HF config"));
  } catch (const nlohmann::json::exception& e) {
    MEGATRON_FAIL(config_path, ": not valid JSON (", e.what(), ")");
  }
  MEGATRON_CHECK(!fs::exists(fs::path(save_dir) / checkpoint::kTrackerFile), "--save-dir ", save_dir,
                 " already holds a checkpoint; choose a new folder");
  std::vector<std::string> problems;
  auto number = [&](const char* key, auto fallback) {
    using T = decltype(fallback);
    if (!hf.contains(key) || hf.at(key).is_null()) return fallback;
    try {
      return hf.at(key).get<T>();
    } catch (const nlohmann::json::exception&) {
      problems.push_back(std::string(key) + ": not a number");
      return fallback;
    }
  };
  auto str = [](double v) {  // the shortest text that reads back as v
    char text[32];
    return std::string(text, std::to_chars(text, text + sizeof(text), v).ptr);
  };
  HfImport result;
  std::vector<std::string> flags;
  std::int64_t vocab = 0;
  bool tied = true;
  try {  // a key of the wrong type (null, a string for a flag) is reported with config.json's path
  const std::string type = hf.value("model_type", "");
  if (type == "gpt2") {
    result.family = HfFamily::kGpt2;
    const int hidden = number("n_embd", 0);
    const int heads = number("n_head", 0);
    const std::string act = hf.value("activation_function", "gelu_new");
    // gelu_pytorch_tanh is gelu_new's function (the tanh approximation) in PyTorch's kernel.
    const bool tanh_gelu = act == "gelu_new" || act == "gelu_pytorch_tanh";
    if (!tanh_gelu && act != "gelu") {
      problems.push_back("activation_function " + act +
                         ": megatron_train has gelu_new / gelu_pytorch_tanh (fused) and gelu (--no-bias-gelu-fusion)");
    }
    if (hf.value("scale_attn_by_inverse_layer_idx", false)) problems.push_back("scale_attn_by_inverse_layer_idx: not in Megatron");
    if (!hf.value("scale_attn_weights", true)) problems.push_back("scale_attn_weights false: Megatron scales by 1/sqrt(d)");
    if (hf.value("add_cross_attention", false)) problems.push_back("add_cross_attention: a decoder-only GPT has none");
    vocab = number("vocab_size", std::int64_t{0});
    tied = hf.value("tie_word_embeddings", true);
    const int positions = number("n_positions", 1024);
    flags = {"--num-layers", std::to_string(number("n_layer", 0)), "--hidden-size", std::to_string(hidden),
             "--ffn-hidden-size", std::to_string(number("n_inner", 4 * hidden)), "--num-attention-heads",
             std::to_string(heads), "--kv-channels", std::to_string(heads > 0 ? hidden / heads : 0),
             "--seq-length", std::to_string(positions), "--max-position-embeddings", std::to_string(positions),
             "--norm-epsilon", str(number("layer_norm_epsilon", 1e-5)), "--hidden-dropout",
             str(number("resid_pdrop", 0.1)), "--attention-dropout", str(number("attn_pdrop", 0.1)),
             "--init-method-std", str(number("initializer_range", 0.02))};
    if (act == "gelu") flags.push_back("--no-bias-gelu-fusion");
  } else if (type == "llama") {
    result.family = HfFamily::kLlama;
    const int hidden = number("hidden_size", 0);
    const int heads = number("num_attention_heads", 0);
    const int groups = number("num_key_value_heads", heads);
    const int head_dim = number("head_dim", heads > 0 ? hidden / heads : 0);
    double theta = number("rope_theta", 10000.0);
    if (hf.contains("rope_parameters") && hf.at("rope_parameters").is_object()) {
      const auto& rp = hf.at("rope_parameters");
      if (rp.value("rope_type", "default") != "default") {
        problems.push_back("rope_parameters.rope_type " + rp.value("rope_type", "") + ": only plain RoPE is in Megatron's GPT");
      }
      if (rp.contains("rope_theta")) theta = rp.at("rope_theta").get<double>();
    }
    if (!(theta >= 1 && theta <= 1e15 && theta == std::floor(theta))) {
      problems.push_back("rope_theta " + str(theta) + ": megatron_train's --rotary-base is a whole number");
    }
    if (hf.contains("rope_scaling") && !hf.at("rope_scaling").is_null()) {
      problems.push_back("rope_scaling " + hf.at("rope_scaling").dump() + ": only plain RoPE is in Megatron's GPT");
    }
    if (hf.value("hidden_act", "silu") != "silu") problems.push_back("hidden_act " + hf.value("hidden_act", "") + ": SwiGLU is silu");
    const bool attention_bias = hf.value("attention_bias", false);
    if (hf.value("mlp_bias", false) != attention_bias) {
      problems.push_back("attention_bias and mlp_bias differ: Megatron's --disable-bias-linear covers both");
    }
    vocab = number("vocab_size", std::int64_t{0});
    tied = hf.value("tie_word_embeddings", false);
    const int positions = number("max_position_embeddings", 2048);
    flags = {"--num-layers", std::to_string(number("num_hidden_layers", 0)), "--hidden-size", std::to_string(hidden),
             "--ffn-hidden-size", std::to_string(number("intermediate_size", 0)), "--num-attention-heads",
             std::to_string(heads), "--kv-channels", std::to_string(head_dim), "--seq-length",
             std::to_string(positions), "--max-position-embeddings", std::to_string(positions),
             "--position-embedding-type", "rope", "--rotary-base", std::to_string(static_cast<std::int64_t>(theta)),
             "--normalization", "RMSNorm",
             "--norm-epsilon", str(number("rms_norm_eps", 1e-6)), "--swiglu", "--attention-dropout",
             str(number("attention_dropout", 0.0)), "--hidden-dropout", "0", "--init-method-std",
             str(number("initializer_range", 0.02))};
    if (groups != heads) {
      flags.insert(flags.end(), {"--group-query-attention", "--num-query-groups", std::to_string(groups)});
    }
    if (!attention_bias) flags.push_back("--disable-bias-linear");
  } else {
    problems.push_back("model_type '" + type + "': supported are gpt2 and llama");
  }
  } catch (const nlohmann::json::exception& e) {
    MEGATRON_FAIL(config_path, ": a setting has the wrong type (", e.what(), ")");
  }
  if (!tied) flags.push_back("--untie-embeddings-and-output-weights");
  if (vocab <= 0) problems.push_back("vocab_size: missing");
  if (!problems.empty()) {
    std::string message = config_path + ": this model cannot be imported:";
    for (const auto& p : problems) message += "\n  " + p;
    MEGATRON_FAIL(message);
  }
  // Megatron splits the vocabulary evenly over TP: pad to its usual multiple where needed.
  const std::int64_t padded_for_tp = vocab % tp == 0 ? vocab : padded_vocab_size(vocab, 128, tp);
  flags.insert(flags.end(), {"--padded-vocab-size", std::to_string(padded_for_tp)});
  result.model_flags = flags;

  // The same resolution as megatron_train's, at this layout, so that --load finds the same shape.
  std::vector<std::string> argv = flags;
  argv.insert(argv.end(), {"--lr", "1e-4", "--tensor-model-parallel-size", std::to_string(tp), "--pipeline-model-parallel-size",
                           std::to_string(pp), "--micro-batch-size", "1", "--train-iters", "1", "--mock-data",
                           "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", vocab_file, "--merge-file",
                           merge_file});
  ParseOptions options;
  options.world_size = tp * pp;
  options.support = BuildSupport::everything();
  const Arguments args = parse_arguments(argv, options);
  const auto tokenizer = build_run_tokenizer(args);
  const auto tokens = static_cast<std::int64_t>(tokenizer->vocab_size());
  MEGATRON_CHECK(vocab >= tokens, config_path, ": vocab_size ", vocab, " is smaller than the tokenizer's ", tokens,
                 " tokens (", vocab_file, "): the model was trained with another tokenizer");
  const std::int64_t padded = padded_vocab_size(args, tokens);
  model::ModelConfig config = to_model_config(args, padded);
  config.sequence_parallel = false;

  // HF names to Megatron's full (single-process) parameters.
  const std::map<std::string, at::Tensor> t = read_hf_tensors(dir);
  auto take = [&](std::initializer_list<std::string> names) -> at::Tensor {
    for (const auto& name : names) {
      const auto it = t.find(name);
      if (it != t.end()) return it->second;
    }
    MEGATRON_FAIL(hf_dir, ": no tensor ", *names.begin(), " in the safetensors files");
  };
  auto pad_rows = [&](const at::Tensor& w) {
    if (w.size(0) == padded) return w;
    return at::cat({w, at::zeros({padded - w.size(0), w.size(1)})}, 0);
  };
  std::vector<std::pair<std::string, at::Tensor>> full;
  auto put = [&](const std::string& name, const at::Tensor& v) { full.emplace_back(name, v.contiguous()); };
  auto layer = [](int i, const char* rest) { return "decoder.layers." + std::to_string(i) + "." + rest; };
  if (result.family == HfFamily::kGpt2) {
    auto g = [&](const std::string& rest) { return take({"transformer." + rest, rest}); };
    put("embedding.word_embeddings.weight", pad_rows(g("wte.weight")));
    put("embedding.position_embeddings.weight", g("wpe.weight"));
    for (int i = 0; i < config.num_layers; ++i) {
      const std::string h = "h." + std::to_string(i) + ".";
      put(layer(i, "input_layernorm.weight"), g(h + "ln_1.weight"));
      put(layer(i, "input_layernorm.bias"), g(h + "ln_1.bias"));
      const auto qkv = g(h + "attn.c_attn.weight").t().chunk(3, 0);  // Conv1D [in, out] -> [q; k; v]
      put(layer(i, "self_attention.linear_qkv.weight"), join_qkv(qkv[0], qkv[1], qkv[2], config));
      const auto qkv_bias = g(h + "attn.c_attn.bias").chunk(3, 0);
      put(layer(i, "self_attention.linear_qkv.bias"), join_qkv(qkv_bias[0], qkv_bias[1], qkv_bias[2], config));
      put(layer(i, "self_attention.linear_proj.weight"), g(h + "attn.c_proj.weight").t());
      put(layer(i, "self_attention.linear_proj.bias"), g(h + "attn.c_proj.bias"));
      put(layer(i, "pre_mlp_layernorm.weight"), g(h + "ln_2.weight"));
      put(layer(i, "pre_mlp_layernorm.bias"), g(h + "ln_2.bias"));
      put(layer(i, "mlp.linear_fc1.weight"), g(h + "mlp.c_fc.weight").t());
      put(layer(i, "mlp.linear_fc1.bias"), g(h + "mlp.c_fc.bias"));
      put(layer(i, "mlp.linear_fc2.weight"), g(h + "mlp.c_proj.weight").t());
      put(layer(i, "mlp.linear_fc2.bias"), g(h + "mlp.c_proj.bias"));
    }
    put("decoder.final_layernorm.weight", g("ln_f.weight"));
    put("decoder.final_layernorm.bias", g("ln_f.bias"));
  } else {
    put("embedding.word_embeddings.weight", pad_rows(take({"model.embed_tokens.weight"})));
    for (int i = 0; i < config.num_layers; ++i) {
      const std::string h = "model.layers." + std::to_string(i) + ".";
      put(layer(i, "input_layernorm.weight"), take({h + "input_layernorm.weight"}));
      put(layer(i, "self_attention.linear_qkv.weight"),
          join_qkv(take({h + "self_attn.q_proj.weight"}), take({h + "self_attn.k_proj.weight"}),
                   take({h + "self_attn.v_proj.weight"}), config));
      put(layer(i, "self_attention.linear_proj.weight"), take({h + "self_attn.o_proj.weight"}));
      put(layer(i, "mlp.linear_fc1.weight"),
          at::cat({take({h + "mlp.gate_proj.weight"}), take({h + "mlp.up_proj.weight"})}, 0));
      put(layer(i, "mlp.linear_fc2.weight"), take({h + "mlp.down_proj.weight"}));
      if (config.add_bias_linear) {
        put(layer(i, "self_attention.linear_qkv.bias"),
            join_qkv(take({h + "self_attn.q_proj.bias"}), take({h + "self_attn.k_proj.bias"}),
                     take({h + "self_attn.v_proj.bias"}), config));
        put(layer(i, "self_attention.linear_proj.bias"), take({h + "self_attn.o_proj.bias"}));
        put(layer(i, "mlp.linear_fc1.bias"),
            at::cat({take({h + "mlp.gate_proj.bias"}), take({h + "mlp.up_proj.bias"})}, 0));
        put(layer(i, "mlp.linear_fc2.bias"), take({h + "mlp.down_proj.bias"}));
      }
      put(layer(i, "pre_mlp_layernorm.weight"), take({h + "post_attention_layernorm.weight"}));
    }
    put("decoder.final_layernorm.weight", take({"model.norm.weight"}));
  }
  if (!tied) put("output_layer.weight", pad_rows(take({"lm_head.weight"})));

  // Into the single-process model: every name and shape is checked against what it holds.
  auto comm = parallel::make_single_process_communicator();
  const parallel::ParallelState state(parallel::ParallelConfig{}, 0);
  const parallel::ParallelContext pc = parallel::ParallelContext::create(state, *comm);
  at::Generator init = at::make_generator<at::CPUGeneratorImpl>(0);
  const model::GptModel model(config, pc, init);
  load_parameters(model.named_parameters(), full, hf_dir);

  // Each TP x PP rank's shard under the names its stage gives it.
  const parallel::PipelineLayout split{config.num_layers, pp, 1, std::nullopt, std::nullopt};
  const auto& params = model.named_parameters();
  const auto& layouts = model.parameter_layouts();
  std::vector<std::pair<std::string, checkpoint::NamedTensors>> shards;
  std::vector<StagePlace> places;
  for (const auto& [name, param] : params) places.push_back(stage_place(name, split));
  for (int p = 0; p < pp; ++p) {
    for (int r = 0; r < tp; ++r) {
      checkpoint::NamedTensors mine;
      for (std::size_t i = 0; i < params.size(); ++i) {
        const std::string& name = params[i].first;
        if (places[i].stage == p) {
          mine.emplace_back(places[i].name, parallel::shard_of_full(params[i].second.detach(), layouts[i], r, tp));
        }
        // Tied embeddings over several stages: the last one keeps its own copy as the output layer.
        if (tied && pp > 1 && p == pp - 1 && name == "embedding.word_embeddings.weight") {
          mine.emplace_back("output_layer.weight", parallel::shard_of_full(params[i].second.detach(), layouts[i], r, tp));
        }
      }
      shards.emplace_back(parallel::ParallelState::checkpoint_shard_name(r, p, pp), std::move(mine));
    }
  }
  checkpoint::CheckpointState common;
  common.iteration = 0;
  common.config = nlohmann::json::parse(to_json(args));
  common.config["padded_vocab_size_resolved"] = padded;
  checkpoint::save_model_shards(save_dir, common, shards);
  return result;
}

std::int64_t sample_token(const at::Tensor& logits, std::int64_t vocab_limit, const SamplingOptions& options,
                          at::Generator& gen) {
  at::Tensor l = logits.to(at::kFloat).narrow(0, 0, std::min<std::int64_t>(vocab_limit, logits.size(0)));
  if (options.greedy) return l.argmax().item<std::int64_t>();
  l = l / options.temperature;
  const float minus_inf = -std::numeric_limits<float>::infinity();
  if (options.top_k > 0) {
    // Megatron's modify_logits_for_top_k_filtering: everything below the k-th largest goes.
    const at::Tensor kth = std::get<0>(at::topk(l, std::min<std::int64_t>(options.top_k, l.size(0)))).select(0, -1);
    l = l.masked_fill(l < kth, minus_inf);
  } else if (options.top_p > 0.0) {
    // Megatron's top-p: the smallest set of most likely tokens whose probability reaches p.
    const auto [sorted, order] = at::sort(l, 0, /*descending=*/true);
    const at::Tensor cumulative = at::softmax(sorted, 0).cumsum(0);
    at::Tensor remove = cumulative > options.top_p;
    remove = at::cat({at::zeros({1}, remove.options()), remove.narrow(0, 0, remove.size(0) - 1)});  // keep the first past p
    l = l.index_put({order.masked_select(remove)}, at::scalar_tensor(minus_inf));
  }
  return at::multinomial(at::softmax(l, 0), 1, false, gen).item<std::int64_t>();
}

std::vector<std::int64_t> generate(const model::GptModel& model, const std::vector<std::int64_t>& prompt,
                                   std::int64_t vocab_limit, std::int64_t eod, const SamplingOptions& options,
                                   const std::function<void(std::int64_t)>& on_token) {
  MEGATRON_CHECK(!prompt.empty(), "the prompt is empty: give some text (or the EOD token) to start from");
  const model::ModelConfig& c = model.config();
  const bool learned = c.position_embedding == model::PositionEmbedding::kLearnedAbsolute;
  MEGATRON_CHECK(!learned || static_cast<std::int64_t>(prompt.size()) <= c.max_position_embeddings, "the prompt has ",
                 prompt.size(), " tokens; the model has ", c.max_position_embeddings, " positions");
  at::NoGradGuard no_grad;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  model::GptModel::KvCache cache;
  at::Tensor step = at::tensor(prompt, at::kLong).unsqueeze(0);
  std::vector<std::int64_t> out;
  while (static_cast<std::int64_t>(out.size()) < options.max_new_tokens) {
    if (learned && cache.length() + step.size(1) > c.max_position_embeddings) break;
    const at::Tensor logits = model.forward_cached(step, cache);  // [1, s, V]
    const std::int64_t next = sample_token(logits[0][-1], vocab_limit, options, gen);
    out.push_back(next);
    if (on_token) on_token(next);
    if (options.stop_at_eod && next == eod) break;
    step = at::full({1, 1}, next, at::kLong);
  }
  return out;
}

}  // namespace megatron::train
