// torch.optim's fused optimizers (fused=True: Adam, AdamW, SGD, Adagrad), the default of Hugging
// Face's Trainer. CUDA and the CPU have one kernel each; here each is composed of _foreach_ ops,
// so the update records entry by entry through the batched ops' fast path (foreach.cc) and runs
// as one program, in strict mode too. The arithmetic is that of PyTorch's fused kernels:
// gradients are unscaled in place by grad_scale, nothing at all is written when found_inf is
// set, and the step counts are device tensors the optimizer has already advanced, so the bias
// corrections are computed on the device. A learning rate is a scalar of the program, or a
// device tensor: one that changes from step to step compiles nothing new.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_addcdiv.h>
#include <ATen/ops/_foreach_addcmul.h>
#include <ATen/ops/_foreach_div.h>
#include <ATen/ops/_foreach_lerp.h>
#include <ATen/ops/_foreach_maximum.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_neg.h>
#include <ATen/ops/_foreach_sqrt.h>
#include <ATen/ops/_foreach_sub.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aten/tpu_tensor.h"
#include "exec/pending.h"

namespace torch_tpu::aten {

namespace {

using TensorVector = std::vector<at::Tensor>;

// A fused optimizer op's arguments, looked up by name: one kernel serves both overloads (a float
// or a Tensor lr), whatever the order of the keyword arguments in this torch's schema.
class Arguments {
 public:
  Arguments(const c10::OperatorHandle& op, c10::Stack* stack)
      : schema_(op.schema()),
        stack_(*stack),
        begin_(stack->size() - op.schema().arguments().size()) {}

  const c10::IValue& operator[](const char* name) const {
    const std::optional<int> index = schema_.argumentIndexWithName(name);
    TORCH_INTERNAL_ASSERT(index, schema_.name(), " has no argument ", name);
    return stack_[begin_ + *index];
  }
  TensorVector List(const char* name) const { return (*this)[name].toTensorVector(); }
  double Double(const char* name) const { return (*this)[name].toDouble(); }
  bool Bool(const char* name) const { return (*this)[name].toBool(); }
  std::optional<at::Tensor> OptionalTensor(const char* name) const {
    const c10::IValue& value = (*this)[name];
    return value.isNone() ? std::nullopt : std::optional<at::Tensor>(value.toTensor());
  }
  const std::string& op_name() const { return schema_.name(); }

  // Pops the arguments: the ops return nothing.
  void Consume() {
    stack_.erase(stack_.begin() + static_cast<std::ptrdiff_t>(begin_), stack_.end());
  }

 private:
  const c10::FunctionSchema& schema_;
  c10::Stack& stack_;
  size_t begin_;
};

// The learning rate: a float, or a tensor on the device. A CPU tensor is read as a float, as
// CUDA's kernels do.
struct LearningRate {
  double value = 0;
  at::Tensor tensor;  // defined for a device tensor: its value never reaches the host

  explicit LearningRate(const Arguments& args) {
    const c10::IValue& lr = args["lr"];
    if (!lr.isTensor()) {
      value = lr.toDouble();
      return;
    }
    const at::Tensor& t = lr.toTensor();
    TORCH_CHECK(t.numel() == 1, args.op_name(), ": lr must be a 1-element tensor, got ", t.numel(),
                " elements");
    if (t.is_cpu()) {
      value = t.item<double>();
    } else {
      tensor = t.reshape({});
    }
  }
};

void CheckLengths(const Arguments& args, const TensorVector& params,
                  std::initializer_list<std::pair<const char*, const TensorVector*>> lists) {
  for (const auto& [name, list] : lists) {
    TORCH_CHECK(list->size() == params.size(), args.op_name(), ": expected ", params.size(),
                " tensors in ", name, " (one per parameter), got ", list->size());
  }
}

// found_inf: when set, the update writes nothing. The update then runs on copies, committed at
// the end by a select on the device, so no host read decides it.
class SkippableUpdate {
 public:
  explicit SkippableUpdate(const Arguments& args) {
    if (std::optional<at::Tensor> found_inf = args.OptionalTensor("found_inf")) {
      TORCH_CHECK(found_inf->numel() == 1, args.op_name(),
                  ": found_inf must be a 1-element tensor");
      skip_ = found_inf->reshape({}).ne(0);
    }
  }

  // The tensors the update writes in place of `tensors`: themselves, or copies.
  TensorVector Writable(const TensorVector& tensors) {
    if (!skip_.defined()) return tensors;
    TensorVector copies;
    copies.reserve(tensors.size());
    for (const at::Tensor& t : tensors) copies.push_back(t.clone());
    written_.emplace_back(tensors, copies);
    return copies;
  }

