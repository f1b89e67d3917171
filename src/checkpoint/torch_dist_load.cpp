// Reading Megatron-Core's torch_dist checkpoints (see torch_dist.h): the common state through the
// pickle reader (common.pt, or the common_state bytes item of newer writers), Megatron's args as
// the saved run, and each parameter's shard cut from the global tensors by reading only its blocks.
#include "megatron/checkpoint/torch_dist.h"

#include <filesystem>
#include <optional>

#include "megatron/checkpoint/dcp.h"
#include "megatron/checkpoint/pickle.h"
#include "megatron/checkpoint/saved_run.h"
#include "megatron/checkpoint/torch_save.h"
#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "megatron/core/strings.h"
#include "torch_dist_names.h"

namespace megatron::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Kind = PickleValue::Kind;

constexpr const char* kCommonItem = "common_state";     // later: a bytes item of the DCP folder

// A pickled value as JSON: None, bools, numbers, strings, and lists, tuples and str-keyed dicts of
// them; anything else (a dtype, an enum member, a class) is null.
json plain_json(const PickleValue& v, int depth = 0) {
  if (depth > 32) return nullptr;
  switch (v.kind) {
    case Kind::kBool: return v.boolean;
    case Kind::kInt: return v.integer;
    case Kind::kFloat: return v.real;
    case Kind::kString: return v.text;
    case Kind::kList:
    case Kind::kTuple: {
      json out = json::array();
      for (const auto& item : v.items) out.push_back(plain_json(*item, depth + 1));
      return out;
    }
    case Kind::kDict: {
      json out = json::object();
      for (const auto& [key, value] : v.entries) {
        if (key->kind == Kind::kString) out[key->text] = plain_json(*value, depth + 1);
      }
      return out;
    }
    default: return nullptr;
  }
}

// The common state's dict, from whichever place the writer's version put it.
class CommonState {
 public:
  explicit CommonState(const std::string& folder) {
    const std::string file = (fs::path(folder) / kTorchDistCommonFile).string();
    if (fs::exists(file)) {
      archive_.emplace(file);
    } else {
      const DcpCheckpoint dcp(folder);
      for (const auto& [name, item] : dcp.bytes_items()) {
        if (name == kCommonItem || name.starts_with(std::string(kCommonItem) + "/")) {
          archive_.emplace(TorchSaveArchive::from_bytes(dcp.read_bytes(name), folder + " (" + name + ")"));
          break;
        }
      }
      MEGATRON_CHECK(archive_.has_value(), "checkpoint ", folder, " has neither ", kTorchDistCommonFile, " nor a ", kCommonItem,
                     " item: it is partial, or not written by Megatron-Core");
    }
    MEGATRON_CHECK(root().kind == Kind::kDict, archive_->where(), ": the common state is a ", root().kind_name(),
                   ", not a dict");
  }
  const PickleValue& root() const { return archive_->root(); }
  const std::string& where() const { return archive_->where(); }

 private:
  std::optional<TorchSaveArchive> archive_;
};

std::int64_t integer_or(const json& j, const char* key, std::int64_t fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<std::int64_t>() : fallback;
}

}  // namespace

bool is_torch_dist(const std::string& folder) {
  const std::string path = (fs::path(folder) / kTorchDistMetadataFile).string();
  if (!fs::exists(path)) return false;
  json meta;
  try {
    meta = json::parse(read_text_file(path, "distributed checkpoint metadata"));
  } catch (const json::exception& e) {
    MEGATRON_FAIL(path, ": not JSON (", e.what(), ")");
  }
  const std::string backend = meta.is_object() ? meta.value("sharded_backend", std::string()) : std::string();
  MEGATRON_CHECK(backend == "torch_dist", path, ": sharded_backend '", backend,
                 "' is not read (only Megatron-Core's torch_dist checkpoints are)");
  return true;
}

