#include "aten/device_checks.h"

#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/accumulate.h>
#include <c10/util/bit_cast.h>

#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
  kBounds,          // IndexError: index 7 is out of bounds for dimension 0 with size 5
  kBoundsRuntime,   // the same, as a RuntimeError (gather, scatter)
  kInSelf,          // IndexError: index out of range in self
  kIndexCopy,       // IndexError: index_copy_(): index 7 is out of bounds for ...
  kElements,        // IndexError: out of range: tried to access index 7 on a tensor of 5 elements.
  kTarget,          // IndexError: Target 7 is out of bounds. (nll_loss)
  kTargetRange,     // RuntimeError: target out of range (multi_margin_loss)
  kTargetArgument,  // RuntimeError: argument #2 'target' is out of range (multilabel_margin_loss)
  kBagIndex,        // RuntimeError: Index 2 of input takes value 7 which is not in the valid ...
  kBagMaxIndex,     // RuntimeError: embedding_bag: Expected idx >= 0 && idx < num_embeddings ...
  kUnpoolIndex,     // RuntimeError: Found an invalid max index: 9 (output volumes are of size 4x4)
  kSorterIndex,     // RuntimeError: torch.searchsorted(): sorter index out of range
  // Value domains (the value is 0, or multinomial's code; the position the first bad element's):
  kInputNotUnit,    // RuntimeError: all elements of input should be between 0 and 1
  kTargetNotUnit,   // RuntimeError: all elements of target should be between 0 and 1
  kBernoulliP,      // RuntimeError: Expected p_in >= 0 && p_in <= 1 to be true, but got false.
  kMultinomial,     // RuntimeError: by the value's code (ops::kNegativeProbability, ...)
  kNegativeStd,     // RuntimeError: normal expects all elements of std >= 0.0
  kPoissonRate,     // RuntimeError: invalid Poisson rate, expected rate to be non-negative
  kSourceTooShort,  // RuntimeError: Number of elements of source < number of ones in mask
  // The value and position are the bits of the data's min and max (ops::NonFiniteDataRange):
  kHistcRange,      // RuntimeError: torch.histc: range of [1, inf] is not finite
  kHistogramRange,  // RuntimeError: torch.histogramdd: dimension 0's range [1, inf] is not finite
};

// How an op indexes `indexed`: through its "indices" list (one per leading dim), its `index`
// along "dim", its `index` into the flattened tensor, its `index` into the class dim (1, or 0
// for a single sample), the first dim or the last, where given (an optional argument), or
// (max_unpool) its `index` into each plane of the output, the product of "output_size".
enum class Indexing {
  kIndicesList,
  kAlongDim,
  kFlat,
  kClassDim,
  kFirstDim,
  kLastDim,
  kOutputPlane
};

struct IndexedOp {
  const char* lowering;
  Indexing indexing;
  Range range;
  Error error;
  const char* indexed = "self";    // the argument indexed
  const char* index = "index";     // the index argument (kIndicesList: "indices")
  const char* ignored = nullptr;   // an int argument whose value is never out of range
  bool minus_one_ignored = false;  // -1 is never out of range (it ends a row of targets)
};

constexpr IndexedOp kIndexedOps[] = {
    {"index", Indexing::kIndicesList, Range::kWrapping, Error::kBounds, "self", "indices"},
    {"_index_put_impl", Indexing::kIndicesList, Range::kWrapping, Error::kBounds, "self",
     "indices"},
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
    // Losses over class targets: the CPU raises where CUDA asserts; a lowering that compares
    // classes with the target would take an unknown class as none.
    {"nll_loss_forward", Indexing::kClassDim, Range::kNonNegative, Error::kTarget, "self", "target",
     "ignore_index"},
    {"nll_loss2d_forward", Indexing::kClassDim, Range::kNonNegative, Error::kTarget, "self",
     "target", "ignore_index"},
    {"multi_margin_loss", Indexing::kClassDim, Range::kNonNegative, Error::kTargetRange, "self",
     "target"},
    {"multilabel_margin_loss_forward", Indexing::kClassDim, Range::kNonNegative,
     Error::kTargetArgument, "self", "target", nullptr, /*minus_one_ignored=*/true},
    {"_embedding_bag", Indexing::kFirstDim, Range::kNonNegative, Error::kBagIndex, "weight",
     "indices"},
    {"_embedding_bag_forward_only", Indexing::kFirstDim, Range::kNonNegative, Error::kBagIndex,
     "weight", "indices"},
    {"searchsorted", Indexing::kLastDim, Range::kNonNegative, Error::kSorterIndex,
     "sorted_sequence", "sorter"},
    {"max_unpool2d", Indexing::kOutputPlane, Range::kNonNegative, Error::kUnpoolIndex, "self",
     "indices"},
    {"max_unpool3d", Indexing::kOutputPlane, Range::kNonNegative, Error::kUnpoolIndex, "self",
     "indices"},
};

