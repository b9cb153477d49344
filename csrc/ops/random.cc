// Lowerings for the random op family. Every op whose schema has a Generator gets the generator's
// (seed, offset) appended as its last two arguments (aten/fallback.cc); they become runtime
// parameters of a ThreeFry rng_bit_generator, so a new seed or offset never recompiles.
// Argument checks that PyTorch does in the CPU kernel rather than the meta function are repeated
// here, with the CPU's messages.
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "ops/builder.h"
#include "ops/random_bits.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {

namespace {

// ---- dtype facts the CPU's ranges use (names: ops/type_names.h) ----

// Significant bits of a float type (std::numeric_limits<T>::digits).
int Digits(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return 11;
    case DType::kBF16:
      return 8;
    case DType::kF64:
      return 53;
    default:
      return 24;
  }
}

double FloatMax(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return 65504.0;
    case DType::kBF16:
      return 3.38953138925153547590470800371487866880e+38;
    case DType::kF64:
      return std::numeric_limits<double>::max();
    default:
      return std::numeric_limits<float>::max();
  }
}

int64_t IntegerMin(DType dtype) {
  if (!IsSignedInteger(dtype)) return 0;
  return ByteSize(dtype) == 8 ? std::numeric_limits<int64_t>::min()
                              : -(int64_t{1} << (ByteSize(dtype) * 8 - 1));
}

int64_t IntegerMax(DType dtype) {
  if (dtype == DType::kBool) return 1;
  const int bits = static_cast<int>(ByteSize(dtype) * 8) - (IsSignedInteger(dtype) ? 1 : 0);
  return bits >= 63 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << bits) - 1;
}

// The float type arithmetic runs in: f32 for the 16-bit floats (as the CPU's accumulate type).
DType ComputeType(DType dtype) { return dtype == DType::kF64 ? DType::kF64 : DType::kF32; }

template <typename... Parts>
[[noreturn]] void Fail(const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw std::runtime_error(message.str());
}

template <typename... Parts>
void Check(bool condition, const Parts&... parts) {
  if (!condition) Fail(parts...);
}

// ---- random bits ----

constexpr double kPi = 3.14159265358979323846;

// SplitMix64's finalizer: a bijection of 64-bit words that spreads every input bit.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t RandomKey(uint64_t seed, uint64_t offset) {
  return Mix64(Mix64(seed) + 0x9E3779B97F4A7C15ull * (offset + 1));
}

// The op's generator state for ThreeFry. ThreeFry takes state[0] as its key and counts from
// state[1], one counter per output word, so using the offset as the counter would make consecutive
// ops' streams overlap (shifted by one). Instead each op gets its own key, a hash of (seed, offset)
// (distinct offsets of one seed give distinct keys), and counts from zero. The key is a runtime
// parameter, so it never recompiles; hashing on the host rather than in the program halves the
// compile time of a random op.
Value InitialRandomState(const LoweringContext& ctx) {
  const size_t n = ctx.size();
  const auto seed = static_cast<uint64_t>(ctx.scalar(n - 2).i);
  const auto offset = static_cast<uint64_t>(ctx.scalar(n - 1).i);
  Scalar key;
  key.i = static_cast<int64_t>(RandomKey(seed, offset));
  return Concatenate({Reshape(ctx.ScalarParameter(key, DType::kU64), {1}),
                      Reshape(IntegerConstant(0, DType::kU64), {1})},
                     0);
}

RandomDraw DrawBits(const Value& state, const Shape& shape, DType bits_dtype) {
  std::vector<Value> results =
      ir::MakeMultiOp("stablehlo.rng_bit_generator", {state},
                      {TensorType{DType::kU64, {2}}, TensorType{bits_dtype, shape}},
                      "rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>");
  return {results[0], results[1]};
}

