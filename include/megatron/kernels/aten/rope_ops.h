// ATen-facing rotary position embedding (spec 10.4), forward and backward: the CUDA kernel for
// fp32/bf16/fp16 CUDA tensors, the plain ATen reference (also the fallback and the CPU path)
// otherwise. Partial rotation (--rotary-percent) is a table narrower than hn.
#pragma once

#include <ATen/ATen.h>

namespace megatron::kernels {

// Megatron's angle table [s, rot_dim] (fp32, on `device`): inv_freq[i] = 1 / base^(2i/rot_dim),
// freqs = (pos / seq_len_interpolation_factor) x inv_freq, laid out [f, f] (half-split) or with
// each frequency duplicated adjacently (interleaved). rot_dim = int(hn * rotary_percent), even.
at::Tensor rope_freqs(int64_t s, int64_t rot_dim, double base, bool interleaved, const at::Device& device,
                      double seq_len_interpolation_factor = 1.0);

// t [s, b, heads, hn] (sequence-first; any strides with contiguous hn), freqs [>= s, rot_dim] or
// [>= s, 1, 1, rot_dim] angles -> contiguous [s, b, heads, hn] in t's dtype: the first rot_dim
// channels rotated (t*cos + rotate_half(t)*sin), the rest copied. Math in fp32.
at::Tensor rope_forward(const at::Tensor& t, const at::Tensor& freqs, bool interleaved);

// The gradient of rope_forward: dt = dy*cos - rotate_half(dy*sin) (rotation by -angle); the
// channels past rot_dim pass dy through.
at::Tensor rope_backward(const at::Tensor& dy, const at::Tensor& freqs, bool interleaved);

// Plain ATen references (fp32 math, input dtype out; any device).
at::Tensor rope_forward_reference(const at::Tensor& t, const at::Tensor& freqs, bool interleaved);
at::Tensor rope_backward_reference(const at::Tensor& dy, const at::Tensor& freqs, bool interleaved);

}  // namespace megatron::kernels
