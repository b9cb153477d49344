// The lowering library: one pure function per ATen op, logical values in, logical values out.
// Knows nothing of tensors, storages, modes or PJRT.
#pragma once

#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace torch_tpu::ops {

using ir::DType;
using ir::Shape;
using ir::TensorType;
using ir::Value;

// A host scalar argument (a Python number, or the value of a 0-d CPU tensor).
struct Scalar {
  enum class Kind { kBool, kInt, kFloat, kComplex };
  Kind kind = Kind::kInt;
  double f = 0;  // kComplex: the real part
  int64_t i = 0;
  double imag = 0;  // kComplex only
  bool IsFloatLike() const { return kind == Kind::kFloat || kind == Kind::kComplex; }
  double ToDouble() const { return IsFloatLike() ? f : static_cast<double>(i); }
  int64_t ToInt() const { return IsFloatLike() ? static_cast<int64_t>(f) : i; }
  bool IsOne() const { return ToDouble() == 1.0 && imag == 0; }
  bool IsZero() const { return ToDouble() == 0 && imag == 0; }
};

// A tensor whose dimension `dim` grew by appending (exec/bucketing.h), as its padded value:
// `padded` has the tensor's shape but along `dim`, where its first `length` positions are the
// tensor's and the rest zeros. `length_parameter` holds `length` as a runtime s64 scalar, so a
// program that masks with it does not depend on the length, only on the padded size.
struct GrowingValue {
  Value padded;
  Value length_parameter;
  int64_t dim = -1;
  int64_t length = 0;
  explicit operator bool() const { return static_cast<bool>(padded); }
  int64_t bucket() const { return padded.shape()[dim]; }
};

struct Argument {
  enum class Kind {
    kNone,
    kTensor,
    kTensorList,
    kScalar,
    kInt,
    kDouble,
    kBool,
    kIntList,
    kDoubleList,
    kString,
    kDType,
    kOther
  };
  Kind kind = Kind::kNone;
  Value tensor;
  std::vector<Value> tensors;
  Scalar scalar;  // kScalar, kInt, kDouble, kBool all fill this too
  // A kTensor that is a 0-d CPU tensor (a wrapped Python number): `scalar` holds its value, so
  // value(i, dtype) makes the parameter in dtype directly, and `3` and `0.5` share one program.
  bool host_scalar = false;
  // A kTensor's layout, for the few ops whose results PyTorch defines by it (_linalg_det factors
  // A^T when A is contiguous, and its backward relies on that).
  bool contiguous = true;
  std::vector<int64_t> ints;
  std::vector<double> doubles;  // kDoubleList
  std::string text;
  DType dtype = DType::kF32;
  // Per tensor (one for kTensor, one per list entry for kTensorList), when its storage grew by
  // appending; empty when none did. Lowerings that can mask padding use it (cat, attention).
  std::vector<GrowingValue> growing;
};

class LoweringContext {
 public:
  std::string name;                 // "add"
  std::string overload;             // "Tensor", "Scalar", "out", ""
  std::vector<Argument> args;       // schema arguments, out= arguments removed
  std::vector<TensorType> outputs;  // the types the results must have (from the meta run)
  DType promoted = DType::kF32;     // PyTorch's result_type over tensor and scalar arguments
  // Makes a 0-d runtime parameter holding `scalar` as `dtype` (so a new value does not recompile).
  std::function<Value(const Scalar&, DType)> make_scalar_parameter;
  // New values for arguments the op mutates without returning them (native_batch_norm's running
  // stats): (index into args, value of the argument's exact shape and dtype).
  std::vector<std::pair<size_t, Value>> argument_writes;
  // Growing layouts (exec/bucketing.h): the padded size after appending to a grown dimension and
  // for a range that grew (0: leave it unpadded), and the results a lowering also gives in growing
  // form (per result; its plain value is still returned, for outputs that cannot take the layout).
  int64_t (*append_bucket)(int64_t length, int64_t appended) = nullptr;
  int64_t (*range_bucket)(int64_t length) = nullptr;
  std::vector<GrowingValue> growing_results;

  size_t size() const { return args.size(); }
  bool has(size_t i) const { return i < args.size() && args[i].kind != Argument::Kind::kNone; }
  const Argument& arg(size_t i) const;
  bool is_tensor(size_t i) const { return has(i) && args[i].kind == Argument::Kind::kTensor; }
  Value tensor(size_t i) const;
  // The growing form of tensor argument i (entry `entry` of a list), or an empty one.
  GrowingValue growing(size_t i, size_t entry = 0) const;
  // A tensor converted to dtype, or a scalar as a runtime parameter of dtype.
  Value value(size_t i, DType dtype) const;
  Scalar scalar(size_t i) const;
  int64_t int_arg(size_t i) const;
  int64_t int_arg(size_t i, int64_t fallback) const { return has(i) ? int_arg(i) : fallback; }
  double double_arg(size_t i) const { return scalar(i).ToDouble(); }
  bool bool_arg(size_t i, bool fallback = false) const {
    return has(i) ? scalar(i).i != 0 : fallback;
  }
  const std::vector<int64_t>& int_list(size_t i) const;
  const std::vector<double>& double_list(size_t i) const;
  const std::string& string_arg(size_t i) const;
  const TensorType& output(size_t i = 0) const { return outputs.at(i); }
  Value ScalarParameter(const Scalar& s, DType dtype) const {
    return make_scalar_parameter(s, dtype);
  }
};

