// Python bindings (torch_tpu._C): configuration, device queries, memory stats and metrics.
#include <ATen/core/Generator.h>
#include <c10/util/Exception.h>
#include <c10/util/hash.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <unordered_map>

#include "aten/generator.h"
#include "aten/tpu_tensor.h"
#include "exec/compile_cache.h"
#include "exec/context.h"
#include "exec/pending.h"
#include "exec/storage.h"
#include "ops/lowering.h"
#include "ops/precision.h"
#include "python/compiled_graph.h"
#include "python/distributed.h"
#include "python/in_program.h"
#include "python/kernels.h"
#include "python/profiler.h"

namespace py = pybind11;
using namespace torch_tpu;

namespace {

template <typename Body>
auto Checked(Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const c10::Error&) {
    throw;
  } catch (const std::out_of_range& e) {
    throw py::index_error(e.what());
  } catch (const std::exception& e) {
    throw std::runtime_error(e.what());
  }
}

py::dict Metrics() {
  auto& m = exec::GetMetrics();
  py::dict d;
  d["compiles"] = m.compiles.load();
  d["compile_time_s"] = static_cast<double>(m.compile_time_ns.load()) / 1e9;
  d["memory_cache_hits"] = m.memory_cache_hits.load();
  d["disk_cache_hits"] = m.disk_cache_hits.load();
  d["cache_misses"] = m.cache_misses.load();
  d["executions"] = m.executions.load();
  d["execute_time_s"] = static_cast<double>(m.execute_time_ns.load()) / 1e9;
  d["transfers_to_device"] = m.transfers_to_device.load();
  d["bytes_to_device"] = m.bytes_to_device.load();
  d["transfers_to_host"] = m.transfers_to_host.load();
  d["bytes_to_host"] = m.bytes_to_host.load();
  d["scalar_uploads"] = m.scalar_uploads.load();
  d["meta_runs"] = m.meta_runs.load();
  d["donated_buffers"] = m.donated_buffers.load();
  d["volatile_programs"] = m.volatile_programs.load();
  d["compiled_graph_calls"] = m.compiled_graph_calls.load();
  d["compiled_graph_executions"] = m.compiled_graph_executions.load();
  d["compiled_graph_direct_calls"] = m.compiled_graph_direct_calls.load();
  std::lock_guard<std::mutex> lock(m.mutex);
  int64_t fallbacks = 0;
  py::dict per_op, reasons;
  for (const auto& [op, count] : m.cpu_fallbacks) {
    per_op[py::str(op)] = count;
    fallbacks += count;
  }
  for (const auto& [reason, count] : m.sync_reasons) reasons[py::str(reason)] = count;
  d["cpu_fallbacks"] = fallbacks;
  d["cpu_fallbacks_per_op"] = per_op;
  d["sync_reasons"] = reasons;
  return d;
}

// Where the user's code recorded an op: the innermost Python frame outside torch and torch_tpu,
// or in an FX graph's code. Fused mode asks for it at every recorded op, so it is interned per
// code object and instruction: a repeated line costs a frame walk and a table lookup, no text.
// The tables hold a reference to each code object they key, so a key's address is never reused;
// the GIL guards them.
struct CodeSite {
  PyCodeObject* code;
  int instruction;
  bool operator==(const CodeSite&) const = default;
};
struct CodeSiteHash {
  size_t operator()(const CodeSite& s) const {
    return c10::hash_combine(std::hash<const void*>()(s.code), static_cast<size_t>(s.instruction));
  }
};
struct SourceTables {
  std::unordered_map<PyCodeObject*, std::optional<std::string>> paths;  // none: torch's own code
  std::unordered_map<CodeSite, exec::SourceLocation, CodeSiteHash> lines;
};

// The path a code object's lines are shown with, or none when its frames are not the user's.
const std::optional<std::string>& UserPath(SourceTables& tables, PyCodeObject* code) {
  constexpr size_t kMaxCodeObjects = 16384;  // generated code (FX graphs) must not pile up
  if (tables.paths.size() >= kMaxCodeObjects) {
    for (auto& [known, path] : tables.paths) Py_DECREF(known);
    tables.paths.clear();
    tables.lines.clear();
  }
  auto [entry, added] = tables.paths.try_emplace(code);
  if (!added) return entry->second;
  Py_INCREF(code);
  const char* file = PyUnicode_AsUTF8(code->co_filename);
  std::string path = file != nullptr ? file : "";
  // An FX graph's generated code ("<eval_with_key>.N from .../torch/fx/...") is where a
  // compiled graph recorded an op; GraphSourceLine maps its line to the user's.
  const bool graph_code = path.rfind("<eval_with_key>", 0) == 0;
  if (graph_code) path = path.substr(0, path.find(' '));
  if (graph_code || (path.find("/torch/") == std::string::npos &&
                     path.find("/torch_tpu/") == std::string::npos)) {
    entry->second = std::move(path);
  }
  return entry->second;
}

