// Which parameters get weight decay (see adamw.h).
#include "megatron/optim/adamw.h"

namespace megatron::optim {

bool decays_weight(const std::string& name, const at::Tensor& t) {
  const bool bias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
  return t.dim() > 1 && !bias;
}

}  // namespace megatron::optim
