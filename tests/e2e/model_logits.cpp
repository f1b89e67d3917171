// Test helper: the logits our model gives for token ids, from a checkpoint of any layout (loaded
// as convert_checkpoint loads it), written as a safetensors file for the Python side to compare
// with transformers. Usage: model_logits CHECKPOINT_DIR OUT.safetensors ID [ID ...]
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "megatron/checkpoint/safetensors.h"
#include "megatron/core/tool_main.h"
#include "megatron/interop/loaded_model.h"

int main(int argc, char** argv) {
  return megatron::run_tool("model_logits", [&] {
    if (argc < 4) {
      std::fprintf(stderr, "usage: model_logits CHECKPOINT_DIR OUT.safetensors ID [ID ...]\n");
      return 2;
    }
    std::vector<std::int64_t> ids;
    for (int i = 3; i < argc; ++i) ids.push_back(std::atoll(argv[i]));
    const megatron::interop::LoadedModel loaded = megatron::interop::load_model(argv[1]);
    const auto n = static_cast<std::int64_t>(ids.size());
    const at::Tensor tokens = at::tensor(ids, at::kLong).view({1, n});
    const at::Tensor positions = at::arange(n, at::kLong).view({1, n});
    at::NoGradGuard no_grad;
    const at::Tensor logits = loaded.model->forward(tokens, positions, at::Tensor(), at::Tensor(),
                                                    megatron::model::ForwardContext{false});
    megatron::checkpoint::write_safetensors(argv[2], {{"logits", logits.contiguous()}});
    return 0;
  });
}