// Arguments whose values the CPU checks against a domain (where CUDA asserts on the device).
struct DomainCheck {
  const char* lowering;
  const char* argument;  // a tensor argument; bernoulli's p is `self` in the overloads without p
  ops::ValueDomain domain;
  Error error;
};

constexpr DomainCheck kDomainChecks[] = {
    {"binary_cross_entropy", "self", ops::ValueDomain::kUnitInterval, Error::kInputNotUnit},
    {"binary_cross_entropy", "target", ops::ValueDomain::kUnitInterval, Error::kTargetNotUnit},
    {"bernoulli", "p", ops::ValueDomain::kUnitInterval, Error::kBernoulliP},
    {"normal", "std", ops::ValueDomain::kNonNegative, Error::kNegativeStd},
    {"poisson", "self", ops::ValueDomain::kNonNegative, Error::kPoissonRate},
    // Or kSampledProbabilities (DomainOf).
    {"multinomial", "self", ops::ValueDomain::kProbabilities, Error::kMultinomial},
};

// Masks whose true entries (as broadcast to `self`) must not outnumber a source's elements.
struct CountCheck {
  const char* lowering;
  const char* mask;
  const char* source;
  Error error;
};

constexpr CountCheck kCountChecks[] = {
    {"masked_scatter", "mask", "source", Error::kSourceTooShort},
};

// histc's range is the data's when min == max, histogram's (bin_ct) when none is given: the CPU
// rejects it when it is not finite.
bool ChecksDataRange(const std::string& lowering_name) {
  return lowering_name == "histc" || lowering_name == "histogram";
}

// The dimension histogram's data-range check names (ScopedHistogramDimension).
thread_local int64_t g_histogram_dimension = 0;

// A float from the bits a check holds: an f64's when `width` is 64, else an f32's. A NaN gets the
// sign the CPU's message prints it with.
double FromBits(int64_t bits, int64_t width, bool negative_nan) {
  const double value =
      width == 64 ? c10::bit_cast<double>(bits) : c10::bit_cast<float>(static_cast<uint32_t>(bits));
  return std::isnan(value) ? std::copysign(value, negative_nan ? -1.0 : 1.0) : value;
}

const c10::IValue& Argument(const c10::FunctionSchema& schema, const c10::Stack& args,
                            const char* name) {
  const std::optional<int> index = schema.argumentIndexWithName(name);
  TORCH_INTERNAL_ASSERT(index, schema.name(), " has no argument ", name);
  return args[*index];
}

