// The Bessel functions of torch.special that PyTorch's CPU evaluates with Cephes' approximations
// (ATen/native/Math.h): bessel_j0/j1/y0/y1, modified_bessel_k0/k1 and their scaled forms, and
// airy_ai. Each uses the CPU's published coefficients and piecewise structure, evaluated by three
// table-driven helpers (polynomial, rational function, Chebyshev series), and the CPU's edge
// values (poles, out-of-domain arguments, infinities). Like the CPU kernels, they exist for float
// and double only; integer inputs promote to the default float dtype.
#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/builder.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

using Coefficients = std::vector<double>;

Value C(double value, DType t) { return Constant(value, t); }
Value IsEqualTo(const Value& x, double value) { return Compare(x, C(value, x.dtype()), "EQ"); }
Value IsLess(const Value& x, double value) { return Compare(x, C(value, x.dtype()), "LT"); }
Value IsAtMost(const Value& x, double value) { return Compare(x, C(value, x.dtype()), "LE"); }
Value IsGreater(const Value& x, double value) { return Compare(x, C(value, x.dtype()), "GT"); }
Value Sin(const Value& x) { return Unary("stablehlo.sine", x); }
Value Cos(const Value& x) { return Unary("stablehlo.cosine", x); }
Value Square(const Value& x) { return Mul(x, x); }

// ---- the evaluation helpers ----

// sum_k c[k] y^(n-k): Horner's rule, highest power first (Cephes' polevl order).
Value Polevl(const Coefficients& c, const Value& y) {
  Value sum = C(c.front(), y.dtype());
  for (size_t k = 1; k < c.size(); ++k) sum = Add(Mul(sum, y), C(c[k], y.dtype()));
  return sum;
}

Value Rational(const Coefficients& p, const Coefficients& q, const Value& y) {
  return Div(Polevl(p, y), Polevl(q, y));
}

// Cephes' chbevl: the Chebyshev series sum' c[k] T_k(y / 2) by Clenshaw's recurrence, highest
// order first, 0.5 (b0 - b2) at the end.
Value Chbevl(const Coefficients& c, const Value& y) {
  const DType t = y.dtype();
  Value b0 = C(c.front(), t), b1 = C(0, t), b2 = C(0, t);
  for (size_t k = 1; k < c.size(); ++k) {
    b2 = b1;
    b1 = b0;
    b0 = Add(Sub(Mul(y, b1), b2), C(c[k], t));
  }
  return Mul(C(0.5, t), Sub(b0, b2));
}

// ---- Bessel functions of the first and second kind ----

constexpr double kTwoOverPi = 0.636619772367581343075535053490057448;
constexpr double kSqrtTwoOverPi = 0.797884560802865355879892119868763737;

// The asymptotic forms above x = 5, shared by J_n and Y_n: P(w) = pp/pq and Q(w) = qp/qq in
// w = (5/x)^2, the phase x - (2n + 1) pi / 4.
struct Hankel {
  Coefficients pp, pq, qp, qq;
  double phase;
};

const Hankel kHankel0 = {
    {7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e+00,
     5.44725003058768775090e+00, 8.74716500199817011941e+00, 5.30324038235394892183e+00,
     9.99999999999999997821e-01},
    {9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e+00,
     5.47097740330417105182e+00, 8.76190883237069594232e+00, 5.30605288235394617618e+00,
     1.00000000000000000218e+00},
    {-1.13663838898469149931e-02, -1.28252718670509318512e+00, -1.95539544257735972385e+01,
     -9.32060152123768231369e+01, -1.77681167980488050595e+02, -1.47077505154951170175e+02,
     -5.14105326766599330220e+01, -6.05014350600728481186e+00},
    {6.43178256118178023184e+01, 8.56430025976980587198e+02, 3.88240183605401609683e+03,
     7.24046774195652478189e+03, 5.93072701187316984827e+03, 2.06209331660327847417e+03,
     2.42005740240291393179e+02},
    0.785398163397448309615660845819875721,
};

