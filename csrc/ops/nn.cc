// Lowerings for neural-network ops: activations and their backward ops, dropout, the embedding
// backward and the losses. Like PyTorch's CPU kernels, f16/bf16 compute in f32 ("opmath") and
// round once at the end.
#include <cmath>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ops/builder.h"
#include "ops/random_bits.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

// ---- building blocks ----

Value C(double value, DType t) { return Constant(value, t); }
Value Expm1(const Value& x) { return Unary("stablehlo.exponential_minus_one", x); }
Value Log1p(const Value& x) { return Unary("stablehlo.log_plus_one", x); }
Value Erf(const Value& x) { return Unary("chlo.erf", x); }
Value Square(const Value& x) { return Mul(x, x); }
Value Where(const Value& predicate, const Value& on_true, const Value& on_false) {
  const Shape shape =
      BroadcastShapes(predicate.shape(), BroadcastShapes(on_true.shape(), on_false.shape()));
  return Select(BroadcastTo(predicate, shape), BroadcastTo(on_true, shape),
                BroadcastTo(on_false, shape));
}
Value Less(const Value& a, const Value& b) { return Compare(a, b, "LT"); }
Value Greater(const Value& a, const Value& b) { return Compare(a, b, "GT"); }
Value LessEqual(const Value& a, const Value& b) { return Compare(a, b, "LE"); }
Value GreaterEqual(const Value& a, const Value& b) { return Compare(a, b, "GE"); }
Value Or(const Value& a, const Value& b) { return Binary("stablehlo.or", a, b); }
Value And(const Value& a, const Value& b) { return Binary("stablehlo.and", a, b); }

std::vector<int64_t> AllDims(const Value& x) {
  std::vector<int64_t> dims(x.rank());
  for (int64_t i = 0; i < x.rank(); ++i) dims[i] = i;
  return dims;
}

Value SumAll(const Value& x) { return Reduce(x, AllDims(x), "stablehlo.add", C(0, x.dtype())); }

// ---- pointwise activations and their backward ops, from a table of formulas ----

// `x` holds the op's tensor arguments in the compute dtype, broadcast to the output's shape;
// scalar options are read from ctx in `t`.
using Formula = Value (*)(const LoweringContext& ctx, const std::vector<Value>& x, DType t);

struct PointwiseOp {
  std::vector<size_t> tensors;  // argument indices of the tensor operands
  Formula formula;
};

constexpr double kSqrt1_2 = 0.70710678118654752440;      // 1/sqrt(2)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kGeluKappa = 0.044715;

std::string Approximate(const LoweringContext& ctx, size_t i) {
  const std::string approximate = ctx.has(i) ? ctx.string_arg(i) : "none";
  if (approximate != "none" && approximate != "tanh") {
    throw UnsupportedError("gelu approximate='" + approximate + "'");
  }
  return approximate;
}

Value Gelu(const LoweringContext& ctx, const std::vector<Value>& x, DType t) {
  const Value& a = x[0];
  if (Approximate(ctx, 1) == "tanh") {
    Value inner = Mul(C(kSqrt2OverPi, t), Add(a, Mul(C(kGeluKappa, t), Mul(a, Square(a)))));
    return Mul(Mul(C(0.5, t), a), Add(C(1, t), Tanh(inner)));
  }
  return Mul(Mul(a, C(0.5, t)), Add(C(1, t), Erf(Mul(a, C(kSqrt1_2, t)))));
}

Value GeluBackward(const LoweringContext& ctx, const std::vector<Value>& x, DType t) {
  const Value &grad = x[0], &a = x[1];
  if (Approximate(ctx, 2) == "tanh") {
    Value a_squared = Square(a);
    Value inner = Mul(C(kSqrt2OverPi, t), Add(a, Mul(C(kGeluKappa, t), Mul(a_squared, a))));
    Value tanh_inner = Tanh(inner);
    Value left = Mul(C(0.5, t), a);
    Value right = Add(C(1, t), tanh_inner);
    Value left_derivative = Mul(C(0.5, t), right);
    Value right_derivative =
        Mul(Sub(C(1, t), Square(tanh_inner)),
            Mul(C(kSqrt2OverPi, t), Add(C(1, t), Mul(C(3 * kGeluKappa, t), a_squared))));
    return Mul(grad, Add(left_derivative, Mul(left, right_derivative)));
  }
  Value cdf = Mul(C(0.5, t), Add(C(1, t), Erf(Mul(a, C(kSqrt1_2, t)))));
  // The standard normal density: exp(-x^2 / 2) / sqrt(2 pi).
  Value pdf = Mul(Exp(Mul(C(-0.5, t), Square(a))), C(0.39894228040143267794, t));
  return Mul(grad, Add(cdf, Mul(a, pdf)));
}

Value Silu(const LoweringContext&, const std::vector<Value>& x, DType t) {
  return Div(x[0], Add(C(1, t), Exp(Neg(x[0]))));
}

Value SiluBackward(const LoweringContext&, const std::vector<Value>& x, DType t) {
  const Value &grad = x[0], &a = x[1];
  Value sigmoid = Div(C(1, t), Add(C(1, t), Exp(Neg(a))));
  return Mul(Mul(grad, sigmoid), Add(C(1, t), Mul(a, Sub(C(1, t), sigmoid))));
}

// softplus(x, beta, threshold): linear where x * beta exceeds the threshold.
Value Softplus(const LoweringContext& ctx, const std::vector<Value>& x, DType t) {
  Value beta = ctx.value(1, t);
  Value scaled = Mul(x[0], beta);
  return Where(Greater(scaled, ctx.value(2, t)), x[0], Div(Log1p(Exp(scaled)), beta));
}

Value SoftplusBackward(const LoweringContext& ctx, const std::vector<Value>& x, DType t) {
  const Value &grad = x[0], &a = x[1];
  Value scaled = Mul(a, ctx.value(2, t));
  Value z = Exp(scaled);
  return Where(Greater(scaled, ctx.value(3, t)), grad, Div(Mul(grad, z), Add(z, C(1, t))));
}

Value LeakyRelu(const LoweringContext& ctx, const std::vector<Value>& x, DType t) {
  return Where(Greater(x[0], C(0, t)), x[0], Mul(x[0], ctx.value(1, t)));
}

