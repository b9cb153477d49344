// Elementwise ops: arithmetic, comparisons, logical and bitwise ops, unary math, rounding,
// selection and fills. Families that differ only in an opcode or a formula come from tables.
//
// Numerics follow PyTorch's CPU kernels, which the tests check bit for bit in f16/bf16: most ops
// compute f16/bf16 in f32 ("opmath") and round once; scalar operands are rounded to the op's
// common dtype first, except where the CPU reads them in opmath (mul and div's single-element
// operand, lerp's weight, addcmul's value); floor/trunc division of f16/bf16 tensors rounds
// every step in the dtype itself.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "ops/builder.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

// ---- dtypes ----

bool IsReducedFloat(DType t) { return t == DType::kF16 || t == DType::kBF16; }
// Integer and bool inputs of float ops promote to PyTorch's default dtype.
DType FloatType(DType t) { return ir::IsFloating(t) || ir::IsComplex(t) ? t : DType::kF32; }

// The dtype categories an op's CPU kernel is compiled for.
enum Domain : unsigned {
  kBools = 1,
  kIntegers = 2,
  kFloats = 4,
  kNumbers = kIntegers | kFloats,
  kIntegersAndBools = kIntegers | kBools,
  kAny = kBools | kIntegers | kFloats,
};

// The CPU rejects these dtypes when it dispatches the kernel, after the meta function passed.
void CheckDomain(const std::string& op, DType dtype, unsigned domain) {
  const unsigned category = dtype == DType::kBool   ? kBools
                            : ir::IsFloating(dtype) ? kFloats
                                                    : kIntegers;
  if ((category & domain) == 0) {
    throw UnsupportedError("\"" + op + "\" not implemented for '" + ScalarTypeName(dtype) + "'");
  }
}

// ---- building blocks (operands share a dtype; 0-d constants broadcast) ----

Value Zero(DType t) { return Constant(0, t); }
Value One(DType t) { return Constant(1, t); }
Value Xor(const Value& a, const Value& b) { return Binary("stablehlo.xor", a, b); }
Value Rem(const Value& a, const Value& b) { return Binary("stablehlo.remainder", a, b); }
Value Power(const Value& a, const Value& b) { return Binary("stablehlo.power", a, b); }
Value Floor(const Value& x) { return Unary("stablehlo.floor", x); }
Value Ceil(const Value& x) { return Unary("stablehlo.ceil", x); }
Value IsNegative(const Value& x) { return Compare(x, Zero(x.dtype()), "LT"); }
Value IsNonZero(const Value& x) { return Compare(x, Zero(x.dtype()), "NE"); }
Value IsEqualTo(const Value& x, double value) {
  return Compare(x, Constant(value, x.dtype()), "EQ");
}
Value FalseLike(const Value& x) { return Constant(0, DType::kBool, x.shape()); }
Value Trunc(const Value& x) { return Select(IsNegative(x), Ceil(x), Floor(x)); }
Value Reciprocal(const Value& x) { return Div(One(x.dtype()), x); }

// The sign bit, which also tells -0.0 and negative NaNs apart.
Value SignBit(const Value& x) {
  if (!ir::IsFloating(x.dtype())) return IsNegative(x);
  const size_t bytes = ir::ByteSize(x.dtype());
  const DType bits = bytes == 2 ? DType::kS16 : bytes == 4 ? DType::kS32 : DType::kS64;
  return IsNegative(ir::MakeOp("stablehlo.bitcast_convert", {x}, TensorType{bits, x.shape()}));
}

Value CopySign(const Value& magnitude, const Value& sign) {
  Value abs = Abs(magnitude);
  return Select(SignBit(sign), Neg(abs), abs);
}

Value FloatMax(DType t) {
  switch (t) {
    case DType::kF16:
      return Constant(65504.0, t);
    case DType::kBF16:
      return Constant(3.3895313892515355e38, t);
    case DType::kF32:
      return Constant(std::numeric_limits<float>::max(), t);
    default:
      return Constant(std::numeric_limits<double>::max(), t);
  }
}

// A value known on the host (a Python number or a 0-d CPU tensor) that is integer zero.
bool IsHostIntegerZero(const Argument& a) {
  if (a.kind == Argument::Kind::kTensor) {
    const ir::Node* node = a.tensor.node.get();
    if (node->kind != ir::NodeKind::kScalarParameter || ir::IsFloating(node->scalar.dtype))
      return false;
    for (size_t i = 0; i < ir::ByteSize(node->scalar.dtype); ++i)
      if (node->scalar.bytes[i] != 0) return false;
    return true;
  }
  return a.kind != Argument::Kind::kNone && a.scalar.ToInt() == 0;
}

// The CPU raises for integer division by zero. Only a divisor known on the host can be checked
// without a device round trip; a device divisor of zero gives XLA's value (x / 0 = -1, x % 0 = x).
void RejectIntegerZeroDivisor(const LoweringContext& ctx, size_t i, DType common) {
  if (ir::IsIntegral(common) && IsHostIntegerZero(ctx.arg(i)))
    throw std::runtime_error("ZeroDivisionError");
}

