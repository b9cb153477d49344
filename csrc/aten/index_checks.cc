#include "aten/index_checks.h"

#include <ATen/core/Tensor.h>
#include <c10/core/WrapDimMinimal.h>

#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "aten/fallback.h"
#include "aten/tpu_tensor.h"
#include "exec/context.h"
#include "exec/graph_plan.h"
#include "exec/pending.h"
#include "exec/storage.h"

namespace torch_tpu::aten {

namespace {

// Which indices the CPU kernel accepts for a dim of size n.
enum class Range { kWrapping, kNonNegative };  // [-n, n), or [0, n)

// The CPU kernel's error, by its wording.
enum class Error {
  kBounds,         // IndexError: index 7 is out of bounds for dimension 0 with size 5
  kBoundsRuntime,  // the same, as a RuntimeError (gather, scatter)
  kInSelf,         // IndexError: index out of range in self
  kIndexCopy,      // IndexError: index_copy_(): index 7 is out of bounds for ...
  kElements,       // IndexError: out of range: tried to access index 7 on a tensor of 5 elements.
};

// How an op indexes: through its "indices" list (one per leading dim), its "index" along "dim",
// or its "index" into the flattened self.
enum class Indexing { kIndicesList, kAlongDim, kFlat };

struct IndexedOp {
  const char* lowering;
  Indexing indexing;
  Range range;
  Error error;
};

constexpr IndexedOp kIndexedOps[] = {
    {"index", Indexing::kIndicesList, Range::kWrapping, Error::kBounds},
    {"_index_put_impl", Indexing::kIndicesList, Range::kWrapping, Error::kBounds},
    {"index_fill", Indexing::kAlongDim, Range::kWrapping, Error::kBounds},
    {"index_select", Indexing::kAlongDim, Range::kNonNegative, Error::kInSelf},
    {"index_add", Indexing::kAlongDim, Range::kNonNegative, Error::kInSelf},
    {"index_reduce", Indexing::kAlongDim, Range::kNonNegative, Error::kInSelf},
    {"index_copy", Indexing::kAlongDim, Range::kNonNegative, Error::kIndexCopy},
    {"gather", Indexing::kAlongDim, Range::kNonNegative, Error::kBoundsRuntime},
    {"scatter", Indexing::kAlongDim, Range::kNonNegative, Error::kBoundsRuntime},
    {"scatter_add", Indexing::kAlongDim, Range::kNonNegative, Error::kBoundsRuntime},
    {"scatter_reduce", Indexing::kAlongDim, Range::kNonNegative, Error::kBoundsRuntime},
    {"take", Indexing::kFlat, Range::kWrapping, Error::kElements},
    {"put", Indexing::kFlat, Range::kWrapping, Error::kElements},
};

const c10::IValue& Argument(const c10::FunctionSchema& schema, const c10::Stack& args,
                            const char* name) {
  const std::optional<int> index = schema.argumentIndexWithName(name);
  TORCH_INTERNAL_ASSERT(index, schema.name(), " has no argument ", name);
  return args[*index];
}

// Raises `op`'s error, the CPU's, for index `v` along dim `dim` of `size`; `context` follows it.
[[noreturn]] void RaiseOutOfRange(const IndexedOp& op, int64_t v, int64_t dim, int64_t size,
                                  const std::string& context = "") {
  switch (op.error) {
    case Error::kBounds:
      TORCH_CHECK_INDEX(false, "index ", v, " is out of bounds for dimension ", dim, " with size ",
                        size, context);
    case Error::kBoundsRuntime:
      TORCH_CHECK(false, "index ", v, " is out of bounds for dimension ", dim, " with size ", size,
                  context);
    case Error::kInSelf:
      TORCH_CHECK_INDEX(false, "index out of range in self", context);
    case Error::kIndexCopy:
      TORCH_CHECK_INDEX(false, "index_copy_(): index ", v, " is out of bounds for dimension ", dim,
                        " with size ", size, context);
    case Error::kElements:
      TORCH_CHECK_INDEX(false, "out of range: tried to access index ", v, " on a tensor of ", size,
                        " elements.", context);
  }
  TORCH_INTERNAL_ASSERT(false, "unknown index error kind");
}

bool Checkable(const at::Tensor& index) {
  return index.defined() && index.numel() > 0 && at::isIntegralType(index.scalar_type(), false);
}

// Raises `op`'s error for the first index out of range along a dim of `size` elements.
void CheckIndex(const IndexedOp& op, const at::Tensor& index, int64_t dim, int64_t size) {
  if (!Checkable(index)) return;
  const at::Tensor host = index.to(at::kCPU, at::kLong).contiguous();  // a host read
  const int64_t low = op.range == Range::kWrapping ? -size : 0;
  const int64_t* values = host.const_data_ptr<int64_t>();
  for (int64_t i = 0; i < host.numel(); ++i) {
    const int64_t v = values[i];
    if (v < low || v >= size) RaiseOutOfRange(op, v, dim, size);
  }
}

const IndexedOp* FindIndexedOp(const std::string& lowering_name) {
  for (const IndexedOp& candidate : kIndexedOps) {
    if (lowering_name == candidate.lowering) return &candidate;
  }
  return nullptr;
}

// Calls `check(index, name, entry, dim, size)` for each index tensor of the op: the tensor, the
// schema argument holding it (and its entry, in a list), the dim the CPU's message names, and the
// size of the range it indexes.
template <typename Check>
void ForEachIndex(const IndexedOp& op, const c10::FunctionSchema& schema, const c10::Stack& args,
                  Check&& check) {
  const at::Tensor& self = Argument(schema, args, "self").toTensor();
  switch (op.indexing) {
    case Indexing::kIndicesList: {
      // The CPU's message numbers the index tensors given, not the dims they index.
      int64_t dim = 0, given = 0;
      for (const std::optional<at::Tensor>& index :
           Argument(schema, args, "indices").toOptionalTensorList()) {
        if (index && index->defined() && dim < self.dim()) {
          check(*index, "indices", static_cast<size_t>(dim), given++, self.size(dim));
        }
        ++dim;
      }
      break;
    }
    case Indexing::kAlongDim: {
      const c10::IValue& dim_argument = Argument(schema, args, "dim");
      if (!dim_argument.isInt()) return;  // a Dimname overload (torch 2.11)
      const int64_t dim = c10::maybe_wrap_dim(dim_argument.toInt(), self.dim());
      check(Argument(schema, args, "index").toTensor(), "index", 0, dim,
            self.dim() == 0 ? 1 : self.size(dim));
      break;
    }
    case Indexing::kFlat:
      check(Argument(schema, args, "index").toTensor(), "index", 0, 0, self.numel());
      break;
  }
}

}  // namespace

struct IndexCheckReport {
  const IndexedOp* op;
  int64_t dim;
  int64_t size;
  std::shared_ptr<const std::string> site;
};

namespace {

// A recorded device-side check: `flag` (0-d i64 on the device) holds the op's greatest index out
// of range, or ops::kNoIndexOutOfRange.
struct DeviceIndexCheck {
  at::Tensor flag;
  std::shared_ptr<const IndexCheckReport> report;
  std::optional<int64_t> found;  // the flag's value, once read
};

// The checks a compiled graph's capture has seen recorded on this thread.
std::vector<std::pair<exec::DeviceStorage*, std::shared_ptr<const IndexCheckReport>>>&
CapturedChecks() {
  thread_local std::vector<std::pair<exec::DeviceStorage*, std::shared_ptr<const IndexCheckReport>>>
      captured;
  return captured;
}

struct DeviceIndexChecks {
  std::mutex mutex;
  std::vector<DeviceIndexCheck> recorded;
};

DeviceIndexChecks& RecordedChecks() {
  static auto* checks = new DeviceIndexChecks;  // never destroyed: tensors outlive exit order
  return *checks;
}

// A program that never syncs keeps recording checks; past this many, the launched ones are read.
constexpr size_t kMaxUnreadChecks = 1024;

// Reads the recorded checks whose programs have been launched, in order, and drops those that
// passed. At the first that failed: raises its error when `raise`; otherwise keeps it, and every
// check after it, for the next synchronization to raise (recording an op never raises another's).
void ReadIndexChecks(bool raise) {
  DeviceIndexChecks& recorded = RecordedChecks();
  std::vector<DeviceIndexCheck> checks;
  {
    std::lock_guard<std::mutex> lock(recorded.mutex);
    if (recorded.recorded.empty()) return;
    checks.swap(recorded.recorded);
  }
  std::vector<DeviceIndexCheck> kept;
  auto keep = [&](auto begin, auto end) {
    kept.insert(kept.end(), std::make_move_iterator(begin), std::make_move_iterator(end));
    std::lock_guard<std::mutex> lock(recorded.mutex);
    recorded.recorded.insert(recorded.recorded.begin(), std::make_move_iterator(kept.begin()),
                             std::make_move_iterator(kept.end()));
  };
  for (auto check = checks.begin(); check != checks.end(); ++check) {
    if (!check->found) {
      exec::DeviceStorage* storage = StorageOf(check->flag);
      bool pending = false;
      {
        const auto lock = exec::LockStorages();  // another thread's cut may be installing it
        pending = storage->pending();
      }
      if (pending) {  // fused mode, not cut yet: a later synchronization reads it
        kept.push_back(std::move(*check));
        continue;
      }
      int64_t found = ops::kNoIndexOutOfRange;
      try {
        Translate([&] { exec::CopyToHost(*storage, &found, sizeof(found)); });
      } catch (...) {
        keep(check + 1, checks.end());
        throw;  // the op's program failed: its own error
      }
      check->found = found;
    }
    if (*check->found == ops::kNoIndexOutOfRange) continue;
    if (!raise) return keep(check, checks.end());
    const DeviceIndexCheck failed = std::move(*check);
    keep(check + 1, checks.end());
    const IndexCheckReport& report = *failed.report;
    RaiseOutOfRange(*report.op, *failed.found, report.dim, report.size,
                    "\n(a device-side index check of " + *report.site +
                        ", reported at this later synchronization as CUDA reports a device-side "
                        "assert; torch_tpu.execution_mode(\"debug\") raises it at the op)");
  }
  keep(checks.end(), checks.end());
}

void Enqueue(std::vector<DeviceIndexCheck> checks) {
  if (checks.empty()) return;
  DeviceIndexChecks& recorded = RecordedChecks();
  bool over = false;
  {
    std::lock_guard<std::mutex> lock(recorded.mutex);
    for (DeviceIndexCheck& check : checks) recorded.recorded.push_back(std::move(check));
    over = recorded.recorded.size() > kMaxUnreadChecks;
  }
  if (over) ReadIndexChecks(/*raise=*/false);
}

}  // namespace

bool IsIndexedOp(const std::string& lowering_name) {
  return FindIndexedOp(lowering_name) != nullptr;
}

void CheckIndicesInDebugMode(const std::string& lowering_name, const c10::FunctionSchema& schema,
                             const c10::Stack& args) {
  // Inside a deferred scope (a compiled graph's trace, an optimizer step) the indices may not
  // exist yet: reading them would cut the scope.
  if (exec::CurrentMode() != exec::Mode::kDebug || exec::InDeferredScope()) return;
  const IndexedOp* op = FindIndexedOp(lowering_name);
  if (op == nullptr) return;
  ForEachIndex(*op, schema, args,
               [&](const at::Tensor& index, const char*, size_t, int64_t dim, int64_t size) {
                 CheckIndex(*op, index, dim, size);
               });
}

void RecordDeviceIndexChecks(const c10::OperatorHandle& handle, const c10::Stack& args,
                             const std::vector<size_t>& schema_index,
                             const ops::LoweringContext& ctx,
                             std::vector<exec::DeviceStorage*>& written) {
  // Debug mode reads the indices at the op instead, except inside a deferred scope.
  if (exec::CurrentMode() == exec::Mode::kDebug && !exec::InDeferredScope()) return;
  const IndexedOp* op = FindIndexedOp(ctx.name);
  if (op == nullptr) return;
  const c10::FunctionSchema& schema = handle.schema();
  // The value the lowering read for schema argument `name` (entry `entry` of a list), and its
  // growing form if it has one.
  auto lowered = [&](const char* name, size_t entry) -> std::pair<ir::Value, ops::GrowingValue> {
    const std::optional<int> position = schema.argumentIndexWithName(name);
    for (size_t j = 0; position && j < schema_index.size(); ++j) {
      if (schema_index[j] != static_cast<size_t>(*position)) continue;
      const ops::Argument& argument = ctx.args[j];
      if (argument.kind == ops::Argument::Kind::kTensor) return {argument.tensor, ctx.growing(j)};
      if (argument.kind == ops::Argument::Kind::kTensorList && entry < argument.tensors.size()) {
        return {argument.tensors[entry], ctx.growing(j, entry)};
      }
    }
    return {};
  };
  std::shared_ptr<const std::string> site;
  std::vector<DeviceIndexCheck> checks;
  ForEachIndex(
      *op, schema, args,
      [&](const at::Tensor& index, const char* name, size_t entry, int64_t dim, int64_t size) {
        const auto [value, grown] = lowered(name, entry);
        if (!Checkable(index) || !index.is_privateuseone() || !value) return;
        ops::Scalar extent;
        extent.i = size;
        const ir::Value out_of_range = ops::OutOfRangeIndex(
            value, ScalarParameter(extent, ir::DType::kS64), op->range == Range::kWrapping, grown);
        at::Tensor flag = EmptyTpu({}, {}, at::kLong, index.device().index());
        WriteTensor(flag, out_of_range);
        written.push_back(StorageOf(flag));
        if (site == nullptr) site = RecordingSite(handle);
        auto report =
            std::make_shared<const IndexCheckReport>(IndexCheckReport{op, dim, size, site});
        if (exec::ActiveGraphCapture() != nullptr) {
          CapturedChecks().emplace_back(StorageOf(flag), report);
        }
        checks.push_back(DeviceIndexCheck{std::move(flag), std::move(report), std::nullopt});
      });
  Enqueue(std::move(checks));
}

std::vector<std::pair<exec::DeviceStorage*, std::shared_ptr<const IndexCheckReport>>>
TakeCapturedIndexChecks() {
  return std::exchange(CapturedChecks(), {});
}

void AddIndexCheck(at::Tensor value, std::shared_ptr<const IndexCheckReport> report) {
  std::vector<DeviceIndexCheck> checks;
  checks.push_back(DeviceIndexCheck{std::move(value), std::move(report), std::nullopt});
  Enqueue(std::move(checks));
}

void RaiseFailedIndexChecks() { ReadIndexChecks(/*raise=*/true); }

}  // namespace torch_tpu::aten
