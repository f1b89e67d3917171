// Megatron's param-and-grad buffer (distributed_data_parallel.py, param_and_grad_buffer.py): the
// model's parameters become views into one flat buffer and their gradients views into one flat
// fp32 buffer, laid out in reverse order of the parameter list (backward produces gradients
// roughly in that order) and cut into buckets; the gradients are averaged over the data-parallel
// (x context-parallel) group per bucket: all-reduced, or reduce-scattered into this rank's shard
// when the distributed optimizer owns the update. With --overlap-grad-reduce a bucket's
// reduction starts from a backward hook as soon as its last gradient of the last micro-batch is
// accumulated. A DP group of one rank keeps the same buffers and skips the communication.
// The expert weights of MoE layers (TensorParallelLayout::expert_parallel) get buckets of their
// own after the others' (Megatron's expert_parallel_buffers): reduced over the expert-data-parallel
// group, the ranks holding the same experts, and scaled by 1/(DP x CP) like the rest, since each
// expert's gradient already sums the tokens that the expert-parallel ranks sent it.
// Not handled: several dtypes in one model (one buffer per dtype), parameters that do not require
// grad, and --overlap-param-gather.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "megatron/parallel/parallel_context.h"

namespace megatron::parallel {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

struct DataParallelConfig {
  bool overlap_grad_reduce = false;        // --overlap-grad-reduce
  bool use_distributed_optimizer = false;  // --use-distributed-optimizer
  // --ddp-bucket-size in elements; unset: max(40M, 1M x DP). Only used with overlap_grad_reduce
  // (otherwise one bucket), and never on pipeline stages after the first (Megatron's rule).
  std::optional<std::int64_t> bucket_size;
  // One bucket whatever the flags (Megatron's disable_bucketing: virtual-pipeline chunks after the
  // first).
  bool disable_bucketing = false;
  // Gradients accumulated and reduced in fp32 whatever the parameters' dtype; false: in the
  // parameters' dtype (Megatron's fp16 default without --accumulate-allreduce-grads-in-fp32).
  bool grad_in_fp32 = true;
};

// [begin, end) in elements of a flat buffer.
struct Range {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t numel() const { return end - begin; }
};

// Where every parameter and bucket sits in the flat buffers: a pure function of the sizes.
struct BufferLayout {
  struct Bucket {
    Range range;  // padded
    std::int64_t numel_unpadded = 0;
    std::vector<int> params;  // indices into the parameter list, in buffer order
    bool expert = false;      // expert weights, reduced over the expert-data-parallel group
  };
  std::vector<Range> params;      // per parameter, in the order of the given list
  std::vector<int> param_bucket;  // per parameter: its bucket
  std::vector<Bucket> buckets;
  std::int64_t numel = 0;  // the whole buffer, padding included
};

// The bucket size the flags imply: unset when there is one bucket (no overlap, a pipeline stage
// after the first, disable_bucketing), else config.bucket_size or max(40M, 1M x dp_size).
std::optional<std::int64_t> effective_bucket_size(const DataParallelConfig& config, int dp_size, int pp_rank);

// Megatron's layouts. Parameters are placed from the last to the first; a bucket closes once it
// holds at least `bucket_size` elements (unset: one bucket). For the distributed optimizer
// (`pad_for_dp`) every parameter starts at a multiple of 64 elements and every bucket ends at a
// multiple of lcm(dp_size, 128), so it splits into dp_size equal shards; otherwise no padding.
// Parameters marked in `own_bucket` get a bucket to themselves (Megatron: the shared embedding
// with the distributed optimizer, so that the first and last stage shard it alike).
BufferLayout make_buffer_layout(const std::vector<std::int64_t>& numels, std::optional<std::int64_t> bucket_size,
                                int dp_size, bool pad_for_dp, const std::vector<bool>& own_bucket = {});

// The buffers of one model chunk and the DP reduction of its gradients. Construction moves every
// parameter's values into the param buffer (the tensors the model holds become views into it,
// values preserved) and sets every parameter's .grad to its view of the zeroed grad buffer, so
// autograd accumulates into the buffer in place (or, in main-grad mode, hooks add each .grad into
// it). Never reset a parameter's .grad yourself; call zero_grad(); read gradients with grad(i).
// Not copyable or movable (the backward hooks refer to it).
//
// Per iteration: zero_grad(); for each micro-batch set_last_microbatch(last) then forward and
// backward; finish_grad_sync(). After it, with the plain optimizer every gradient is the DP
// average; with the distributed optimizer only this rank's shard of each bucket is (the rest of
// the grad buffer holds unreduced local values), and after the optimizer updated that shard of
// the param buffer, all_gather_params() brings every rank the updated parameters.
class DataParallelBuffers {
 public:
  // `params` and `layouts` aligned (GptModel::named_parameters() / parameter_layouts()); every
  // parameter a leaf that requires grad, all of one dtype and device. `pc` must outlive this.
  DataParallelBuffers(const NamedTensors& params, std::vector<TensorParallelLayout> layouts, const ParallelContext& pc,
                      const DataParallelConfig& config);
  ~DataParallelBuffers();
  DataParallelBuffers(const DataParallelBuffers&) = delete;
  DataParallelBuffers& operator=(const DataParallelBuffers&) = delete;

