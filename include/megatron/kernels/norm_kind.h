// Which normalisation a norm kernel or its ATen entry computes; shared by the CUDA launcher
// (norms.h) and the ATen-facing entry (aten/norm_ops.cpp). No CUDA headers here, so the entry
// builds without the CUDA toolkit.
#pragma once

namespace megatron::kernels {

enum class NormKind { kLayerNorm, kRmsNorm };

}  // namespace megatron::kernels