// True when the CPU kernel reads argument i, a single element (a scalar), straight into opmath
// (f32 for f16/bf16) instead of casting it to the common dtype first, as mul and div do.
bool ReadsScalarInOpMath(const LoweringContext& ctx, size_t i, DType common) {
  if (!IsReducedFloat(common)) return false;
  return !ctx.is_tensor(i) || ir::NumElements(ctx.tensor(i).shape()) == 1;
}

// Argument i in `compute`, through `common` as PyTorch casts operands to the common dtype first.
// `opmath_scalar`: a single-element operand is read straight into opmath (ReadsScalarInOpMath).
Value Operand(const LoweringContext& ctx, size_t i, DType common, DType compute,
              bool opmath_scalar = false) {
  if (opmath_scalar && ReadsScalarInOpMath(ctx, i, common)) {
    if (!ctx.is_tensor(i)) return ctx.ScalarParameter(ctx.scalar(i), compute);
    return Convert(ctx.tensor(i), compute);
  }
  return Convert(ctx.value(i, common), compute);
}

// PyTorch's checked Scalar::to<T>() (c10::overflows): fill values, bounds, alpha and the like
// must fit the dtype they are cast to; negative integers may wrap into unsigned types.
void CheckScalarFits(const Scalar& s, DType t) {
  if (t == DType::kBool || t == DType::kF64 || ir::IsComplex(t) || s.kind == Scalar::Kind::kBool)
    return;
  double lowest = 0, max = 0;
  const char* name = "";
  switch (t) {
    case DType::kU8:
      max = 255, name = "uint8_t";
      break;
    case DType::kS8:
      lowest = -128, max = 127, name = "int8_t";
      break;
    case DType::kS16:
      lowest = -32768, max = 32767, name = "int16_t";
      break;
    case DType::kS32:
      lowest = -2147483648.0, max = 2147483647.0, name = "int";
      break;
    case DType::kS64:
      lowest = -9223372036854775808.0, max = 9223372036854775807.0, name = "int64_t";
      break;
    case DType::kF16:
      max = 65504, lowest = -max, name = "c10::Half";
      break;
    case DType::kBF16:
      max = 3.3895313892515355e38, lowest = -max, name = "c10::BFloat16";
      break;
    case DType::kF32:
      max = std::numeric_limits<float>::max(), lowest = -max, name = "float";
      break;
    default:
      return;
  }
  bool overflows = false;
  if (s.kind == Scalar::Kind::kInt) {
    if (t == DType::kS64) return;
    const double v = static_cast<double>(s.i);
    overflows = v > max || (ir::IsUnsignedInteger(t) ? -v > max : v < lowest);
  } else if (std::isnan(s.f)) {
    overflows = !ir::IsFloating(t);
  } else if (!std::isinf(s.f) || !ir::IsFloating(t)) {
    overflows = s.f < lowest || s.f > max;
  }
  if (overflows) {
    throw std::runtime_error(std::string("value cannot be converted to type ") + name +
                             " without overflow");
  }
}

// Argument i (a tensor, or a host scalar that must fit) as a value of dtype t.
Value CheckedValue(const LoweringContext& ctx, size_t i, DType t) {
  if (!ctx.is_tensor(i)) CheckScalarFits(ctx.scalar(i), t);
  return ctx.value(i, t);
}

// ctx.promoted also counts Scalar options (alpha, value) that PyTorch's result type for these ops
// ignores. They can only raise it when every operand is of a lower category.
DType OperandsType(const LoweringContext& ctx, std::initializer_list<size_t> operands) {
  bool all_bool = true, any_float = false;
  for (size_t i : operands) {
    const Argument& a = ctx.arg(i);
    const bool is_tensor = a.kind == Argument::Kind::kTensor;
    all_bool &= is_tensor ? a.tensor.dtype() == DType::kBool : a.scalar.kind == Scalar::Kind::kBool;
    any_float |=
        is_tensor ? ir::IsFloating(a.tensor.dtype()) : a.scalar.kind == Scalar::Kind::kFloat;
  }
  if (all_bool) return DType::kBool;
  if (ir::IsFloating(ctx.promoted) && !any_float) {
    // Integer operands with a float option: integer arithmetic, exact up to wrap-around.
    return ir::IsIntegral(ctx.output().dtype) ? ctx.output().dtype : DType::kS64;
  }
  return ctx.promoted;
}

// A host scalar argument in `compute`, rounded through `common` first.
Value ScalarOperand(const LoweringContext& ctx, size_t i, DType common, DType compute) {
  CheckScalarFits(ctx.scalar(i), common);
  return Convert(ctx.ScalarParameter(ctx.scalar(i), common), compute);
}

std::vector<Value> Result(const LoweringContext& ctx, const Value& value) {
  return {BroadcastTo(Convert(value, ctx.output().dtype), ctx.output().shape)};
}

// ---- formulas ----