// Raises `error`, the CPU's, for a check that found `v` (an index, or a code) at `position` (in
// the CPU's order) of an argument indexing dim `dim` of `size` (`extent`: its dims, "4x4", where
// the message names them); `context` follows it. For kHistcRange and kHistogramRange, `v` and
// `position` are the range's bits and `size` their float's width.
[[noreturn]] void RaiseFailedCheck(Error error, int64_t v, int64_t position, int64_t dim,
                                   int64_t size, const std::string& extent,
                                   const std::string& context = "") {
  switch (error) {
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
    case Error::kTarget:
      TORCH_CHECK_INDEX(false, "Target ", v, " is out of bounds.", context);
    case Error::kTargetRange:
      TORCH_CHECK(false, "target out of range", context);
    case Error::kTargetArgument:
      TORCH_CHECK(false, "argument #2 'target' is out of range", context);
    case Error::kBagIndex:
      TORCH_CHECK(false, "Index ", position, " of input takes value ", v,
                  " which is not in the valid range [0, ", size, ")", context);
    case Error::kBagMaxIndex:
      TORCH_CHECK(false,
                  "embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be ",
                  v, context);
    case Error::kSorterIndex:
      TORCH_CHECK(false, "torch.searchsorted(): sorter index out of range", context);
    case Error::kUnpoolIndex:
      TORCH_CHECK(false, "Found an invalid max index: ", v, " (output volumes are of size ", extent,
                  ")", context);
    case Error::kInputNotUnit:
      TORCH_CHECK(false, "all elements of input should be between 0 and 1", context);
    case Error::kTargetNotUnit:
      TORCH_CHECK(false, "all elements of target should be between 0 and 1", context);
    case Error::kBernoulliP:
      TORCH_CHECK(false,
                  "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error "
                  "message be improved?  If so, please report an enhancement request to PyTorch.)",
                  context);
    case Error::kMultinomial:
      TORCH_CHECK(v != ops::kNegativeProbability,
                  "invalid multinomial distribution (encountering probability entry < 0)", context);
      TORCH_CHECK(v != ops::kInfiniteProbability,
                  "invalid multinomial distribution (encountering probability entry = infinity or "
                  "NaN)",
                  context);
      TORCH_CHECK(v != ops::kMasslessDistribution,
                  "invalid multinomial distribution (sum of probabilities <= 0)", context);
      TORCH_CHECK(false, "probability tensor contains either `inf`, `nan` or element < 0", context);
    case Error::kNegativeStd:
      TORCH_CHECK(false, "normal expects all elements of std >= 0.0", context);
    case Error::kPoissonRate:
      TORCH_CHECK(false, "invalid Poisson rate, expected rate to be non-negative", context);
    case Error::kSourceTooShort:
      TORCH_CHECK(false, "Number of elements of source < number of ones in mask", context);
    case Error::kHistcRange:  // x86's default NaN, from the CPU's min and max, prints "-nan"
      TORCH_CHECK(false, "torch.histc: range of [", FromBits(v, size, true), ", ",
                  FromBits(position, size, true), "] is not finite", context);
    case Error::kHistogramRange:
      TORCH_CHECK(false, "torch.histogramdd: dimension ", dim, "'s range [",
                  FromBits(v, size, false), ", ", FromBits(position, size, false),
                  "] is not finite", context);
  }
  TORCH_INTERNAL_ASSERT(false, "unknown device check error kind");
}

bool Checkable(const at::Tensor& index) {
  return index.defined() && index.numel() > 0 && at::isIntegralType(index.scalar_type(), false);
}

// The domain `check` requires of the op called with `args`.
ops::ValueDomain DomainOf(const DomainCheck& check, const c10::FunctionSchema& schema,
                          const c10::Stack& args) {
  // The CPU draws one sample, or any without replacement, on a path that checks every entry first.
  if (check.domain == ops::ValueDomain::kProbabilities &&
      Argument(schema, args, "replacement").toBool() &&
      Argument(schema, args, "num_samples").toInt() > 1) {
    return ops::ValueDomain::kSampledProbabilities;
  }
  return check.domain;
}

// The CPU's error for `op` called with `args`: embedding_bag's max mode has a wording of its own.
Error ErrorOf(const IndexedOp& op, const c10::FunctionSchema& schema, const c10::Stack& args) {
  constexpr int64_t kBagMaxMode = 2;
  if (op.error == Error::kBagIndex && Argument(schema, args, "mode").toInt() == kBagMaxMode) {
    return Error::kBagMaxIndex;
  }
  return op.error;
}

// The value of `op`'s ignored index argument, if it has one.
std::optional<int64_t> IgnoredIndex(const IndexedOp& op, const c10::FunctionSchema& schema,
                                    const c10::Stack& args) {
  if (op.minus_one_ignored) return -1;
  if (op.ignored == nullptr) return std::nullopt;
  return Argument(schema, args, op.ignored).toInt();
}

const IndexedOp* FindIndexedOp(const std::string& lowering_name) {
  for (const IndexedOp& candidate : kIndexedOps) {
    if (lowering_name == candidate.lowering) return &candidate;
  }
  return nullptr;
}

bool HasDomainOrCountChecks(const std::string& lowering_name) {
  for (const DomainCheck& check : kDomainChecks) {
    if (lowering_name == check.lowering) return true;
  }
  for (const CountCheck& check : kCountChecks) {
    if (lowering_name == check.lowering) return true;
  }
  return ChecksDataRange(lowering_name);
}

// "4x4": the dims an error names.
std::string ExtentText(const std::vector<int64_t>& dims) {
  std::string text;
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? "x" : "") + std::to_string(dims[i]);
  return text;
}