// The sign of self equals the sign of the result (the slope is checked positive), so both work.
Value LeakyReluBackward(const LoweringContext& ctx, const std::vector<Value>& x, DType t) {
  return Where(Greater(x[1], C(0, t)), x[0], Mul(x[0], ctx.value(2, t)));
}

// elu(x, alpha, scale, input_scale); selu and celu are elu with other coefficients.
Value Elu(const LoweringContext& ctx, const std::vector<Value>& x, DType t) {
  Value negative = Mul(Expm1(Mul(x[0], ctx.value(3, t))), Mul(ctx.value(1, t), ctx.value(2, t)));
  return Where(LessEqual(x[0], C(0, t)), negative, Mul(x[0], ctx.value(2, t)));
}

// elu_backward(grad, alpha, scale, input_scale, is_result, self_or_result).
Value EluBackward(const LoweringContext& ctx, const std::vector<Value>& x, DType t) {
  const Value &grad = x[0], &b = x[1];
  Value negative_coefficient = Mul(ctx.value(1, t), ctx.value(2, t));
  Value input_scale = ctx.value(3, t);
  Value negative = ctx.bool_arg(4) ? Mul(Mul(grad, input_scale), Add(b, negative_coefficient))
                                   : Mul(Mul(Mul(grad, input_scale), negative_coefficient),
                                         Exp(Mul(b, input_scale)));
  return Where(LessEqual(b, C(0, t)), negative, Mul(grad, ctx.value(2, t)));
}

Value Hardsigmoid(const LoweringContext&, const std::vector<Value>& x, DType t) {
  return Div(Min(Max(Add(x[0], C(3, t)), C(0, t)), C(6, t)), C(6, t));
}

Value HardsigmoidBackward(const LoweringContext&, const std::vector<Value>& x, DType t) {
  Value inside = And(Greater(x[1], C(-3, t)), Less(x[1], C(3, t)));
  return Where(inside, Div(x[0], C(6, t)), C(0, t));
}

Value Hardswish(const LoweringContext& ctx, const std::vector<Value>& x, DType t) {
  return Mul(x[0], Hardsigmoid(ctx, x, t));
}

Value HardswishBackward(const LoweringContext&, const std::vector<Value>& x, DType t) {
  const Value &grad = x[0], &a = x[1];
  Value middle = Mul(grad, Add(Div(a, C(3, t)), C(0.5, t)));
  // Both bounds belong to the outer pieces, as in the CPU kernel.
  return Where(LessEqual(a, C(-3, t)), C(0, t), Where(Less(a, C(3, t)), middle, grad));
}

Value Mish(const LoweringContext&, const std::vector<Value>& x, DType) {
  return Mul(x[0], Tanh(Log1p(Exp(x[0]))));
}

Value MishBackward(const LoweringContext&, const std::vector<Value>& x, DType t) {
  const Value &grad = x[0], &a = x[1];
  Value sigmoid = Div(C(1, t), Add(C(1, t), Exp(Neg(a))));
  Value tanh_softplus = Tanh(Log1p(Exp(a)));
  return Mul(grad, Add(tanh_softplus, Mul(Mul(a, sigmoid), Sub(C(1, t), Square(tanh_softplus)))));
}

// tanh_backward(grad, output) and sigmoid_backward(grad, output) take the forward's result.
Value TanhBackward(const LoweringContext&, const std::vector<Value>& x, DType t) {
  return Mul(x[0], Sub(C(1, t), Square(x[1])));
}

Value SigmoidBackward(const LoweringContext&, const std::vector<Value>& x, DType t) {
  return Mul(x[0], Mul(Sub(C(1, t), x[1]), x[1]));
}

// The gradient is zero at the bounds too, as on the CPU.
Value HardtanhBackward(const LoweringContext& ctx, const std::vector<Value>& x, DType t) {
  const Value& a = x[1];
  Value outside = Or(LessEqual(a, ctx.value(2, t)), GreaterEqual(a, ctx.value(3, t)));
  return Where(outside, C(0, t), x[0]);
}

// log_sigmoid_backward(grad, self, buffer): the buffer (exp(-|x|)) is recomputed from self.
Value LogSigmoidBackward(const LoweringContext&, const std::vector<Value>& x, DType t) {
  const Value &grad = x[0], &a = x[1];
  Value negative = Less(a, C(0, t));
  Value z = Exp(Neg(Abs(a)));
  Value max_derivative = Where(negative, C(1, t), C(0, t));
  Value sign = Where(negative, C(1, t), C(-1, t));
  return Mul(grad, Sub(max_derivative, Mul(sign, Div(z, Add(C(1, t), z)))));
}

// hardshrink(self, lambd): 0 inside [-lambd, lambd] (bounds included, as on the CPU), else self.
Value Hardshrink(const LoweringContext& ctx, const std::vector<Value>& x, DType t) {
  Value lambd = ctx.value(1, t);
  Value inside = And(GreaterEqual(x[0], Neg(lambd)), LessEqual(x[0], lambd));
  return Where(inside, C(0, t), x[0]);
}

// hardshrink_backward and softshrink_backward(grad, self, lambd) share this gradient.
Value ShrinkBackward(const LoweringContext& ctx, const std::vector<Value>& x, DType t) {
  Value lambd = ctx.value(2, t);
  Value inside = And(GreaterEqual(x[1], Neg(lambd)), LessEqual(x[1], lambd));
  return Where(inside, C(0, t), x[0]);
}

// softshrink(self, lambd): moves self toward 0 by lambd; the middle is self * 0 so NaN stays NaN.
Value Softshrink(const LoweringContext& ctx, const std::vector<Value>& x, DType t) {
  Value lambd = ctx.value(1, t);
  return Where(Greater(x[0], lambd), Sub(x[0], lambd),
               Where(Less(x[0], Neg(lambd)), Add(x[0], lambd), Mul(x[0], C(0, t))));
}

// _prelu_kernel(self, weight): weight is already shaped to broadcast against self.
Value Prelu(const LoweringContext&, const std::vector<Value>& x, DType t) {
  return Where(Greater(x[0], C(0, t)), x[0], Mul(x[1], x[0]));
}