TorchDistRun read_torch_dist_run(const std::string& root, std::int64_t iteration) {
  const std::string folder = iteration_folder(root, iteration);
  const CommonState common(folder);
  const PickleValue& dict = common.root();
  TorchDistRun out;
  const PickleValue* args = dict.find("args");
  MEGATRON_CHECK(args && args->kind == Kind::kObject && args->state, common.where(),
                 ": the common state has no args Namespace");
  out.args = plain_json(*args->state);
  if (const PickleValue* version = dict.find("checkpoint_version")) {
    const double v = version->kind == Kind::kFloat ? version->real : static_cast<double>(version->integer);
    MEGATRON_CHECK(v >= 3.0, common.where(), ": checkpoint_version ", v, " (only 3.0, Megatron-Core's, is read)");
  }
  const PickleValue* saved_iteration = dict.find("iteration");
  MEGATRON_CHECK(saved_iteration && saved_iteration->kind == Kind::kInt, common.where(), ": no iteration");
  MEGATRON_CHECK(saved_iteration->integer == iteration, common.where(), ": records iteration ", saved_iteration->integer,
                 " inside the folder of iteration ", iteration);
  CheckpointState& state = out.state;
  state.iteration = iteration;
  state.optimizer_steps = iteration;
  state.consumed_train_samples = integer_or(out.args, "consumed_train_samples", 0);
  state.consumed_valid_samples = integer_or(out.args, "consumed_valid_samples", 0);
  if (const PickleValue* flops = dict.find("num_floating_point_operations_so_far")) {
    state.floating_point_operations_so_far = flops->kind == Kind::kFloat ? flops->real : static_cast<double>(flops->integer);
  }
  if (const PickleValue* scheduler = dict.find("opt_param_scheduler")) {
    state.scheduler = plain_json(*scheduler);
    state.scheduler_num_steps = integer_or(state.scheduler, "num_steps", 0);
  }
  // A checkpoint written here carries the run's own record; Megatron's describe the run by its args.
  const auto record = out.args.find(kRunRecordArg);
  if (record != out.args.end() && record->is_string()) {
    try {
      state.config = json::parse(record->get<std::string>());
    } catch (const json::exception& e) {
      MEGATRON_FAIL(common.where(), ": args.", kRunRecordArg, " is not JSON (", e.what(), ")");
    }
    SavedRun::from_json(state.config, common.where());  // throws naming the file if it is not a record
  } else {
    state.config = SavedRun::from_megatron_args(out.args, common.where()).to_json();
  }
  SavedLayout& layout = out.layout;
  layout.format = CheckpointFormat::kTorchDist;
  layout.tp = static_cast<int>(integer_or(out.args, "tensor_model_parallel_size", 1));
  layout.pp = static_cast<int>(integer_or(out.args, "pipeline_model_parallel_size", 1));
  layout.ep = static_cast<int>(integer_or(out.args, "expert_model_parallel_size", 1));
  layout.etp = static_cast<int>(integer_or(out.args, "expert_tensor_parallel_size", layout.tp));
  layout.dp = static_cast<int>(integer_or(out.args, "data_parallel_size", 1));
  layout.distributed_optimizer = out.args.value("use_distributed_optimizer", json(false)).is_boolean() &&
                                 out.args.value("use_distributed_optimizer", false);
  layout.config = state.config;
  return out;
}