// Calls `check(index, name, entry, dim, size, extent)` for each index tensor of the op: the
// tensor, the schema argument holding it (and its entry, in a list), the dim the CPU's message
// names, the size of the range it indexes and, where the message names them, its dims.
template <typename Check>
void ForEachIndex(const IndexedOp& op, const c10::FunctionSchema& schema, const c10::Stack& args,
                  Check&& check) {
  const at::Tensor& self = Argument(schema, args, op.indexed).toTensor();
  switch (op.indexing) {
    case Indexing::kIndicesList: {
      // The CPU's message numbers the index tensors given, not the dims they index.
      int64_t dim = 0, given = 0;
      for (const std::optional<at::Tensor>& entry :
           Argument(schema, args, op.index).toOptionalTensorList()) {
        if (entry && entry->defined() && dim < self.dim()) {
          check(*entry, op.index, static_cast<size_t>(dim), given++, self.size(dim), "");
        }
        ++dim;
      }
      break;
    }
    case Indexing::kAlongDim: {
      const c10::IValue& dim_argument = Argument(schema, args, "dim");
      if (!dim_argument.isInt()) return;  // a Dimname overload (torch 2.11)
      const int64_t dim = c10::maybe_wrap_dim(dim_argument.toInt(), self.dim());
      check(Argument(schema, args, op.index).toTensor(), op.index, 0, dim,
            self.dim() == 0 ? 1 : self.size(dim), "");
      break;
    }
    case Indexing::kFlat:
      check(Argument(schema, args, op.index).toTensor(), op.index, 0, 0, self.numel(), "");
      break;
    case Indexing::kClassDim:
    case Indexing::kFirstDim: {
      const int64_t dim = op.indexing == Indexing::kClassDim && self.dim() > 1 ? 1 : 0;
      if (self.dim() == 0) return;  // the op's own checks reject it
      check(Argument(schema, args, op.index).toTensor(), op.index, 0, dim, self.size(dim), "");
      break;
    }
    case Indexing::kLastDim: {
      const c10::IValue& index = Argument(schema, args, op.index);
      if (index.isNone() || self.dim() == 0) return;
      check(index.toTensor(), op.index, 0, self.dim() - 1, self.size(-1), "");
      break;
    }
    case Indexing::kOutputPlane: {
      const std::vector<int64_t> output_size = Argument(schema, args, "output_size").toIntVector();
      check(Argument(schema, args, op.index).toTensor(), op.index, 0, 0,
            c10::multiply_integers(output_size), ExtentText(output_size));
      break;
    }
  }
}

}  // namespace

struct DeviceCheckReport {
  Error error;
  int64_t dim;
  int64_t size;
  std::shared_ptr<const std::string> site;
  std::string extent;  // the dims of `size`, where the error names them
};

