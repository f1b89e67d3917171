// A tiny two-layer model of plain ATen parameters of uneven sizes (weights, biases, a 1-D norm
// weight) for the data-parallel and optimizer tests. Its values and inputs are multiples of 1/8
// and its loss is linear in every parameter, so each gradient is a short sum of dyadic products:
// exact in fp32 whatever the summation order (reductions over 2 or 4 ranks included).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "megatron/parallel/data_parallel.h"
#include "megatron/parallel/parallel_state.h"

namespace megatron::testing {

struct TinyModel {
  static constexpr std::int64_t kIn = 7, kHidden = 13, kOut = 5, kRows = 3;

  parallel::NamedTensors params;  // fc1.weight [13, 7], fc1.bias, norm.weight [13], fc2.weight [5, 13], fc2.bias
  std::vector<parallel::TensorParallelLayout> layouts;

  // Values k/8 with k in [-8, 8], from `seed`; every layout replicated (partition_dim -1).
  static TinyModel make(std::uint64_t seed) {
    TinyModel m;
    const std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes = {
        {"layers.0.fc1.weight", {kHidden, kIn}},
        {"layers.0.fc1.bias", {kHidden}},
        {"layers.0.norm.weight", {kHidden}},
        {"layers.0.fc2.weight", {kOut, kHidden}},
        {"layers.0.fc2.bias", {kOut}}};
    std::uint64_t s = seed;
    for (const auto& [name, shape] : shapes) {
      m.params.emplace_back(name, dyadic(shape, s++).requires_grad_(true));
      m.layouts.emplace_back();
    }
    return m;
  }

  // An independent copy with fresh leaves (the dense reference).
  TinyModel clone() const {
    TinyModel m;
    for (const auto& [name, p] : params) m.params.emplace_back(name, p.detach().clone().requires_grad_(true));
    m.layouts = layouts;
    return m;
  }

  // loss = sum(y * t) with y = ((x W1^T + b1) * norm) W2^T + b2; x [3, 7], t [3, 5].
  at::Tensor loss(const at::Tensor& x, const at::Tensor& t) const {
    const at::Tensor h = (at::linear(x, params[0].second, params[1].second)) * params[2].second;
    return (at::linear(h, params[3].second, params[4].second) * t).sum();
  }

  // The input and target of micro-batch `index` (rank-dependent data: pass a rank-derived index).
  static std::pair<at::Tensor, at::Tensor> batch(std::uint64_t index) {
    return {dyadic({kRows, kIn}, 1000 + 2 * index), dyadic({kRows, kOut}, 1001 + 2 * index)};
  }

  static at::Tensor dyadic(const std::vector<std::int64_t>& shape, std::uint64_t seed) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    return at::randint(-8, 9, shape, gen, at::kFloat) / 8.0;
  }
};

// The TP x DP layout of `world` with TP size `tp` (PP = CP = 1), made once per size (collectively)
// and kept for the process.
inline const parallel::ParallelContext& tp_dp_context(parallel::Communicator& world, int tp) {
  struct Layout {
    std::unique_ptr<parallel::ParallelState> state;
    parallel::ParallelContext pc;
  };
  static std::map<int, Layout> layouts;
  Layout& layout = layouts[tp];
  if (!layout.state) {
    layout.state = std::make_unique<parallel::ParallelState>(
        parallel::ParallelConfig{world.world_size(), tp, 1, 1, false}, world.rank());
    layout.pc = parallel::ParallelContext::create(*layout.state, world);
  }
  return layout.pc;
}

// The flat buffer holding each tensor of `tensors` at its parameter's place in `layout` (zeros in
// the padding): a dense gradient arranged as the grad buffer is.
inline at::Tensor as_flat_buffer(const std::vector<at::Tensor>& tensors, const parallel::BufferLayout& layout) {
  at::Tensor flat = at::zeros({layout.numel});
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    flat.narrow(0, layout.params[i].begin, layout.params[i].numel()).copy_(tensors[i].flatten());
  }
  return flat;
}

}  // namespace megatron::testing