  void Commit() {
    for (auto& [targets, values] : written_) {
      for (size_t i = 0; i < targets.size(); ++i) {
        targets[i].copy_(at::where(skip_, targets[i], values[i]));
      }
    }
  }

 private:
  at::Tensor skip_;
  std::vector<std::pair<TensorVector, TensorVector>> written_;
};

// Divides the gradients by grad_scale in place (they stay unscaled, as with CUDA's kernels), then
// returns the gradient the update follows: negated when maximizing, plus weight_decay * param
// when the decay is coupled (L2).
TensorVector EffectiveGradients(const Arguments& args, const TensorVector& grads,
                                const TensorVector& params, double coupled_weight_decay) {
  if (std::optional<at::Tensor> grad_scale = args.OptionalTensor("grad_scale")) {
    TORCH_CHECK(grad_scale->numel() == 1, args.op_name(),
                ": grad_scale must be a 1-element tensor");
    at::_foreach_div_(grads, grad_scale->reshape({}));
  }
  TensorVector g = args.Bool("maximize") ? at::_foreach_neg(grads) : grads;
  if (coupled_weight_decay != 0) g = at::_foreach_add(g, params, coupled_weight_decay);
  return g;
}

// Each entry's step count (0-d device tensors), as one vector, so a per-step quantity is one op
// for all entries; .unbind(0) gives it back per entry.
at::Tensor StackedSteps(const TensorVector& steps) {
  TensorVector flat;
  flat.reserve(steps.size());
  for (const at::Tensor& s : steps) flat.push_back(s.reshape({}));
  return at::stack(flat);
}

// params += coefficient * numerators / denominators, the coefficient being -lr.
void StepAgainst(const TensorVector& params, const TensorVector& numerators,
                 const TensorVector& denominators, const LearningRate& lr) {
  if (lr.tensor.defined()) {
    at::_foreach_addcdiv_(params, at::_foreach_mul(numerators, lr.tensor), denominators, -1);
  } else {
    at::_foreach_addcdiv_(params, numerators, denominators, -lr.value);
  }
}

void AdamUpdate(const Arguments& args) {
  const bool decoupled = args.op_name() == "aten::_fused_adamw_";
  const TensorVector params = args.List("self"), grads = args.List("grads"),
                     exp_avgs = args.List("exp_avgs"), exp_avg_sqs = args.List("exp_avg_sqs"),
                     max_exp_avg_sqs = args.List("max_exp_avg_sqs"),
                     steps = args.List("state_steps");
  const bool amsgrad = args.Bool("amsgrad");
  const double beta1 = args.Double("beta1"), beta2 = args.Double("beta2"),
               weight_decay = args.Double("weight_decay"), eps = args.Double("eps");
  CheckLengths(args, params,
               {{"grads", &grads},
                {"exp_avgs", &exp_avgs},
                {"exp_avg_sqs", &exp_avg_sqs},
                {"state_steps", &steps}});
  if (amsgrad) CheckLengths(args, params, {{"max_exp_avg_sqs", &max_exp_avg_sqs}});
  if (params.empty()) return;
  const LearningRate lr(args);
  SkippableUpdate update(args);
  const TensorVector p = update.Writable(params), m = update.Writable(exp_avgs),
                     v = update.Writable(exp_avg_sqs);
  const TensorVector g =
      EffectiveGradients(args, update.Writable(grads), p, decoupled ? 0 : weight_decay);
  if (decoupled && weight_decay != 0) {
    if (lr.tensor.defined()) {
      at::_foreach_mul_(p, lr.tensor.mul(-weight_decay).add(1));
    } else {
      at::_foreach_mul_(p, 1 - lr.value * weight_decay);
    }
  }
  at::_foreach_lerp_(m, g, 1 - beta1);
  at::_foreach_mul_(v, beta2);
  at::_foreach_addcmul_(v, g, g, 1 - beta2);
  TensorVector denominators;
  if (amsgrad) {
    const TensorVector v_max = update.Writable(max_exp_avg_sqs);
    at::_foreach_maximum_(v_max, v);
    denominators = at::_foreach_sqrt(v_max);
  } else {
    denominators = at::_foreach_sqrt(v);
  }
  // params -= lr * m / ((sqrt(v) / sqrt(1 - beta2^t) + eps) * (1 - beta1^t))
  const at::Tensor t = StackedSteps(steps);
  at::_foreach_div_(denominators, at::rsub(at::pow(beta2, t), 1).sqrt().unbind(0));
  at::_foreach_add_(denominators, eps);
  at::_foreach_mul_(denominators, at::rsub(at::pow(beta1, t), 1).unbind(0));
  StepAgainst(p, m, denominators, lr);
  update.Commit();
}

void SgdUpdate(const Arguments& args) {
  const TensorVector params = args.List("self"), grads = args.List("grads"),
                     buffers = args.List("momentum_buffer_list");
  const double momentum = args.Double("momentum"), dampening = args.Double("dampening"),
               weight_decay = args.Double("weight_decay");
  const bool nesterov = args.Bool("nesterov"), first_step = args.Bool("is_first_step");
  CheckLengths(args, params, {{"grads", &grads}});
  if (momentum != 0) CheckLengths(args, params, {{"momentum_buffer_list", &buffers}});
  if (params.empty()) return;
  const LearningRate lr(args);
  SkippableUpdate update(args);
  const TensorVector p = update.Writable(params);
  TensorVector g = EffectiveGradients(args, update.Writable(grads), p, weight_decay);
  if (momentum != 0) {
    const TensorVector b = update.Writable(buffers);
    if (first_step) {
      for (size_t i = 0; i < b.size(); ++i) b[i].copy_(g[i]);
    } else {
      at::_foreach_mul_(b, momentum);
      at::_foreach_add_(b, g, 1 - dampening);
    }
    g = nesterov ? at::_foreach_add(g, b, momentum) : b;
  }
  if (lr.tensor.defined()) {
    at::_foreach_sub_(p, at::_foreach_mul(g, lr.tensor));
  } else {
    at::_foreach_add_(p, g, -lr.value);
  }
  update.Commit();
}

void AdagradUpdate(const Arguments& args) {
  const TensorVector params = args.List("self"), grads = args.List("grads"),
                     sums = args.List("state_sums"), steps = args.List("state_steps");
  const double lr_decay = args.Double("lr_decay"), weight_decay = args.Double("weight_decay"),
               eps = args.Double("eps");
  CheckLengths(args, params, {{"grads", &grads}, {"state_sums", &sums}, {"state_steps", &steps}});
  if (params.empty()) return;
  const LearningRate lr(args);
  SkippableUpdate update(args);
  const TensorVector p = update.Writable(params), s = update.Writable(sums);
  const TensorVector g = EffectiveGradients(args, update.Writable(grads), p, weight_decay);
  at::_foreach_addcmul_(s, g, g, 1);
  TensorVector denominators = at::_foreach_sqrt(s);
  at::_foreach_add_(denominators, eps);
  // params -= lr / (1 + (t - 1) * lr_decay) * g / (sqrt(sums) + eps)
  at::_foreach_mul_(denominators, StackedSteps(steps).sub(1).mul(lr_decay).add(1).unbind(0));
  StepAgainst(p, g, denominators, lr);
  update.Commit();
}

// A fused optimizer op: its update recorded in a deferred scope, and cut as one program.
template <void (*Update)(const Arguments&)>
void FusedOptimizerKernel(const c10::OperatorHandle& op, c10::Stack* stack) {
  StartRecording();
  exec::DeferredScope scope;
  Arguments args(op, stack);
  Update(args);
  args.Consume();
  Translate([&] {
    scope.Close("fused optimizer");
    return 0;
  });
}

// Both overloads of each op this torch has, registered when the extension loads.
template <void (*Update)(const Arguments&)>
void RegisterOverloads(torch::Library& library, const std::string& name) {
  for (const std::string overload : {"", "tensor_lr"}) {
    if (!c10::Dispatcher::singleton().findSchema({"aten::" + name, overload})) continue;
    const std::string qualified = overload.empty() ? name : name + "." + overload;
    library.impl(qualified.c_str(),
                 torch::CppFunction::makeFromBoxedFunction<&FusedOptimizerKernel<Update>>());
  }
}

struct FusedOptimizerRegistration {
  std::unique_ptr<torch::Library> library;
  FusedOptimizerRegistration() {
    library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                               c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    RegisterOverloads<&AdamUpdate>(*library, "_fused_adam_");
    RegisterOverloads<&AdamUpdate>(*library, "_fused_adamw_");
    RegisterOverloads<&SgdUpdate>(*library, "_fused_sgd_");
    RegisterOverloads<&AdagradUpdate>(*library, "_fused_adagrad_");
  }
};

const FusedOptimizerRegistration kFusedOptimizers;

}  // namespace

}  // namespace torch_tpu::aten