const Hankel kHankel1 = {
    {7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e+00,
     5.11207951146807644818e+00, 8.42404590141772420927e+00, 5.21451598682361504063e+00,
     1.00000000000000000254e+00},
    {5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e+00,
     5.07386386128601488557e+00, 8.39985554327604159757e+00, 5.20982848682361821619e+00,
     9.99999999999999997461e-01},
    {5.10862594750176621635e-02, 4.98213872951233449420e+00, 7.58238284132545283818e+01,
     3.66779609360150777800e+02, 7.10856304998926107277e+02, 5.97489612400613639965e+02,
     2.11688757100572135698e+02, 2.52070205858023719784e+01},
    {7.42373277035675149943e+01, 1.05644886038262816351e+03, 4.98641058337653607651e+03,
     9.56231892404756170795e+03, 7.99704160447350683650e+03, 2.82619278517639096600e+03,
     3.36093607810698293419e+02},
    2.356194490192344928846982537459627163,
};

// sqrt(2 / (pi x)) (P cos(phase) - (5/x) Q sin(phase)) for J_n; sin and cos trade places, with
// a plus, for Y_n. w is (5/x)^2, which the CPU computes as 25/x^2 for n = 0 and as (5/x)^2 for 1.
Value HankelAsymptotic(const Hankel& h, const Value& x, const Value& w, bool second_kind) {
  const DType t = x.dtype();
  const Value phase = Sub(x, C(h.phase, t));
  const Value p = Rational(h.pp, h.pq, w);
  const Value q = Mul(Div(C(5, t), x), Rational(h.qp, h.qq, w));
  const Value sum = second_kind ? Add(Mul(p, Sin(phase)), Mul(q, Cos(phase)))
                                : Sub(Mul(p, Cos(phase)), Mul(q, Sin(phase)));
  return Div(Mul(sum, C(kSqrtTwoOverPi, t)), Sqrt(x));
}
Value W0(const Value& x) { return Div(C(25, x.dtype()), Square(x)); }
Value W1(const Value& x) { return Square(Div(C(5, x.dtype()), x)); }

// Below x = 5, rational functions in x^2 (J with its first two zeros factored out).
const Coefficients kJ0RP = {-4.79443220978201773821e+09, 1.95617491946556577543e+12,
                            -2.49248344360967716204e+14, 9.70862251047306323952e+15};
const Coefficients kJ0RQ = {4.99563147152651017219e+02, 1.73785401676374683123e+05,
                            4.84409658339962045305e+07, 1.11855537045356834862e+10,
                            2.11277520115489217587e+12, 3.10518229857422583814e+14,
                            3.18121955943204943306e+16, 1.71086294081043136091e+18};
const Coefficients kJ1RP = {-8.99971225705559398224e+08, 4.52228297998194034323e+11,
                            -7.27494245221818276015e+13, 3.68295732863852883286e+15};
const Coefficients kJ1RQ = {6.20836478118054335476e+02, 2.56987256757748830383e+05,
                            8.35146791431949253037e+07, 2.21511595479792499675e+10,
                            4.74914122079991414898e+12, 7.84369607876235854894e+14,
                            8.95222336184627338078e+16, 5.32278620332680085395e+18};
const Coefficients kY0YP = {1.55924367855235737965e+04, -1.46639295903971606143e+07,
                            5.43526477051876500413e+09, -9.82136065717911466409e+11,
                            8.75906394395366999549e+13, -3.46628303384729719441e+15,
                            4.42733268572569800351e+16, -1.84950800436986690637e+16};
const Coefficients kY0YQ = {1.04128353664259848412e+03, 6.26107330137134956842e+05,
                            2.68919633393814121987e+08, 8.64002487103935000337e+10,
                            2.02979612750105546709e+13, 3.17157752842975028269e+15,
                            2.50596256172653059228e+17};
