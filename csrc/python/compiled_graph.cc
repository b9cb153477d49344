// torch.compile graphs run directly: the Python side of exec/graph_plan.h. A plan remembers the
// layout of a graph's inputs and outputs when it was captured; a later call whose inputs have
// the same layout (sizes, strides, offsets, dtypes, which share a storage, equal Python values
// and CPU scalars) launches the program and wraps its results as the outputs, with no op
// recorded. Any difference, or deferred work, returns None and the graph is recorded as usual.
// Never-written tensors (placeholders such as attention's unused RNG seed outputs, which the
// backward graph receives again) are part of the layout: unwritten when captured, unwritten
// when replayed. A graph with random ops draws new keys from its generators on each replay.
#include "python/compiled_graph.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "aten/device_checks.h"
#include "aten/tpu_tensor.h"
#include "exec/context.h"
#include "exec/graph_plan.h"
#include "exec/pending.h"
#include "exec/scalar_upload.h"
#include "ops/random_bits.h"

namespace torch_tpu::python {

namespace py = pybind11;

namespace {

struct Layout {
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  at::ScalarType dtype = at::kFloat;

  static Layout Of(const at::Tensor& t) {
    return {t.sizes().vec(), t.strides().vec(), t.storage_offset(), t.scalar_type()};
  }
  bool Matches(const at::Tensor& t) const {
    return t.scalar_type() == dtype && t.storage_offset() == offset && t.sizes().equals(sizes) &&
           t.strides().equals(strides);
  }
};

struct InputSpec {
  enum class Kind { kTpu, kCpuScalar, kObject } kind;
  Layout layout;           // kTpu, kCpuScalar
  int first_sharer = 0;    // kTpu: the first tpu input over the same storage
  bool unwritten = false;  // kTpu: its storage was never written (no buffer) when captured
  at::Tensor value;        // kCpuScalar: its value becomes a scalar parameter of the program
  py::object object;       // kObject
};

struct OutputSpec {
  // kEmpty: no elements, or never written; each call gets a fresh unwritten tensor.
  enum class Kind { kResult, kInput, kEmpty, kObject } kind;
  int index = 0;  // kResult: the program result; kInput: the tpu input sharing its storage
  Layout layout;
  py::object object;
};

// A program result that is a device-side check's value (aten/device_checks.h), not an output.
struct CheckSpec {
  int result = 0;
  std::shared_ptr<const aten::DeviceCheckReport> report;
};

bool IsTpuTensor(py::handle h) {
  return THPVariable_Check(h.ptr()) && THPVariable_Unpack(h.ptr()).is_privateuseone();
}

// Each tpu input's index of the first tpu input over the same storage.
std::vector<int> SharingPattern(const std::vector<exec::DeviceStorage*>& storages) {
  std::vector<int> pattern(storages.size());
  std::unordered_map<exec::DeviceStorage*, int> first;
  for (size_t i = 0; i < storages.size(); ++i) {
    pattern[i] = first.emplace(storages[i], static_cast<int>(i)).first->second;
  }
  return pattern;
}

// Whether the storages share exactly as `pattern` (a SharingPattern) says. Called on every
// direct call, so it allocates one vector, not a hash node per input.
bool SharesAs(const std::vector<exec::DeviceStorage*>& storages, const std::vector<int>& pattern) {
  if (storages.size() != pattern.size()) return false;
  std::vector<exec::DeviceStorage*> firsts;
  firsts.reserve(storages.size());
  for (size_t i = 0; i < storages.size(); ++i) {
    if (pattern[i] == static_cast<int>(i)) {
      firsts.push_back(storages[i]);
    } else if (storages[i] != storages[pattern[i]]) {
      return false;
    }
  }
  std::sort(firsts.begin(), firsts.end());
  return std::adjacent_find(firsts.begin(), firsts.end()) == firsts.end();
}

// Where a recorded random draw's key sits among a plan's scalar parameters.
struct KeySlot {
  size_t pack = 0, index = 0;  // the scalar pack and the u64 within it
  size_t draw = 0;             // the draw, in GraphPlan::draws
};

// The slots holding each draw's key (found by value: a 64-bit hash of the generator's state).
std::vector<KeySlot> FindKeySlots(const exec::GraphPlan& plan) {
  std::vector<KeySlot> slots;
  for (size_t d = 0; d < plan.draws.size(); ++d) {
    const uint64_t key = ops::RandomKey(plan.draws[d].seed, plan.draws[d].offset);
    for (size_t p = 0; p < plan.scalar_bytes.size(); ++p) {
      if (plan.scalar_dtypes[p] != ir::DType::kU64) continue;
      const std::vector<uint8_t>& bytes = plan.scalar_bytes[p];
      for (size_t i = 0; i * sizeof(uint64_t) < bytes.size(); ++i) {
        uint64_t word = 0;
        std::memcpy(&word, bytes.data() + i * sizeof(uint64_t), sizeof(uint64_t));
        if (word == key) slots.push_back({p, i, d});
      }
    }
  }
  return slots;
}

at::Tensor TensorOver(const c10::Storage& storage, const Layout& layout) {
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      caffe2::TypeMeta::fromScalarType(layout.dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(layout.sizes, layout.strides, layout.offset);
  return t;
}

}  // namespace

class CompiledGraphPlan {
 public:
  CompiledGraphPlan(exec::GraphPlan plan, std::vector<InputSpec> inputs,
                    std::vector<OutputSpec> outputs, std::vector<CheckSpec> checks, bool tuple,
                    std::vector<int> sharing, std::vector<size_t> input_arg)
      : plan_(std::move(plan)),
        inputs_(std::move(inputs)),
        outputs_(std::move(outputs)),
        checks_(std::move(checks)),
        tuple_(tuple),
        sharing_(std::move(sharing)),
        input_arg_(std::move(input_arg)),
        key_slots_(FindKeySlots(plan_)) {}