using Lowering = std::vector<Value> (*)(LoweringContext&);

// The one registry: names are ATen op base names ("add", "sum", "_softmax").
void RegisterLowering(const std::string& name, Lowering lowering);
Lowering FindLowering(const std::string& name);
std::vector<std::string> RegisteredLowerings();

// complex64 reaches only the lowerings checked for it (csrc/ops/complex.cc); any other with a
// complex argument or result raises NotImplementedError, never a wrong program.
bool AcceptsComplex(const std::string& name);

struct LoweringRegistrar {
  LoweringRegistrar(std::initializer_list<std::pair<const char*, Lowering>> entries) {
    for (const auto& [name, lowering] : entries) RegisterLowering(name, lowering);
  }
};

// Error for a lowering that cannot handle its arguments: becomes NotImplementedError.
class UnsupportedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---- Device-side checks (aten/device_checks.h; ops/device_checks.cc) ----

// What a check gives when nothing is out of range (both entries).
inline constexpr int64_t kNoIndexOutOfRange = std::numeric_limits<int64_t>::min();
// The first entry of `index` (any integer dtype; row-major order) outside [-size, size) when
// `wrapping` (negative indices count from the end), else outside [0, size), and its flat position
// in `index`, as an i64 [2]: {value, position}; kNoIndexOutOfRange in both when there is none.
// An entry equal to `ignored` (a 0-d i64 value, when given) is never out of range. `size` is a
// 0-d i64 value, so a new size does not make a new program. With `grown`, the index's growing
// form (a grown range of positions), the check reads its padded value up to its length instead,
// so that every length of a bucket shares the program; positions are then the padded ones.
Value OutOfRangeIndex(const Value& index, const Value& size, bool wrapping,
                      const GrowingValue& grown = {}, const Value& ignored = {});

// What the CPU requires of a floating argument's values.
enum class ValueDomain {
  kUnitInterval,          // every element in [0, 1]
  kNonNegative,           // every element >= 0
  kProbabilities,         // multinomial's: entries finite and >= 0, then each row's sum > 0
  kSampledProbabilities,  // the same checked row by row (multinomial drawing several with
                          // replacement)
};
// multinomial's failures, by the CPU's wording.
inline constexpr int64_t kNegativeProbability = 1;   // row by row: an entry < 0 or NaN
inline constexpr int64_t kInfiniteProbability = 2;   // row by row: an entry infinite
inline constexpr int64_t kMasslessDistribution = 3;  // a row's sum <= 0
inline constexpr int64_t kBadProbabilities = 4;      // all entries first: any bad entry
// {code, position} of the first element (or row) outside `domain`, in the CPU's order, as an
// i64 [2], or kNoIndexOutOfRange in both when there is none. The code is 0 for the unit interval,
// one of the above for probabilities.
Value OutsideDomain(const Value& x, ValueDomain domain);
// The number of true (nonzero) entries of `mask`, each counted `copies` times (the mask as
// broadcast to the op's shape), when it exceeds `available` (the elements a source holds), as
// {count, 0}; kNoIndexOutOfRange in both otherwise. masked_scatter's source must not run out.
Value MaskOutnumbers(const Value& mask, int64_t copies, int64_t available);
// histc's or histogram's range taken from the data: {bits of its min, bits of its max} as an
// i64 [2] when either is not finite (NaN or +-inf; the CPU rejects such a range),
// kNoIndexOutOfRange in both otherwise. The bits are an f64's for f64 data, else an f32's
// (zero-extended).
Value NonFiniteDataRange(const Value& x);

// ---- Views: reads and writes of strided views of a 1-D storage value ----

// `storage` is the storage's 1-D value; `offset` a 0-d i64 value (in elements of `dtype`).
Value ReadView(const Value& storage, DType dtype, const Shape& sizes,
               const std::vector<int64_t>& strides, const Value& offset);
// Returns the storage's new 1-D value with `update` (of shape `sizes`) written through the view.
Value WriteView(const Value& storage, const Value& update, const Shape& sizes,
                const std::vector<int64_t>& strides, const Value& offset);
// True when the view is the whole storage, contiguous, so no offset is needed.
bool CoversWholeStorage(int64_t storage_elements, const Shape& sizes,
                        const std::vector<int64_t>& strides);
// The tensor a padded growing value holds (1-D, as the storage holds it), as a contiguous 1-D
// value of its own elements.
Value CompactGrowing(const Value& padded_1d, const Shape& padded_shape, int64_t dim,
                     int64_t length);
// Reinterprets a 1-D value as another dtype with the same bytes (bitcast_convert).
Value Reinterpret1D(const Value& value, DType dtype);

}  // namespace torch_tpu::ops