const Coefficients kY1YP = {1.26320474790178026440e+09, -6.47355876379160291031e+11,
                            1.14509511541823727583e+14, -8.12770255501325109621e+15,
                            2.02439475713594898196e+17, -7.78877196265950026825e+17};
const Coefficients kY1YQ = {5.94301592346128195359e+02, 2.35564092943068577943e+05,
                            7.34811944459721705660e+07, 1.87601316108706159478e+10,
                            3.88231277496238566008e+12, 6.20557727146953693363e+14,
                            6.87141087355300489866e+16, 3.97270608116560655612e+18};

// J0 is even: 1 - x^2/4 below 1e-5, the rational function up to 5, the asymptotic form above.
Value BesselJ0(const Value& x) {
  const DType t = x.dtype();
  const Value a = Abs(x), y = Square(a);
  const Value tiny = Sub(C(1, t), Div(y, C(4, t)));
  const Value zeros =
      Mul(Sub(y, C(5.78318596294678452118e+00, t)), Sub(y, C(3.04712623436620863991e+01, t)));
  const Value small = Div(Mul(zeros, Polevl(kJ0RP, y)), Polevl(kJ0RQ, y));
  const Value large = HankelAsymptotic(kHankel0, a, W0(a), false);
  return Select(IsLess(a, 1e-5), tiny, Select(IsAtMost(a, 5), small, large));
}

// J1 is odd: the rational function of x itself up to |x| = 5 (odd, so -0 stays -0), the
// asymptotic form of |x| with x's sign above.
Value BesselJ1(const Value& x) {
  const DType t = x.dtype();
  const Value y = Square(x);
  Value small = Mul(Rational(kJ1RP, kJ1RQ, y), x);
  small = Mul(Mul(small, Sub(y, C(1.46819706421238932572e+01, t))),
              Sub(y, C(4.92184563216946036703e+01, t)));
  const Value a = Abs(x);
  const Value large = HankelAsymptotic(kHankel1, a, W1(a), false);
  return Select(IsAtMost(a, 5), small, Select(IsLess(x, 0), Neg(large), large));
}

// Y_n up to 5 from `small`; -inf at 0, NaN below (and at -inf); the asymptotic form above.
Value SecondKind(const Value& x, const Value& small, const Value& large) {
  const DType t = x.dtype();
  Value below = Select(IsLess(x, 0), C(NAN, t), small);
  below = Select(IsEqualTo(x, 0), C(-INFINITY, t), below);
  return Select(IsAtMost(x, 5), below, large);
}

// Y0 = R(x^2) + (2/pi) log(x) J0(x) up to 5.
Value BesselY0(const Value& x) {
  const DType t = x.dtype();
  const Value log_term = Mul(Mul(C(kTwoOverPi, t), Log(x)), BesselJ0(x));
  const Value small = Add(Rational(kY0YP, kY0YQ, Square(x)), log_term);
  return SecondKind(x, small, HankelAsymptotic(kHankel0, x, W0(x), true));
}

// Y1 = x R(x^2) + (2/pi) (J1(x) log(x) - 1/x) up to 5.
Value BesselY1(const Value& x) {
  const DType t = x.dtype();
  const Value log_term = Sub(Mul(BesselJ1(x), Log(x)), Div(C(1, t), x));
  const Value small =
      Add(Mul(x, Rational(kY1YP, kY1YQ, Square(x))), Mul(C(kTwoOverPi, t), log_term));
  return SecondKind(x, small, HankelAsymptotic(kHankel1, x, W1(x), true));
}

// ---- modified Bessel functions of the second kind ----

