// Batched ops (_foreach_*) become one program. PyTorch's kernels for them on every backend but
// CUDA loop over the tensors, calling the single-tensor op for each; we run that loop inside a
// DeferredScope, so the per-tensor ops are recorded and then cut as one program, in strict mode
// too. The loop is reached through the CPU slot of the dispatch table, which holds that generic
// (CompositeExplicitAutograd) kernel for every _foreach_ op and touches no CPU memory itself.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>
#include <string>
#include <vector>

#include "aten/tpu_tensor.h"
#include "exec/pending.h"

namespace torch_tpu::aten {

namespace {

void BatchedOpKernel(const c10::OperatorHandle& op, c10::Stack* stack) {
  StartRecording();
  exec::DeferredScope scope;
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  Translate([&] {
    scope.Close("batched op");
    return 0;
  });
}

// Registered when the extension loads: by then libtorch has registered every aten op.
struct BatchedOpRegistration {
  std::unique_ptr<torch::Library> library;
  BatchedOpRegistration() {
    library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                               c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
      if (name.name.rfind("aten::_foreach_", 0) != 0) continue;
      std::string qualified = name.name.substr(6);
      if (!name.overload_name.empty()) qualified += "." + name.overload_name;
      library->impl(qualified.c_str(),
                    torch::CppFunction::makeFromBoxedFunction<&BatchedOpKernel>());
    }
  }
};

const BatchedOpRegistration kBatchedOps;

}  // namespace

}  // namespace torch_tpu::aten