// Python's floor division, as PyTorch's div_floor_floating / div_floor_integer.
Value FloorDivide(const Value& a, const Value& b) {
  const DType t = a.dtype();
  if (!ir::IsFloating(t)) {
    Value quotient = Div(a, b);
    Value inexact = And(IsNonZero(Rem(a, b)), Xor(IsNegative(a), IsNegative(b)));
    return Select(inexact, Sub(quotient, One(t)), quotient);
  }
  Value mod = Rem(a, b);
  Value div = Div(Sub(a, mod), b);
  div = Select(And(IsNonZero(mod), Xor(IsNegative(b), IsNegative(mod))), Sub(div, One(t)), div);
  Value floored = Floor(div);
  floored =
      Select(Compare(Sub(div, floored), Constant(0.5, t), "GT"), Add(floored, One(t)), floored);
  Value quotient = Div(a, b);
  Value result = Select(IsNonZero(div), floored, CopySign(Zero(t), quotient));
  return Select(IsEqualTo(b, 0), quotient, result);
}

// Python's modulo: the result takes the divisor's sign.
Value Remainder(const Value& a, const Value& b) {
  Value mod = Rem(a, b);
  Value adjust = And(IsNonZero(mod), Xor(IsNegative(mod), IsNegative(b)));
  return Select(adjust, Add(mod, b), mod);
}

// NaN in either operand propagates, as on the CPU. stablehlo.maximum alone does not guarantee
// it: XLA's CPU backend returns the other operand when the second one is NaN.
Value PropagateNan(const Value& a, const Value& b, const Value& result) {
  if (!ir::IsFloating(a.dtype())) return result;
  return Select(IsNan(a), a, Select(IsNan(b), b, result));
}
Value Maximum(const Value& a, const Value& b) {
  return a.dtype() == DType::kBool ? Or(a, b) : PropagateNan(a, b, Max(a, b));
}
Value Minimum(const Value& a, const Value& b) {
  return a.dtype() == DType::kBool ? And(a, b) : PropagateNan(a, b, Min(a, b));
}
// fmax/fmin ignore a NaN operand.
Value FMax(const Value& a, const Value& b) {
  if (!ir::IsFloating(a.dtype())) return Maximum(a, b);
  return Select(IsNan(a), b, Select(IsNan(b), a, Max(a, b)));
}
Value FMin(const Value& a, const Value& b) {
  if (!ir::IsFloating(a.dtype())) return Minimum(a, b);
  return Select(IsNan(a), b, Select(IsNan(b), a, Min(a, b)));
}

// Scaled so that large or tiny operands neither overflow nor underflow; inf wins over NaN.
Value Hypot(const Value& a, const Value& b) {
  const DType t = a.dtype();
  Value x = Abs(a), y = Abs(b);
  Value big = Maximum(x, y), small = Minimum(x, y);
  Value ratio = Div(small, big);
  Value h = Mul(big, Sqrt(Add(One(t), Mul(ratio, ratio))));
  h = Select(IsEqualTo(big, 0), Zero(t), h);
  Value infinite = Or(IsEqualTo(x, INFINITY), IsEqualTo(y, INFINITY));
  return Select(infinite, Constant(INFINITY, t), h);
}

Value ShiftLeft(const Value& a, const Value& b) { return Binary("stablehlo.shift_left", a, b); }
// Arithmetic for signed types (sign fill for any out-of-range shift, as the CPU), logical else.
Value ShiftRight(const Value& a, const Value& b) {
  return Binary(ir::IsSignedInteger(a.dtype()) ? "stablehlo.shift_right_arithmetic"
                                               : "stablehlo.shift_right_logical",
                a, b);
}

// (0 < x) - (x < 0), as the CPU: NaN and -0.0 give +0.
Value Sign(const Value& x) {
  if (x.dtype() == DType::kBool) return x;
  if (ir::IsComplex(x.dtype())) {  // sgn: z / |z|, and 0 at 0
    const Value magnitude = Abs(x);
    return Select(Compare(magnitude, ConstantLike(0, magnitude), "EQ"), ConstantLike(0, x),
                  Div(x, Convert(magnitude, x.dtype())));
  }
  Value positive = Compare(Zero(x.dtype()), x, "LT");
  return Sub(Convert(positive, x.dtype()), Convert(IsNegative(x), x.dtype()));
}

// cosh and sinh from h = exp(|x| / 2) as (h / 2) * h ± (1/2 / h) / h: nothing overflows before the
// result does, and a large argument is not rounded by subtracting log(2) first (chlo.cosh's
// expansion loses a few ulp there).
Value Cosh(const Value& x);
Value Sinh(const Value& x);

// Complex: cosh(a + bi) = cosh(a) cos(b) + i sinh(a) sin(b), sinh(a + bi) = sinh(a) cos(b) +
// i cosh(a) sin(b), from the real forms on the parts.
Value ComplexHyperbolic(const Value& z, bool is_cosh) {
  const Value a = Real(z), b = Imag(z);
  const Value cos_b = Unary("stablehlo.cosine", b), sin_b = Unary("stablehlo.sine", b);
  const Value cosh_a = Cosh(a), sinh_a = Sinh(a);
  return is_cosh ? MakeComplex(Mul(cosh_a, cos_b), Mul(sinh_a, sin_b))
                 : MakeComplex(Mul(sinh_a, cos_b), Mul(cosh_a, sin_b));
}

Value Cosh(const Value& x) {
  if (ir::IsComplex(x.dtype())) return ComplexHyperbolic(x, /*is_cosh=*/true);
  const Value half = Constant(0.5, x.dtype());
  const Value h = Exp(Mul(Abs(x), half));
  return Add(Mul(Mul(half, h), h), Div(Div(half, h), h));
}