namespace {

// What a check's value holds: the first bad element's value (an index, or a code) and its
// position, or ops::kNoIndexOutOfRange in both (ops::OutOfRangeIndex, ops::OutsideDomain).
struct FirstFailure {
  int64_t value;
  int64_t position;
};

// Both entries hold the sentinel only when the check found nothing (a failed histc range check's
// min may be -0.0, whose bits are the sentinel's).
bool Passed(const FirstFailure& found) {
  return found.value == ops::kNoIndexOutOfRange && found.position == ops::kNoIndexOutOfRange;
}

// A recorded device-side check: `storage` (an i64 [2] on the device) holds its FirstFailure.
struct DeviceCheck {
  c10::Storage storage;
  std::shared_ptr<const DeviceCheckReport> report;
  std::optional<FirstFailure> found;  // the storage's value, once read
};

// The checks a compiled graph's capture has seen recorded on this thread.
std::vector<std::pair<exec::DeviceStorage*, std::shared_ptr<const DeviceCheckReport>>>&
CapturedChecks() {
  thread_local std::vector<
      std::pair<exec::DeviceStorage*, std::shared_ptr<const DeviceCheckReport>>>
      captured;
  return captured;
}

struct DeviceCheckQueue {
  std::mutex mutex;
  std::vector<DeviceCheck> recorded;
};

DeviceCheckQueue& RecordedChecks() {
  static auto* checks = new DeviceCheckQueue;  // never destroyed: tensors outlive exit order
  return *checks;
}

// A program that never syncs keeps recording checks; past this many, the launched ones are read.
constexpr size_t kMaxUnreadChecks = 1024;

// Reads the recorded checks whose programs have been launched, in order, and drops those that
// passed. At the first that failed: raises its error when `raise`; otherwise keeps it, and every
// check after it, for the next synchronization to raise (recording an op never raises another's).
void ReadDeviceChecks(bool raise) {
  DeviceCheckQueue& recorded = RecordedChecks();
  std::vector<DeviceCheck> checks;
  {
    std::lock_guard<std::mutex> lock(recorded.mutex);
    if (recorded.recorded.empty()) return;
    checks.swap(recorded.recorded);
  }
  std::vector<DeviceCheck> kept;
  auto keep = [&](auto begin, auto end) {
    kept.insert(kept.end(), std::make_move_iterator(begin), std::make_move_iterator(end));
    std::lock_guard<std::mutex> lock(recorded.mutex);
    recorded.recorded.insert(recorded.recorded.begin(), std::make_move_iterator(kept.begin()),
                             std::make_move_iterator(kept.end()));
  };
  for (auto check = checks.begin(); check != checks.end(); ++check) {
    if (!check->found) {
      exec::DeviceStorage* storage = StorageOf(check->storage);
      bool pending = false;
      {
        const auto lock = exec::LockStorages();  // another thread's cut may be installing it
        pending = storage->pending();
      }
      if (pending) {  // fused mode, not cut yet: a later synchronization reads it
        kept.push_back(std::move(*check));
        continue;
      }
      FirstFailure found{};
      static_assert(sizeof(FirstFailure) == 2 * sizeof(int64_t));
      try {
        Translate([&] { exec::CopyToHost(*storage, &found, sizeof(found)); });
      } catch (...) {
        keep(check + 1, checks.end());
        throw;  // the op's program failed: its own error
      }
      check->found = found;
    }
    if (Passed(*check->found)) continue;
    if (!raise) return keep(check, checks.end());
    const DeviceCheck failed = std::move(*check);
    keep(check + 1, checks.end());
    const DeviceCheckReport& report = *failed.report;
    RaiseFailedCheck(report.error, failed.found->value, failed.found->position, report.dim,
                     report.size, report.extent,
                     "\n(a device-side check of " + *report.site +
                         ", reported at this later synchronization as CUDA reports a device-side "
                         "assert; torch_tpu.execution_mode(\"debug\") raises it at the op)");
  }
  keep(checks.end(), checks.end());
}

void Enqueue(std::vector<DeviceCheck> checks) {
  if (checks.empty()) return;
  DeviceCheckQueue& recorded = RecordedChecks();
  bool over = false;
  {
    std::lock_guard<std::mutex> lock(recorded.mutex);
    for (DeviceCheck& check : checks) recorded.recorded.push_back(std::move(check));
    over = recorded.recorded.size() > kMaxUnreadChecks;
  }
  if (over) ReadDeviceChecks(/*raise=*/false);
}

}  // namespace

bool IsCheckedOp(const std::string& lowering_name) {
  return FindIndexedOp(lowering_name) != nullptr || HasDomainOrCountChecks(lowering_name);
}