namespace {

// Uniform floats k * 2^-digits in [0, 1) of `compute` (f32 or f64), like the CPU's
// uniform_real: the top `digits` bits of each random word, so every value is exact.
RandomDraw DrawUniformDigits(const Value& state, const Shape& shape, DType compute, int digits) {
  const DType bits_dtype = compute == DType::kF64 ? DType::kU64 : DType::kU32;
  const int width = static_cast<int>(ByteSize(bits_dtype) * 8);
  RandomDraw draw = DrawBits(state, shape, bits_dtype);
  Value bits = Binary("stablehlo.shift_right_logical", draw.values,
                      IntegerConstant(width - digits, bits_dtype));
  draw.values = Mul(Convert(bits, compute), ScalarConstant(std::ldexp(1.0, -digits), compute));
  return draw;
}

// Random bits (ui32 or ui64) of `shape` from the op's generator key, the last two arguments.
Value RandomBits(const LoweringContext& ctx, const Shape& shape, DType bits_dtype) {
  return DrawBits(InitialRandomState(ctx), shape, bits_dtype).values;
}

}  // namespace

Value UniformUnit(const LoweringContext& ctx, const Shape& shape, DType compute, int digits) {
  return DrawUniformDigits(InitialRandomState(ctx), shape, compute, digits).values;
}

RandomDraw DrawUniform(const Value& state, const Shape& shape, DType compute) {
  return DrawUniformDigits(state, shape, compute, Digits(compute));
}

// Box-Muller: each pair of uniforms gives two samples.
RandomDraw DrawNormal(const Value& state, const Shape& shape, DType compute) {
  const int64_t count = ir::NumElements(shape);
  const int64_t pairs = (count + 1) / 2;
  RandomDraw draw = DrawUniform(state, {2, pairs}, compute);
  // 1 - u lies in (0, 1], so the log is finite.
  Value u1 = Reshape(Sub(ScalarConstant(1, compute), SliceAxis(draw.values, 0, 0, 1)), {pairs});
  Value u2 = Reshape(SliceAxis(draw.values, 0, 1, 2), {pairs});
  Value radius =
      Unary("stablehlo.sqrt", Mul(ScalarConstant(-2, compute), Unary("stablehlo.log", u1)));
  Value angle = Mul(ScalarConstant(2 * kPi, compute), u2);
  Value samples = Concatenate(
      {Mul(radius, Unary("stablehlo.cosine", angle)), Mul(radius, Unary("stablehlo.sine", angle))},
      0);
  draw.values = Reshape(SliceAxis(samples, 0, 0, count), shape);
  return draw;
}