Value Sinh(const Value& x) {
  if (ir::IsComplex(x.dtype())) return ComplexHyperbolic(x, /*is_cosh=*/false);
  const DType t = x.dtype();
  const Value half = Constant(0.5, t);
  const Value a = Abs(x);
  const Value h = Exp(Mul(a, half));
  Value large = Sub(Mul(Mul(half, h), h), Div(Div(half, h), h));
  // Near zero: sinh(a) = (e + e / (e + 1)) / 2 with e = expm1(a), free of cancellation.
  const Value e = Unary("stablehlo.exponential_minus_one", a);
  Value small = Mul(half, Add(e, Div(e, Add(e, One(t)))));
  return CopySign(Select(Compare(a, One(t), "LT"), small, large), x);
}

// ---- unary ops ----

using UnaryFn = Value (*)(const Value&);

enum class UnaryKind {
  kFloatMath,  // integer and bool inputs promote to float; computed in opmath
  kSameType,   // the result has the input's dtype; computed in opmath
  kPredicate,  // a bool result, computed on the input as it is
};

struct UnaryOp {
  const char* opcode;  // a single StableHLO/CHLO op, or null when `formula` is used
  UnaryFn formula;
  UnaryKind kind;
  unsigned domain;
};

// chlo ops are part of what every PJRT plugin accepts (JAX emits them too); each is XLA's own
// accurate expansion of a function StableHLO lacks.
const std::unordered_map<std::string, UnaryOp>& UnaryOps() {
  using K = UnaryKind;
  static const std::unordered_map<std::string, UnaryOp> ops = {
      {"exp", {"stablehlo.exponential", nullptr, K::kFloatMath, kAny}},
      {"exp2",
       {nullptr, [](const Value& x) { return Power(Constant(2, x.dtype()), x); }, K::kFloatMath,
        kAny}},
      {"expm1", {"stablehlo.exponential_minus_one", nullptr, K::kFloatMath, kAny}},
      {"log", {"stablehlo.log", nullptr, K::kFloatMath, kAny}},
      {"log2",
       {nullptr, [](const Value& x) { return Mul(Log(x), Constant(1 / M_LN2, x.dtype())); },
        K::kFloatMath, kAny}},
      {"log10",
       {nullptr, [](const Value& x) { return Mul(Log(x), Constant(1 / M_LN10, x.dtype())); },
        K::kFloatMath, kAny}},
      {"log1p", {"stablehlo.log_plus_one", nullptr, K::kFloatMath, kAny}},
      {"sqrt", {"stablehlo.sqrt", nullptr, K::kFloatMath, kAny}},
      {"rsqrt", {"stablehlo.rsqrt", nullptr, K::kFloatMath, kAny}},
      {"reciprocal", {nullptr, Reciprocal, K::kFloatMath, kAny}},
      {"sin", {"stablehlo.sine", nullptr, K::kFloatMath, kAny}},
      {"cos", {"stablehlo.cosine", nullptr, K::kFloatMath, kAny}},
      {"tan", {"stablehlo.tan", nullptr, K::kFloatMath, kAny}},
      {"asin", {"chlo.asin", nullptr, K::kFloatMath, kAny}},
      {"acos", {"chlo.acos", nullptr, K::kFloatMath, kAny}},
      {"atan", {"chlo.atan", nullptr, K::kFloatMath, kAny}},
      {"sinh", {nullptr, Sinh, K::kFloatMath, kAny}},
      {"cosh", {nullptr, Cosh, K::kFloatMath, kAny}},
      {"tanh", {"stablehlo.tanh", nullptr, K::kFloatMath, kAny}},
      {"asinh", {"chlo.asinh", nullptr, K::kFloatMath, kAny}},
      {"acosh", {"chlo.acosh", nullptr, K::kFloatMath, kAny}},
      {"atanh", {"chlo.atanh", nullptr, K::kFloatMath, kAny}},
      {"sigmoid", {"stablehlo.logistic", nullptr, K::kFloatMath, kAny}},
      {"erf", {"chlo.erf", nullptr, K::kFloatMath, kAny}},
      {"erfc", {"chlo.erfc", nullptr, K::kFloatMath, kAny}},
      {"abs", {nullptr, Abs, K::kSameType, kNumbers}},
      {"neg", {nullptr, Neg, K::kSameType, kNumbers}},
      {"sign", {nullptr, Sign, K::kSameType, kAny}},
      {"sgn", {nullptr, Sign, K::kSameType, kAny}},
      {"floor",
       {nullptr, [](const Value& x) { return ir::IsFloating(x.dtype()) ? Floor(x) : x; },
        K::kSameType, kNumbers}},
      {"ceil",
       {nullptr, [](const Value& x) { return ir::IsFloating(x.dtype()) ? Ceil(x) : x; },
        K::kSameType, kNumbers}},
      {"trunc",
       {nullptr, [](const Value& x) { return ir::IsFloating(x.dtype()) ? Trunc(x) : x; },
        K::kSameType, kNumbers}},
      {"frac", {nullptr, [](const Value& x) { return Sub(x, Trunc(x)); }, K::kSameType, kFloats}},
      {"bitwise_not", {"stablehlo.not", nullptr, K::kSameType, kIntegersAndBools}},
      {"logical_not",
       {nullptr, [](const Value& x) { return IsEqualTo(x, 0); }, K::kPredicate, kAny}},
      {"isnan", {nullptr, IsNan, K::kPredicate, kAny}},
      {"signbit", {nullptr, SignBit, K::kPredicate, kAny}},
      {"isposinf",
       {nullptr,
        [](const Value& x) {
          return ir::IsFloating(x.dtype()) ? IsEqualTo(x, INFINITY) : FalseLike(x);
        },
        K::kPredicate, kAny}},
      {"isneginf",
       {nullptr,
        [](const Value& x) {
          return ir::IsFloating(x.dtype()) ? IsEqualTo(x, -INFINITY) : FalseLike(x);
        },
        K::kPredicate, kAny}},
  };
  return ops;
}

