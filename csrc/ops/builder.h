// Shared StableHLO building blocks for the lowerings (broadcasting, casts, reductions, ...).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ops/lowering.h"

namespace torch_tpu::ops {

Value Convert(const Value& value, DType dtype);
Value Reshape(const Value& value, const Shape& shape);
Value Transpose(const Value& value, const std::vector<int64_t>& permutation);
// numpy-style: aligns trailing dimensions.
Value BroadcastTo(const Value& value, const Shape& shape);
Value BroadcastInDim(const Value& value, const Shape& shape, const std::vector<int64_t>& dims);
Shape BroadcastShapes(const Shape& a, const Shape& b);
Value Slice(const Value& value, const std::vector<int64_t>& start,
            const std::vector<int64_t>& limit, const std::vector<int64_t>& strides);
Value SliceAxis(const Value& value, int64_t axis, int64_t start, int64_t limit, int64_t stride = 1);
Value Pad(const Value& value, const Value& padding_value, const std::vector<int64_t>& low,
          const std::vector<int64_t>& high, const std::vector<int64_t>& interior);
Value Concatenate(const std::vector<Value>& values, int64_t axis);
Value Iota(const TensorType& type, int64_t dimension);
// An s64 constant holding `values`, reshaped to `shape` (static index maps).
Value I64Constant(const std::vector<int64_t>& values, const Shape& shape);

// Scatter-adds `updates` (flattened) into a zero 1-D value of `size` elements at `indices`
// (s64, one per update, in range).
Value ScatterAdd1D(const Value& updates, const Value& indices, int64_t size);

// Stable sort of x along `dim` with each value's input position (s64), ascending or descending,
// NaN above every number as on the CPU (sort.cc).
struct Sorted {
  Value values;
  Value indices;
};
Sorted SortAlong(const Value& x, int64_t dim, bool descending);

// Inclusive scan along `dim` in log2(n) steps (Hillis-Steele): each step combines every position
// with the one 1, 2, 4, ... before it, positions before the start reading `identity`. It scans
// tuples of same-shaped values (cummax carries (value, index)); `combine` must be associative.
using ScanCombine = std::function<std::vector<Value>(const std::vector<Value>& earlier,
                                                     const std::vector<Value>& later)>;
std::vector<Value> InclusiveScan(std::vector<Value> values, int64_t dim,
                                 const std::vector<Value>& identity, const ScanCombine& combine);

// Elementwise with numpy broadcasting; operands must already share a dtype.
Value Unary(std::string_view op, const Value& x);
Value Binary(std::string_view op, const Value& a, const Value& b);
Value BinaryTyped(std::string_view op, const Value& a, const Value& b, DType result);
Value Add(const Value& a, const Value& b);
Value Sub(const Value& a, const Value& b);
Value Mul(const Value& a, const Value& b);
Value Div(const Value& a, const Value& b);
// Plain stablehlo.maximum/minimum: the XLA CPU plugin may drop a NaN in the second operand, so
// ops that must propagate NaN as PyTorch does use elementwise.cc's own forms.
Value Max(const Value& a, const Value& b);
Value Min(const Value& a, const Value& b);
// Single StableHLO ops shared by the op families.
Value Neg(const Value& x);
Value Abs(const Value& x);  // the identity on unsigned integers
// complex64 parts (f32) and construction; Real is the identity on real values.
TensorType ComplexPart(const Value& z);
Value Real(const Value& z);
Value Imag(const Value& z);
Value MakeComplex(const Value& real, const Value& imag);
Value Exp(const Value& x);
Value Log(const Value& x);
Value Sqrt(const Value& x);
Value Rsqrt(const Value& x);
Value Tanh(const Value& x);
Value Sigmoid(const Value& x);
Value And(const Value& a, const Value& b);
Value Or(const Value& a, const Value& b);
Value Not(const Value& x);    // logical on bool, bitwise on integers
Value IsNan(const Value& x);  // x != x

// The dtype PyTorch's CPU kernels compute in: f32 for f16/bf16, the type itself otherwise.
DType OpMathType(DType dtype);

// direction: EQ, NE, LT, LE, GT, GE. Result is bool.
Value Compare(const Value& a, const Value& b, const std::string& direction);
Value Select(const Value& predicate, const Value& on_true, const Value& on_false);
Value Constant(double value, DType dtype, const Shape& shape = {});
Value ConstantLike(double value, const Value& like);

// Reduces `dims` with a binary StableHLO op ("stablehlo.add", "stablehlo.maximum", ...).
Value Reduce(const Value& value, const std::vector<int64_t>& dims, std::string_view op,
             const Value& init);
Value SumOver(const Value& x, const std::vector<int64_t>& dims);  // in x's dtype
// Keeps reduced dims as size 1.
Value KeepDims(const Value& reduced, const Shape& input_shape, const std::vector<int64_t>& dims);

// Normalizes a possibly-negative dim; empty `dims` means all dims.
int64_t NormalizeDim(int64_t dim, int64_t rank);
std::vector<int64_t> NormalizeDims(const std::vector<int64_t>& dims, int64_t rank);

// dot_general with the precision mode's arithmetic applied by the caller; `highest` asks for
// full f32 arithmetic (otherwise XLA on GPU may use TF32).
Value DotGeneral(const Value& lhs, const Value& rhs, const std::vector<int64_t>& lhs_batch,
                 const std::vector<int64_t>& rhs_batch, const std::vector<int64_t>& lhs_contract,
                 const std::vector<int64_t>& rhs_contract, DType result, bool highest = false);

}  // namespace torch_tpu::ops
