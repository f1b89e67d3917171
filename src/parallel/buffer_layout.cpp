// Megatron's param-and-grad buffer layout (see data_parallel.h): parameters in reverse order,
// padded for the distributed optimizer, grouped into buckets by size or alone.
#include <algorithm>
#include <numeric>

#include "megatron/core/check.h"
#include "megatron/parallel/data_parallel.h"

namespace megatron::parallel {
namespace {

constexpr std::int64_t kParamAlignment = 64;  // Megatron's pad_param_start
constexpr std::int64_t kBucketAlignment = 128;

std::int64_t round_up(std::int64_t value, std::int64_t divisor) { return (value + divisor - 1) / divisor * divisor; }

}  // namespace

std::optional<std::int64_t> effective_bucket_size(const DataParallelConfig& config, int dp_size, int pp_rank) {
  if (!config.overlap_grad_reduce || config.disable_bucketing || pp_rank > 0) return std::nullopt;
  if (config.bucket_size) {
    MEGATRON_CHECK(*config.bucket_size > 0, "--ddp-bucket-size must be positive, got ", *config.bucket_size);
    return config.bucket_size;
  }
  return std::max<std::int64_t>(40'000'000, std::int64_t{1'000'000} * dp_size);
}

BufferLayout make_buffer_layout(const std::vector<std::int64_t>& numels, std::optional<std::int64_t> bucket_size,
                                int dp_size, bool pad_for_dp, const std::vector<bool>& own_bucket) {
  MEGATRON_ASSERT(dp_size >= 1);
  BufferLayout out;
  const int n = static_cast<int>(numels.size());
  out.params.resize(numels.size());
  out.param_bucket.resize(numels.size());
  const std::int64_t bucket_divisor = std::lcm(std::int64_t{dp_size}, kBucketAlignment);
  std::int64_t param_start = 0, param_end = 0, bucket_start = 0;
  std::vector<int> bucket_params;
  auto close_bucket = [&] {
    BufferLayout::Bucket b;
    b.range = {bucket_start, pad_for_dp ? round_up(param_end, bucket_divisor) : param_end};
    b.numel_unpadded = param_end - bucket_start;
    b.params = std::move(bucket_params);
    bucket_params.clear();
    out.buckets.push_back(std::move(b));
    bucket_start = out.buckets.back().range.end;
  };
  for (int i = n - 1; i >= 0; --i) {
    const bool alone = static_cast<std::size_t>(i) < own_bucket.size() && own_bucket[static_cast<std::size_t>(i)];
    if (alone && !bucket_params.empty()) {
      param_end = param_start;
      close_bucket();
      param_start = bucket_start;
    }
    if (pad_for_dp) param_start = round_up(param_start, kParamAlignment);
    param_end = param_start + numels[static_cast<std::size_t>(i)];
    out.params[static_cast<std::size_t>(i)] = {param_start, param_end};
    out.param_bucket[static_cast<std::size_t>(i)] = static_cast<int>(out.buckets.size());
    bucket_params.push_back(i);
    if (alone || (bucket_size && param_end - bucket_start >= *bucket_size)) {
      close_bucket();
      param_start = bucket_start;
    } else {
      param_start = param_end;
    }
  }
  if (!bucket_params.empty()) close_bucket();
  out.numel = bucket_start;
  return out;
}

}  // namespace megatron::parallel
