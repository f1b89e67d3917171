// ATen entry of the multi-tensor AdamW and its plain ATen reference (see adamw_ops.h). The entry
// validates the lists, takes the current stream and hands raw pointers to the launcher.
#include "megatron/kernels/aten/adamw_ops.h"

#include <ATen/core/grad_mode.h>

#include <cmath>
#include <string>

#include "checks.h"
#include "megatron/core/check.h"
#if MEGATRON_CUDA_KERNELS
#include "megatron/kernels/multi_tensor_adamw.h"
#endif

namespace megatron::kernels::aten {
namespace {

[[maybe_unused]] DType kernel_dtype(at::ScalarType t, const char* what) {
  return aten_detail::require_kernel_dtype("multi_tensor_adamw_", what, t);
}

// t: entry i of `list`; param: params[i] (the size to match); first: params[0] (the device to match).
void check_tensor(const at::Tensor& t, const char* list, std::size_t i, const at::Tensor& param, const at::Tensor& first,
                  bool on_cuda) {
  MEGATRON_CHECK(t.defined(), "multi_tensor_adamw_: ", list, "[", i, "] is undefined");
  MEGATRON_CHECK(!on_cuda || (t.is_cuda() && t.device() == first.device()), "multi_tensor_adamw_: ", list, "[", i,
                 "] is on ", t.device(), "; expected ", first.device(), " (the device of params[0])");
  MEGATRON_CHECK(on_cuda || t.device() == param.device(), "multi_tensor_adamw_: ", list, "[", i, "] is on ",
                 t.device(), "; params[", i, "] is on ", param.device());
  MEGATRON_CHECK(t.is_contiguous(), "multi_tensor_adamw_: ", list, "[", i, "] is not contiguous; pass .contiguous() storage");
  MEGATRON_CHECK(t.numel() == param.numel(), "multi_tensor_adamw_: ", list, "[", i, "] has ", t.numel(),
                 " elements; params[", i, "] has ", param.numel());
}

// Checks the lists' lengths, devices, dtypes, sizes and contiguity (devices only when on_cuda).
void validate(const AdamWLists& l, bool on_cuda) {
  const std::size_t n = l.params.size();
  MEGATRON_CHECK(l.grads.size() == n && l.exp_avgs.size() == n && l.exp_avg_sqs.size() == n,
                 "multi_tensor_adamw_: list lengths differ: params ", n, ", grads ", l.grads.size(), ", exp_avgs ",
                 l.exp_avgs.size(), ", exp_avg_sqs ", l.exp_avg_sqs.size());
  MEGATRON_CHECK(l.param_copies.empty() || l.param_copies.size() == n, "multi_tensor_adamw_: param_copies has ",
                 l.param_copies.size(), " entries; expected 0 or ", n);
  MEGATRON_CHECK(l.decays.empty() || l.decays.size() == n, "multi_tensor_adamw_: decays has ", l.decays.size(),
                 " entries; expected 0 or ", n);
  if (n == 0) return;
  MEGATRON_CHECK(l.params[0].defined(), "multi_tensor_adamw_: params[0] is undefined");
  MEGATRON_CHECK(!on_cuda || l.params[0].is_cuda(), "multi_tensor_adamw_: params[0] is on ", l.params[0].device(),
                 "; the fused AdamW needs CUDA tensors (use multi_tensor_adamw_reference_ on CPU)");
  const at::ScalarType grad_type = l.grads[0].defined() ? l.grads[0].scalar_type() : at::kFloat;
  at::ScalarType copy_type = at::kBFloat16;
  bool copy_type_seen = false;
  for (std::size_t i = 0; i < n; ++i) {
    const at::Tensor& p = l.params[i];
    MEGATRON_CHECK(p.defined(), "multi_tensor_adamw_: params[", i, "] is undefined");
    check_tensor(p, "params", i, p, l.params[0], on_cuda);
    check_tensor(l.grads[i], "grads", i, p, l.params[0], on_cuda);
    check_tensor(l.exp_avgs[i], "exp_avgs", i, p, l.params[0], on_cuda);
    check_tensor(l.exp_avg_sqs[i], "exp_avg_sqs", i, p, l.params[0], on_cuda);
    MEGATRON_CHECK(p.scalar_type() == at::kFloat && l.exp_avgs[i].scalar_type() == at::kFloat &&
                       l.exp_avg_sqs[i].scalar_type() == at::kFloat,
                   "multi_tensor_adamw_: params[", i, "], exp_avgs[", i, "] and exp_avg_sqs[", i,
                   "] must be float32; got ", p.scalar_type(), ", ", l.exp_avgs[i].scalar_type(), ", ",
                   l.exp_avg_sqs[i].scalar_type());
    MEGATRON_CHECK(l.grads[i].scalar_type() == grad_type, "multi_tensor_adamw_: grads[", i, "] has dtype ",
                   l.grads[i].scalar_type(), "; grads[0] has ", grad_type, " (one grad dtype per list)");
    kernel_dtype(grad_type, "grads[0]");
    if (!l.param_copies.empty() && l.param_copies[i].defined()) {
      const at::Tensor& c = l.param_copies[i];
      check_tensor(c, "param_copies", i, p, l.params[0], on_cuda);
      MEGATRON_CHECK(c.scalar_type() == at::kBFloat16 || c.scalar_type() == at::kHalf, "multi_tensor_adamw_: param_copies[",
                     i, "] has dtype ", c.scalar_type(), "; expected bfloat16 or float16");
      MEGATRON_CHECK(!copy_type_seen || c.scalar_type() == copy_type, "multi_tensor_adamw_: param_copies[", i,
                     "] has dtype ", c.scalar_type(), "; an earlier copy has ", copy_type, " (one copy dtype per list)");
      copy_type = c.scalar_type();
      copy_type_seen = true;
    }
  }
}

void check_found_inf(const at::Tensor& found_inf, const at::Tensor& param0, bool on_cuda) {
  MEGATRON_CHECK(found_inf.scalar_type() == at::kInt && found_inf.numel() == 1,
                 "multi_tensor_adamw_: found_inf must be an int32 tensor of one element; got ", found_inf.scalar_type(),
                 " with ", found_inf.numel(), " elements");
  MEGATRON_CHECK(!on_cuda || found_inf.device() == param0.device(), "multi_tensor_adamw_: found_inf is on ",
                 found_inf.device(), "; expected ", param0.device());
}

}  // namespace

void multi_tensor_all_finite_(const std::vector<at::Tensor>& grads, double grad_scale, const at::Tensor& found_inf) {
#if MEGATRON_CUDA_KERNELS
  if (grads.empty()) return;
  MEGATRON_CHECK(found_inf.defined(), "multi_tensor_all_finite_: found_inf is undefined");
  MEGATRON_CHECK(grads[0].defined() && grads[0].is_cuda(), "multi_tensor_all_finite_: grads[0] must be a CUDA tensor");
  check_found_inf(found_inf, grads[0], true);
  std::vector<const void*> ptrs;
  std::vector<std::int64_t> numels;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const at::Tensor& g = grads[i];
    MEGATRON_CHECK(g.defined() && g.device() == grads[0].device(), "multi_tensor_all_finite_: grads[", i,
                   "] is undefined or not on ", grads[0].device());
    MEGATRON_CHECK(g.is_contiguous(), "multi_tensor_all_finite_: grads[", i, "] is not contiguous");
    MEGATRON_CHECK(g.scalar_type() == grads[0].scalar_type(), "multi_tensor_all_finite_: grads[", i, "] has dtype ",
                   g.scalar_type(), "; grads[0] has ", grads[0].scalar_type());
    ptrs.push_back(g.data_ptr());
    numels.push_back(g.numel());
  }
  const c10::cuda::CUDAGuard guard(grads[0].device());
  multi_tensor_all_finite(ptrs, numels, kernel_dtype(grads[0].scalar_type(), "grads[0]"), grad_scale,
                          found_inf.data_ptr<int>(), at::cuda::getCurrentCUDAStream());
#else
  MEGATRON_FAIL("multi_tensor_adamw_: this build has no CUDA kernels; use adamw_step_");
#endif
}