  // Zeroes the grad buffer (the .grad views stay; a .grad someone replaced is set back to its
  // view) and forgets the previous iteration's reductions. Call before the first micro-batch.
  void zero_grad();
  // With --overlap-grad-reduce, gradients count as ready only in the last micro-batch's backward
  // (Megatron's no_sync() otherwise). Default true, as in Megatron.
  void set_last_microbatch(bool last);
  // Starts the reduction of every bucket that has not started and waits for all of them: each
  // bucket is scaled by 1/dp_cp and summed over the dp_cp group (all-reduce, or reduce-scatter
  // into this rank's shard with the distributed optimizer). Without overlap this is where all the
  // communication happens. The first iteration with overlap learns how often each gradient is
  // accumulated per backward and launches everything here; later ones launch from the hooks.
  void finish_grad_sync();
  // Distributed optimizer: every rank's shard of the param buffer to every rank, per bucket
  // (nothing to do on a DP group of one rank).
  void all_gather_params();
  // Buckets whose reduction has started since the last zero_grad() or finish_grad_sync(): with
  // overlap, all of them once the last micro-batch's backward is through (from the second
  // iteration on).
  int started_buckets() const;

  const NamedTensors& params() const { return params_; }
  const std::vector<TensorParallelLayout>& layouts() const { return layouts_; }
  const BufferLayout& layout() const { return layout_; }
  const DataParallelConfig& config() const { return config_; }
  const ParallelContext& context() const { return *pc_; }
  // The flat buffers: param buffer in the parameters' dtype, grad buffer fp32.
  const at::Tensor& param_data() const { return param_data_; }
  const at::Tensor& grad_data() const { return grad_data_; }
  // Parameter i's gradient: its view of the grad buffer, shaped like the parameter.
  at::Tensor grad(int param) const;
  // The group bucket b is reduced (and sharded) over: DP x CP, or the expert-data-parallel group
  // for expert weights.
  const ProcessGroup& group(int bucket) const;
  // The part of bucket b this rank's optimizer owns: the rank's 1/group-size shard with the
  // distributed optimizer, else the whole bucket.
  Range owned_range(int bucket) const;
  // Whether this rank's owned part of bucket b is the one copy of those elements counted in a sum
  // over the world (the gradient norm): always with the distributed optimizer (disjoint shards),
  // else on the first rank of the bucket's group only.
  bool counts_owned_range(int bucket) const;

 private:
  struct Core;
  void start_bucket(int bucket);
  void register_hooks();

  NamedTensors params_;
  std::vector<TensorParallelLayout> layouts_;
  const ParallelContext* pc_;
  DataParallelConfig config_;
  BufferLayout layout_;
  at::Tensor param_data_, grad_data_;
  bool main_grad_mode_ = false;  // grad buffer dtype != parameter dtype
  std::shared_ptr<Core> core_;  // bucket state, shared weakly with the backward hooks
};

// Megatron's _allreduce_word_embedding_grads: the gradients of parameters marked
// shared_embedding (the word embedding on the first stage, its copy in the output layer on the
// last) are summed over the embedding group. Call after finish_grad_sync(); nothing to do when the
// group has one rank.
void allreduce_shared_embedding_grads(const DataParallelBuffers& buffers);

// Megatron's _allreduce_layernorm_grads: the gradients of parameters whose layout says
// sequence_parallel are summed over the tensor-parallel group (one coalesced all-reduce). Call
// after finish_grad_sync(); nothing to do when TP is 1 or no parameter is marked.
void allreduce_sequence_parallel_grads(const DataParallelBuffers& buffers);

}  // namespace megatron::parallel