// I0 and I1 for 0 < x <= 2, where the K_n formulas need them: their power series in q = x^2/4,
// sum q^k / (k! (k + n)!), whose terms are positive; 12 terms leave less than 1e-17 at q = 1.
Coefficients ModifiedBesselISeries(int order) {
  Coefficients c;
  double factorials = 1;
  for (int k = 1; k <= order; ++k) factorials *= k;
  for (int k = 0; k < 12; ++k) {
    if (k > 0) factorials *= static_cast<double>(k) * (k + order);
    c.insert(c.begin(), 1 / factorials);
  }
  return c;
}
Value ModifiedBesselI(int order, const Value& x) {
  static const Coefficients series[2] = {ModifiedBesselISeries(0), ModifiedBesselISeries(1)};
  const Value sum = Polevl(series[order], Mul(Square(x), C(0.25, x.dtype())));
  return order == 0 ? sum : Mul(Mul(x, C(0.5, x.dtype())), sum);
}

// Chebyshev series for x <= 2 (in x^2 - 2) and above (in 8/x - 2, of e^x sqrt(x) K_n(x)).
struct ModifiedK {
  Coefficients small, large;
};

const ModifiedK kK0 = {
    {1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11,
     1.90451637722020886025e-09, 2.53479107902614945675e-07, 2.28621210311945178607e-05,
     1.26461541144692592338e-03, 3.59799365153615016266e-02, 3.44289899924628486886e-01,
     -5.35327393233902768720e-01},
    {5.30043377268626276149e-18,  -1.64758043015242134646e-17, 5.21039150503902756861e-17,
     -1.67823109680541210385e-16, 5.51205597852431940784e-16,  -1.84859337734377901440e-15,
     6.34007647740507060557e-15,  -2.22751332699166985548e-14, 8.03289077536357521100e-14,
     -2.98009692317273043925e-13, 1.14034058820847496303e-12,  -4.51459788337394416547e-12,
     1.85594911495471785253e-11,  -7.95748924447710747776e-11, 3.57739728140030116597e-10,
     -1.69753450938905987466e-09, 8.57403401741422608519e-09,  -4.66048989768794782956e-08,
     2.76681363944501510342e-07,  -1.83175552271911948767e-06, 1.39498137188764993662e-05,
     -1.28495495816278026384e-04, 1.56988388573005337491e-03,  -3.14481013119645005427e-02,
     2.44030308206595545468e+00},
};

const ModifiedK kK1 = {
    {-7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13,
     -1.41148839263352776110e-10, -2.21338763073472585583e-08, -2.43340614156596823496e-06,
     -1.73028895751305206302e-04, -6.97572385963986435018e-03, -1.22611180822657148235e-01,
     -3.53155960776544875667e-01, 1.52530022733894777053e+00},
    {-5.75674448366501715755e-18, 1.79405087314755922667e-17,  -5.68946255844285935196e-17,
     1.83809354436663880070e-16,  -6.05704724837331885336e-16, 2.03870316562433424052e-15,
     -7.01983709041831346144e-15, 2.47715442448130437068e-14,  -8.97670518232499435011e-14,
     3.34841966607842919884e-13,  -1.28917396095102890680e-12, 5.13963967348173025100e-12,
     -2.12996783842756842877e-11, 9.21831518760500529508e-11,  -4.19035475934189648750e-10,
     2.01504975519703286596e-09,  -1.03457624656780970260e-08, 5.74108412545004946722e-08,
     -3.50196060308781257119e-07, 2.40648494783721712015e-06,  -1.93619797416608296024e-05,
     1.95215518471351631108e-04,  -2.85781685962277938680e-03, 1.03923736576817238437e-01,
     2.72062619048444266945e+00},
};

