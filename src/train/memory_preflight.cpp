// The memory preflight (see memory_preflight.h): Megatron's bytes per parameter (2 + 4 + 12 with
// mixed precision, 6 + 12/DP with the distributed optimizer; 4 + 4 + 8 in fp32) over this rank's
// parameter count, which the model config computes for any TP rank and pipeline chunk.
#include "megatron/train/memory_preflight.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "megatron/core/check.h"
#include "megatron/core/saturating.h"
#include "megatron/core/strings.h"
#include "megatron/kernels/device.h"

namespace megatron::train {
namespace {

std::string bytes_text(std::int64_t bytes) {
  if (bytes == kSaturated) return "more than 2^63 bytes (more than a 64-bit size can index)";
  return human_bytes(static_cast<std::uint64_t>(bytes)) + " (" + std::to_string(bytes) + " bytes)";
}

std::string short_bytes(std::int64_t bytes) {
  return bytes == kSaturated ? "more than 2^63 bytes" : human_bytes(static_cast<std::uint64_t>(bytes));
}

// A cgroup's memory limit (v2 memory.max, else v1 memory.limit_in_bytes), or kSaturated.
std::int64_t cgroup_memory_limit() {
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    long long value = 0;
    if (in >> value && value > 0) return value;
  }
  return kSaturated;
}

// Which part of the model makes most of this rank's parameters, named by its flags.
struct LargestPart {
  std::string what;
  bool experts = false;
};

LargestPart largest_part(const model::ModelConfig& c, const RankShare& share) {
  std::int64_t layers = 0;
  for (const std::int64_t n : share.chunk_layers) layers = saturating_add(layers, n);
  const std::int64_t in_layers = c.num_parameters(share.tp, layers, false, false, share.ep, share.expert_tp);
  const std::int64_t experts = c.num_expert_parameters(share.tp, layers, share.ep, share.expert_tp);
  const std::int64_t dense = in_layers - experts;
  const std::int64_t vocab = saturating_mul(c.padded_vocab_size / share.tp, c.hidden_size);
  const std::int64_t positions = share.pp_rank == 0 && c.position_embedding == model::PositionEmbedding::kLearnedAbsolute
                                     ? saturating_mul(c.max_position_embeddings, c.hidden_size)
                                     : 0;
  const std::int64_t largest = std::max({dense, experts, vocab, positions});
  if (positions == largest) {
    return {str_cat("the position-embedding table (--max-position-embeddings ", c.max_position_embeddings,
                    " x --hidden-size ", c.hidden_size, ")")};
  }
  if (vocab == largest && (share.pp_rank == 0 || share.pp_rank == share.pp - 1)) {
    return {str_cat("the embedding table (padded vocabulary ", c.padded_vocab_size, " x --hidden-size ", c.hidden_size,
                    share.tp > 1 ? str_cat(", split over ", share.tp, " tensor-parallel ranks") : std::string(), ")")};
  }
  if (experts == largest) {
    const int moe_ffn = c.moe.ffn_hidden_size > 0 ? c.moe.ffn_hidden_size : c.ffn_hidden_size;
    return {str_cat("the experts (--num-experts ", c.moe.num_experts, " x --moe-ffn-hidden-size ", moe_ffn,
                    " x --hidden-size ", c.hidden_size, " in ", layers, " layers",
                    share.ep > 1 ? str_cat(", ", c.moe.num_experts / share.ep, " per rank over --expert-model-parallel-size ", share.ep)
                                 : std::string(", all on this rank: --expert-model-parallel-size 1"),
                    ")"),
            true};
  }
  return {str_cat("the transformer layers (", layers, " of --num-layers ", c.num_layers, ", --hidden-size ",
                  c.hidden_size, c.moe.num_experts > 0 ? "" : str_cat(", --ffn-hidden-size ", c.ffn_hidden_size), ")")};
}

}  // namespace

std::int64_t MemoryNeed::total() const {
  return saturating_add(saturating_add(parameter_bytes, gradient_bytes), saturating_add(optimizer_bytes, score_bytes));
}