void multi_tensor_adamw_(const AdamWLists& lists, const AdamWHyperparams& hyper, const at::Tensor& found_inf) {
#if MEGATRON_CUDA_KERNELS
  validate(lists, /*on_cuda=*/true);
  if (lists.params.empty()) return;
  if (found_inf.defined()) check_found_inf(found_inf, lists.params[0], true);
  const c10::cuda::CUDAGuard guard(lists.params[0].device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();

  std::vector<AdamWTensorArgs> tensors;
  DType copy_dtype = DType::kBFloat16;
  for (std::size_t i = 0; i < lists.params.size(); ++i) {
    AdamWTensorArgs t;
    t.param = lists.params[i].data_ptr<float>();
    t.grad = lists.grads[i].data_ptr();
    t.exp_avg = lists.exp_avgs[i].data_ptr<float>();
    t.exp_avg_sq = lists.exp_avg_sqs[i].data_ptr<float>();
    if (!lists.param_copies.empty() && lists.param_copies[i].defined()) {
      t.param_copy = lists.param_copies[i].data_ptr();
      copy_dtype = kernel_dtype(lists.param_copies[i].scalar_type(), "param_copies");
    }
    t.numel = lists.params[i].numel();
    t.decay = lists.decays.empty() || lists.decays[i];
    tensors.push_back(t);
  }
  const DType grad_dtype = kernel_dtype(lists.grads[0].scalar_type(), "grads[0]");
  if (found_inf.defined()) {
    multi_tensor_all_finite_(lists.grads, hyper.grad_scale, found_inf);
    multi_tensor_adamw(tensors, grad_dtype, copy_dtype, hyper, found_inf.data_ptr<int>(), InfCheck::kSkipIfSet, stream);
  } else {
    multi_tensor_adamw(tensors, grad_dtype, copy_dtype, hyper, nullptr, InfCheck::kNone, stream);
  }
#else
  MEGATRON_FAIL("multi_tensor_adamw_: this build has no CUDA kernels; use adamw_step_");
#endif
}

void multi_tensor_adamw_reference_(const AdamWLists& lists, const AdamWHyperparams& hyper, const at::Tensor& found_inf) {
  validate(lists, /*on_cuda=*/false);
  if (lists.params.empty()) return;
  const at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;  // scaled, fp32
  for (const at::Tensor& g : lists.grads) {
    grads.push_back(hyper.grad_scale == 1.0 ? g.to(at::kFloat) : g.to(at::kFloat).mul(hyper.grad_scale));
  }
  if (found_inf.defined()) {
    check_found_inf(found_inf, lists.params[0], false);
    for (const at::Tensor& g : grads) {
      if (!g.isfinite().all().item<bool>()) found_inf.fill_(1);
    }
    if (found_inf.item<int>() != 0) return;
  }
  const double bias_correction1 = 1.0 - std::pow(hyper.beta1, static_cast<double>(hyper.step));
  const double bias_correction2 = 1.0 - std::pow(hyper.beta2, static_cast<double>(hyper.step));
  const double step_size = hyper.lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  for (std::size_t i = 0; i < lists.params.size(); ++i) {
    const at::Tensor& p = lists.params[i];
    const bool decay = lists.decays.empty() || lists.decays[i];
    if (decay && hyper.weight_decay != 0.0) p.mul_(1.0 - hyper.lr * hyper.weight_decay);
    lists.exp_avgs[i].lerp_(grads[i], 1.0 - hyper.beta1);
    lists.exp_avg_sqs[i].mul_(hyper.beta2).addcmul_(grads[i], grads[i], 1.0 - hyper.beta2);
    const at::Tensor denom = (lists.exp_avg_sqs[i].sqrt() / bias_correction2_sqrt).add_(hyper.eps);
    p.addcdiv_(lists.exp_avgs[i], denom, -step_size);
    if (!lists.param_copies.empty() && lists.param_copies[i].defined()) lists.param_copies[i].copy_(p);
  }
}

void adamw_step_(const AdamWLists& lists, const AdamWHyperparams& hyper, const at::Tensor& found_inf) {
  if (!lists.params.empty() && aten_detail::on_kernel_path(lists.params[0])) {
    multi_tensor_adamw_(lists, hyper, found_inf);
  } else {
    multi_tensor_adamw_reference_(lists, hyper, found_inf);
  }
}

}  // namespace megatron::kernels::aten
