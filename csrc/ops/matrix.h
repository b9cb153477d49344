// Helpers shared by the matrix decompositions (decomposition.cc, qr.cc, spectral.cc): the last
// two dims of a value are the matrix, the others the batch. Index arithmetic is s32 (the loop
// counters' type, native on the device); no matrix dim comes near 2^31.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "ops/builder.h"

namespace torch_tpu::ops {

// ---- shapes ----

// The batch dims of a matrix shape (all but the last two).
Shape BatchOf(const Shape& shape);
// `batch` with a (rows, columns) matrix appended.
Shape WithMatrix(Shape batch, int64_t rows, int64_t columns);
// `shape` with one more trailing dim of `size`.
Shape WithLast(Shape shape, int64_t size);
int64_t Rows(const Value& x);
int64_t Columns(const Value& x);

// ---- constants, indices and masks ----

// A 0-d s32 constant: loop counters and dynamic slice starts.
Value S32(int64_t value);
// Row and column indices (s32) of every entry of a value of `shape`.
Value RowIndex(const Shape& shape);
Value ColumnIndex(const Shape& shape);
// True where column - row <= offset (lower) or column - row >= offset (upper).
Value TriangleMask(const Shape& shape, bool lower, int64_t offset = 0);
// True on the main diagonal.
Value DiagonalMask(const Shape& shape);
// x with the entries outside TriangleMask(lower, offset) zeroed.
Value Triangle(const Value& x, bool lower, int64_t offset = 0);
// Identity matrices of `shape` (any batch, square or not).
Value Identity(DType dtype, const Shape& shape);

// ---- matrix ops ----

// Swaps each matrix's rows and columns.
Value MatrixTranspose(const Value& x);
// The complex conjugate; the identity on real values.
Value Conjugate(const Value& x);
// The conjugate transpose (MatrixTranspose for real values).
Value Adjoint(const Value& x);
// (*) -> (*, 1, 1), to act on whole matrices.
Value PerMatrix(const Value& x);
// True when any entry is (over all dims; a 0-d value is itself).
Value AnyOf(const Value& flags);
// x[..., start:start+size, ...] along `dim`, at a 0-d s32 `start` (a loop index).
Value DynamicSliceAt(const Value& x, int64_t dim, const Value& start, int64_t size);
// x with `update` written over x[..., start:start+size, ...] along `dim` (the other dims whole).
Value DynamicUpdateSliceAt(const Value& x, const Value& update, int64_t dim, const Value& start);
// op(a) x = b (left) or x op(a) = b (right) for a lower/upper triangular `a` (its other triangle
// ignored), batch dims broadcast; `transpose_a` makes op(a) = a^T, or a^H with `conjugate_a`.
Value TriangularSolve(Value a, Value b, bool left, bool lower, bool unit_diagonal, bool transpose_a,
                      bool conjugate_a = false);

// ---- loops: the factorizations iterate inside the program, so its size does not grow with n ----

// `while (condition(values)) values = body(values)`. Regions see only the carried values (and
// constants), so whatever they read must be carried.
template <typename Condition, typename Body>
std::vector<Value> While(const std::vector<Value>& initial, Condition&& condition, Body&& body) {
  std::vector<TensorType> types;
  for (const Value& v : initial) types.push_back(v.type());
  auto condition_region = ir::MakeRegion(
      types, [&](const std::vector<Value>& a) { return std::vector<Value>{condition(a)}; });
  auto body_region = ir::MakeRegion(types, [&](const std::vector<Value>& a) { return body(a); });
  return ir::MakeMultiOp("stablehlo.while", initial, types, "",
                         {std::move(condition_region), std::move(body_region)});
}

// `for j in [0, count)` over `carried` values; `body(j, values)` returns their new values (j a
// 0-d s32). With `guarded`, carried[0] is a 0-d bool the body keeps unchanged: false skips the
// loop.
template <typename Body>
std::vector<Value> ForLoop(int64_t count, const std::vector<Value>& carried, Body&& body,
                           bool guarded = false) {
  std::vector<Value> initial{S32(0)};
  initial.insert(initial.end(), carried.begin(), carried.end());
  auto condition = [&](const std::vector<Value>& a) {
    Value more = Compare(a[0], S32(count), "LT");
    return guarded ? And(more, a[1]) : more;
  };
  auto step = [&](const std::vector<Value>& a) {
    std::vector<Value> values(a.begin() + 1, a.end());
    std::vector<Value> next{Add(a[0], S32(1))};
    for (Value& v : body(a[0], values)) next.push_back(std::move(v));
    return next;
  };
  std::vector<Value> results = While(initial, condition, step);
  return std::vector<Value>(results.begin() + 1, results.end());
}

}  // namespace torch_tpu::ops