Value ApplyUnary(const UnaryOp& op, const Value& x) {
  return op.opcode != nullptr ? Unary(op.opcode, x) : op.formula(x);
}

std::vector<Value> UnaryLowering(LoweringContext& ctx) {
  const UnaryOp& op = UnaryOps().at(ctx.name);
  const Value x = ctx.tensor(0);
  CheckDomain(ctx.name, x.dtype(), op.domain);
  DType compute = x.dtype();
  if (op.kind == UnaryKind::kFloatMath) compute = OpMathType(FloatType(x.dtype()));
  if (op.kind == UnaryKind::kSameType) compute = OpMathType(x.dtype());
  return Result(ctx, ApplyUnary(op, Convert(x, compute)));
}

// round(x) and round(x, decimals): half to even, scaled by 10^decimals in opmath like the CPU.
std::vector<Value> RoundLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0);
  const bool with_decimals = ctx.overload.find("decimals") != std::string::npos;
  CheckDomain("round", x.dtype(), with_decimals ? kFloats : kNumbers);
  if (!ir::IsFloating(x.dtype())) return Result(ctx, x);
  const DType compute = OpMathType(x.dtype());
  Value value = Convert(x, compute);
  const int64_t decimals = with_decimals ? ctx.int_arg(1) : 0;
  if (decimals == 0) return Result(ctx, Unary("stablehlo.round_nearest_even", value));
  // A parameter, not a constant: XLA would turn the division by a constant into an inexact
  // multiplication by its reciprocal.
  Scalar power_of_ten;
  power_of_ten.kind = Scalar::Kind::kFloat;
  power_of_ten.f = std::pow(10.0, static_cast<double>(std::abs(decimals)));
  Value scale = ctx.ScalarParameter(power_of_ten, compute);
  Value rounded =
      Unary("stablehlo.round_nearest_even", decimals > 0 ? Mul(value, scale) : Div(value, scale));
  return Result(ctx, decimals > 0 ? Div(rounded, scale) : Mul(rounded, scale));
}

std::vector<Value> NanToNumLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0);
  const DType t = x.dtype();
  if (!ir::IsFloating(t)) return Result(ctx, x);
  auto replacement = [&](size_t i, Value fallback) {
    return ctx.has(i) ? ctx.ScalarParameter(ctx.scalar(i), t) : fallback;
  };
  Value nan = replacement(1, Zero(t));
  Value positive = replacement(2, FloatMax(t));
  Value negative = replacement(3, Neg(FloatMax(t)));
  Value result = Select(IsEqualTo(x, -INFINITY), negative, x);
  result = Select(IsEqualTo(x, INFINITY), positive, result);
  return Result(ctx, Select(IsNan(x), nan, result));
}

// ---- binary ops ----

using BinaryFn = Value (*)(const Value&, const Value&);

enum class BinaryKind {
  kArithmetic,  // computed in the promoted dtype (opmath for f16/bf16)
  kFloatMath,   // integer and bool operands promote to float
  kLogical,     // operands read as bool
};

struct BinaryOp {
  BinaryFn formula;
  BinaryKind kind;
  unsigned domain;
  bool opmath_scalar = false;     // a single-element `other` is read in opmath (CPU mul)
  bool integer_division = false;  // raises for a host integer zero divisor
};

Value Multiply(const Value& a, const Value& b) {
  return a.dtype() == DType::kBool ? And(a, b) : Mul(a, b);
}

const std::unordered_map<std::string, BinaryOp>& BinaryOps() {
  using K = BinaryKind;
  static const std::unordered_map<std::string, BinaryOp> ops = {
      {"mul", {Multiply, K::kArithmetic, kAny, true}},
      {"remainder", {Remainder, K::kArithmetic, kNumbers, false, true}},
      {"fmod", {Rem, K::kArithmetic, kNumbers, false, true}},
      {"atan2",
       {[](const Value& a, const Value& b) { return Binary("stablehlo.atan2", a, b); },
        K::kFloatMath, kAny}},
      {"maximum", {Maximum, K::kArithmetic, kAny}},
      {"minimum", {Minimum, K::kArithmetic, kAny}},
      {"fmax", {FMax, K::kArithmetic, kAny}},
      {"fmin", {FMin, K::kArithmetic, kAny}},
      {"hypot", {Hypot, K::kArithmetic, kFloats}},
      {"copysign", {CopySign, K::kFloatMath, kAny}},
      {"logical_and", {And, K::kLogical, kAny}},
      {"logical_or", {Or, K::kLogical, kAny}},
      {"logical_xor", {Xor, K::kLogical, kAny}},
      {"bitwise_and", {And, K::kArithmetic, kIntegersAndBools}},
      {"bitwise_or", {Or, K::kArithmetic, kIntegersAndBools}},
      {"bitwise_xor", {Xor, K::kArithmetic, kIntegersAndBools}},
      {"bitwise_left_shift", {ShiftLeft, K::kArithmetic, kIntegers}},
      {"bitwise_right_shift", {ShiftRight, K::kArithmetic, kIntegers}},
      {"__lshift__", {ShiftLeft, K::kArithmetic, kIntegers}},
      {"__ilshift__", {ShiftLeft, K::kArithmetic, kIntegers}},
      {"__rshift__", {ShiftRight, K::kArithmetic, kIntegers}},
      {"__irshift__", {ShiftRight, K::kArithmetic, kIntegers}},
  };
  return ops;
}

