// ATen entries and references for cross entropy from logits (cross_entropy_ops.h): validate,
// flatten to [rows, vocab_shard], allocate the fp32 per-row outputs, take the current stream and
// launch the kernels in cross_entropy.cu. CPU tensors and other dtypes take the "ATen path": the
// reference's arithmetic through ATen's fused row kernels (max, log_softmax), so that each step
// touches the [rows, vocab] logits in as few passes as ATen allows: on CPU ranks the logits are
// the largest activation and each pass over them is memory-bound. The references stay plain and
// are what the kernels and the ATen path are tested against.
// The shard pack/combine is plain ATen on [rows, 2*tp + 1] tensors.
#include "megatron/kernels/aten/cross_entropy_ops.h"

#include <limits>
#include <optional>

#include "checks.h"
#include "megatron/core/check.h"
#if MEGATRON_CUDA_KERNELS
#include "megatron/kernels/cross_entropy.h"
#endif

namespace megatron::kernels {
namespace {

[[maybe_unused]] constexpr auto kernel_dtype = aten_detail::kernel_dtype;

struct Flat {
  at::Tensor logits;  // [rows, vocab_shard], last dim contiguous
  at::Tensor target;  // [rows] int64, contiguous
};

Flat flatten(const at::Tensor& logits, const at::Tensor& target) {
  MEGATRON_CHECK(logits.defined() && logits.dim() >= 1 && logits.size(-1) > 0,
                 "cross entropy: logits must be [..., vocab_shard] with vocab_shard > 0, got ",
                 logits.defined() ? logits.sizes() : at::IntArrayRef{});
  MEGATRON_CHECK(logits.is_floating_point(), "cross entropy: logits must be floating point, got ",
                 logits.scalar_type());
  MEGATRON_CHECK(target.defined() && target.sizes() == logits.sizes().slice(0, logits.dim() - 1),
                 "cross entropy: target ", target.sizes(), " must match the leading dims of logits ",
                 logits.sizes());
  MEGATRON_CHECK(!target.is_floating_point() && target.scalar_type() != at::kBool,
                 "cross entropy: target must hold integer token ids, got ", target.scalar_type());
  MEGATRON_CHECK(target.device() == logits.device(), "cross entropy: target on ", target.device(),
                 " but logits on ", logits.device());
  at::Tensor flat = logits.reshape({-1, logits.size(-1)});
  if (flat.stride(1) != 1) flat = flat.contiguous();
  return {flat, target.reshape({-1}).to(at::kLong).contiguous()};
}

bool use_kernel(const at::Tensor& logits) { return aten_detail::on_kernel_path(logits); }

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// x [rows, vocab_shard] fp32 -> the target's logit where this shard owns it (and it is not
// ignored), else 0.
at::Tensor target_logit(const Flat& f, const at::Tensor& x, int64_t vocab_start, int64_t ignore_index) {
  const int64_t vocab = x.size(1);
  const at::Tensor local = f.target - vocab_start;
  const at::Tensor owned = (f.target != ignore_index) & (local >= 0) & (local < vocab);
  const at::Tensor picked = x.gather(1, local.clamp(0, vocab - 1).unsqueeze(1)).squeeze(1);
  return at::where(owned, picked, at::zeros_like(picked));
}

// Per-shard stats of the whole vocabulary -> the loss (0 where ignored).
CrossEntropyResult loss_from(const CrossEntropyStats& s, const at::Tensor& target, int64_t ignore_index) {
  const at::Tensor loss = s.sum_exp.log() + s.max - s.target_logit;
  return {at::where(target == ignore_index, at::zeros_like(loss), loss), s.max, s.sum_exp};
}

// Two passes over the logits, each a vectorised ATen row kernel: the row max, then the fused
// log_softmax; log(sum_exp) = x_j - log_softmax_j - max at any column j (the clamped target's).
CrossEntropyStats aten_path_stats(const Flat& f, const at::Tensor& target_shape, int64_t vocab_start,
                                  int64_t ignore_index) {
  const at::Tensor x = f.logits.to(at::kFloat);
  const at::Tensor max = x.amax(1);
  const at::Tensor column = (f.target - vocab_start).clamp(0, x.size(1) - 1).unsqueeze(1);
  const at::Tensor log_probs = at::_log_softmax(x, 1, /*half_to_float=*/false);
  const at::Tensor log_sum = (x.gather(1, column) - log_probs.gather(1, column)).squeeze(1) - max;
  // A row of -inf logits has sum 0 (as in the kernel); its log_softmax is nan.
  const at::Tensor sum_exp = at::where(max == kNegInf, at::zeros_like(max), log_sum.exp());
  const auto shape = target_shape.sizes();
  return {max.view(shape), sum_exp.view(shape), target_logit(f, x, vocab_start, ignore_index).view(shape)};
}

// (softmax - onehot) * w with w = grad_loss where the target is not ignored. For w >= 0 (any
// mean or masked sum of the loss) the weight goes into the exponent, exp(x - (M + log S - log w)),
// w = 0 giving exp(-inf) = 0: one subtraction and one in-place exp over the logits. Other weights
// take one more pass to multiply.
at::Tensor aten_path_backward(const at::Tensor& grad_loss, const Flat& f, const at::Tensor& logits,
                              const at::Tensor& m, const at::Tensor& s, int64_t vocab_start, int64_t ignore_index) {
  const int64_t vocab = f.logits.size(1);
  const at::Tensor keep = (f.target != ignore_index).to(at::kFloat);
  const at::Tensor w = grad_loss.to(at::kFloat).expand(logits.sizes().slice(0, logits.dim() - 1)).reshape({-1}) * keep;
  const at::Tensor log_norm = m + s.log();
  const bool fold = w.numel() == 0 || w.min().item<float>() >= 0.0f;
  at::Tensor grad = at::sub(f.logits.to(at::kFloat), (fold ? log_norm - w.log() : log_norm).unsqueeze(1)).exp_();
  if (!fold) grad.mul_(w.unsqueeze(1));
  const at::Tensor local = f.target - vocab_start;
  const at::Tensor owned = ((local >= 0) & (local < vocab)).to(at::kFloat);
  grad.scatter_add_(1, local.clamp(0, vocab - 1).unsqueeze(1), (-owned * w).unsqueeze(1));
  return grad.to(logits.scalar_type()).view(logits.sizes());
}

[[maybe_unused]] at::Tensor per_row(const Flat& f) { return at::empty({f.target.size(0)}, f.target.options().dtype(at::kFloat)); }

at::Tensor checked_row_stat(const at::Tensor& t, const Flat& f, const char* name) {
  MEGATRON_CHECK(t.defined() && t.numel() == f.target.numel(), "cross entropy backward: ", name, " has ",
                 t.defined() ? t.numel() : 0, " elements, expected one per row (", f.target.numel(), ")");
  MEGATRON_CHECK(t.device() == f.logits.device(), "cross entropy backward: ", name, " on ", t.device(),
                 " but logits on ", f.logits.device());
  return t.reshape({-1}).to(at::kFloat).contiguous();
}

CrossEntropyStats launch_stats(const Flat& f, const at::Tensor& target_shape, int64_t vocab_start,
                               int64_t ignore_index, at::Tensor* loss) {
#if MEGATRON_CUDA_KERNELS
  const c10::cuda::CUDAGuard guard(f.logits.device());
  CrossEntropyStats s{per_row(f), per_row(f), per_row(f)};
  CrossEntropyFwdParams p;
  p.logits = f.logits.data_ptr();
  p.target = f.target.data_ptr<int64_t>();
  p.max = s.max.data_ptr<float>();
  p.sum_exp = s.sum_exp.data_ptr<float>();
  p.target_logit = s.target_logit.data_ptr<float>();
  if (loss != nullptr) {
    *loss = per_row(f);
    p.loss = loss->data_ptr<float>();
  }
  p.rows = f.logits.size(0);
  p.vocab = f.logits.size(1);
  p.logits_stride = f.logits.stride(0);
  p.vocab_start = vocab_start;
  p.ignore_index = ignore_index;
  p.dtype = *kernel_dtype(f.logits.scalar_type());
  launch_cross_entropy_fwd(p, at::cuda::getCurrentCUDAStream().stream());
  const auto shape = target_shape.sizes();
  if (loss != nullptr) *loss = loss->view(shape);
  return {s.max.view(shape), s.sum_exp.view(shape), s.target_logit.view(shape)};
#else
  MEGATRON_FAIL("internal error: no CUDA kernels in this build");
#endif
}

}  // namespace

CrossEntropyStats cross_entropy_shard_stats_reference(const at::Tensor& logits, const at::Tensor& target,
                                                      int64_t vocab_start, int64_t ignore_index) {
  const Flat f = flatten(logits, target);
  const int64_t vocab = f.logits.size(1);
  const at::Tensor x = f.logits.to(at::kFloat);
  const at::Tensor max = std::get<0>(x.max(1));
  // A row of -inf logits has max -inf and sum 0 (as in the kernel), not exp(-inf - -inf) = nan.
  const at::Tensor shift = at::where(max == kNegInf, at::zeros_like(max), max);
  const at::Tensor sum_exp = (x - shift.unsqueeze(1)).exp_().sum(1);  // one [rows, vocab] temporary
  const auto shape = target.sizes();
  return {max.view(shape), sum_exp.view(shape), target_logit(f, x, vocab_start, ignore_index).view(shape)};
}

CrossEntropyResult cross_entropy_forward_reference(const at::Tensor& logits, const at::Tensor& target,
                                                   int64_t ignore_index) {
  return loss_from(cross_entropy_shard_stats_reference(logits, target, 0, ignore_index), target, ignore_index);
}

at::Tensor cross_entropy_backward_reference(const at::Tensor& grad_loss, const at::Tensor& logits,
                                            const at::Tensor& target, const at::Tensor& max,
                                            const at::Tensor& sum_exp, int64_t vocab_start, int64_t ignore_index) {
  const Flat f = flatten(logits, target);
  const int64_t vocab = f.logits.size(1);
  const at::Tensor m = checked_row_stat(max, f, "max").unsqueeze(1);
  const at::Tensor s = checked_row_stat(sum_exp, f, "sum_exp").unsqueeze(1);
  const at::Tensor g = grad_loss.to(at::kFloat).expand(target.sizes()).reshape({-1, 1});
  const at::Tensor local = (f.target - vocab_start).unsqueeze(1);
  const at::Tensor owned = (local >= 0) & (local < vocab);
  const at::Tensor keep = (f.target != ignore_index).unsqueeze(1).to(at::kFloat);
  // (softmax - onehot(target)) * grad * keep, with one [rows, vocab] tensor updated in place (the
  // logits are the largest activation: each extra temporary is a full pass and a fresh allocation).
  at::Tensor grad = (f.logits.to(at::kFloat) - m).exp_();
  grad.div_(s);
  grad.scatter_add_(1, local.clamp(0, vocab - 1), -owned.to(at::kFloat));  // target owned by this shard: -1
  grad.mul_(g * keep);
  return grad.to(logits.scalar_type()).view(logits.sizes());
}

CrossEntropyStats cross_entropy_shard_stats(const at::Tensor& logits, const at::Tensor& target, int64_t vocab_start,
                                            int64_t ignore_index) {
  const Flat f = flatten(logits, target);
  if (!use_kernel(f.logits)) return aten_path_stats(f, target, vocab_start, ignore_index);
  return launch_stats(f, target, vocab_start, ignore_index, nullptr);
}

CrossEntropyResult cross_entropy_forward(const at::Tensor& logits, const at::Tensor& target, int64_t ignore_index) {
  const Flat f = flatten(logits, target);
  if (!use_kernel(f.logits)) return loss_from(aten_path_stats(f, target, 0, ignore_index), target, ignore_index);
  at::Tensor loss;
  const CrossEntropyStats s = launch_stats(f, target, 0, ignore_index, &loss);
  return {loss, s.max, s.sum_exp};
}

at::Tensor cross_entropy_pack_stats(const CrossEntropyStats& stats, int64_t tp_rank, int64_t tp_size) {
  MEGATRON_CHECK(tp_size >= 1 && tp_rank >= 0 && tp_rank < tp_size, "cross_entropy_pack_stats: tp_rank ", tp_rank,
                 " outside [0, tp_size=", tp_size, ")");
  const at::Tensor m = stats.max.reshape({-1}).to(at::kFloat);
  at::Tensor packed = at::zeros({m.size(0), 2 * tp_size + 1}, m.options());
  packed.select(1, 2 * tp_rank).copy_(m);
  packed.select(1, 2 * tp_rank + 1).copy_(stats.sum_exp.reshape({-1}));
  packed.select(1, 2 * tp_size).copy_(stats.target_logit.reshape({-1}));
  return packed;
}

CrossEntropyResult cross_entropy_combine_packed(const at::Tensor& packed, const at::Tensor& target, int64_t tp_size,
                                                int64_t ignore_index) {
  MEGATRON_CHECK(packed.dim() == 2 && packed.size(1) == 2 * tp_size + 1 && packed.size(0) == target.numel(),
                 "cross_entropy_combine_packed: packed must be [rows=", target.numel(), ", 2*tp_size+1=",
                 2 * tp_size + 1, "], got ", packed.sizes());
  const at::Tensor p = packed.to(at::kFloat);
  const at::Tensor pieces = p.narrow(1, 0, 2 * tp_size).view({-1, tp_size, 2});
  const at::Tensor maxes = pieces.select(2, 0);  // [rows, tp]
  const at::Tensor sums = pieces.select(2, 1);
  const at::Tensor max = std::get<0>(maxes.max(1));
  // A shard whose max is -inf contributes nothing (its sum is 0); avoid exp(-inf - -inf) = nan.
  const at::Tensor scale = at::where(maxes == kNegInf, at::zeros_like(maxes),
                                     (maxes - max.unsqueeze(1)).exp());
  const at::Tensor sum_exp = (sums * scale).sum(1);
  const at::Tensor loss = sum_exp.log() + max - p.select(1, 2 * tp_size);
  const at::Tensor ignored = target.reshape({-1}).to(p.device()) == ignore_index;
  const auto shape = target.sizes();
  return {at::where(ignored, at::zeros_like(loss), loss).view(shape), max.view(shape), sum_exp.view(shape)};
}

at::Tensor cross_entropy_backward(const at::Tensor& grad_loss, const at::Tensor& logits, const at::Tensor& target,
                                  const at::Tensor& max, const at::Tensor& sum_exp, int64_t vocab_start,
                                  int64_t ignore_index) {
  const Flat f = flatten(logits, target);
  if (!use_kernel(f.logits)) {
    return aten_path_backward(grad_loss, f, logits, checked_row_stat(max, f, "max"),
                              checked_row_stat(sum_exp, f, "sum_exp"), vocab_start, ignore_index);
  }
#if MEGATRON_CUDA_KERNELS
  MEGATRON_CHECK(grad_loss.defined() && grad_loss.device() == f.logits.device(),
                 "cross entropy backward: grad_loss must be on ", f.logits.device());
  const c10::cuda::CUDAGuard guard(f.logits.device());
  const at::Tensor m = checked_row_stat(max, f, "max");
  const at::Tensor s = checked_row_stat(sum_exp, f, "sum_exp");
  // A broadcast grad_loss (e.g. from a mean) stays a stride-0 view: no copy per row.
  const at::Tensor g = grad_loss.to(at::kFloat).expand(target.sizes()).reshape({-1});
  at::Tensor grad = at::empty({f.logits.size(0), f.logits.size(1)}, f.logits.options());
  CrossEntropyBwdParams p;
  p.logits = f.logits.data_ptr();
  p.target = f.target.data_ptr<int64_t>();
  p.max = m.data_ptr<float>();
  p.sum_exp = s.data_ptr<float>();
  p.grad_loss = g.data_ptr<float>();
  p.grad_loss_stride = g.stride(0);
  p.grad = grad.data_ptr();
  p.rows = f.logits.size(0);
  p.vocab = f.logits.size(1);
  p.logits_stride = f.logits.stride(0);
  p.vocab_start = vocab_start;
  p.ignore_index = ignore_index;
  p.dtype = *kernel_dtype(f.logits.scalar_type());
  launch_cross_entropy_bwd(p, at::cuda::getCurrentCUDAStream().stream());
  return grad.view(logits.sizes());
#else
  MEGATRON_FAIL("internal error: no CUDA kernels in this build");
#endif
}

}  // namespace megatron::kernels