// rrelu_with_noise(self, noise, lower, upper, training, generator): in eval mode a leaky relu
// with the mean slope. Training draws a slope per element from the CPU's generator stream, which
// cannot be reproduced here.
Value RreluSlope(const LoweringContext& ctx, size_t lower, size_t training, DType t) {
  if (ctx.bool_arg(training)) throw UnsupportedError("rrelu with training=True");
  return Div(Add(ctx.value(lower, t), ctx.value(lower + 1, t)), C(2, t));
}

Value RreluWithNoise(const LoweringContext& ctx, const std::vector<Value>& x, DType t) {
  return Where(Greater(x[0], C(0, t)), x[0], Mul(x[0], RreluSlope(ctx, 2, 4, t)));
}

// rrelu_with_noise_backward(grad, self, noise, lower, upper, training, self_is_result): self and
// the result have the same sign, so either works.
Value RreluWithNoiseBackward(const LoweringContext& ctx, const std::vector<Value>& x, DType t) {
  return Where(Greater(x[1], C(0, t)), x[0], Mul(x[0], RreluSlope(ctx, 3, 5, t)));
}

// xlogy(x, y) = x * log(y), 0 where x == 0 unless y is NaN (kl_div's decomposition uses it).
Value Xlogy(const LoweringContext&, const std::vector<Value>& x, DType t) {
  const Value &a = x[0], &b = x[1];
  Value product = Where(Compare(a, C(0, t), "EQ"), C(0, t), Mul(a, Log(b)));
  return Where(Compare(b, b, "NE"), b, product);
}

const std::unordered_map<std::string, PointwiseOp>& PointwiseOps() {
  static const std::unordered_map<std::string, PointwiseOp> ops = {
      {"gelu", {{0}, Gelu}},
      {"gelu_backward", {{0, 1}, GeluBackward}},
      {"silu", {{0}, Silu}},
      {"silu_backward", {{0, 1}, SiluBackward}},
      {"softplus", {{0}, Softplus}},
      {"softplus_backward", {{0, 1}, SoftplusBackward}},
      {"leaky_relu", {{0}, LeakyRelu}},
      {"leaky_relu_backward", {{0, 1}, LeakyReluBackward}},
      {"elu", {{0}, Elu}},
      {"elu_backward", {{0, 5}, EluBackward}},
      {"hardsigmoid", {{0}, Hardsigmoid}},
      {"hardsigmoid_backward", {{0, 1}, HardsigmoidBackward}},
      {"hardswish", {{0}, Hardswish}},
      {"hardswish_backward", {{0, 1}, HardswishBackward}},
      {"mish", {{0}, Mish}},
      {"mish_backward", {{0, 1}, MishBackward}},
      {"tanh_backward", {{0, 1}, TanhBackward}},
      {"sigmoid_backward", {{0, 1}, SigmoidBackward}},
      {"hardtanh_backward", {{0, 1}, HardtanhBackward}},
      {"log_sigmoid_backward", {{0, 1}, LogSigmoidBackward}},
      {"xlogy", {{0, 1}, Xlogy}},
      {"hardshrink", {{0}, Hardshrink}},
      {"hardshrink_backward", {{0, 1}, ShrinkBackward}},
      {"softshrink", {{0}, Softshrink}},
      {"softshrink_backward", {{0, 1}, ShrinkBackward}},
      {"_prelu_kernel", {{0, 1}, Prelu}},
      {"rrelu_with_noise", {{0}, RreluWithNoise}},
      {"rrelu_with_noise_backward", {{0, 1}, RreluWithNoiseBackward}},
  };
  return ops;
}

std::vector<Value> PointwiseLowering(LoweringContext& ctx) {
  const PointwiseOp& op = PointwiseOps().at(ctx.name);
  const TensorType& out = ctx.output();
  // Complex reaches only the formulas listed in complex.cc (silu).
  if (!ir::IsComplex(out.dtype)) CheckFloatingKernel(ctx.name, out.dtype);
  const DType t = OpMathType(out.dtype);
  std::vector<Value> x;
  // Operands are cast to the common dtype first (xlogy's may be a host scalar).
  for (size_t i : op.tensors)
    x.push_back(BroadcastTo(Convert(ctx.value(i, out.dtype), t), out.shape));
  return {BroadcastTo(Convert(op.formula(ctx, x, t), out.dtype), out.shape)};
}

// relu keeps NaN (as CPU torch does): max(x, 0) would too, select on x > 0 would not.
std::vector<Value> ReluLowering(LoweringContext& ctx) {
  Value x = ctx.tensor(0);
  if (x.dtype() == DType::kBool) throw UnsupportedError("relu of a bool tensor");
  return {Max(x, ConstantLike(0, x))};
}

// threshold(self, threshold, value) = self <= threshold ? value : self, and threshold_backward(
// grad, self, threshold) = self <= threshold ? 0 : grad (so a NaN self keeps its gradient): the
// CPU's one kernel. Floating inputs compare in opmath (a bf16 input against the f32 threshold,
// not a bf16-rounded one); integers truncate the scalars to the tensor's type, as Scalar::to does.
std::vector<Value> ThresholdLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  if (out.dtype == DType::kBool) CheckFloatingKernel("threshold_cpu", out.dtype);
  const DType t = OpMathType(out.dtype);
  const bool backward = ctx.name == "threshold_backward";
  Value self = Convert(ctx.value(backward ? 1 : 0, out.dtype), t);
  Value other = backward ? Convert(ctx.value(0, out.dtype), t) : self;
  Value value = backward ? C(0, t) : ctx.value(2, t);
  Value replaced = Where(LessEqual(self, ctx.value(1 + backward, t)), value, other);
  return {BroadcastTo(Convert(replaced, out.dtype), out.shape)};
}

// glu(self, dim) = a * sigmoid(b), a and b the two halves of self along dim (the meta function
// checks that the dim is even).
std::pair<Value, Value> GluHalves(const Value& self, int64_t dim, DType t) {
  const int64_t half = self.shape()[dim] / 2;
  Value x = Convert(self, t);
  return {SliceAxis(x, dim, 0, half), SliceAxis(x, dim, half, 2 * half)};
}

std::vector<Value> GluLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  CheckFloatingKernel("glu_cpu", out.dtype);
  const Value self = ctx.tensor(0);
  const int64_t dim = NormalizeDim(ctx.int_arg(1, -1), self.rank());
  auto [a, b] = GluHalves(self, dim, OpMathType(out.dtype));
  return {Convert(Mul(a, Sigmoid(b)), out.dtype)};
}