std::vector<Value> BinaryLowering(LoweringContext& ctx) {
  const BinaryOp& op = BinaryOps().at(ctx.name);
  DType common = ctx.promoted;
  DType compute = OpMathType(common);
  if (op.kind == BinaryKind::kFloatMath) {
    common = FloatType(common);
    compute = OpMathType(common);
  } else if (op.kind == BinaryKind::kLogical) {
    common = compute = DType::kBool;
  }
  CheckDomain(ctx.name, common, op.domain);
  if (op.integer_division) RejectIntegerZeroDivisor(ctx, 1, common);
  Value a = Operand(ctx, 0, common, compute);
  Value b = Operand(ctx, 1, common, compute, op.opmath_scalar);
  return Result(ctx, op.formula(a, b));
}

// Comparisons run in the promoted dtype itself (a scalar is rounded to it, as on the CPU).
const std::unordered_map<std::string, std::string>& ComparisonDirections() {
  static const std::unordered_map<std::string, std::string> directions = {
      {"eq", "EQ"}, {"ne", "NE"}, {"lt", "LT"}, {"le", "LE"}, {"gt", "GT"}, {"ge", "GE"},
  };
  return directions;
}

std::vector<Value> CompareLowering(LoweringContext& ctx) {
  const DType common = ctx.promoted;
  return Result(ctx, Compare(ctx.value(0, common), ctx.value(1, common),
                             ComparisonDirections().at(ctx.name)));
}

// add, sub and rsub: self ± alpha * other (rsub: other - alpha * self). alpha is rounded to the
// common dtype and applied in opmath, as the CPU does.
std::vector<Value> AddLowering(LoweringContext& ctx) {
  const DType common = OperandsType(ctx, {0, 1});
  const DType compute = OpMathType(common);
  const bool reversed = ctx.name == "rsub";
  Value a = Operand(ctx, reversed ? 1 : 0, common, compute);
  Value b = Operand(ctx, reversed ? 0 : 1, common, compute);
  if (ctx.has(2) && !ctx.scalar(2).IsOne()) b = Multiply(b, ScalarOperand(ctx, 2, common, compute));
  if (ctx.name == "add") return Result(ctx, common == DType::kBool ? Or(a, b) : Add(a, b));
  return Result(ctx, Sub(a, b));
}

// div (rounding_mode None, "trunc", "floor") and floor_divide.
std::vector<Value> DivLowering(LoweringContext& ctx) {
  std::string mode = ctx.name == "floor_divide" ? "floor" : "";
  if (ctx.has(2)) mode = ctx.string_arg(2);
  if (mode.empty()) {
    const DType common = FloatType(ctx.promoted);
    const DType compute = OpMathType(common);
    return Result(ctx, Div(Operand(ctx, 0, common, compute),
                           Operand(ctx, 1, common, compute, /*opmath_scalar=*/true)));
  }
  const DType common = ctx.promoted;
  // Only a scalar divisor takes the CPU's opmath path; f16/bf16 tensor operands are divided in
  // their own dtype, every step rounded.
  const DType compute = ReadsScalarInOpMath(ctx, 1, common) ? OpMathType(common) : common;
  CheckDomain("div_" + mode + "_cpu", common, kNumbers);
  RejectIntegerZeroDivisor(ctx, 1, common);
  Value a = Operand(ctx, 0, common, compute);
  Value b = Operand(ctx, 1, common, compute, /*opmath_scalar=*/true);
  if (mode == "floor") return Result(ctx, FloorDivide(a, b));
  // Integer division truncates already.
  return Result(ctx, ir::IsFloating(compute) ? Trunc(Div(a, b)) : Div(a, b));
}

