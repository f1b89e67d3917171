// Writing Megatron-Core's torch_dist checkpoints (see torch_dist.h): each rank's chunks of the global
// tensors under Megatron's sharded names (the inverse of load_torch_dist's cut), the `_extra_state`
// items Megatron's layers expect, and rank 0's common state with Megatron's args Namespace.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "megatron/checkpoint/dcp.h"
#include "megatron/checkpoint/pickle.h"
#include "megatron/checkpoint/saved_run.h"
#include "megatron/checkpoint/torch_dist.h"
#include "megatron/checkpoint/torch_save.h"
#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "megatron/core/strings.h"
#include "save_phases.h"
#include "torch_dist_names.h"

namespace megatron::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The modules of a transformer layer whose `_extra_state` Megatron's layer specs save (Transformer
// Engine's FP8 metadata; None from the local spec's layers, and without FP8).
constexpr const char* kAttentionExtraStates[] = {"self_attention.linear_qkv", "self_attention.linear_proj",
                                                 "self_attention.core_attention"};
constexpr const char* kMlpExtraStates[] = {"mlp.linear_fc1", "mlp.linear_fc2"};

void add_extra_states(TorchDistPlan& plan, int layer, int num_layers, bool dense_mlp) {
  const auto add = [&](const char* module) {
    plan.extra_states.push_back(str_cat("decoder.layers.", module, "._extra_state/shard_", layer, "_", num_layers));
  };
  for (const char* m : kAttentionExtraStates) add(m);
  if (dense_mlp) {
    for (const char* m : kMlpExtraStates) add(m);
  }
}

PickleRef pickle_json(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return py::none();
    case json::value_t::boolean: return py::boolean(j.get<bool>());
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return py::integer(j.get<std::int64_t>());
    case json::value_t::number_float: return py::real(j.get<double>());
    case json::value_t::string: return py::str(j.get<std::string>());
    case json::value_t::array: {
      std::vector<PickleRef> items;
      for (const auto& item : j) items.push_back(pickle_json(item));
      return py::list(std::move(items));
    }
    case json::value_t::object: {
      std::vector<std::pair<PickleRef, PickleRef>> entries;
      for (const auto& [key, value] : j.items()) entries.emplace_back(py::str(key), pickle_json(value));
      return py::dict(std::move(entries));
    }
    default: return py::none();
  }
}

// Megatron's args for a checkpoint of this run: the run's resolved arguments (Megatron's names),
// the model's settings resolved, the layout and counters of this save.
json megatron_args(const json& meta, const SavedLayout& layout, const std::string& where) {
  const json& config = meta.at("config");
  const SavedRun run = SavedRun::from_json(config, where);
  const model::ModelConfig& m = run.model_config(where);
  json args = run.arguments.is_object() ? run.arguments : json::object();
  const json resolved = m.to_json();
  for (const char* key : {"num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups",
                          "kv_channels", "seq_length", "max_position_embeddings", "position_embedding_type",
                          "rotary_base", "rotary_percent", "rotary_interleaved", "normalization", "norm_epsilon",
                          "swiglu", "qk_layernorm", "untie_embeddings_and_output_weights", "add_bias_linear",
                          "init_method_std", "attention_dropout", "hidden_dropout", "padded_vocab_size"}) {
    args[key] = resolved.at(key);
  }
  if (!args.contains("add_qkv_bias")) args["add_qkv_bias"] = m.add_bias_linear;
  args["group_query_attention"] = m.num_query_groups != m.num_attention_heads;
  args["num_experts"] = m.moe.enabled() ? json(resolved.at("num_experts")) : json();
  const json tokenizer = run.tokenizer.to_json();
  for (auto it = tokenizer.begin(); it != tokenizer.end(); ++it) {
    const json& value = it.value();
    if (!args.contains(it.key())) args[it.key()] = value.is_string() && value.get<std::string>().empty() ? json() : value;
  }
  args["tensor_model_parallel_size"] = layout.tp;
  args["pipeline_model_parallel_size"] = layout.pp;
  args["expert_model_parallel_size"] = layout.ep;
  args["expert_tensor_parallel_size"] = layout.etp;
  args["data_parallel_size"] = layout.dp;
  args["use_distributed_optimizer"] = layout.distributed_optimizer;
  args["iteration"] = meta.at("iteration");
  args["consumed_train_samples"] = meta.at("consumed_train_samples");
  args["consumed_valid_samples"] = meta.at("consumed_valid_samples");
  args["ckpt_format"] = "torch_dist";
  args["use_dist_ckpt"] = true;
  args[kRunRecordArg] = config.dump();
  return args;
}

void write_bytes_atomically(const std::string& path, const std::string& bytes) {
  AtomicFile file(path);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

}  // namespace

