// Rotary position embedding (spec 10.4) on raw device pointers, forward and backward, the CUDA
// half of TE's fused_apply_rotary_pos_emb. Sequence-first t [s, b, heads, hn] (any strides over
// s, b and heads, contiguous hn); an fp32 angle table freqs [>= s, rot_dim] in Megatron's layout
// ([f, f] half-split or each frequency twice adjacently when interleaved). The first rot_dim
// channels are rotated, the rest copied. The ATen-facing entries are in aten/rope_ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "megatron/kernels/dtype.h"

namespace megatron::kernels {

// Forward: out = t * cos(f) + rotate_half(t) * sin(f) on the first rot_dim channels, with
// rotate_half([x1, x2]) = [-x2, x1] (halves) or (a, b) -> (-b, a) per interleaved pair.
// Backward (the transpose, i.e. rotation by -angle): dt = dy * cos(f) - rotate_half(dy * sin(f)).
struct RopeParams {
  const void* in = nullptr;   // t (forward) or dy (backward), [s, b, heads, hn] with the strides below
  void* out = nullptr;        // contiguous [s, b, heads, hn]; must not overlap `in`
  const float* freqs = nullptr;  // [>= s, rot_dim] angles in radians, row stride freqs_stride
  int64_t s = 0;
  int64_t b = 0;
  int64_t heads = 0;
  int64_t hn = 0;
  int64_t rot_dim = 0;  // even, 0 < rot_dim <= hn
  int64_t in_stride_s = 0;  // element strides of `in`
  int64_t in_stride_b = 0;
  int64_t in_stride_h = 0;
  int64_t freqs_stride = 0;
  bool interleaved = false;
  bool backward = false;
  DType dtype = DType::kFloat32;
};

// Launch on `stream`. Throws megatron::Error on invalid parameters or a launch failure.
void launch_rope(const RopeParams& params, cudaStream_t stream);

}  // namespace megatron::kernels