// Complex pow as the CPU's std::pow (glibc's cpowf): cexpf(e * clogf(b)), each step rounded to
// f32 as there. The elementary functions run in f64 and are rounded once, which reproduces glibc's
// nearly correctly rounded float ones; the product's terms are exact in f64, so rounding them and
// then their sum gives the C float arithmetic. Where the angle is large its rounding dominates,
// so stablehlo.power's |b|^c e^(-d arg b) form was ~1e-6 relative off the CPU, and it gives
// 0^0 = 1 where the CPU gives NaN. Where the real part of e * log(b) is infinite (b = 0), C's cexp
// gives 0 at -inf and inf + NaN i at +inf with an infinite or NaN angle.
Value ComplexPower(const Value& base, const Value& exponent) {
  auto wide = [](const Value& x) { return Convert(x, DType::kF64); };
  auto f32 = [](const Value& x) { return Convert(x, DType::kF32); };
  const Value br = wide(Real(base)), bi = wide(Imag(base));
  const Value er = wide(Real(exponent)), ei = wide(Imag(exponent));
  // clogf: its real part is logf(hypotf(|b|)), rounded twice, except near |b| = 1, where it is
  // a log1p form as accurate as log|b| rounded once (f32 squares are exact in f64).
  const Value squares = Add(Mul(br, br), Mul(bi, bi));
  const Value large = Max(Abs(br), Abs(bi)), small = Min(Abs(br), Abs(bi));
  auto c = [](double v) { return Constant(v, DType::kF64); };
  const Value near_one =
      Or(Or(Compare(large, c(1), "EQ"),
            And(And(Compare(large, c(1), "GT"), Compare(large, c(2), "LT")),
                Compare(small, c(1), "LT"))),
         And(And(Compare(large, c(0.5), "GE"), Compare(large, c(1), "LT")),
             Or(Compare(small, c(std::numeric_limits<float>::epsilon() / 2), "LT"),
                Compare(squares, c(0.5), "GE"))));
  const Value log_abs =
      wide(f32(Select(near_one, Mul(Log(squares), c(0.5)), Log(wide(f32(Sqrt(squares)))))));
  const Value arg = wide(f32(Binary("stablehlo.atan2", bi, br)));
  const Value re = f32(Sub(wide(f32(Mul(er, log_abs))), wide(f32(Mul(ei, arg)))));
  const Value im = f32(Add(wide(f32(Mul(er, arg))), wide(f32(Mul(ei, log_abs)))));
  // cexpf: expf(re) times cosf/sinf(im).
  const Value magnitude = wide(f32(Exp(wide(re))));
  const Value cosine = wide(f32(Unary("stablehlo.cosine", wide(im))));
  const Value sine = wide(f32(Unary("stablehlo.sine", wide(im))));
  Value result = MakeComplex(f32(Mul(magnitude, cosine)), f32(Mul(magnitude, sine)));
  const Value zero = ConstantLike(0, re), inf = ConstantLike(INFINITY, re);
  const Value bad_angle = Or(IsNan(im), Compare(Abs(im), inf, "EQ"));
  result = Select(And(Compare(re, inf, "EQ"), bad_angle), MakeComplex(inf, ConstantLike(NAN, re)),
                  result);
  return Select(Compare(re, Neg(inf), "EQ"), MakeComplex(zero, zero), result);
}

// pow: the CPU computes some constant exponents with dedicated kernels (sqrt, rsqrt, reciprocal
// in opmath; x*x, x*x*x, 1/(x*x) in the dtype itself), except for f16; for complex also exponent 0
// (ones) and 1 (a copy), and a base of 1 gives ones.
std::vector<Value> PowLowering(LoweringContext& ctx) {
  const DType common = ctx.promoted;
  const DType compute = OpMathType(common);
  const bool is_complex = ir::IsComplex(common);
  CheckDomain("pow", common, kNumbers);
  Value base = Operand(ctx, 0, common, compute);
  if (ctx.overload.rfind("Tensor_Scalar", 0) == 0 &&
      ((ir::IsFloating(common) && common != DType::kF16) || is_complex) &&
      ctx.scalar(1).imag == 0) {
    const double e = ctx.scalar(1).ToDouble();
    const Value x = ctx.value(0, common);
    if (e == 0.5) return Result(ctx, Sqrt(base));
    if (e == -0.5) return Result(ctx, Unary("stablehlo.rsqrt", base));
    if (e == -1) return Result(ctx, Reciprocal(base));
    if (e == 2) return Result(ctx, Mul(x, x));
    if (e == 3) return Result(ctx, Mul(Mul(x, x), x));
    if (e == -2) return Result(ctx, Reciprocal(Mul(x, x)));
    if (is_complex && e == 0) return Result(ctx, ConstantLike(1, x));
    if (is_complex && e == 1) return Result(ctx, x);
  }
  if (is_complex && ctx.overload.rfind("Scalar", 0) == 0 && ctx.scalar(0).IsOne()) {
    return Result(ctx, Constant(1, common, ctx.output().shape));
  }
  const Value exponent = Operand(ctx, 1, common, compute);
  if (is_complex) {
    const Shape& shape = ctx.output().shape;
    return Result(ctx, ComplexPower(BroadcastTo(base, shape), BroadcastTo(exponent, shape)));
  }
  return Result(ctx, Power(base, exponent));
}

// ---- ternary and selection ops ----

