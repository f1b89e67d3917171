// Activation recomputation (see recompute.h) as an autograd function whose state (the function and
// the generator states) travels in a capsule of the autograd context.
#include "megatron/model/recompute.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <ATen/core/ivalue.h>

#include "megatron/core/check.h"

namespace megatron::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct RecomputeState : torch::CustomClassHolder {
  std::function<at::Tensor(const at::Tensor&)> fn;
  std::vector<at::Generator*> generators;
  std::vector<at::Tensor> forward_states;  // the generators' states when the forward ran
};

// Sets every generator to `states` for its lifetime, then back to what they held before.
class GeneratorStates {
 public:
  GeneratorStates(const std::vector<at::Generator*>& gens, const std::vector<at::Tensor>& states) : gens_(gens) {
    for (std::size_t i = 0; i < gens_.size(); ++i) {
      saved_.push_back(gens_[i]->get_state());
      gens_[i]->set_state(states[i]);
    }
  }
  ~GeneratorStates() {
    for (std::size_t i = 0; i < gens_.size(); ++i) gens_[i]->set_state(saved_[i]);
  }
  GeneratorStates(const GeneratorStates&) = delete;
  GeneratorStates& operator=(const GeneratorStates&) = delete;

 private:
  const std::vector<at::Generator*>& gens_;
  std::vector<at::Tensor> saved_;
};

struct RecomputeFunction : torch::autograd::Function<RecomputeFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, c10::intrusive_ptr<RecomputeState> state) {
    for (at::Generator* g : state->generators) state->forward_states.push_back(g->get_state());
    at::Tensor out = state->fn(input);  // grad mode is off inside an autograd function's forward
    ctx->save_for_backward({input});
    ctx->saved_data["state"] = at::IValue::make_capsule(std::move(state));
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor input = ctx->get_saved_variables()[0];
    auto state = c10::static_intrusive_pointer_cast<RecomputeState>(ctx->saved_data["state"].toCapsule());
    at::Tensor detached = input.detach();
    detached.requires_grad_(input.requires_grad());
    at::Tensor out;
    {
      const GeneratorStates replay(state->generators, state->forward_states);
      const at::AutoGradMode grad_mode(true);
      out = state->fn(detached);
    }
    MEGATRON_ASSERT(out.requires_grad(), "the recomputed function produced no differentiable output");
    torch::autograd::backward({out}, {grads[0]});
    return {input.requires_grad() ? detached.grad() : at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor recompute(const std::function<at::Tensor(const at::Tensor&)>& fn, const at::Tensor& input,
                     const std::vector<at::Generator*>& generators) {
  if (!at::GradMode::is_enabled()) return fn(input);
  // An input that needs no gradient (the tokens' embedding of a frozen table, say) is replaced by a
  // leaf that does, so that the output is differentiable and the backward reaches the parameters.
  const at::Tensor in = input.requires_grad() ? input : input.detach().requires_grad_(true);
  auto state = c10::make_intrusive<RecomputeState>();
  state->fn = fn;
  for (at::Generator* g : generators) {
    if (g != nullptr) state->generators.push_back(g);
  }
  return RecomputeFunction::apply(in, std::move(state));
}

}  // namespace megatron::model
