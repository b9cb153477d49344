#include "aten/kernel_call.h"

#include <c10/util/Exception.h>

#include <optional>
#include <string>

#include "aten/tpu_tensor.h"
#include "exec/context.h"
#include "exec/pending.h"

namespace torch_tpu::aten {

namespace {

// The device every input is on (0-d CPU tensors mix with any device, as in ATen ops).
c10::Device KernelDevice(const std::string& name, const std::vector<at::Tensor>& inputs) {
  std::optional<c10::Device> device;
  for (const at::Tensor& t : inputs) {
    TORCH_CHECK(t.defined(), "kernel '", name, "': an input tensor is undefined");
    if (t.is_cpu() && t.dim() == 0) continue;
    TORCH_CHECK(t.is_privateuseone(), "kernel '", name,
                "' runs on tpu tensors, but an input is on ", t.device());
    TORCH_CHECK(!device || *device == t.device(),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                *device, " and ", t.device(), "!");
    device = t.device();
  }
  return device.value_or(c10::Device(c10::DeviceType::PrivateUse1, CurrentDeviceIndex()));
}

// Writes the call's results into `targets` and runs or defers them like any op.
void RecordCall(const std::shared_ptr<const ir::Function>& function,
                const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets) {
  StartRecording();
  std::vector<ir::Value> operands;
  for (const at::Tensor& t : inputs) operands.push_back(ReadTensor(t));
  std::vector<ir::TensorType> types;
  for (const at::Tensor& t : targets) {
    types.push_back(ir::TensorType{ToDType(t.scalar_type()), ir::Shape(t.sizes().vec())});
  }
  const std::vector<ir::Value> results = ir::MakeCall(function, operands, types);
  std::vector<exec::DeviceStorage*> written;
  for (size_t r = 0; r < targets.size(); ++r) {
    if (targets[r].numel() == 0) continue;
    WriteTensor(targets[r], results[r]);
    written.push_back(StorageOf(targets[r]));
  }
  FinishWrites(written);
}

}  // namespace

std::vector<at::Tensor> CallKernel(const std::shared_ptr<const ir::Function>& function,
                                   const std::vector<at::Tensor>& inputs,
                                   const std::vector<KernelOutput>& outputs) {
  const std::string& name = function->name;
  TORCH_CHECK(static_cast<int>(inputs.size()) == function->num_arguments, "kernel '", name,
              "' takes ", function->num_arguments, " tensors (its func.func has ",
              function->num_arguments, " arguments), but got ", inputs.size());
  TORCH_CHECK(static_cast<int>(outputs.size()) == function->num_results, "kernel '", name,
              "' was given ", outputs.size(), " result types, but its func.func returns ",
              function->num_results, " values");
  const c10::Device device = KernelDevice(name, inputs);
  std::vector<at::Tensor> targets;
  bool any_elements = false;
  for (const KernelOutput& output : outputs) {
    targets.push_back(EmptyTpuContiguous(output.sizes, output.dtype, device.index()));
    any_elements |= targets.back().numel() > 0;
  }
  if (!any_elements) return targets;
  try {
    Translate([&] {
      // Deferred nodes remember what recorded them, to be named if their program fails.
      std::optional<ir::RecordingOrigin> origin;
      if (exec::Deferring()) {
        const exec::SourceLocation location = exec::CurrentSourceLocation();
        origin.emplace(std::make_shared<const std::string>("kernel '" + name + "'" +
                                                           (location ? " at " + *location : "")));
      }
      RecordCall(function, inputs, targets);
      return 0;
    });
  } catch (const c10::OutOfMemoryError&) {
    throw;
  } catch (const c10::Error& e) {
    // Run now (strict and debug modes): the failing program is this kernel's.
    TORCH_CHECK(false, "kernel '", name, "' failed: ", e.what_without_backtrace());
  }
  return targets;
}

}  // namespace torch_tpu::aten
