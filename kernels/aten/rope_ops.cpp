// ATen entries and references for rotary position embedding (rope_ops.h): validate, allocate,
// take the current stream, launch the kernel in rope.cu; CPU tensors and other dtypes go through
// the ATen reference.
#include "megatron/kernels/aten/rope_ops.h"

#include <optional>

#include "checks.h"
#include "megatron/core/check.h"
#if MEGATRON_CUDA_KERNELS
#include "megatron/kernels/rope.h"
#endif

namespace megatron::kernels {
namespace {

[[maybe_unused]] constexpr auto kernel_dtype = aten_detail::kernel_dtype;

// Validates t and freqs; returns freqs as fp32 [rows, rot_dim].
at::Tensor checked_table(const at::Tensor& t, const at::Tensor& freqs, const char* name) {
  MEGATRON_CHECK(t.defined() && t.dim() == 4, "rope: ", name, " must be [s, b, heads, hn], got ", t.sizes());
  MEGATRON_CHECK(t.is_floating_point(), "rope: ", name, " must be floating point, got ", t.scalar_type());
  MEGATRON_CHECK(freqs.defined() && (freqs.dim() == 2 || (freqs.dim() == 4 && freqs.size(1) == 1 && freqs.size(2) == 1)),
                 "rope: freqs must be [s, rot_dim] or [s, 1, 1, rot_dim], got ", freqs.sizes());
  MEGATRON_CHECK(freqs.device() == t.device(), "rope: freqs on ", freqs.device(), " but ", name, " on ", t.device());
  const at::Tensor table = freqs.reshape({freqs.size(0), freqs.size(-1)}).to(at::kFloat);
  const int64_t rot_dim = table.size(1);
  MEGATRON_CHECK(table.size(0) >= t.size(0), "rope: freqs has ", table.size(0), " positions but ", name, " has s=",
                 t.size(0));
  MEGATRON_CHECK(rot_dim > 0 && rot_dim % 2 == 0 && rot_dim <= t.size(3), "rope: rot_dim (freqs last dim) ",
                 rot_dim, " must be even and in (0, hn=", t.size(3), "]");
  return table.narrow(0, 0, t.size(0));
}

// rotate_half on the last dim of x: [x1, x2] -> [-x2, x1], or (a, b) -> (-b, a) per pair.
at::Tensor rotate_half(const at::Tensor& x, bool interleaved) {
  if (interleaved) {
    const at::Tensor x1 = x.slice(-1, 0, x.size(-1), 2);
    const at::Tensor x2 = x.slice(-1, 1, x.size(-1), 2);
    return at::stack({-x2, x1}, -1).flatten(-2);
  }
  const auto halves = x.chunk(2, -1);
  return at::cat({-halves[1], halves[0]}, -1);
}

// forward: rot*cos + rotate_half(rot)*sin; backward: rot*cos - rotate_half(rot*sin).
at::Tensor reference(const at::Tensor& t, const at::Tensor& freqs, bool interleaved, bool backward) {
  const at::Tensor table = checked_table(t, freqs, backward ? "dy" : "t");
  const int64_t s = t.size(0), rot_dim = table.size(1);
  const at::Tensor cos = table.cos().view({s, 1, 1, rot_dim});
  const at::Tensor sin = table.sin().view({s, 1, 1, rot_dim});
  const at::Tensor rot = t.narrow(-1, 0, rot_dim).to(at::kFloat);
  const at::Tensor out = backward ? rot * cos - rotate_half(rot * sin, interleaved)
                                  : rot * cos + rotate_half(rot, interleaved) * sin;
  const at::Tensor pass = t.narrow(-1, rot_dim, t.size(-1) - rot_dim).to(at::kFloat);
  return at::cat({out, pass}, -1).to(t.scalar_type());
}

at::Tensor launch(const at::Tensor& t, const at::Tensor& freqs, bool interleaved, bool backward) {
  const at::Tensor table = checked_table(t, freqs, backward ? "dy" : "t");
  if (!aten_detail::on_kernel_path(t)) return reference(t, freqs, interleaved, backward);
#if MEGATRON_CUDA_KERNELS
  const auto dtype = kernel_dtype(t.scalar_type());
  const c10::cuda::CUDAGuard guard(t.device());
  const at::Tensor in = t.stride(3) == 1 ? t : t.contiguous();
  const at::Tensor tab = table.stride(1) == 1 ? table : table.contiguous();
  at::Tensor out = at::empty(t.sizes(), t.options().memory_format(at::MemoryFormat::Contiguous));
  RopeParams p;
  p.in = in.data_ptr();
  p.out = out.data_ptr();
  p.freqs = tab.data_ptr<float>();
  p.s = in.size(0);
  p.b = in.size(1);
  p.heads = in.size(2);
  p.hn = in.size(3);
  p.rot_dim = tab.size(1);
  p.in_stride_s = in.stride(0);
  p.in_stride_b = in.stride(1);
  p.in_stride_h = in.stride(2);
  p.freqs_stride = tab.stride(0);
  p.interleaved = interleaved;
  p.backward = backward;
  p.dtype = *dtype;
  launch_rope(p, at::cuda::getCurrentCUDAStream().stream());
  return out;
#else
  MEGATRON_FAIL("internal error: no CUDA kernels in this build");
#endif
}

}  // namespace

at::Tensor rope_freqs(int64_t s, int64_t rot_dim, double base, bool interleaved, const at::Device& device,
                      double seq_len_interpolation_factor) {
  MEGATRON_CHECK(s > 0 && rot_dim > 0 && rot_dim % 2 == 0, "rope_freqs: need s > 0 and an even rot_dim > 0, got s=",
                 s, " rot_dim=", rot_dim);
  MEGATRON_CHECK(seq_len_interpolation_factor > 0, "rope_freqs: seq_len_interpolation_factor must be positive");
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  const at::Tensor inv_freq = 1.0 / at::pow(base, at::arange(0, rot_dim, 2, opts) / static_cast<double>(rot_dim));
  at::Tensor pos = at::arange(s, opts);
  if (seq_len_interpolation_factor != 1.0) pos = pos / seq_len_interpolation_factor;
  const at::Tensor f = at::outer(pos, inv_freq);  // [s, rot_dim / 2]
  return interleaved ? at::stack({f, f}, -1).reshape({s, rot_dim}) : at::cat({f, f}, -1);
}

at::Tensor rope_forward(const at::Tensor& t, const at::Tensor& freqs, bool interleaved) {
  return launch(t, freqs, interleaved, /*backward=*/false);
}

at::Tensor rope_backward(const at::Tensor& dy, const at::Tensor& freqs, bool interleaved) {
  return launch(dy, freqs, interleaved, /*backward=*/true);
}

at::Tensor rope_forward_reference(const at::Tensor& t, const at::Tensor& freqs, bool interleaved) {
  return reference(t, freqs, interleaved, /*backward=*/false);
}

at::Tensor rope_backward_reference(const at::Tensor& dy, const at::Tensor& freqs, bool interleaved) {
  return reference(dy, freqs, interleaved, /*backward=*/true);
}

}  // namespace megatron::kernels