// glu_backward(grad, self, dim): d/da = grad * sigmoid(b), d/db = grad * a * s * (1 - s).
std::vector<Value> GluBackwardLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  CheckFloatingKernel("glu_backward_cpu", out.dtype);
  const DType t = OpMathType(out.dtype);
  const Value self = ctx.tensor(1);
  const int64_t dim = NormalizeDim(ctx.int_arg(2), self.rank());
  auto [a, b] = GluHalves(self, dim, t);
  Value grad = Convert(ctx.tensor(0), t);
  Value sigmoid = Sigmoid(b);
  Value grad_a = Mul(grad, sigmoid);
  Value grad_b = Mul(Mul(grad_a, a), Sub(C(1, t), sigmoid));
  return {Convert(Concatenate({grad_a, grad_b}, dim), out.dtype)};
}

// hardtanh(self, min, max) (and relu6) clamps in the tensor's own dtype; NaN passes through.
std::vector<Value> HardtanhLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  if (out.dtype == DType::kBool) CheckFloatingKernel(ctx.name, out.dtype);
  Value x = ctx.value(0, out.dtype);
  Value low = ctx.value(1, out.dtype);
  Value high = ctx.value(2, out.dtype);
  return {Where(Less(x, low), low, Where(Greater(x, high), high, x))};
}

// log_sigmoid_forward(self) -> (output, buffer): min(x, 0) - log1p(exp(-|x|)); the CPU's buffer
// holds exp(-|x|).
std::vector<Value> LogSigmoidForwardLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  CheckFloatingKernel(ctx.name, out.dtype);
  const DType t = OpMathType(out.dtype);
  Value x = Convert(ctx.tensor(0), t);
  Value z = Exp(Neg(Abs(x)));
  Value output = Sub(Min(x, C(0, t)), Log1p(z));
  Value buffer = ctx.output(1).shape == out.shape
                     ? Convert(z, ctx.output(1).dtype)
                     : Constant(0, ctx.output(1).dtype, ctx.output(1).shape);
  return {Convert(output, out.dtype), buffer};
}

// _prelu_kernel_backward(grad, self, weight) -> (grad_self, grad_weight), both of the broadcast
// shape (autograd sums grad_weight down to weight's shape).
std::vector<Value> PreluBackwardLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  CheckFloatingKernel(ctx.name, out.dtype);
  const DType t = OpMathType(out.dtype);
  const Shape shape = BroadcastShapes(ctx.tensor(1).shape(), ctx.tensor(2).shape());
  Value grad = BroadcastTo(Convert(ctx.tensor(0), t), shape);
  Value self = BroadcastTo(Convert(ctx.tensor(1), t), shape);
  Value weight = BroadcastTo(Convert(ctx.tensor(2), t), shape);
  Value positive = Greater(self, C(0, t));
  Value grad_self = Where(positive, grad, Mul(weight, grad));
  Value grad_weight = Where(positive, C(0, t), Mul(self, grad));
  return {BroadcastTo(Convert(grad_self, out.dtype), out.shape),
          BroadcastTo(Convert(grad_weight, ctx.output(1).dtype), ctx.output(1).shape)};
}

// ---- dropout ----

// native_dropout(input, p, train?) -> (output, mask); the generator key follows the schema args.
std::vector<Value> NativeDropoutLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  Value input = ctx.tensor(0);
  const double p = ctx.double_arg(1);
  // Keeping everything draws no random numbers (a compiled graph holding it then runs from a
  // plan, _compile/dynamo_backend.py); the result is the input, exactly as x * 1 / (1 - 0).
  if (!ctx.bool_arg(2, true) || p == 0) {
    return {input, Constant(1, DType::kBool, out.shape)};
  }
  const DType t = OpMathType(out.dtype);
  Scalar keep_probability, scale;
  keep_probability.kind = scale.kind = Scalar::Kind::kFloat;
  keep_probability.f = 1 - p;
  scale.f = keep_probability.f == 0 ? 0 : 1 / keep_probability.f;
  // Probabilities and scales are runtime parameters, so a new p does not recompile.
  Value unit = UniformUnit(ctx, out.shape, DType::kF32, 24);
  Value keep = Less(unit, ctx.ScalarParameter(keep_probability, DType::kF32));
  Value kept = Mul(Convert(input, t), ctx.ScalarParameter(scale, t));
  return {Convert(Where(keep, kept, C(0, t)), out.dtype), keep};
}

// native_dropout_backward(grad, mask, scale) = grad * (mask * scale), the factor rounded to
// grad's dtype first as the CPU does.
std::vector<Value> NativeDropoutBackwardLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  CheckFloatingKernel(ctx.name, out.dtype);
  const DType t = OpMathType(out.dtype);
  Value mask = Convert(ctx.tensor(1), t);
  Value factor = Convert(Convert(Mul(mask, ctx.value(2, t)), out.dtype), t);
  Value grad = Convert(ctx.value(0, out.dtype), t);
  return {BroadcastTo(Convert(Mul(grad, factor), out.dtype), out.shape)};
}

// ---- embedding ----

// Adds the rows of `updates` ([n, d]) into rows `indices` ([n]) of `operand` ([v, d]).
Value ScatterAddRows(const Value& operand, const Value& indices, const Value& updates) {
  TensorType scalar{operand.dtype(), {}};
  auto body = ir::MakeRegion({scalar, scalar}, [&](const std::vector<Value>& a) {
    return std::vector<Value>{ir::MakeOp("stablehlo.add", {a[0], a[1]}, scalar)};
  });
  const std::string numbers =
      "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], "
      "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>";
  Value points = Reshape(indices, {indices.shape()[0], 1});
  return ir::MakeMultiOp("stablehlo.scatter", {operand, points, updates}, {operand.type()}, numbers,
                         {std::move(body)})[0];
}

// embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq): the sum
// of the gradient rows of each index; padding_idx rows get none; scale_grad_by_freq divides each
// row by how often its index occurs.
std::vector<Value> EmbeddingDenseBackwardLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  const int64_t count = ir::NumElements(ctx.tensor(1).shape());
  const int64_t width = out.shape[1];
  const DType t = OpMathType(out.dtype);
  Value indices = Reshape(Convert(ctx.tensor(1), DType::kS64), {count});
  Value grad = Reshape(Convert(ctx.tensor(0), t), {count, width});
  const int64_t padding_idx = ctx.int_arg(3);
  Value used = Constant(1, DType::kBool, {count});
  if (padding_idx >= 0) {
    used = Compare(indices, IntegerConstant(padding_idx, DType::kS64), "NE");
    grad = Where(Reshape(used, {count, 1}), grad, C(0, t));
  }
  Value sums = ScatterAddRows(Constant(0, t, {out.shape[0], width}), indices, grad);
  if (ctx.bool_arg(4)) {
    Value counts =
        ScatterAddRows(Constant(0, t, {out.shape[0], 1}), indices, Constant(1, t, {count, 1}));
    sums = Div(sums, Max(counts, C(1, t)));
  }
  return {Convert(sums, out.dtype)};
}

// ---- losses ----

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

Value Reduced(const Value& loss, int64_t reduction) {
  if (reduction == kNone) return loss;
  Value sum = SumAll(loss);
  if (reduction == kSum) return sum;
  return Div(sum, C(static_cast<double>(ir::NumElements(loss.shape())), loss.dtype()));
}

// The gradient of the reduction: grad as is (none, sum) or divided by the element count (mean).
Value ReducedGradient(const Value& grad, const Shape& shape, int64_t reduction) {
  Value g = BroadcastTo(grad, shape);
  if (reduction != kMean) return g;
  return Div(g, C(static_cast<double>(ir::NumElements(shape)), g.dtype()));
}

// (self, target) in the compute dtype, broadcast together.
std::pair<Value, Value> LossOperands(const LoweringContext& ctx, DType dtype, DType t) {
  Value self = Convert(ctx.value(0, dtype), t);
  Value target = Convert(ctx.value(1, dtype), t);
  const Shape shape = BroadcastShapes(self.shape(), target.shape());
  return {BroadcastTo(self, shape), BroadcastTo(target, shape)};
}

using LossFormula = Value (*)(const LoweringContext& ctx, const Value& difference, DType t);

Value SquaredError(const LoweringContext&, const Value& d, DType) { return Square(d); }
Value SquaredErrorGradient(const LoweringContext&, const Value& d, DType t) {
  return Mul(C(2, t), d);
}

// smooth_l1(d, beta): 0.5 d^2 / beta below beta, |d| - beta / 2 above (beta = 0: l1).
Value SmoothL1(const LoweringContext& ctx, const Value& d, DType t) {
  Value beta = ctx.value(3, t);
  Value z = Abs(d);
  return Where(Less(z, beta), Div(Mul(C(0.5, t), Square(z)), beta), Sub(z, Mul(C(0.5, t), beta)));
}
Value SmoothL1Gradient(const LoweringContext& ctx, const Value& d, DType t) {
  Value beta = ctx.value(4, t);
  return Where(LessEqual(d, Neg(beta)), C(-1, t),
               Where(GreaterEqual(d, beta), C(1, t), Div(d, beta)));
}

// huber(d, delta): 0.5 d^2 below delta, delta (|d| - delta / 2) above.
Value Huber(const LoweringContext& ctx, const Value& d, DType t) {
  Value delta = ctx.value(3, t);
  Value z = Abs(d);
  return Where(Less(z, delta), Mul(C(0.5, t), Square(z)),
               Mul(delta, Sub(z, Mul(C(0.5, t), delta))));
}
Value HuberGradient(const LoweringContext& ctx, const Value& d, DType t) {
  Value delta = ctx.value(4, t);
  return Where(LessEqual(d, Neg(delta)), Neg(delta), Where(GreaterEqual(d, delta), delta, d));
}

struct RegressionLoss {
  LossFormula loss;      // of self - target
  LossFormula gradient;  // d loss / d self
};

// Forward: name(self, target, reduction, options...); backward: name_backward(grad, self,
// target, reduction, options...).
const std::unordered_map<std::string, RegressionLoss>& RegressionLosses() {
  static const std::unordered_map<std::string, RegressionLoss> losses = {
      {"mse_loss", {SquaredError, SquaredErrorGradient}},
      {"smooth_l1_loss", {SmoothL1, SmoothL1Gradient}},
      {"huber_loss", {Huber, HuberGradient}},
  };
  return losses;
}

std::vector<Value> RegressionLossLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  CheckFloatingKernel(ctx.name, out.dtype);
  const DType t = OpMathType(out.dtype);
  auto [self, target] = LossOperands(ctx, out.dtype, t);
  Value loss = RegressionLosses().at(ctx.name).loss(ctx, Sub(self, target), t);
  return {BroadcastTo(Convert(Reduced(loss, ctx.int_arg(2)), out.dtype), out.shape)};
}

std::vector<Value> RegressionLossBackwardLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  CheckFloatingKernel(ctx.name, out.dtype);
  const DType t = OpMathType(out.dtype);
  const std::string forward = ctx.name.substr(0, ctx.name.size() - std::string("_backward").size());
  Value self = Convert(ctx.value(1, out.dtype), t);
  Value target = Convert(ctx.value(2, out.dtype), t);
  const Shape shape = BroadcastShapes(self.shape(), target.shape());
  Value d = Sub(BroadcastTo(self, shape), BroadcastTo(target, shape));
  Value grad = ReducedGradient(Convert(ctx.value(0, out.dtype), t), shape, ctx.int_arg(3));
  Value result = Mul(RegressionLosses().at(forward).gradient(ctx, d, t), grad);
  return {BroadcastTo(Convert(result, out.dtype), out.shape)};
}

// binary_cross_entropy(self, target, weight?, reduction): the logs are clamped at -100, as on
// the CPU, so probabilities of exactly 0 or 1 give finite losses.
std::vector<Value> BinaryCrossEntropyLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  CheckFloatingKernel(ctx.name, out.dtype);
  const DType t = OpMathType(out.dtype);
  auto [x, y] = LossOperands(ctx, out.dtype, t);
  Value log_x = Max(Log(x), C(-100, t));
  Value log_1mx = Max(Log1p(Neg(x)), C(-100, t));
  Value loss = Sub(Mul(Sub(y, C(1, t)), log_1mx), Mul(y, log_x));
  if (ctx.has(2)) loss = Mul(loss, BroadcastTo(Convert(ctx.tensor(2), t), loss.shape()));
  return {BroadcastTo(Convert(Reduced(loss, ctx.int_arg(3)), out.dtype), out.shape)};
}

