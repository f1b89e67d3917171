// Activation recomputation (Megatron's tensor_parallel.checkpoint, reentrant form): a function of
// one tensor runs without keeping its intermediate activations; its input is kept, and the
// backward runs it again with autograd on, restoring the random-number streams of the forward so
// that every dropout mask is the same, then back-propagates through the recomputed graph (which
// accumulates the parameters' gradients as usual and fires their hooks).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

namespace megatron::model {

// fn(input) computed under recomputation. `generators` are the streams fn draws from (null entries
// ignored); their states at the call are restored for the recomputation and put back after it.
// Without grad mode, or when neither input nor any parameter needs a gradient, fn just runs.
at::Tensor recompute(const std::function<at::Tensor(const at::Tensor&)>& fn, const at::Tensor& input,
                     const std::vector<at::Generator*>& generators);

}  // namespace megatron::model
