// ATen entries and references for the scaled causal masked softmax (softmax_ops.h): validate,
// allocate, take the current stream, launch the kernel in causal_softmax.cu; CPU tensors and
// other dtypes go through ATen: fp32 through its fused row softmax and softmax backward (three
// passes forward and two backward over the scores instead of four and five), the rest through
// the reference.
#include "megatron/kernels/aten/softmax_ops.h"

#include <limits>
#include <optional>

#include "checks.h"
#include "megatron/core/check.h"
#if MEGATRON_CUDA_KERNELS
#include "megatron/kernels/causal_softmax.h"
#endif

namespace megatron::kernels {
namespace {

[[maybe_unused]] constexpr auto kernel_dtype = aten_detail::kernel_dtype;

void check_scores(const at::Tensor& t, const char* name) {
  MEGATRON_CHECK(t.defined() && t.dim() == 3, "causal softmax: ", name,
                 " must be [batch*heads, sq, sk], got ", t.sizes());
  MEGATRON_CHECK(t.size(1) == t.size(2), "causal softmax: ", name, " needs sq == sk (upper-triangular mask), got ",
                 t.sizes());
  MEGATRON_CHECK(t.is_floating_point(), "causal softmax: ", name, " must be floating point, got ", t.scalar_type());
}

at::Tensor causal_mask(int64_t s, const at::Device& device) {
  return at::ones({s, s}, at::TensorOptions().dtype(at::kBool).device(device)).triu(1);
}

}  // namespace

at::Tensor causal_softmax_forward_reference(const at::Tensor& x, double scale) {
  check_scores(x, "x");
  const at::Tensor scores = (x.to(at::kFloat) * scale).masked_fill(causal_mask(x.size(1), x.device()),
                                                                   -std::numeric_limits<float>::infinity());
  return at::softmax(scores, -1).to(x.scalar_type());
}

at::Tensor causal_softmax_backward_reference(const at::Tensor& dy, const at::Tensor& y, double scale) {
  check_scores(dy, "dy");
  MEGATRON_CHECK(y.sizes() == dy.sizes(), "causal softmax backward: y ", y.sizes(), " and dy ", dy.sizes(),
                 " differ in shape");
  const at::Tensor y32 = y.to(at::kFloat);
  const at::Tensor dy32 = dy.to(at::kFloat);
  const at::Tensor dot = (dy32 * y32).sum(-1, /*keepdim=*/true);
  return (scale * y32 * (dy32 - dot)).to(dy.scalar_type());
}

at::Tensor causal_softmax_forward(const at::Tensor& x, double scale) {
  check_scores(x, "x");
  if (!aten_detail::on_kernel_path(x)) {
    if (x.scalar_type() != at::kFloat) return causal_softmax_forward_reference(x, scale);
    const at::Tensor scores = at::mul(x, scale).masked_fill_(causal_mask(x.size(1), x.device()),
                                                             -std::numeric_limits<float>::infinity());
    return at::_softmax(scores, -1, /*half_to_float=*/false);
  }
#if MEGATRON_CUDA_KERNELS
  const auto dtype = kernel_dtype(x.scalar_type());
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  CausalSoftmaxFwdParams p;
  p.x = xc.data_ptr();
  p.y = y.data_ptr();
  p.batch_heads = xc.size(0);
  p.sq = xc.size(1);
  p.sk = xc.size(2);
  p.scale = static_cast<float>(scale);
  p.dtype = *dtype;
  launch_causal_softmax_fwd(p, at::cuda::getCurrentCUDAStream().stream());
  return y;
#else
  MEGATRON_FAIL("internal error: no CUDA kernels in this build");
#endif
}

at::Tensor causal_softmax_backward(const at::Tensor& dy, const at::Tensor& y, double scale) {
  check_scores(dy, "dy");
  MEGATRON_CHECK(y.sizes() == dy.sizes(), "causal softmax backward: y ", y.sizes(), " and dy ", dy.sizes(),
                 " differ in shape");
  MEGATRON_CHECK(y.scalar_type() == dy.scalar_type(), "causal softmax backward: y is ", y.scalar_type(),
                 " but dy is ", dy.scalar_type());
  MEGATRON_CHECK(y.device() == dy.device(), "causal softmax backward: y on ", y.device(), " but dy on ",
                 dy.device());
  if (!aten_detail::on_kernel_path(dy)) {
    if (dy.scalar_type() != at::kFloat) return causal_softmax_backward_reference(dy, y, scale);
    return at::_softmax_backward_data(dy, y, -1, at::kFloat).mul_(scale);
  }
#if MEGATRON_CUDA_KERNELS
  const auto dtype = kernel_dtype(dy.scalar_type());
  const c10::cuda::CUDAGuard guard(dy.device());
  const at::Tensor dyc = dy.contiguous();
  const at::Tensor yc = y.contiguous();
  at::Tensor dx = at::empty_like(dyc);
  CausalSoftmaxBwdParams p;
  p.dy = dyc.data_ptr();
  p.y = yc.data_ptr();
  p.dx = dx.data_ptr();
  p.batch_heads = dyc.size(0);
  p.sq = dyc.size(1);
  p.sk = dyc.size(2);
  p.scale = static_cast<float>(scale);
  p.dtype = *dtype;
  launch_causal_softmax_bwd(p, at::cuda::getCurrentCUDAStream().stream());
  return dx;
#else
  MEGATRON_FAIL("internal error: no CUDA kernels in this build");
#endif
}

}  // namespace megatron::kernels