MemoryNeed rank_memory_need(const model::ModelConfig& config, const RankShare& share, const MemorySettings& settings) {
  MEGATRON_ASSERT(share.tp > 0 && share.pp > 0 && share.dp > 0 && !share.chunk_layers.empty());
  MemoryNeed need;
  const std::size_t chunks = share.chunk_layers.size();
  std::int64_t experts = 0;
  for (std::size_t c = 0; c < chunks; ++c) {
    const bool first = share.pp_rank == 0 && c == 0;
    const bool last = share.pp_rank == share.pp - 1 && c + 1 == chunks;
    const std::int64_t layers = share.chunk_layers[c];
    need.parameters = saturating_add(need.parameters,
                                     config.num_parameters(share.tp, layers, first, last, share.ep, share.expert_tp));
    experts = saturating_add(experts, config.num_expert_parameters(share.tp, layers, share.ep, share.expert_tp));
  }
  need.parameter_bytes = saturating_mul(need.parameters, settings.param_bytes);
  need.gradient_bytes = saturating_mul(need.parameters, settings.grad_in_fp32 ? 4 : settings.param_bytes);
  // fp32 main weights when the model's are in 16 bits, and Adam's two fp32 moments.
  const std::int64_t per_parameter = (settings.param_bytes == 4 ? 0 : 4) + 8;
  // With the distributed optimizer the dense part is sharded over DP x CP, the experts over the
  // expert-data-parallel group.
  const auto shard = [](std::int64_t n, int over) { return saturating_add(n, over - 1) / over; };
  const std::int64_t owned = settings.distributed_optimizer
                                 ? saturating_add(shard(need.parameters - experts, share.dp), shard(experts, share.expert_dp))
                                 : need.parameters;
  need.optimizer_bytes = saturating_mul(owned, per_parameter);
  if (settings.explicit_attention) {
    const std::int64_t heads = config.num_attention_heads / share.tp;
    need.score_bytes = saturating_mul(
        saturating_mul(saturating_mul(settings.micro_batch_size, heads), saturating_mul(config.seq_length, config.seq_length)),
        4);
  }
  return need;
}

DeviceMemory device_memory(const at::Device& device, int local_ranks) {
  if (device.is_cuda()) {
    // Local ranks take the GPUs round robin (kernels::select_device): more ranks than GPUs share.
    const int gpus = std::max(1, kernels::cuda_device_count());
    const int sharing = (std::max(1, local_ranks) + gpus - 1) / gpus;
    const std::int64_t total = kernels::device_memory_bytes(device);
    if (sharing == 1) return {total, kernels::describe_device(device)};
    return {total / sharing, str_cat(kernels::describe_device(device), " shared by ", sharing, " local ranks")};
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  std::int64_t host = pages > 0 && page > 0 ? saturating_mul(pages, page) : kSaturated;
  const std::int64_t limit = cgroup_memory_limit();
  const bool limited = limit < host;
  host = std::min(host, limit);
  std::string what = limited ? "this process's memory limit (cgroup)" : "this node's memory";
  if (local_ranks > 1) {
    return {host / local_ranks, str_cat(what, " shared by its ", local_ranks, " local ranks (",
                                        short_bytes(host), " in all)")};
  }
  return {host, what};
}

void check_memory_fits(const model::ModelConfig& config, const RankShare& share, const MemorySettings& settings,
                       const DeviceMemory& device) {
  const MemoryNeed need = rank_memory_need(config, share, settings);
  if (need.total() <= device.bytes) return;
  const char* dtype = settings.param_bytes == 4 ? "fp32" : "16-bit";
  const LargestPart largest = largest_part(config, share);
  std::string parts = str_cat(need.parameters, " parameters, mostly ", largest.what, ", in ", dtype,
                              " (", short_bytes(need.parameter_bytes), "), their ",
                              settings.grad_in_fp32 ? "fp32" : dtype, " gradients (", short_bytes(need.gradient_bytes),
                              "), ", settings.param_bytes == 4 ? "" : "fp32 main weights and ", "Adam moments (",
                              short_bytes(need.optimizer_bytes));
  parts += settings.distributed_optimizer ? str_cat(", sharded over ", share.dp, " data-parallel ranks)") : ")";
  if (need.score_bytes > 0) {
    parts += str_cat(" and one layer's attention scores ([", settings.micro_batch_size, ", ",
                     config.num_attention_heads / share.tp, ", ", config.seq_length, ", ", config.seq_length,
                     "] in fp32: ", short_bytes(need.score_bytes), ")");
  }
  std::string advice = largest.experts ? "spread the experts over more ranks (--expert-model-parallel-size) or the model "
                                         "(--tensor-model-parallel-size, --pipeline-model-parallel-size)"
                                       : "spread the model over more ranks (--tensor-model-parallel-size, --pipeline-model-parallel-size)";
  if (!settings.distributed_optimizer && share.dp > 1) advice += ", shard the optimizer state (--use-distributed-optimizer)";
  if (need.score_bytes > need.total() / 2) {
    advice = "lower --seq-length or --micro-batch-size, or use an attention backend that does not materialise the scores";
  }
  MEGATRON_FAIL("rank ", share.rank, " (tensor ", share.tp_rank + 1, "/", share.tp, ", pipeline ", share.pp_rank + 1,
                "/", share.pp, ", data-parallel size ", share.dp, ") needs at least ", bytes_text(need.total()),
                " to train its share of the model, and ", device.description, " has ", bytes_text(device.bytes),
                ". Its share: ", parts, ". To fit, ", advice, ", or train a smaller model");
}

}  // namespace megatron::train