void RecordDeviceChecks(const c10::OperatorHandle& handle, const c10::Stack& args,
                        const std::vector<size_t>& schema_index, const ops::LoweringContext& ctx,
                        std::vector<exec::DeviceStorage*>& written) {
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
  std::vector<DeviceCheck> checks;
  auto add = [&](const at::Tensor& like, const ir::Value& check, DeviceCheckReport report) {
    at::Tensor flag = EmptyTpuContiguous({2}, at::kLong, like.device().index());
    WriteTensor(flag, check);
    if (site == nullptr) site = RecordingSite(handle);
    report.site = site;
    checks.push_back(DeviceCheck{flag.storage(),
                                 std::make_shared<const DeviceCheckReport>(std::move(report)),
                                 std::nullopt});
  };
  if (const IndexedOp* op = FindIndexedOp(ctx.name)) {
    const Error error = ErrorOf(*op, schema, args);
    // A runtime scalar, like the size: a new ignored value is not a new program.
    ir::Value ignored;
    if (const std::optional<int64_t> value = IgnoredIndex(*op, schema, args)) {
      ops::Scalar scalar;
      scalar.i = *value;
      ignored = ScalarParameter(scalar, ir::DType::kS64);
    }
    ForEachIndex(*op, schema, args,
                 [&](const at::Tensor& index, const char* name, size_t entry, int64_t dim,
                     int64_t size, const std::string& dims) {
                   const auto [value, grown] = lowered(name, entry);
                   if (!Checkable(index) || !index.is_privateuseone() || !value) return;
                   ops::Scalar extent;
                   extent.i = size;
                   add(index,
                       ops::OutOfRangeIndex(value, ScalarParameter(extent, ir::DType::kS64),
                                            op->range == Range::kWrapping, grown, ignored),
                       DeviceCheckReport{error, dim, size, nullptr, dims});
                 });
  }
  for (const DomainCheck& check : kDomainChecks) {
    if (ctx.name != check.lowering) continue;
    const std::optional<int> position = schema.argumentIndexWithName(check.argument);
    const char* name = position ? check.argument : "self";
    const c10::IValue& argument = Argument(schema, args, name);
    // A Python number is checked by the lowering at the call.
    if (!argument.isTensor() || argument.toTensor().numel() == 0) continue;
    const ir::Value value = lowered(name, 0).first;
    if (!value || !argument.toTensor().is_privateuseone()) continue;
    add(argument.toTensor(), ops::OutsideDomain(value, DomainOf(check, schema, args)),
        DeviceCheckReport{check.error, 0, 0, nullptr});
  }
  for (const CountCheck& check : kCountChecks) {
    if (ctx.name != check.lowering) continue;
    const at::Tensor& self = Argument(schema, args, "self").toTensor();
    const at::Tensor& mask = Argument(schema, args, check.mask).toTensor();
    const int64_t selected = c10::multiply_integers(at::infer_size(self.sizes(), mask.sizes()));
    const ir::Value value = lowered(check.mask, 0).first;
    if (mask.numel() == 0 || selected == 0 || !mask.is_privateuseone() || !value) continue;
    add(mask,
        ops::MaskOutnumbers(value, selected / mask.numel(),
                            Argument(schema, args, check.source).toTensor().numel()),
        DeviceCheckReport{check.error, 0, 0, nullptr});
  }
  if (ChecksDataRange(ctx.name)) {
    const at::Tensor& self = Argument(schema, args, "self").toTensor();
    const ir::Value value = lowered("self", 0).first;
    const bool histc = ctx.name == "histc";
    // histc takes the data's range when min == max; histogram when bins is a count and no range
    // is given (its bins_tensor overload has neither).
    const bool data_range =
        histc ? Argument(schema, args, "min").toScalar().toDouble() ==
                    Argument(schema, args, "max").toScalar().toDouble()
              : Argument(schema, args, "bins").isInt() && Argument(schema, args, "range").isNone();
    if (data_range && self.is_floating_point() && self.numel() > 0 && value) {
      const int64_t width = self.scalar_type() == at::kDouble ? 64 : 32;
      add(self, ops::NonFiniteDataRange(value),
          DeviceCheckReport{histc ? Error::kHistcRange : Error::kHistogramRange,
                            histc ? 0 : g_histogram_dimension, width, nullptr});
    }
  }
  if (checks.empty()) return;
  // Debug mode raises at the op, before its results are written, except inside a deferred scope
  // (a compiled graph's trace, an optimizer step), which cannot run the checks yet.
  if (exec::CurrentMode() == exec::Mode::kDebug && !exec::InDeferredScope()) {
    std::vector<exec::DeviceStorage*> storages;
    for (const DeviceCheck& check : checks) storages.push_back(StorageOf(check.storage));
    FinishWrites(storages);
    for (const DeviceCheck& check : checks) {
      FirstFailure found{};
      exec::CopyToHost(*StorageOf(check.storage), &found, sizeof(found));
      if (!Passed(found)) {
        RaiseFailedCheck(check.report->error, found.value, found.position, check.report->dim,
                         check.report->size, check.report->extent);
      }
    }
    return;
  }
  for (const DeviceCheck& check : checks) {
    written.push_back(StorageOf(check.storage));
    if (exec::ActiveGraphCapture() != nullptr) {
      CapturedChecks().emplace_back(StorageOf(check.storage), check.report);
    }
  }
  Enqueue(std::move(checks));
}

std::vector<std::pair<exec::DeviceStorage*, std::shared_ptr<const DeviceCheckReport>>>
TakeCapturedDeviceChecks() {
  return std::exchange(CapturedChecks(), {});
}

void AddDeviceCheck(c10::Storage value, std::shared_ptr<const DeviceCheckReport> report) {
  std::vector<DeviceCheck> checks;
  checks.push_back(DeviceCheck{std::move(value), std::move(report), std::nullopt});
  Enqueue(std::move(checks));
}

void RaiseFailedDeviceChecks() { ReadDeviceChecks(/*raise=*/true); }

ScopedHistogramDimension::ScopedHistogramDimension(int64_t dim)
    : previous_(std::exchange(g_histogram_dimension, dim)) {}

ScopedHistogramDimension::~ScopedHistogramDimension() { g_histogram_dimension = previous_; }

}  // namespace torch_tpu::aten