// The user's line behind a line of a compiled graph's generated code (torch_tpu._compile keeps
// the graphs and Dynamo's stack traces), or none: not graph code, or no trace kept.
std::optional<std::string> GraphSourceLine(const std::string& path, int line) {
  if (path.rfind("<eval_with_key>", 0) != 0) return std::nullopt;
  try {
    py::object found = py::module_::import("torch_tpu._compile.dynamo_backend")
                           .attr("_graph_source_line")(path, line);
    if (!found.is_none()) return found.cast<std::string>();
  } catch (const py::error_already_set&) {
    // A location is a convenience of the message; the generated one is kept instead.
  }
  return std::nullopt;
}

// torch's bindings release the GIL around ops, so it is taken back to read the thread's frame;
// a thread with no Python frames (autograd's device threads) has none.
exec::SourceLocation PythonSourceLocation() {
  if (!Py_IsInitialized()) return nullptr;
  const PyGILState_STATE gil = PyGILState_Ensure();
  static auto* tables = new SourceTables();
  PyFrameObject* frame = PyEval_GetFrame();
  Py_XINCREF(frame);
  exec::SourceLocation location;
  while (frame != nullptr && location == nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    if (const std::optional<std::string>& path = UserPath(*tables, code)) {
      const int instruction = PyFrame_GetLasti(frame);
      exec::SourceLocation& line = tables->lines[CodeSite{code, instruction}];
      if (line == nullptr) {
        const int number = PyCode_Addr2Line(code, instruction);
        std::optional<std::string> user_line = GraphSourceLine(*path, number);
        line = std::make_shared<const std::string>(
            user_line ? std::move(*user_line) : *path + ":" + std::to_string(number));
      }
      location = line;
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  PyGILState_Release(gil);
  return location;
}

// Deferred scopes opened and closed from Python, per thread (an optimizer step: _optim.py).
std::vector<std::unique_ptr<exec::DeferredScope>>& PythonDeferredScopes() {
  thread_local std::vector<std::unique_ptr<exec::DeferredScope>> scopes;
  return scopes;
}

// Closes the innermost scope opened from Python, which runs its work unless scopes remain open.
void CloseInnermostPythonScope(const std::string& reason) {
  auto& scopes = PythonDeferredScopes();
  if (scopes.empty()) return;
  std::unique_ptr<exec::DeferredScope> scope = std::move(scopes.back());
  scopes.pop_back();
  aten::Translate([&] {
    scope->Close(reason);
    return 0;
  });
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  aten::RegisterDeviceHooks();
  exec::SetWarningHandler([](const std::string& message) { TORCH_WARN(message); });
  exec::SetSourceLocationProvider(&PythonSourceLocation);

  m.def("_configure",
        [](std::vector<std::pair<std::string, std::string>> candidates, int num_devices) {
          std::vector<exec::PluginCandidate> list;
          for (auto& [label, path] : candidates) list.push_back({label, path});
          exec::ConfigurePlugins(std::move(list), num_devices);
        });
  m.def("_init", [] {
    Checked([] {
      exec::GetClient();
      return 0;
    });
  });
  m.def("_is_available", [] { return exec::IsAvailable(); });
  m.def("_is_initialized", [] { return exec::IsInitialized(); });
  m.def("_device_count", [] { return exec::DeviceCount(); });
  m.def("_current_device", [] { return static_cast<int>(aten::CurrentDeviceIndex()); });
  m.def("_set_device", [](int index) {
    aten::CheckDeviceIndex(static_cast<c10::DeviceIndex>(index));
    aten::SetCurrentDeviceIndex(static_cast<c10::DeviceIndex>(index));
  });
  m.def("_synchronize", [] {
    py::gil_scoped_release release;
    aten::SynchronizeDevice();
  });
  m.def("_platform", [] {
    return Checked([] {
      auto& client = exec::GetClient();
      py::dict d;
      d["platform"] = client.platform_name();
      d["platform_version"] = client.platform_version();
      d["plugin"] = exec::PluginLabel();
      d["plugin_path"] = client.plugin()->path();
      d["api_version"] = std::to_string(client.plugin()->major_version()) + "." +
                         std::to_string(client.plugin()->minor_version());
      d["header_api_version"] = std::to_string(runtime::Plugin::header_major_version()) + "." +
                                std::to_string(runtime::Plugin::header_minor_version());
      std::vector<std::string> kinds;
      for (const auto& device : client.devices()) kinds.push_back(device.kind());
      d["devices"] = kinds;
      d["plugin_identity"] = exec::PluginIdentity();
      d["extension_identity"] = exec::ExtensionIdentity();
      return d;
    });
  });
  m.def("_get_mode", [] { return static_cast<int>(exec::CurrentMode()); });
  m.def("_set_mode", [](int mode) {
    if (exec::CurrentMode() == exec::Mode::kDeferAndFuse && mode != 2) aten::SynchronizeDevice();
    exec::SetMode(static_cast<exec::Mode>(mode));
  });
  m.def("_registered_lowerings", [] { return ops::RegisteredLowerings(); });
  m.def("_get_precision", [] { return static_cast<int>(ops::MatmulPrecision()); });
  m.def("_set_precision",
        [](int precision) { ops::SetMatmulPrecision(static_cast<ops::Precision>(precision)); });
  m.def("_pending_count", [] { return exec::PendingCount(); });
  // Cuts and launches the pending work without waiting for it (the recording benchmark).
  m.def("_launch_pending", [] {
    aten::Translate([] {
      exec::MaterializeAllPending("launch");
      return 0;
    });
  });
  m.def("_enter_deferred", [] {
    aten::StartRecording();
    PythonDeferredScopes().push_back(std::make_unique<exec::DeferredScope>());
  });
  m.def("_exit_deferred", &CloseInnermostPythonScope);
  // An optimizer step's scope: its work runs as one program when it closes, in fused mode too.
  m.def("_exit_optimizer_step", [] {
    CloseInnermostPythonScope("optimizer step");
    aten::CutAtScopeBoundary("optimizer step");
  });
  // A torch.compile graph: its ops are recorded in a deferred scope and cut as one program
  // (src/torch_tpu/_compile/dynamo_backend.py), in fused mode too.
  m.def("_enter_compiled_graph", [] {
    exec::GetMetrics().compiled_graph_calls++;
    aten::StartRecording();
    aten::CutAtScopeBoundary("compiled graph boundary");
    PythonDeferredScopes().push_back(std::make_unique<exec::DeferredScope>());
  });
  m.def("_exit_compiled_graph", [] {
    CloseInnermostPythonScope(exec::kCompiledGraphReason);
    aten::CutAtScopeBoundary(exec::kCompiledGraphReason);
  });
  python::BindCompiledGraphs(m);
  python::BindInProgramCollectives(m);
  python::BindKernels(m);
  python::BindDistributed(m);
  python::BindProfiler(m);
  m.def("_metrics", &Metrics);
  m.def("_reset_metrics", [] { exec::GetMetrics().Reset(); });
  m.def("_cache_dir", [] { return exec::CacheDirectory(); });
  m.def("_clear_memory_cache", [] { exec::ClearMemoryCache(); });
  m.def("_run_stablehlo", [](const std::string& text, int device) {
    return Checked([&] {
      py::gil_scoped_release release;
      return exec::RunProgramText(text, device).size();
    });
  });
  auto generator = [](int device) {
    return aten::DefaultGenerator(static_cast<c10::DeviceIndex>(device)).get<aten::TpuGenerator>();
  };
  m.def("_manual_seed",
        [generator](int device, uint64_t seed) { generator(device)->set_current_seed(seed); });
  m.def("_seed", [generator](int device) { return generator(device)->seed(); });
  m.def("_initial_seed", [generator](int device) { return generator(device)->current_seed(); });
  m.def("_get_rng_state", [generator](int device) {
    auto* g = generator(device);
    return py::make_tuple(g->current_seed(), g->get_offset());
  });
  m.def("_set_rng_state", [generator](int device, uint64_t seed, uint64_t offset) {
    auto* g = generator(device);
    g->set_current_seed(seed);
    g->set_offset(offset);
  });
}