// lerp(self, end, weight) as the CPU's vector kernel: measured from the nearer end, so that the
// result is exact at weight 0 and 1. A scalar weight is read in opmath. Complex too.
std::vector<Value> LerpLowering(LoweringContext& ctx) {
  const DType common = ctx.promoted;
  const DType compute = OpMathType(common);
  if (!ir::IsComplex(common)) {
    CheckDomain(ctx.is_tensor(2) ? "lerp_kernel_tensor" : "lerp_kernel_scalar",
                ctx.tensor(0).dtype(), kFloats);
  }
  Value start = Operand(ctx, 0, common, compute);
  Value end = Operand(ctx, 1, common, compute);
  Value weight = Operand(ctx, 2, common, compute, /*opmath_scalar=*/!ctx.is_tensor(2));
  // A complex weight is near the start by its magnitude (real, hence the constant's type).
  const Value magnitude = Abs(weight);
  Value near_start = Compare(magnitude, ConstantLike(0.5, magnitude), "LT");
  Value coefficient = Select(near_start, weight, Sub(weight, One(compute)));
  Value base = Select(near_start, start, end);
  return Result(ctx, Add(Mul(coefficient, Sub(end, start)), base));
}

// addcmul: self + value * t1 * t2; addcdiv: self + value * t1 / t2 (integers rejected by meta).
std::vector<Value> AddcLowering(LoweringContext& ctx) {
  const DType common = OperandsType(ctx, {0, 1, 2});
  const DType compute = OpMathType(common);
  const bool divide = ctx.name == "addcdiv";
  CheckDomain(ctx.name + "_cpu_out", common, kNumbers);
  Value self = Operand(ctx, 0, common, compute);
  Value t1 = Operand(ctx, 1, common, compute);
  Value t2 = Operand(ctx, 2, common, compute);
  if (ctx.has(3) && !ctx.scalar(3).IsOne()) {
    // The CPU reads value in opmath for floats and casts it for integers.
    Value value = ir::IsFloating(compute) ? ctx.ScalarParameter(ctx.scalar(3), compute)
                                          : ScalarOperand(ctx, 3, common, compute);
    t1 = Mul(value, t1);
  }
  return Result(ctx, Add(self, divide ? Div(t1, t2) : Mul(t1, t2)));
}

std::vector<Value> WhereLowering(LoweringContext& ctx) {
  const DType t = ctx.output().dtype;
  return Result(ctx,
                Select(Convert(ctx.tensor(0), DType::kBool), ctx.value(1, t), ctx.value(2, t)));
}

// clamp(self, min, max), clamp_min, clamp_max; NaN in the input or a bound propagates. The CPU
// handles a single tensor bound with maximum/minimum, which also take bool.
std::vector<Value> ClampLowering(LoweringContext& ctx) {
  const DType common = ctx.promoted;
  const bool is_max_only = ctx.name == "clamp_max";
  const size_t max_index = ctx.name == "clamp" ? 2 : 1;
  const bool has_min = !is_max_only && ctx.has(1);
  const bool has_max = ctx.name != "clamp_min" && ctx.has(max_index);
  const bool tensor_bounds = ctx.is_tensor(has_min ? 1 : max_index);
  if (!tensor_bounds) {
    const char* kernel = has_min && has_max ? "clamp_scalar_cpu"
                         : has_min          ? "clamp_min_scalar_cpu"
                                            : "clamp_max_scalar_cpu";
    CheckDomain(kernel, common, kNumbers);
  } else if (has_min && has_max) {
    CheckDomain("clamp_cpu", common, kNumbers);
  }
  Value result = Convert(ctx.tensor(0), common);
  if (has_min) result = Maximum(result, CheckedValue(ctx, 1, common));
  if (has_max) result = Minimum(result, CheckedValue(ctx, max_index, common));
  return Result(ctx, result);
}

// masked_fill_(self, mask, value): the value is cast to self's dtype.
std::vector<Value> MaskedFillLowering(LoweringContext& ctx) {
  const DType t = ctx.output().dtype;
  const Value mask = ctx.tensor(1);
  if (mask.dtype() != DType::kBool) {
    throw std::runtime_error("masked_fill_ only supports boolean masks, but got mask with dtype " +
                             std::string(CppTypeName(mask.dtype())));
  }
  return Result(ctx, Select(mask, CheckedValue(ctx, 2, t), ctx.value(0, t)));
}

std::vector<Value> FillLowering(LoweringContext& ctx) {
  return Result(ctx, CheckedValue(ctx, 1, ctx.output().dtype));
}

std::vector<Value> ZeroLowering(LoweringContext& ctx) {
  return Result(ctx, Zero(ctx.output().dtype));
}

const bool registered = [] {
  for (const auto& entry : UnaryOps()) RegisterLowering(entry.first, UnaryLowering);
  for (const auto& entry : BinaryOps()) RegisterLowering(entry.first, BinaryLowering);
  for (const auto& entry : ComparisonDirections()) RegisterLowering(entry.first, CompareLowering);
  return true;
}();

LoweringRegistrar registrar({
    {"add", AddLowering},
    {"sub", AddLowering},
    {"rsub", AddLowering},
    {"div", DivLowering},
    {"floor_divide", DivLowering},
    {"pow", PowLowering},
    {"round", RoundLowering},
    {"nan_to_num", NanToNumLowering},
    {"lerp", LerpLowering},
    {"addcmul", AddcLowering},
    {"addcdiv", AddcLowering},
    {"where", WhereLowering},
    {"clamp", ClampLowering},
    {"clamp_min", ClampLowering},
    {"clamp_max", ClampLowering},
    {"masked_fill", MaskedFillLowering},
    {"fill", FillLowering},
    {"zero", ZeroLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