// binary_cross_entropy_backward(grad, self, target, weight?, reduction).
std::vector<Value> BinaryCrossEntropyBackwardLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  CheckFloatingKernel(ctx.name, out.dtype);
  const DType t = OpMathType(out.dtype);
  Value x = BroadcastTo(Convert(ctx.tensor(1), t), out.shape);
  Value y = BroadcastTo(Convert(ctx.tensor(2), t), out.shape);
  Value grad = ReducedGradient(Convert(ctx.tensor(0), t), out.shape, ctx.int_arg(4));
  constexpr double kEpsilon = 1e-12;
  Value denominator = Max(Mul(Sub(C(1, t), x), x), C(kEpsilon, t));
  Value result = Div(Mul(grad, Sub(x, y)), denominator);
  if (ctx.has(3)) result = Mul(result, BroadcastTo(Convert(ctx.tensor(3), t), out.shape));
  return {Convert(result, out.dtype)};
}

// ---- margin losses: self [C] or [N, C] (a 0-d self is one sample of one class) ----
//
// Targets are data: the CPU raises for one out of range, which a device-side check raises at the
// next synchronization (aten/device_checks.h); in the program it matches no class (its score
// reads as 0).

// The CPU kernels exist for float and double only, and take int64 targets only.
void CheckMarginLossTypes(const std::string& kernel, DType self, const Value& target) {
  if (self != DType::kF32 && self != DType::kF64) {
    throw UnsupportedError("\"" + kernel + "\" not implemented for '" + ScalarTypeName(self) + "'");
  }
  if (target.dtype() != DType::kS64) {
    throw std::runtime_error(std::string("expected scalar type Long but found ") +
                             ScalarTypeName(target.dtype()));
  }
}

// self as [N, C] in the compute dtype.
Value AsSamples(const Value& self, DType t) {
  const int64_t classes = self.rank() == 0 ? 1 : self.shape().back();
  const int64_t samples = self.rank() == 2 ? self.shape()[0] : 1;
  return Reshape(Convert(self, t), {samples, classes});
}

// The factor each sample's gradient is scaled by, as [N]: 1 / C (1 / (N C) for mean) times
// grad_output, which is per sample for an unreduced batch and a single value otherwise.
Value SampleGradients(const Value& grad_output, int64_t samples, int64_t classes, int64_t reduction,
                      DType t) {
  const int64_t count = ir::NumElements(grad_output.shape());
  Value grad = Reshape(Convert(grad_output, t), {count});
  grad = count == samples ? grad : BroadcastTo(Reshape(grad, {}), {samples});
  const double scale = reduction == kMean ? 1.0 / (static_cast<double>(samples) * classes)
                                          : 1.0 / static_cast<double>(classes);
  return Mul(grad, C(scale, t));
}

// multi_margin_loss's per-class terms: z = margin - x[target] + x[i] for each class i.
struct MultiMarginTerms {
  Value picked;         // [N, C]: the target class
  Value active;         // [N, C]: not the target, and z > 0
  Value z;              // [N, C]
  Value target_weight;  // [N]: weight[target], 1 without a weight
};

// (self, target, p, margin, weight?) at self_index onwards.
MultiMarginTerms MultiMarginTermsOf(const LoweringContext& ctx, size_t self_index, DType t) {
  Value x = AsSamples(ctx.tensor(self_index), t);
  const int64_t n = x.shape()[0], c = x.shape()[1];
  const Shape shape{n, c};
  Value target = Reshape(Convert(ctx.tensor(self_index + 1), DType::kS64), {n});
  Value classes = Iota(TensorType{DType::kS64, shape}, 1);
  Value picked = Compare(classes, BroadcastInDim(target, shape, {0}), "EQ");
  Value zeros = Constant(0, t, shape);
  Value x_target = Reduce(Select(picked, x, zeros), {1}, "stablehlo.add", C(0, t));
  Value z = Add(Sub(ctx.value(self_index + 3, t), BroadcastInDim(x_target, shape, {0})), x);
  Value active = And(Not(picked), Greater(z, C(0, t)));
  Value target_weight = Constant(1, t, {n});
  if (ctx.has(self_index + 4)) {
    Value weight = BroadcastInDim(Reshape(Convert(ctx.tensor(self_index + 4), t), {c}), shape, {1});
    target_weight = Reduce(Select(picked, weight, zeros), {1}, "stablehlo.add", C(0, t));
  }
  return {picked, active, z, target_weight};
}

// The meta function accepts only p = 1 and p = 2.
int64_t MarginPower(const LoweringContext& ctx, size_t i) { return ctx.scalar(i).ToInt(); }

// multi_margin_loss(self, target, p, margin, weight?, reduction): per sample, the sum over the
// other classes of weight[target] * max(0, z)^p, divided by C.
std::vector<Value> MultiMarginLossLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  CheckMarginLossTypes("multi_margin_loss_cpu_kernel", out.dtype, ctx.tensor(1));
  const DType t = OpMathType(out.dtype);
  const MultiMarginTerms terms = MultiMarginTermsOf(ctx, 0, t);
  const Shape& shape = terms.z.shape();
  Value h = MarginPower(ctx, 2) == 1 ? terms.z : Square(terms.z);
  h = Mul(h, BroadcastInDim(terms.target_weight, shape, {0}));
  Value sums =
      Reduce(Select(terms.active, h, Constant(0, t, shape)), {1}, "stablehlo.add", C(0, t));
  Value loss = Div(sums, C(static_cast<double>(shape[1]), t));
  return {Reshape(Convert(Reduced(loss, ctx.int_arg(5)), out.dtype), out.shape)};
}