CheckpointState load_torch_dist(const std::string& root, std::int64_t iteration, const ReshardTarget& target) {
  const std::string folder = iteration_folder(root, iteration);
  CheckpointState state = read_torch_dist_run(root, iteration).state;
  const DcpCheckpoint dcp(folder);
  const auto& tensors = dcp.tensors();
  const bool tied = !SavedRun::from_json(state.config, folder).model_config(folder).untie_embeddings_and_output_weights;
  for (std::size_t i = 0; i < target.params.size(); ++i) {
    const auto& [name, param] = target.params[i];
    const parallel::TensorParallelLayout& layout = target.layouts[i];
    std::string full = full_model_name(name, target.layout, target.pp_rank);
    // Megatron saves no output layer when it is the word embedding.
    if (full == "output_layer.weight" && tied && !tensors.contains(full)) full = "embedding.word_embeddings.weight";
    const auto keys = torch_dist_keys(full);
    const TorchDistKey* found = nullptr;
    for (const TorchDistKey& k : keys) {
      if (tensors.contains(k.key)) {
        found = &k;
        break;
      }
    }
    MEGATRON_CHECK(found, "checkpoint ", folder, " has no ", keys.front().key, " (", name,
                   " of this model); is it a checkpoint of another model?");
    const DcpTensor& t = tensors.at(found->key);
    // The global tensor without the layer axis: this build's full tensor.
    std::vector<std::int64_t> offsets(t.size.size(), 0), sizes = t.size;
    std::size_t first = 0;
    if (found->layer) {
      MEGATRON_CHECK(!t.size.empty() && *found->layer < t.size[0], "checkpoint ", folder, ": ", found->key, " holds ",
                     t.size.empty() ? 0 : t.size[0], " layers; this model's ", name, " is layer ", *found->layer);
      offsets[0] = *found->layer;
      sizes[0] = 1;
      first = 1;
    }
    const std::vector<std::int64_t> full_shape(t.size.begin() + static_cast<std::ptrdiff_t>(first), t.size.end());
    const auto misfit = [&](const std::string& why) {
      return str_cat("checkpoint ", folder, ": ", found->key, " (global shape ", at::IntArrayRef(t.size), ") does not fit ",
                     name, " of shape ", param.sizes(), " here: ", why);
    };
    MEGATRON_CHECK(full_shape.size() == static_cast<std::size_t>(param.dim()), misfit("another number of dimensions"));
    // Expert weights: this rank's block of experts; then its TP (expert-TP) shard: `stride` blocks.
    int split_rank = target.tp_rank, splits = target.tp;
    if (layout.expert_parallel) {
      const std::int64_t experts = full_shape[0];
      MEGATRON_CHECK(experts % target.ep == 0, misfit(str_cat(experts, " experts do not split over ", target.ep,
                                                             " expert-parallel ranks")));
      offsets[first] = experts / target.ep * target.ep_rank;
      sizes[first] = experts / target.ep;
      if (target.etp > 0) {
        split_rank = target.etp_rank;
        splits = target.etp;
      }
    }
    std::vector<at::Tensor> blocks;
    if (!layout.sharded()) {
      blocks.push_back(dcp.read(found->key, offsets, sizes));
    } else {
      const std::size_t d = first + static_cast<std::size_t>(layout.partition_dim);
      const std::int64_t n = sizes[d], stride = layout.partition_stride;
      MEGATRON_CHECK(n % (stride * splits) == 0, misfit(str_cat("its dimension ", layout.partition_dim, " (", n,
                                                                 ") does not split into ", stride * splits, " blocks")));
      const std::int64_t block = n / (stride * splits);
      for (std::int64_t j = 0; j < stride; ++j) {
        auto o = offsets, s = sizes;
        o[d] = offsets[d] + j * (n / stride) + split_rank * block;
        s[d] = block;
        blocks.push_back(dcp.read(found->key, o, s));
      }
    }
    at::Tensor shard = blocks.size() == 1 ? blocks.front()
                                          : at::cat(blocks, static_cast<std::int64_t>(first) + layout.partition_dim);
    if (found->layer) shard = shard.squeeze(0);
    MEGATRON_CHECK(shard.sizes() == param.sizes(),
                   misfit(str_cat("this rank's shard of it is ", shard.sizes(),
                                  " (a different padded vocabulary? Megatron pads it to a multiple of "
                                  "--make-vocab-size-divisible-by x TP; give --make-vocab-size-divisible-by so that "
                                  "it comes out the same)")));
    state.model.emplace_back(name, shard.contiguous());
  }
  return state;
}

}  // namespace megatron::checkpoint
