// Objects an autograd function needs beside its tensors (the parallel context, a process group, the
// communicator) travel through Function::apply and its context's saved_data as their address, an
// int64, the one non-tensor form both accept (private to src/parallel). The object must outlive
// the backward pass; the trainer's context and communicator do.
#pragma once

#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

namespace megatron::parallel::detail {

template <typename T>
std::int64_t address_of(T& object) {
  return static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(&object));
}

template <typename T>
T& object_at(std::int64_t address) {
  return *reinterpret_cast<T*>(static_cast<std::intptr_t>(address));
}

template <typename T>
void save_object(torch::autograd::AutogradContext* ctx, const char* key, T& object) {
  ctx->saved_data[key] = address_of(object);
}

template <typename T>
T& saved_object(torch::autograd::AutogradContext* ctx, const char* key) {
  return object_at<T>(ctx->saved_data[key].toInt());
}

}  // namespace megatron::parallel::detail