// multi_margin_loss_backward(grad, self, target, p, margin, weight?, reduction): each active
// class gets weight[target] * (1 or 2 z) times its sample's factor; the target gets minus their
// sum.
std::vector<Value> MultiMarginLossBackwardLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  CheckMarginLossTypes("multi_margin_loss_backward_cpu_kernel", out.dtype, ctx.tensor(2));
  const DType t = OpMathType(out.dtype);
  const MultiMarginTerms terms = MultiMarginTermsOf(ctx, 1, t);
  const Shape& shape = terms.z.shape();
  Value factor = Mul(SampleGradients(ctx.tensor(0), shape[0], shape[1], ctx.int_arg(6), t),
                     terms.target_weight);
  Value slope = MarginPower(ctx, 3) == 1 ? Constant(1, t, shape) : Mul(C(2, t), terms.z);
  Value zeros = Constant(0, t, shape);
  Value others = Select(terms.active, Mul(slope, BroadcastInDim(factor, shape, {0})), zeros);
  Value target = Neg(Reduce(others, {1}, "stablehlo.add", C(0, t)));
  Value grad = Select(terms.picked, BroadcastInDim(target, shape, {0}), others);
  return {Reshape(Convert(grad, out.dtype), out.shape)};
}

// multilabel_margin_loss's terms over [N, K, C]: each sample's targets are the entries of its
// target row before the first negative one; for every target k and every class c that is not a
// target, z = 1 - x[target[k]] + x[c].
struct MultilabelTerms {
  Value hits;       // [N, K, C]: target[k] == c
  Value active;     // [N, K, C]: k is a target, c is not, and z > 0
  Value z;          // [N, K, C]
  Value is_target;  // [N, C]
};

// `is_target` is the forward's, given to the backward (the CPU backward reads it, not target).
MultilabelTerms MultilabelTermsOf(const Value& self, const Value& target_labels,
                                  const Value* is_target, DType t) {
  Value x = AsSamples(self, t);
  const int64_t n = x.shape()[0], c = x.shape()[1];
  const Shape rows{n, c}, cube{n, c, c};
  Value target = Reshape(Convert(target_labels, DType::kS64), rows);
  Value positions = Iota(TensorType{DType::kS64, rows}, 1);
  Value ends = Where(Less(target, IntegerConstant(0, DType::kS64)), positions,
                     IntegerConstant(c, DType::kS64));
  Value end = Reduce(ends, {1}, "stablehlo.minimum", IntegerConstant(c, DType::kS64));
  Value valid = BroadcastInDim(Less(positions, BroadcastInDim(end, rows, {0})), cube, {0, 1});
  Value classes = Iota(TensorType{DType::kS64, cube}, 2);
  Value hits = Compare(BroadcastInDim(target, cube, {0, 1}), classes, "EQ");
  Value targets = is_target != nullptr
                      ? Compare(Reshape(Convert(*is_target, t), rows), C(0, t), "NE")
                      : Reduce(And(hits, valid), {1}, "stablehlo.or", Constant(0, DType::kBool));
  Value x_classes = BroadcastInDim(x, cube, {0, 2});
  Value x_target =
      Reduce(Select(hits, x_classes, Constant(0, t, cube)), {2}, "stablehlo.add", C(0, t));
  Value z = Add(Sub(C(1, t), BroadcastInDim(x_target, cube, {0, 1})), x_classes);
  Value active = And(And(valid, Not(BroadcastInDim(targets, cube, {0, 2}))), Greater(z, C(0, t)));
  return {hits, active, z, targets};
}

// multilabel_margin_loss_forward(self, target, reduction) -> (output, is_target): per sample
// the sum of max(0, z) over (target, non-target) pairs, divided by C.
std::vector<Value> MultilabelMarginLossForwardLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  CheckMarginLossTypes("multilabel_margin_loss_forward_out_frame", out.dtype, ctx.tensor(1));
  const DType t = OpMathType(out.dtype);
  const MultilabelTerms terms = MultilabelTermsOf(ctx.tensor(0), ctx.tensor(1), nullptr, t);
  const Shape& cube = terms.z.shape();
  Value sums =
      Reduce(Select(terms.active, terms.z, Constant(0, t, cube)), {1, 2}, "stablehlo.add", C(0, t));
  Value loss = Div(sums, C(static_cast<double>(cube[2]), t));
  const TensorType& is_target = ctx.output(1);
  return {Reshape(Convert(Reduced(loss, ctx.int_arg(2)), out.dtype), out.shape),
          Reshape(Convert(terms.is_target, is_target.dtype), is_target.shape)};
}

// multilabel_margin_loss_backward(grad, self, target, reduction, is_target): every active pair
// adds its sample's factor to the non-target class and subtracts it from the target.
std::vector<Value> MultilabelMarginLossBackwardLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  CheckMarginLossTypes("multilabel_margin_loss_backward_out_frame", out.dtype, ctx.tensor(2));
  const DType t = OpMathType(out.dtype);
  const Value is_target = ctx.tensor(4);
  const MultilabelTerms terms = MultilabelTermsOf(ctx.tensor(1), ctx.tensor(2), &is_target, t);
  const Shape& cube = terms.z.shape();
  Value factor = SampleGradients(ctx.tensor(0), cube[0], cube[2], ctx.int_arg(3), t);
  Value zeros = Constant(0, t, cube);
  Value pairs = Select(terms.active, BroadcastInDim(factor, cube, {0}), zeros);
  Value per_target = Reduce(pairs, {2}, "stablehlo.add", C(0, t));  // [N, K]
  Value to_targets = Select(terms.hits, BroadcastInDim(per_target, cube, {0, 1}), zeros);
  Value grad = Sub(Reduce(pairs, {1}, "stablehlo.add", C(0, t)),
                   Reduce(to_targets, {1}, "stablehlo.add", C(0, t)));
  return {Reshape(Convert(grad, out.dtype), out.shape)};
}

// ---- nll_loss: self [C], [N, C] or [N, C, d...], target the same without the class dim ----

struct NllTerms {
  Value picked;           // true where a class is the target (self's shape)
  Value target_weight;    // weight of each target, 0 where ignored (target's shape)
  Value picked_log_prob;  // self at the target (target's shape)
};

int64_t ClassDim(const Value& self) { return self.rank() == 1 ? 0 : 1; }

std::vector<int64_t> NonClassDims(int64_t rank, int64_t class_dim) {
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < rank; ++i)
    if (i != class_dim) dims.push_back(i);
  return dims;
}