  // The graph's outputs, or None when this call's inputs differ from the captured layout.
  py::object Run(const py::list& args) {
    if (exec::InDeferredScope() || args.size() != inputs_.size()) return py::none();
    // Fused mode's pending eager work runs first, as its own program: the inputs it writes are
    // then buffers, and the graph stays its own program.
    aten::CutAtScopeBoundary("compiled graph boundary");
    std::vector<exec::DeviceStorage*> storages;
    storages.reserve(inputs_.size());
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const InputSpec& spec = inputs_[i];
      py::handle arg = args[i];
      if (spec.kind == InputSpec::Kind::kObject) {
        if (THPVariable_Check(arg.ptr()) || !arg.equal(spec.object)) return py::none();
        continue;
      }
      if (!THPVariable_Check(arg.ptr())) return py::none();
      const at::Tensor& t = THPVariable_Unpack(arg.ptr());
      if (!spec.layout.Matches(t)) return py::none();
      if (spec.kind == InputSpec::Kind::kCpuScalar) {
        if (!t.is_cpu() || !at::equal(t, spec.value)) return py::none();
        continue;
      }
      if (!t.is_privateuseone() || t.device().index() != plan_.device) return py::none();
      exec::DeviceStorage* storage = aten::StorageOf(t);
      if (storage->pending() || (storage->buffer() == nullptr) != spec.unwritten ||
          storage->padded()) {
        return py::none();
      }
      storages.push_back(storage);
    }
    if (!SharesAs(storages, sharing_)) return py::none();