namespace {

// The largest value of x's float type below the 0-d x (for x = 0: the negative subnormal).
Value PreviousFloat(const Value& x) {
  const DType bits_dtype = ByteSize(x.dtype()) == 2   ? DType::kS16
                           : ByteSize(x.dtype()) == 4 ? DType::kS32
                                                      : DType::kS64;
  Value bits = ir::MakeOp("stablehlo.bitcast_convert", {x}, TensorType{bits_dtype, {}});
  Value one = IntegerConstant(1, bits_dtype);
  Value zero = ConstantLike(0, x);
  // Sign-magnitude: moving toward -inf shrinks a positive pattern and grows a negative one.
  Value below_zero = IntegerConstant(IntegerMin(bits_dtype) + 1, bits_dtype);
  Value previous = Select(Compare(x, zero, "GT"), Sub(bits, one),
                          Select(Compare(x, zero, "LT"), Add(bits, one), below_zero));
  return ir::MakeOp("stablehlo.bitcast_convert", {previous}, x.type());
}

Value Scalar0d(const LoweringContext& ctx, size_t index, DType dtype) {
  return ctx.ScalarParameter(ctx.scalar(index), dtype);
}

// ---- complex targets ----

// A complex target is drawn as its real view, the f32 pairs (real, imaginary) in a last dim of 2,
// as PyTorch's uniform_ and normal_ draw through view_as_real.
TensorType RealView(const TensorType& complex) {
  Shape shape = complex.shape;
  shape.push_back(2);
  return TensorType{DType::kF32, shape};
}

Value FromRealView(const Value& pairs) {
  const int64_t last = pairs.rank() - 1;
  Shape shape = pairs.shape();
  shape.pop_back();
  return MakeComplex(Reshape(SliceAxis(pairs, last, 0, 1), shape),
                     Reshape(SliceAxis(pairs, last, 1, 2), shape));
}

// ---- uniform_(from, to) ----

// Samples of `out` (a float type) in [from, to).
Value UniformSample(const LoweringContext& ctx, const TensorType& out) {
  const double from = ctx.double_arg(1);
  const double to = ctx.double_arg(2);
  const double max = FloatMax(out.dtype);
  Check(from >= -max && from <= max, "from is out of bounds for ", CppTypeName(out.dtype));
  Check(to >= -max && to <= max, "to is out of bounds for ", CppTypeName(out.dtype));
  Check(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from,
        " > to=", to);
  Check(to - from <= max, "uniform_ expects to-from <= std::numeric_limits<",
        ScalarTypeName(out.dtype), ">::max(), but found to=", to, " and from=", from,
        " which result in to-from to exceed the limit");
  // from and to are rounded to the output dtype first, as the CPU does.
  const DType compute = ComputeType(out.dtype);
  Value from_value = Scalar0d(ctx, 1, out.dtype);
  Value to_value = Scalar0d(ctx, 2, out.dtype);
  Value low = Convert(from_value, compute);
  Value unit = UniformUnit(ctx, out.shape, compute, Digits(out.dtype));
  Value sample = Convert(Add(Mul(unit, Sub(Convert(to_value, compute), low)), low), out.dtype);
  // Rounding to the output dtype can reach `to`; keep [from, to) by stepping just below it
  // (from itself when from == to).
  Value below_to = Max(PreviousFloat(to_value), from_value);
  return Select(Compare(sample, to_value, "GE"), below_to, sample);
}

std::vector<Value> LowerUniform(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  if (IsComplex(out.dtype)) return {FromRealView(UniformSample(ctx, RealView(out)))};
  if (!IsFloating(out.dtype)) {
    throw UnsupportedError(std::string("\"check_uniform_bounds\" not implemented for '") +
                           ScalarTypeName(out.dtype) + "'");
  }
  return {UniformSample(ctx, out)};
}

// ---- normal_(mean, std) and normal.{Tensor,float}_{Tensor,float} ----

Value StandardNormal(const LoweringContext& ctx, const Shape& shape, DType compute) {
  return DrawNormal(InitialRandomState(ctx), shape, compute).values;
}

std::vector<Value> LowerNormal(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  const bool complex = IsComplex(out.dtype);
  if (!IsFloating(out.dtype) && !complex) {
    throw UnsupportedError(std::string("\"normal_kernel_cpu\" not implemented for '") +
                           ScalarTypeName(out.dtype) + "'");
  }
  // normal_(self, mean, std) has its target first; the functional overloads start at mean.
  const size_t mean_index = ctx.overload.empty() ? 1 : 0;
  const size_t std_index = mean_index + 1;
  Check(!ctx.is_tensor(std_index) || !IsComplex(ctx.tensor(std_index).dtype()),
        "normal expects standard deviation to be non-complex");
  const DType compute = complex ? DType::kF32 : ComputeType(out.dtype);
  if (!complex) {
    Value mean = ctx.value(mean_index, compute);
    Value std = ctx.value(std_index, compute);
    Value z = StandardNormal(ctx, out.shape, compute);
    return {
        Convert(Add(Mul(z, BroadcastTo(std, out.shape)), BroadcastTo(mean, out.shape)), out.dtype)};
  }
  // Each part has half the variance. A real mean is added to both parts (the real view's
  // elements), a complex mean tensor part by part.
  const bool complex_mean = ctx.is_tensor(mean_index) && IsComplex(ctx.tensor(mean_index).dtype());
  Value mean = complex_mean ? ctx.tensor(mean_index) : ctx.value(mean_index, compute);
  Value std = ctx.value(std_index, compute);
  Value part_std = BroadcastTo(Mul(std, ScalarConstant(1 / std::sqrt(2.0), compute)), out.shape);
  Value z = FromRealView(StandardNormal(ctx, RealView(out).shape, compute));
  auto part = [&](const Value& z_part, const Value& mean_part) {
    return Add(Mul(z_part, part_std), BroadcastTo(mean_part, out.shape));
  };
  return {MakeComplex(part(Real(z), Real(mean)), part(Imag(z), complex_mean ? Imag(mean) : mean))};
}

// ---- bernoulli(self), bernoulli_(p: float or tensor) ----

std::vector<Value> LowerBernoulli(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  // bernoulli(self) draws with probabilities self; the other overloads take p second.
  const bool p_is_self = ctx.overload.empty() || ctx.overload == "out";
  const size_t p_index = p_is_self ? 0 : 1;
  if (!ctx.is_tensor(p_index)) {
    const double p = ctx.double_arg(p_index);
    Check(p >= 0 && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  }
  const DType compute = ctx.is_tensor(p_index) && ctx.tensor(p_index).dtype() == DType::kF64
                            ? DType::kF64
                            : DType::kF32;
  Value p = BroadcastTo(ctx.value(p_index, compute), out.shape);
  Value unit = UniformUnit(ctx, out.shape, compute, Digits(compute));
  return {Convert(Compare(unit, p, "LT"), out.dtype)};
}

// ---- random_(), random_(to), random_(from, to?) ----

// static_cast<scalar_t>(value) for a float type: round to `digits` significant bits.
int64_t RoundToFloat(int64_t value, DType dtype) {
  const double x = static_cast<double>(value);
  if (x == 0) return 0;
  int exponent = 0;
  std::frexp(x, &exponent);
  const int digits = Digits(dtype);
  return static_cast<int64_t>(
      std::ldexp(std::nearbyint(std::ldexp(x, digits - exponent)), exponent - digits));
}

int BitLength(int64_t value) {
  int n = 0;
  while (value >>= 1) ++n;
  return n;
}

// PyTorch's update_from / update_to: move a bound that the float type cannot hold inward.
int64_t UpdateFrom(int64_t from, DType dtype) {
  const int64_t rounded = RoundToFloat(from + 1, dtype);
  if (rounded >= from) return from;
  return rounded + (int64_t{1} << (BitLength(std::abs(from + 1)) - Digits(dtype) + 1));
}

int64_t UpdateTo(int64_t to, DType dtype) {
  const int64_t rounded = RoundToFloat(to - 1, dtype);
  if (rounded < to) return to;
  return rounded - (int64_t{1} << (BitLength(std::abs(to - 1)) - Digits(dtype) + 1));
}

void CheckInRange(int64_t from, int64_t to_inclusive, DType dtype) {
  auto in_range = [&](int64_t v) {
    if (IsFloating(dtype)) return std::abs(static_cast<double>(v)) <= FloatMax(dtype);
    return v >= IntegerMin(dtype) && v <= IntegerMax(dtype);
  };
  Check(in_range(from), "from is out of bounds for ", CppTypeName(dtype));
  Check(in_range(to_inclusive), "to - 1 is out of bounds for ", CppTypeName(dtype));
}

// Integers base + (bits mod range) with 64-bit bits (range 0: the full 64-bit range). The
// modulo bias is range / 2^64, negligible for any range a tensor can use.
Value RandomIntegers(const LoweringContext& ctx, const TensorType& out, int64_t base,
                     uint64_t range) {
  Value bits = RandomBits(ctx, out.shape, DType::kU64);
  if (range != 0) {
    Scalar range_scalar, base_scalar;
    range_scalar.i = static_cast<int64_t>(range);
    base_scalar.i = base;
    Value in_range =
        Binary("stablehlo.remainder", bits, ctx.ScalarParameter(range_scalar, DType::kU64));
    bits = Add(in_range, ctx.ScalarParameter(base_scalar, DType::kU64));  // wraps like the CPU
  }
  Value as_signed =
      ir::MakeOp("stablehlo.bitcast_convert", {bits}, TensorType{DType::kS64, out.shape});
  return Convert(as_signed, out.dtype);
}

std::vector<Value> LowerRandom(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  const DType dtype = out.dtype;
  const bool floating = IsFloating(dtype);
  const bool from_overload = ctx.overload.rfind("from", 0) == 0;
  const bool to_overload = ctx.overload.rfind("to", 0) == 0;
  if (!from_overload && !to_overload) {
    // random_(): [0, max] for integers, [0, 2^digits] for floats, {0, 1} for bool.
    const int64_t max = floating ? int64_t{1} << Digits(dtype) : IntegerMax(dtype);
    return {RandomIntegers(ctx, out, 0, static_cast<uint64_t>(max) + 1)};
  }
  int64_t from = from_overload ? ctx.int_arg(1) : 0;
  const bool has_to = to_overload || ctx.has(2);
  if (has_to) {
    int64_t to = ctx.int_arg(to_overload ? 1 : 2);
    Check(from < to, "random_ expects 'from' to be less than 'to', but got from=", from,
          " >= to=", to);
    if (floating) {
      from = UpdateFrom(from, dtype);
      to = UpdateTo(to, dtype);
      Check(from < to,
            "random_ expects 'from' casted to dtype to be less than 'to' casted to dtype, but got "
            "from=",
            from, " >= to=", to);
    }
    CheckInRange(from, to - 1, dtype);
    return {
        RandomIntegers(ctx, out, from, static_cast<uint64_t>(to) - static_cast<uint64_t>(from))};
  }
  if (from == std::numeric_limits<int64_t>::min()) return {RandomIntegers(ctx, out, 0, 0)};
  // [from, the dtype's largest value]
  int64_t to_inclusive = IntegerMax(dtype);
  if (floating) {
    to_inclusive =
        Digits(dtype) >= 63 ? std::numeric_limits<int64_t>::max() : int64_t{1} << Digits(dtype);
    from = UpdateFrom(from, dtype);
    Check(from < to_inclusive,
          "random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' casted to "
          "dtype, but got from=",
          from, " > to_inc=", to_inclusive);
  }
  CheckInRange(from, to_inclusive, dtype);
  return {RandomIntegers(ctx, out, from,
                         static_cast<uint64_t>(to_inclusive) - static_cast<uint64_t>(from) + 1)};
}

// ---- exponential_, geometric_, cauchy_: transforms of one uniform; log_normal_ ----
// (Their meta functions check the parameters and reject what the CPU rejects.)

// log(1 - u) for u in [0, 1): finite, in [log(2^-digits), 0].
Value LogOneMinus(const Value& unit) {
  return Unary("stablehlo.log_plus_one", Unary("stablehlo.negate", unit));
}

// exponential_(lambd): -log(1 - u) / lambd.
Value Exponential(const LoweringContext& ctx, const Value& unit) {
  return Div(Unary("stablehlo.negate", LogOneMinus(unit)), Scalar0d(ctx, 1, unit.dtype()));
}

// geometric_(p): the number of trials to the first success, ceil(log(1 - u) / log(1 - p)) >= 1.
Value Geometric(const LoweringContext& ctx, const Value& unit) {
  Value log_failure = LogOneMinus(Scalar0d(ctx, 1, unit.dtype()));
  Value trials = Unary("stablehlo.ceil", Div(LogOneMinus(unit), log_failure));
  return Max(trials, ConstantLike(1, trials));
}

// cauchy_(median, sigma): median + sigma * tan(pi * (u - 1/2)).
Value Cauchy(const LoweringContext& ctx, const Value& unit) {
  const DType dtype = unit.dtype();
  Value angle = Mul(ScalarConstant(kPi, dtype), Sub(unit, ScalarConstant(0.5, dtype)));
  Value tangent = Div(Unary("stablehlo.sine", angle), Unary("stablehlo.cosine", angle));
  return Add(Mul(tangent, Scalar0d(ctx, 2, dtype)), Scalar0d(ctx, 1, dtype));
}

template <Value (*Transform)(const LoweringContext&, const Value&)>
std::vector<Value> LowerUniformTransform(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  const DType compute = ComputeType(out.dtype);
  return {
      Convert(Transform(ctx, UniformUnit(ctx, out.shape, compute, Digits(compute))), out.dtype)};
}

// log_normal_(mean, std): exp(mean + std * z).
std::vector<Value> LowerLogNormal(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  const DType compute = ComputeType(out.dtype);
  Value z = StandardNormal(ctx, out.shape, compute);
  Value exponent = Add(Mul(z, Scalar0d(ctx, 2, compute)), Scalar0d(ctx, 1, compute));
  return {Convert(Unary("stablehlo.exponential", exponent), out.dtype)};
}

// ---- sorting random keys: randperm, multinomial ----

// Sorts `keys` along `dimension` (ascending, or descending) and returns the permuted iota.
Value SortedIndices(const Value& keys, int64_t dimension, bool descending) {
  Value indices = Iota(TensorType{DType::kS64, keys.shape()}, dimension);
  TensorType key_scalar{keys.dtype(), {}};
  TensorType index_scalar{DType::kS64, {}};
  auto comparator = ir::MakeRegion(
      {key_scalar, key_scalar, index_scalar, index_scalar}, [&](const std::vector<Value>& a) {
        return std::vector<Value>{Compare(a[0], a[1], descending ? "GT" : "LT")};
      });
  return ir::MakeMultiOp("stablehlo.sort", {keys, indices}, {keys.type(), indices.type()},
                         "dimension = " + std::to_string(dimension) + " : i64, is_stable = true",
                         {std::move(comparator)})[1];
}

// randperm.generator_out(n): the order that sorts n random 64-bit keys (ties: probability
// about n^2 / 2^65).
std::vector<Value> LowerRandperm(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  return {Convert(SortedIndices(RandomBits(ctx, out.shape, DType::kU64), 0, false), out.dtype)};
}

// multinomial(probs, num_samples, replacement): an exponential race. With E ~ Exp(1), the
// category with the largest weight / E is distributed as weight / sum(weights), and the k largest
// are a sample without replacement. With replacement, every sample runs its own race.
std::vector<Value> LowerMultinomial(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  Value weights = ctx.tensor(0);
  Check(IsFloating(weights.dtype()),
        "multinomial only supports floating-point dtypes for input, got: ",
        ScalarTypeName(weights.dtype()));
  const DType compute = ComputeType(weights.dtype());
  weights = Convert(weights, compute);
  const bool replacement = ctx.bool_arg(2);
  const int64_t samples = out.shape.back();
  const int64_t categories = weights.shape().back();
  Check(replacement || samples <= categories,
        "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  const int64_t rows = weights.rank() == 2 ? weights.shape()[0] : 1;
  weights = Reshape(weights, {rows, 1, categories});
  const int64_t races = replacement ? samples : 1;
  const Shape key_shape{rows, races, categories};
  Value unit = UniformUnit(ctx, key_shape, compute, Digits(compute));
  Value exponential =
      Unary("stablehlo.negate", Unary("stablehlo.log_plus_one", Unary("stablehlo.negate", unit)));
  Value keys = Div(BroadcastTo(weights, key_shape), exponential);
  Value picked;
  if (replacement) {
    // argmax over categories: the first index holding the maximum key.
    Value best = Reduce(keys, {2}, "stablehlo.maximum",
                        ScalarConstant(-std::numeric_limits<double>::infinity(), compute));
    Value is_best = Compare(keys, BroadcastInDim(best, key_shape, {0, 1}), "EQ");
    Value index = Iota(TensorType{DType::kS64, key_shape}, 2);
    picked = Reduce(Select(is_best, index, IntegerConstant(categories, DType::kS64)), {2},
                    "stablehlo.minimum", IntegerConstant(categories, DType::kS64));
  } else {
    picked = SliceAxis(SortedIndices(Reshape(keys, {rows, categories}), 1, true), 1, 0, samples);
  }
  return {Convert(Reshape(picked, out.shape), out.dtype)};
}

const LoweringRegistrar registrar{
    {"uniform", LowerUniform},
    {"normal", LowerNormal},
    {"bernoulli", LowerBernoulli},
    {"random", LowerRandom},
    {"exponential", LowerUniformTransform<Exponential>},
    {"geometric", LowerUniformTransform<Geometric>},
    {"cauchy", LowerUniformTransform<Cauchy>},
    {"log_normal", LowerLogNormal},
    {"randperm", LowerRandperm},
    {"multinomial", LowerMultinomial},
};

}  // namespace

}  // namespace torch_tpu::ops