// self at index `self_index`, target, weight and ignore_index at the following positions.
NllTerms NllLossTerms(const LoweringContext& ctx, size_t self_index, DType t) {
  Value self = Convert(ctx.tensor(self_index), t);
  Value target = Convert(ctx.tensor(self_index + 1), DType::kS64);
  const int64_t class_dim = ClassDim(self);
  const std::vector<int64_t> non_class = NonClassDims(self.rank(), class_dim);
  Value classes = Iota(TensorType{DType::kS64, self.shape()}, class_dim);
  Value picked = Compare(classes, BroadcastInDim(target, self.shape(), non_class), "EQ");
  Value zeros = Constant(0, t, self.shape());
  Value weight = ctx.has(self_index + 2) ? BroadcastInDim(Convert(ctx.tensor(self_index + 2), t),
                                                          self.shape(), {class_dim})
                                         : Constant(1, t, self.shape());
  Value target_weight =
      Reduce(Select(picked, weight, zeros), {class_dim}, "stablehlo.add", C(0, t));
  Value ignore = ctx.value(self_index + 4, DType::kS64);
  target_weight = Where(Compare(target, ignore, "NE"), target_weight, C(0, t));
  Value picked_log_prob =
      Reduce(Select(picked, self, zeros), {class_dim}, "stablehlo.add", C(0, t));
  return {picked, target_weight, picked_log_prob};
}

// nll_loss_forward / nll_loss2d_forward(self, target, weight?, reduction, ignore_index)
//   -> (output, total_weight).
std::vector<Value> NllLossForwardLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  CheckFloatingKernel(ctx.name, out.dtype);
  const DType t = OpMathType(out.dtype);
  NllTerms terms = NllLossTerms(ctx, 0, t);
  Value loss = Neg(Mul(terms.target_weight, terms.picked_log_prob));
  const int64_t reduction = ctx.int_arg(3);
  Value total_weight = SumAll(terms.target_weight);
  Value output = loss;
  if (reduction == kSum) output = SumAll(loss);
  if (reduction == kMean) output = Div(SumAll(loss), total_weight);
  // Without a reduction the CPU leaves total_weight 0 (it is only read by the mean's backward),
  // except for a single sample, which it treats as a reduction.
  if (reduction == kNone && ctx.tensor(0).rank() != 1) total_weight = C(0, t);
  return {Convert(output, out.dtype), Convert(total_weight, ctx.output(1).dtype)};
}

// nll_loss_backward / nll_loss2d_backward(grad, self, target, weight?, reduction, ignore_index,
// total_weight): -weight[target] * grad at each target, 0 elsewhere.
std::vector<Value> NllLossBackwardLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  CheckFloatingKernel(ctx.name, out.dtype);
  const DType t = OpMathType(out.dtype);
  NllTerms terms = NllLossTerms(ctx, 1, t);
  Value grad = Convert(ctx.tensor(0), t);
  const int64_t reduction = ctx.int_arg(4);
  if (reduction == kMean) grad = Div(grad, Convert(ctx.tensor(6), t));
  Value per_target = Neg(Mul(terms.target_weight, BroadcastTo(grad, terms.target_weight.shape())));
  const int64_t class_dim = ClassDim(ctx.tensor(1));
  Value spread = BroadcastInDim(per_target, out.shape, NonClassDims(out.rank(), class_dim));
  return {Convert(Select(terms.picked, spread, Constant(0, t, out.shape)), out.dtype)};
}

LoweringRegistrar registrar({
    {"relu", ReluLowering},
    {"threshold", ThresholdLowering},
    {"threshold_backward", ThresholdLowering},
    {"glu", GluLowering},
    {"glu_backward", GluBackwardLowering},
    {"gelu", PointwiseLowering},
    {"gelu_backward", PointwiseLowering},
    {"silu", PointwiseLowering},
    {"silu_backward", PointwiseLowering},
    {"softplus", PointwiseLowering},
    {"softplus_backward", PointwiseLowering},
    {"leaky_relu", PointwiseLowering},
    {"leaky_relu_backward", PointwiseLowering},
    {"elu", PointwiseLowering},
    {"elu_backward", PointwiseLowering},
    {"hardsigmoid", PointwiseLowering},
    {"hardsigmoid_backward", PointwiseLowering},
    {"hardswish", PointwiseLowering},
    {"hardswish_backward", PointwiseLowering},
    {"mish", PointwiseLowering},
    {"mish_backward", PointwiseLowering},
    {"tanh_backward", PointwiseLowering},
    {"sigmoid_backward", PointwiseLowering},
    {"hardtanh_backward", PointwiseLowering},
    {"log_sigmoid_backward", PointwiseLowering},
    {"xlogy", PointwiseLowering},
    {"hardshrink", PointwiseLowering},
    {"hardshrink_backward", PointwiseLowering},
    {"softshrink", PointwiseLowering},
    {"softshrink_backward", PointwiseLowering},
    {"_prelu_kernel", PointwiseLowering},
    {"_prelu_kernel_backward", PreluBackwardLowering},
    {"rrelu_with_noise", PointwiseLowering},
    {"rrelu_with_noise_backward", PointwiseLowering},
    {"hardtanh", HardtanhLowering},
    {"log_sigmoid_forward", LogSigmoidForwardLowering},
    {"native_dropout", NativeDropoutLowering},
    {"native_dropout_backward", NativeDropoutBackwardLowering},
    {"embedding_dense_backward", EmbeddingDenseBackwardLowering},
    {"mse_loss", RegressionLossLowering},
    {"mse_loss_backward", RegressionLossBackwardLowering},
    {"smooth_l1_loss", RegressionLossLowering},
    {"smooth_l1_loss_backward", RegressionLossBackwardLowering},
    {"huber_loss", RegressionLossLowering},
    {"huber_loss_backward", RegressionLossBackwardLowering},
    {"binary_cross_entropy", BinaryCrossEntropyLowering},
    {"binary_cross_entropy_backward", BinaryCrossEntropyBackwardLowering},
    {"multi_margin_loss", MultiMarginLossLowering},
    {"multi_margin_loss_backward", MultiMarginLossBackwardLowering},
    {"multilabel_margin_loss_forward", MultilabelMarginLossForwardLowering},
    {"multilabel_margin_loss_backward", MultilabelMarginLossBackwardLowering},
    {"nll_loss_forward", NllLossForwardLowering},
    {"nll_loss2d_forward", NllLossForwardLowering},
    {"nll_loss_backward", NllLossBackwardLowering},
    {"nll_loss2d_backward", NllLossBackwardLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