// K_n(x) (e^x K_n(x) when scaled): inf at 0, NaN below; 0 at +inf (unscaled e^-x underflows).
Value BesselK(int order, bool scaled, const Value& x) {
  const DType t = x.dtype();
  const ModifiedK& k = order == 0 ? kK0 : kK1;
  const Value series = Chbevl(k.small, Sub(Square(x), C(2, t)));
  const Value log_half = Log(Mul(C(0.5, t), x));
  Value small = order == 0 ? Sub(series, Mul(log_half, ModifiedBesselI(0, x)))
                           : Add(Mul(log_half, ModifiedBesselI(1, x)), Div(series, x));
  if (scaled) small = Mul(small, Exp(x));
  Value large = Chbevl(k.large, Sub(Div(C(8, t), x), C(2, t)));
  if (!scaled) large = Mul(Exp(Neg(x)), large);
  large = Div(large, Sqrt(x));
  Value result = Select(IsAtMost(x, 2), small, large);
  result = Select(IsLess(x, 0), C(NAN, t), result);
  return Select(IsEqualTo(x, 0), C(INFINITY, t), result);
}
Value BesselK0(const Value& x) { return BesselK(0, false, x); }
Value BesselK1(const Value& x) { return BesselK(1, false, x); }
Value ScaledBesselK0(const Value& x) { return BesselK(0, true, x); }
Value ScaledBesselK1(const Value& x) { return BesselK(1, true, x); }

// ---- the Airy function Ai ----

const Coefficients kAiryAN = {3.46538101525629032477e-01, 1.20075952739645805542e+01,
                              7.62796053615234516538e+01, 1.68089224934630576269e+02,
                              1.59756391350164413639e+02, 7.05360906840444183113e+01,
                              1.40264691163389668864e+01, 9.99999999999999995305e-01};
const Coefficients kAiryAD = {5.67594532638770212846e-01, 1.47562562584847203173e+01,
                              8.45138970141474626562e+01, 1.77318088145400459522e+02,
                              1.64234692871529701831e+02, 7.14778400825575695274e+01,
                              1.40959135607834029598e+01, 1.00000000000000000470e+00};
const Coefficients kAiryAFN = {
    -1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
    -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
    -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08};
const Coefficients kAiryAFD = {
    1.33560420706553243746e+01, 3.26825032795224613948e+01, 2.67367040941499554804e+01,
    9.18707402907259625840e+00, 1.47529146771666414581e+00, 1.15687173795188044134e-01,
    4.40291641615211203805e-03, 7.54720348287414296618e-05, 4.51850092970580378464e-07};
const Coefficients kAiryAGN = {
    1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e+00,
    9.39169229816650230044e-01, 3.51465656105547619242e-01, 6.33888919628925490927e-02,
    5.85804113048388458567e-03, 2.82851600836737019778e-04, 6.98793669997260967291e-06,
    8.11789239554389293311e-08, 3.41551784765923618484e-10};
const Coefficients kAiryAGD = {9.30892908077441974853e+00, 1.98352928718312140417e+01,
                               1.55646628932864612953e+01, 5.47686069422975497931e+00,
                               9.54293611618961883998e-01, 8.64580826352392193095e-02,
                               4.12656523824222607191e-03, 1.01259085116509135510e-04,
                               1.17166733214413521882e-06, 4.91834570062930015649e-09};
constexpr double kAiryInvSqrtPi = 5.64189583547756286948e-01;
constexpr double kAiryBoundary = 2.09;

// Below -2.09: the oscillating asymptotic form in zeta = (2/3) (-x)^(3/2).
Value AiryOscillating(const Value& x) {
  const DType t = x.dtype();
  const Value zeta = Div(Mul(Mul(C(-2, t), x), Sqrt(Neg(x))), C(3, t));
  const Value z = Div(C(1, t), zeta), z2 = Square(z);
  const Value f = Add(C(1, t), Div(Mul(z2, Polevl(kAiryAFN, z2)), Polevl(kAiryAFD, z2)));
  const Value g = Div(Mul(z, Polevl(kAiryAGN, z2)), Polevl(kAiryAGD, z2));
  const Value phase = Add(zeta, C(0.25 * M_PI, t));
  const Value scale = Div(C(kAiryInvSqrtPi, t), Sqrt(Sqrt(Neg(x))));
  return Mul(scale, Sub(Mul(Sin(phase), f), Mul(Cos(phase), g)));
}