    exec::GetMetrics().compiled_graph_calls++;
    exec::GetMetrics().compiled_graph_direct_calls++;
    std::vector<std::shared_ptr<runtime::Buffer>> results = aten::Translate([&] {
      if (plan_.draws.empty()) return exec::RunGraphPlan(plan_, storages);
      std::vector<std::shared_ptr<runtime::Buffer>> scalars = FreshRandomKeys();
      return exec::RunGraphPlan(plan_, storages, &scalars);
    });
    // New storages for the results that overwrite no input; outputs view them.
    std::vector<c10::Storage> fresh(results.size());
    const c10::DeviceIndex saved = aten::CurrentDeviceIndex();
    aten::SetCurrentDeviceIndex(static_cast<c10::DeviceIndex>(plan_.device));
    c10::Allocator* allocator = aten::GetTpuAllocator();
    for (size_t r = 0; r < results.size(); ++r) {
      if (plan_.result_input[r] >= 0) continue;
      fresh[r] = c10::Storage(c10::Storage::use_byte_size_t(), plan_.result_nbytes[r],
                              allocator->allocate(plan_.result_nbytes[r]), allocator, true);
      aten::StorageOf(fresh[r])->SetBuffer(results[r], plan_.result_dtype[r]);
    }
    aten::SetCurrentDeviceIndex(saved);
    for (const CheckSpec& check : checks_) {
      aten::AddDeviceCheck(fresh[check.result], check.report);
    }
    py::list outputs(outputs_.size());
    for (size_t o = 0; o < outputs_.size(); ++o) {
      const OutputSpec& spec = outputs_[o];
      switch (spec.kind) {
        case OutputSpec::Kind::kObject:
          outputs[o] = spec.object;
          break;
        case OutputSpec::Kind::kEmpty:
          outputs[o] = py::cast(aten::EmptyTpu(spec.layout.sizes, spec.layout.strides,
                                               spec.layout.dtype, plan_.device));
          break;
        case OutputSpec::Kind::kResult:
          outputs[o] = py::cast(TensorOver(fresh[spec.index], spec.layout));
          break;
        case OutputSpec::Kind::kInput:
          outputs[o] = py::cast(TensorOver(
              THPVariable_Unpack(args[input_arg_[spec.index]].ptr()).storage(), spec.layout));
          break;
      }
    }
    if (tuple_) return py::tuple(outputs);
    return std::move(outputs);
  }

 private:
  // The scalar parameters with each random draw made again, in the recorded order, from its
  // generator: the generators advance as they would in eager mode.
  std::vector<std::shared_ptr<runtime::Buffer>> FreshRandomKeys() {
    std::vector<uint64_t> keys;
    keys.reserve(plan_.draws.size());
    for (const exec::RandomDraw& draw : plan_.draws) {
      const auto [seed, offset] = draw.next_key();
      keys.push_back(ops::RandomKey(seed, offset));
    }
    std::vector<std::vector<uint8_t>> bytes = plan_.scalar_bytes;
    std::vector<bool> changed(bytes.size(), false);
    for (const KeySlot& slot : key_slots_) {
      std::memcpy(bytes[slot.pack].data() + slot.index * sizeof(uint64_t), &keys[slot.draw],
                  sizeof(uint64_t));
      changed[slot.pack] = true;
    }
    std::vector<std::shared_ptr<runtime::Buffer>> buffers = plan_.scalar_buffers;
    for (size_t p = 0; p < buffers.size(); ++p) {
      if (changed[p]) {
        buffers[p] =
            exec::UploadScalars(bytes[p], plan_.scalar_dtypes[p], exec::GetDevice(plan_.device));
      }
    }
    return buffers;
  }

  exec::GraphPlan plan_;
  std::vector<InputSpec> inputs_;
  std::vector<OutputSpec> outputs_;
  std::vector<CheckSpec> checks_;
  bool tuple_;
  std::vector<int> sharing_;       // SharingPattern of the tpu inputs
  std::vector<size_t> input_arg_;  // per tpu input: its position among the arguments
  std::vector<KeySlot> key_slots_;
};

// A capture, opened before a graph's first call and finished after its cut.
class CompiledGraphCapture {
 public:
  explicit CompiledGraphCapture(const py::list& args) {
    std::vector<exec::DeviceStorage*> storages;
    for (size_t i = 0; i < args.size(); ++i) {
      py::handle arg = args[i];
      InputSpec spec;
      if (!THPVariable_Check(arg.ptr())) {
        spec.kind = InputSpec::Kind::kObject;
        spec.object = py::reinterpret_borrow<py::object>(arg);
      } else {
        const at::Tensor& t = THPVariable_Unpack(arg.ptr());
        spec.layout = Layout::Of(t);
        if (t.is_privateuseone()) {
          spec.kind = InputSpec::Kind::kTpu;
          storages.push_back(aten::StorageOf(t));
          spec.unwritten = storages.back()->buffer() == nullptr;
          input_arg_.push_back(i);
        } else if (t.is_cpu() && t.dim() == 0) {
          spec.kind = InputSpec::Kind::kCpuScalar;
          spec.value = t.clone();
        } else {
          usable_ = false;  // another device: the graph is not one tpu program
        }
      }
      inputs_.push_back(std::move(spec));
    }
    storages_ = storages;
    aten::TakeCapturedDeviceChecks();  // another capture's, abandoned
    capture_ = std::make_unique<exec::GraphCapture>(std::move(storages));
  }