TorchDistPlan plan_torch_dist(const ReshardTarget& target, const model::ModelConfig& model, bool writes_model) {
  TorchDistPlan plan;
  if (!writes_model) return plan;
  const bool tied = !model.untie_embeddings_and_output_weights;
  std::set<int> layers, dense_layers;
  for (std::size_t i = 0; i < target.params.size(); ++i) {
    const auto& [name, param] = target.params[i];
    const parallel::TensorParallelLayout& layout = target.layouts[i];
    if (layout.expert_parallel) {
      MEGATRON_CHECK(target.etp <= 0 || target.etp == target.tp, "--ckpt-format torch_dist: experts with a tensor-"
                     "parallel size (", target.etp, ") other than --tensor-model-parallel-size (", target.tp,
                     ") are not written in this format yet; give --ckpt-format megatron_cpp");
    } else if (target.ep_rank != 0) {
      continue;  // expert-parallel rank 0 writes the dense tensors
    }
    const std::string full = full_model_name(name, target.layout, target.pp_rank);
    if (tied && full == "output_layer.weight") continue;  // the word embedding, saved once under its name
    const TorchDistKey key = torch_dist_keys(full).front();
    std::vector<std::int64_t> global = param.sizes().vec(), offsets(global.size(), 0);
    int split_rank = target.tp_rank, splits = target.tp;
    if (layout.expert_parallel) {
      offsets[0] = global[0] * target.ep_rank;
      global[0] *= target.ep;
    }
    if (layout.expert_parallel && target.etp > 0) {
      split_rank = target.etp_rank;
      splits = target.etp;
    }
    std::vector<TorchDistChunk> chunks;
    if (!layout.sharded()) {
      if (split_rank != 0) continue;  // every TP rank holds it: the first writes it
      chunks.push_back({key.key, global, offsets});
    } else {
      const int d = layout.partition_dim;
      const std::int64_t stride = layout.partition_stride, local = global[static_cast<std::size_t>(d)];
      MEGATRON_CHECK(local % stride == 0, name, ": ", local, " rows do not split into ", stride, " blocks");
      const std::int64_t block = local / stride, n = local * splits;
      global[static_cast<std::size_t>(d)] = n;
      for (std::int64_t j = 0; j < stride; ++j) {
        auto o = offsets;
        o[static_cast<std::size_t>(d)] = j * (n / stride) + split_rank * block;
        chunks.push_back({key.key, global, o, d, j * block, stride == 1 ? -1 : block});
      }
    }
    for (TorchDistChunk& c : chunks) {
      if (!key.layer) continue;
      c.global_shape.insert(c.global_shape.begin(), model.num_layers);
      c.offsets.insert(c.offsets.begin(), *key.layer);
      c.layer_axis = true;
      layers.insert(*key.layer);
      if (full.ends_with(".mlp.linear_fc1.weight")) dense_layers.insert(*key.layer);
    }
    plan.chunks[name] = std::move(chunks);
  }
  if (target.tp_rank == 0 && target.ep_rank == 0) {
    for (const int layer : layers) add_extra_states(plan, layer, model.num_layers, dense_layers.contains(layer));
  }
  return plan;
}

std::vector<DcpEntry> write_torch_dist_shard(const std::string& folder, const std::string& file,
                                             const NamedTensors& model, const TorchDistPlan& plan) {
  if (plan.chunks.empty() && plan.extra_states.empty()) return {};
  DcpFileWriter out(folder, file);
  for (const auto& [name, t] : model) {
    const auto it = plan.chunks.find(name);
    if (it == plan.chunks.end()) continue;
    for (const TorchDistChunk& c : it->second) {
      at::Tensor chunk = c.length < 0 ? t : t.narrow(c.dim, c.start, c.length);
      if (c.layer_axis) chunk = chunk.unsqueeze(0);
      out.add_tensor(c.key, c.global_shape, c.offsets, chunk);
    }
  }
  if (!plan.extra_states.empty()) {
    // What Megatron saves for a layer without extra state: torch.save of the list of its objects' data.
    const std::string none = TorchSaveWriter().bytes(*py::list({py::none()}));
    for (const std::string& key : plan.extra_states) out.add_bytes(key, none);
  }
  return out.commit();
}

void write_torch_dist_common(const std::string& folder, const std::vector<DcpEntry>& entries, const json& meta,
                             const SavedLayout& layout) {
  write_dcp_metadata(folder, entries);
  std::vector<std::pair<PickleRef, PickleRef>> common = {
      {py::str("args"), py::instance("argparse.Namespace", pickle_json(megatron_args(meta, layout, folder)))},
      {py::str("checkpoint_version"), py::real(3.0)},
      {py::str("iteration"), py::integer(meta.at("iteration").get<std::int64_t>())},
      {py::str("num_floating_point_operations_so_far"),
       py::real(meta.value("floating_point_operations_so_far", 0.0))}};
  if (const json& scheduler = meta.value("opt_param_scheduler", json()); scheduler.is_object()) {
    common.emplace_back(py::str("opt_param_scheduler"), pickle_json(scheduler));
  }
  write_bytes_atomically((fs::path(folder) / kTorchDistCommonFile).string(), TorchSaveWriter().bytes(*py::dict(std::move(common))));
  // Last: Megatron takes a folder with metadata.json for a distributed checkpoint.
  const json backend = {{"sharded_backend", "torch_dist"}, {"sharded_backend_version", 1},
                        {"common_backend", "torch"}, {"common_backend_version", 1}};
  write_bytes_atomically((fs::path(folder) / kTorchDistMetadataFile).string(), backend.dump());
}