// From 2.09: the decaying asymptotic form e^-zeta / (2 sqrt(pi) x^(1/4)) AN(1/zeta)/AD(1/zeta).
Value AiryDecaying(const Value& x) {
  const DType t = x.dtype();
  const Value zeta = Div(Mul(Mul(C(2, t), x), Sqrt(x)), C(3, t));
  const Value ratio = Rational(kAiryAN, kAiryAD, Div(C(1, t), zeta));
  const Value denominator = Mul(Mul(C(2, t), Sqrt(Sqrt(x))), Exp(zeta));
  return Div(Mul(C(kAiryInvSqrtPi, t), ratio), denominator);
}

// Between: the Maclaurin series c1 f(x) - c2 g(x), f = sum z^k / prod_j (3j-1)(3j) and
// g = x sum z^k / prod_j (3j)(3j+1), z = x^3. |z| <= 9.2, where 16 terms leave less than 1e-20.
Coefficients AiryMaclaurin(int shift) {
  Coefficients c{1};
  for (int j = 1; j < 16; ++j) c.insert(c.begin(), c.front() / ((3.0 * j + shift) * (3.0 * j)));
  return c;
}
Value AirySeries(const Value& x) {
  static const Coefficients f_series = AiryMaclaurin(-1), g_series = AiryMaclaurin(1);
  const DType t = x.dtype();
  const Value z = Mul(Square(x), x);
  const Value f = Polevl(f_series, z), g = Mul(x, Polevl(g_series, z));
  return Sub(Mul(C(0.355028053887817239260, t), f), Mul(C(0.258819403792806798405, t), g));
}

// NaN at ±inf and 0 above 103.892, as on the CPU.
Value AiryAi(const Value& x) {
  const DType t = x.dtype();
  Value result = Select(Compare(x, C(kAiryBoundary, t), "GE"), AiryDecaying(x), AirySeries(x));
  result = Select(IsLess(x, -kAiryBoundary), AiryOscillating(x), result);
  result = Select(IsGreater(x, 103.892), C(0, t), result);
  return Select(IsEqualTo(Abs(x), INFINITY), C(NAN, t), result);
}

// ---- registration: every kernel exists for float and double only on the CPU ----

using UnaryFn = Value (*)(const Value&);

const std::unordered_map<std::string, UnaryFn>& BesselOps() {
  static const std::unordered_map<std::string, UnaryFn> ops = {
      {"special_bessel_j0", BesselJ0},
      {"special_bessel_j1", BesselJ1},
      {"special_bessel_y0", BesselY0},
      {"special_bessel_y1", BesselY1},
      {"special_modified_bessel_k0", BesselK0},
      {"special_modified_bessel_k1", BesselK1},
      {"special_scaled_modified_bessel_k0", ScaledBesselK0},
      {"special_scaled_modified_bessel_k1", ScaledBesselK1},
      {"special_airy_ai", AiryAi},
  };
  return ops;
}

// "special_bessel_j0" -> "bessel_j0_cpu", the CPU kernel's name in its dtype-dispatch message.
std::string KernelName(const std::string& op) {
  return op.substr(std::string("special_").size()) + "_cpu";
}

std::vector<Value> BesselLowering(LoweringContext& ctx) {
  const DType out = ctx.output().dtype;
  CheckFloatOrDoubleKernel(KernelName(ctx.name), out);
  const Value x = Convert(ctx.tensor(0), out);
  return {BroadcastTo(BesselOps().at(ctx.name)(x), ctx.output().shape)};
}

const bool registered = [] {
  for (const auto& entry : BesselOps()) RegisterLowering(entry.first, BesselLowering);
  return true;
}();

}  // namespace
}  // namespace torch_tpu::ops
