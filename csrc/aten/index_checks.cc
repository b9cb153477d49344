#include "aten/index_checks.h"

#include <ATen/core/Tensor.h>
#include <c10/core/WrapDimMinimal.h>

#include <optional>

#include "exec/context.h"
#include "exec/pending.h"

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

// Raises `op`'s error for the first index out of range along a dim of `size` elements.
void CheckIndex(const IndexedOp& op, const at::Tensor& index, int64_t dim, int64_t size) {
  if (!index.defined() || index.numel() == 0 || !at::isIntegralType(index.scalar_type(), false)) {
    return;
  }
  const at::Tensor host = index.to(at::kCPU, at::kLong).contiguous();  // a host read
  const int64_t low = op.range == Range::kWrapping ? -size : 0;
  const int64_t* values = host.const_data_ptr<int64_t>();
  for (int64_t i = 0; i < host.numel(); ++i) {
    const int64_t v = values[i];
    if (v >= low && v < size) continue;
    switch (op.error) {
      case Error::kBounds:
        TORCH_CHECK_INDEX(false, "index ", v, " is out of bounds for dimension ", dim,
                          " with size ", size);
      case Error::kBoundsRuntime:
        TORCH_CHECK(false, "index ", v, " is out of bounds for dimension ", dim, " with size ",
                    size);
      case Error::kInSelf:
        TORCH_CHECK_INDEX(false, "index out of range in self");
      case Error::kIndexCopy:
        TORCH_CHECK_INDEX(false, "index_copy_(): index ", v, " is out of bounds for dimension ",
                          dim, " with size ", size);
      case Error::kElements:
        TORCH_CHECK_INDEX(false, "out of range: tried to access index ", v, " on a tensor of ",
                          size, " elements.");
    }
  }
}

}  // namespace

void CheckIndicesInDebugMode(const std::string& lowering_name, const c10::FunctionSchema& schema,
                             const c10::Stack& args) {
  // Inside a deferred scope (a compiled graph's trace, an optimizer step) the indices may not
  // exist yet: reading them would cut the scope.
  if (exec::CurrentMode() != exec::Mode::kDebug || exec::InDeferredScope()) return;
  const IndexedOp* op = nullptr;
  for (const IndexedOp& candidate : kIndexedOps) {
    if (lowering_name == candidate.lowering) op = &candidate;
  }
  if (op == nullptr) return;
  const at::Tensor& self = Argument(schema, args, "self").toTensor();
  switch (op->indexing) {
    case Indexing::kIndicesList: {
      // The CPU's message numbers the index tensors given, not the dims they index.
      int64_t dim = 0, given = 0;
      for (const std::optional<at::Tensor>& index :
           Argument(schema, args, "indices").toOptionalTensorList()) {
        if (index && index->defined() && dim < self.dim()) {
          CheckIndex(*op, *index, given++, self.size(dim));
        }
        ++dim;
      }
      break;
    }
    case Indexing::kAlongDim: {
      const c10::IValue& dim_argument = Argument(schema, args, "dim");
      if (!dim_argument.isInt()) return;  // a Dimname overload (torch 2.11)
      const int64_t dim = c10::maybe_wrap_dim(dim_argument.toInt(), self.dim());
      CheckIndex(*op, Argument(schema, args, "index").toTensor(), dim,
                 self.dim() == 0 ? 1 : self.size(dim));
      break;
    }
    case Indexing::kFlat:
      CheckIndex(*op, Argument(schema, args, "index").toTensor(), 0, self.numel());
      break;
  }
}

}  // namespace torch_tpu::aten