void save_torch_dist_model(const std::string& root, const CheckpointState& common, const NamedTensors& params,
                           const std::vector<parallel::TensorParallelLayout>& layouts, const model::ModelConfig& model,
                           const SavedLayout& layout) {
  MEGATRON_CHECK(params.size() == layouts.size(), "save_torch_dist_model: ", params.size(), " parameters, ",
                 layouts.size(), " layouts");
  write_new_checkpoint(root, common, [&](const std::string& folder) {
    // The layers stack on one axis whatever the pipeline split: each TP x EP rank's shard is one file.
    const parallel::PipelineLayout whole{model.num_layers, 1, 1, std::nullopt, std::nullopt};
    std::vector<DcpEntry> entries;
    int file = 0;
    for (int e = 0; e < layout.ep; ++e) {
      for (int r = 0; r < layout.tp; ++r) {
        NamedTensors shards;
        for (std::size_t i = 0; i < params.size(); ++i) {
          const at::Tensor block = parallel::expert_block(params[i].second.detach(), layouts[i], e, layout.ep);
          shards.emplace_back(params[i].first, parallel::shard_of_full(block, layouts[i], r, layout.tp));
        }
        const ReshardTarget target{.params = shards, .layouts = layouts, .tp_rank = r, .tp = layout.tp, .pp_rank = 0,
                                   .layout = whole, .ep_rank = e, .ep = layout.ep, .etp_rank = r, .etp = layout.tp};
        auto written = write_torch_dist_shard(folder, str_cat("__", file++, "_0.distcp"), shards,
                                              plan_torch_dist(target, model, true));
        entries.insert(entries.end(), written.begin(), written.end());
      }
    }
    ShardWriter writer;
    writer.tp = layout.tp;
    writer.ep = layout.ep;
    writer.etp = layout.etp;
    write_torch_dist_common(folder, entries, detail::meta_without_files(common, writer), layout);
  });
}

namespace detail {

std::string commit_torch_dist_metadata(SaveInProgress& save, const parallel::ParallelContext& pc) {
  parallel::Communicator& comm = *pc.comm;
  const parallel::ProcessGroup& world = *pc.world;
  std::string error = save.error;
  std::string mine;
  if (error.empty()) {
    json items = json::array();
    for (const DcpEntry& e : save.torch_dist_entries) items.push_back(e.to_json());
    mine = items.dump();
  }
  // Every rank's item records, to every rank (only rank 0 reads them): their lengths, then the bytes.
  const auto lengths = all_gather_values({static_cast<std::int64_t>(mine.size()), error.empty() ? 0 : 1}, world, comm);
  std::int64_t longest = 1;
  bool any_failed = false;
  for (int r = 0; r < world.size(); ++r) {
    longest = std::max(longest, lengths[2 * static_cast<std::size_t>(r)]);
    any_failed = any_failed || lengths[2 * static_cast<std::size_t>(r) + 1] != 0;
  }
  at::Tensor in = at::zeros({longest}, at::kByte);
  std::memcpy(in.data_ptr(), mine.data(), mine.size());
  at::Tensor all = at::empty({longest * world.size()}, at::kByte);
  comm.all_gather(all, in, world).wait();
  if (!save.leader || any_failed) return error;  // a failure is reported by commit_save's check
  try {
    std::vector<DcpEntry> entries;
    std::map<std::string, std::uint64_t> ends;  // per file, where its last item ends
    const char* bytes = static_cast<const char*>(all.data_ptr());
    for (int r = 0; r < world.size(); ++r) {
      const std::string text(bytes + longest * r, static_cast<std::size_t>(lengths[2 * static_cast<std::size_t>(r)]));
      for (const json& item : json::parse(text)) {
        entries.push_back(DcpEntry::from_json(item));
        std::uint64_t& end = ends[entries.back().item.file];
        end = std::max(end, entries.back().item.offset + entries.back().item.length);
      }
    }
    for (const auto& [file, end] : ends) {
      std::error_code ec;
      const auto size = fs::file_size(fs::path(save.temp_dir) / file, ec);
      MEGATRON_CHECK(!ec && size >= end, "checkpoint save at iteration ", save.iteration, ": ", file,
                     ", written by another rank, is not in ", save.temp_dir, " as rank 0 sees it; --save must be a "
                     "folder every rank sees (a shared file system)");
    }
    write_torch_dist_common(save.temp_dir, entries, save.meta, save.writer.torch_dist->layout);
  } catch (const std::exception& e) {
    error = str_cat("cannot write the metadata of checkpoint ", save.final_dir, ": ", e.what());
  }
  return error;
}

}  // namespace detail
}  // namespace megatron::checkpoint