  // The plan for the captured call, or None.
  py::object Finish(const py::object& outputs) {
    std::vector<exec::DeviceStorage*> results;
    std::optional<exec::GraphPlan> plan = capture_->Finish(&results);
    capture_.reset();
    const auto captured_checks = aten::TakeCapturedDeviceChecks();
    if (!plan || !usable_) return py::none();
    const bool tuple = py::isinstance<py::tuple>(outputs);
    if (!tuple && !py::isinstance<py::list>(outputs)) return py::none();
    std::vector<bool> result_used(results.size(), false);
    std::vector<OutputSpec> specs;
    for (py::handle output : outputs) {
      OutputSpec spec;
      if (!THPVariable_Check(output.ptr())) {
        spec.kind = OutputSpec::Kind::kObject;
        spec.object = py::reinterpret_borrow<py::object>(output);
        specs.push_back(std::move(spec));
        continue;
      }
      const at::Tensor& t = THPVariable_Unpack(output.ptr());
      if (!t.is_privateuseone()) return py::none();
      spec.layout = Layout::Of(t);
      exec::DeviceStorage* storage = aten::StorageOf(t);
      auto result = std::find(results.begin(), results.end(), storage);
      auto input = std::find(storages_.begin(), storages_.end(), storage);
      if (result != results.end() && plan->result_input[result - results.begin()] < 0) {
        spec.kind = OutputSpec::Kind::kResult;
        spec.index = static_cast<int>(result - results.begin());
        result_used[spec.index] = true;
      } else if (input != storages_.end()) {  // an input, or its new value (written in place)
        spec.kind = OutputSpec::Kind::kInput;
        spec.index = static_cast<int>(input - storages_.begin());
      } else if (t.numel() == 0 || (storage->buffer() == nullptr && !storage->pending())) {
        spec.kind = OutputSpec::Kind::kEmpty;
      } else {
        return py::none();  // a storage the graph neither received nor wrote
      }
      specs.push_back(std::move(spec));
    }
    std::vector<CheckSpec> checks;
    for (size_t r = 0; r < results.size(); ++r) {
      if (plan->result_input[r] >= 0 || result_used[r]) continue;
      auto check = std::find_if(captured_checks.begin(), captured_checks.end(),
                                [&](const auto& c) { return c.first == results[r]; });
      // A new value no output holds was kept alive by something else: not replayable.
      if (check == captured_checks.end()) return py::none();
      checks.push_back(CheckSpec{static_cast<int>(r), check->second});
    }
    return py::cast(std::make_shared<CompiledGraphPlan>(std::move(*plan), std::move(inputs_),
                                                        std::move(specs), std::move(checks), tuple,
                                                        SharingPattern(storages_), input_arg_));
  }

  void Abandon() {
    capture_.reset();
    aten::TakeCapturedDeviceChecks();
  }

 private:
  std::vector<InputSpec> inputs_;
  std::vector<exec::DeviceStorage*> storages_;
  std::vector<size_t> input_arg_;
  bool usable_ = true;
  std::unique_ptr<exec::GraphCapture> capture_;
};

void BindCompiledGraphs(py::module& m) {
  py::class_<CompiledGraphPlan, std::shared_ptr<CompiledGraphPlan>>(m, "_CompiledGraphPlan")
      .def("run", &CompiledGraphPlan::Run);
  py::class_<CompiledGraphCapture>(m, "_CompiledGraphCapture")
      .def(py::init<const py::list&>())
      .def("finish", &CompiledGraphCapture::Finish)
      .def("abandon", &CompiledGraphCapture::Abandon);
}

}  // namespace torch_tpu::python
