// Tests of the torch-free core: the PJRT runtime on the CPU plugin through the C API, growing
// layouts, and the IR builder.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <stdexcept>
#include <vector>

#include "exec/bucketing.h"
#include "exec/graph_release.h"
#include "ops/builder.h"
#include "runtime/buffer_release.h"
#include "runtime/pjrt.h"

namespace torch_tpu::runtime {
namespace {

std::shared_ptr<Plugin> LoadTestPlugin() {
  const char* path = std::getenv("TORCH_TPU_TEST_PLUGIN");
  if (path == nullptr) throw std::runtime_error("TORCH_TPU_TEST_PLUGIN is not set");
  static std::shared_ptr<Plugin> plugin = Plugin::Load(path);
  return plugin;
}

std::shared_ptr<Client> TestClient() {
  static std::shared_ptr<Client> client = Client::Create(LoadTestPlugin(), 2);
  return client;
}

const char kAddProgram[] = R"(module {
  func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "stablehlo.add"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
})";

TEST(Plugin, SameMajorVersionAsHeader) {
  auto plugin = LoadTestPlugin();
  EXPECT_EQ(plugin->major_version(), Plugin::header_major_version());
  EXPECT_FALSE(plugin->HasEntry(1u << 20));
}

TEST(Plugin, MissingFileIsClearError) {
  try {
    Plugin::Load("/nonexistent/libnothing.so");
    FAIL() << "expected an error";
  } catch (const PjrtError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/libnothing.so"), std::string::npos);
  }
}

TEST(Client, DeviceCountFromOption) {
  auto client = TestClient();
  EXPECT_EQ(client->devices().size(), 2u);
  EXPECT_EQ(client->platform_name(), "cpu");
}

TEST(Buffer, RoundTrip) {
  auto client = TestClient();
  const float host[6] = {1, 2, 3, 4, 5, 6};
  auto buffer = client->BufferFromHost(host, ElementType::kF32, {2, 3}, client->devices()[1]);
  EXPECT_EQ(buffer->element_type(), ElementType::kF32);
  EXPECT_EQ(buffer->dimensions(), (std::vector<int64_t>{2, 3}));
  float back[6] = {};
  buffer->ToHost(back, sizeof(back));
  EXPECT_EQ(std::memcmp(host, back, sizeof(back)), 0);
  auto copy = buffer->CopyToDevice(client->devices()[0]);
  float copied[6] = {};
  copy->ToHost(copied, sizeof(copied));
  EXPECT_EQ(std::memcmp(host, copied, sizeof(copied)), 0);
}

TEST(Executable, CompileExecuteSerialize) {
  auto client = TestClient();
  auto executable = client->Compile(kAddProgram, CompileOptions{});
  ASSERT_EQ(executable->num_outputs(), 1u);
  const float a[4] = {1, 2, 3, 4};
  const float b[4] = {10, 20, 30, 40};
  for (const Device& device : client->devices()) {
    auto x = client->BufferFromHost(a, ElementType::kF32, {4}, device);
    auto y = client->BufferFromHost(b, ElementType::kF32, {4}, device);
    auto out = executable->Execute({x->raw(), y->raw()}, {false, false}, device);
    float result[4] = {};
    out[0]->ToHost(result, sizeof(result));
    for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(result[i], a[i] + b[i]);
  }
  const std::string bytes = executable->Serialize();
  ASSERT_FALSE(bytes.empty());
  auto reloaded = client->Deserialize(bytes);
  auto x = client->BufferFromHost(a, ElementType::kF32, {4}, client->devices()[0]);
  auto out = reloaded->Execute({x->raw(), x->raw()}, {false, false}, client->devices()[0]);
  float result[4] = {};
  out[0]->ToHost(result, sizeof(result));
  EXPECT_FLOAT_EQ(result[3], 8.0f);
}

// An executable compiled for one device and bound to it runs there with no execute device named,
// and refuses another device rather than running on its own.
TEST(Executable, BoundToItsDevice) {
  auto client = TestClient();
  const Device& bound = client->devices()[1];
  CompileOptions options;
  options.portable = false;
  options.device_assignment = {bound.id()};
  auto executable = client->Compile(kAddProgram, options);
  executable->BindToDevice(bound.id());
  const float a[4] = {1, 2, 3, 4};
  auto x = client->BufferFromHost(a, ElementType::kF32, {4}, bound);
  auto out = executable->Execute({x->raw(), x->raw()}, {false, false}, bound);
  float result[4] = {};
  out[0]->ToHost(result, sizeof(result));
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(result[i], 2 * a[i]);
  const Device& other = client->devices()[0];
  auto y = client->BufferFromHost(a, ElementType::kF32, {4}, other);
  EXPECT_THROW(executable->Execute({y->raw(), y->raw()}, {false, false}, other), std::logic_error);
}

TEST(Buffer, ReadyAfterAwait) {
  auto client = TestClient();
  auto executable = client->Compile(kAddProgram, CompileOptions{});
  const float a[4] = {1, 2, 3, 4};
  auto x = client->BufferFromHost(a, ElementType::kF32, {4}, client->devices()[0]);
  auto out = executable->Execute({x->raw(), x->raw()}, {false, false}, client->devices()[0]);
  out[0]->AwaitReady();
  EXPECT_TRUE(out[0]->IsReady());
  EXPECT_TRUE(x->IsReady());
}

TEST(Buffer, OnReadyCallsBackOnceComputed) {
  auto client = TestClient();
  auto executable = client->Compile(kAddProgram, CompileOptions{});
  const float a[4] = {1, 2, 3, 4};
  auto x = client->BufferFromHost(a, ElementType::kF32, {4}, client->devices()[0]);
  auto out = executable->Execute({x->raw(), x->raw()}, {false, false}, client->devices()[0]);
  std::promise<bool> computed;
  out[0]->OnReady([&computed, output = out[0]] { computed.set_value(output->IsReady()); });
  auto called = computed.get_future();
  ASSERT_EQ(called.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_TRUE(called.get());
  // A buffer that is ready already calls back too.
  std::promise<void> again;
  out[0]->OnReady([&again] { again.set_value(); });
  EXPECT_EQ(again.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
}

// A product large enough (a few GFLOP) that the plugin runs it asynchronously and the host acts
// while it runs; its input is donated to its result.
constexpr int64_t kSlowSize = 1536;
const char kSlowDonatingProgram[] = R"(module {
  func.func @main(%x: tensor<1536x1536xf32> {tf.aliasing_output = 0 : i32}) -> tensor<1536x1536xf32> {
    %0 = stablehlo.dot_general %x, %x, contracting_dims = [1] x [0] : (tensor<1536x1536xf32>, tensor<1536x1536xf32>) -> tensor<1536x1536xf32>
    return %0 : tensor<1536x1536xf32>
  }
})";

// The plugin holds a donation until the program has run, so destroying the donated handle at once
// would wait for it: the runtime retires it instead, and a fused step's launch never waits.
TEST(Buffer, DroppingADonatedInputDoesNotWaitForItsProgram) {
  auto client = TestClient();
  auto executable = client->Compile(kSlowDonatingProgram, CompileOptions{});
  const std::vector<float> ones(kSlowSize * kSlowSize, 1.0f);
  auto x = client->BufferFromHost(ones.data(), ElementType::kF32, {kSlowSize, kSlowSize},
                                  client->devices()[0]);
  x->AwaitReady();
  auto out = executable->Execute({x->raw()}, {true}, client->devices()[0]);
  x->MarkDonated();
  x.reset();
  EXPECT_FALSE(out[0]->IsReady());  // the drop returned while the program still runs
  std::vector<float> result(ones.size());
  out[0]->ToHost(result.data(), result.size() * sizeof(float));
  EXPECT_EQ(result.front(), static_cast<float>(kSlowSize));
  EXPECT_EQ(result.back(), static_cast<float>(kSlowSize));
  DestroyRetiredBuffers();
}

TEST(Executable, CompileErrorCarriesPluginMessage) {
  auto client = TestClient();
  try {
    client->Compile("module { this is not mlir }", CompileOptions{});
    FAIL() << "expected an error";
  } catch (const PjrtError& e) {
    EXPECT_NE(std::string(e.what()).find("PJRT_Client_Compile"), std::string::npos);
    EXPECT_GT(std::strlen(e.what()), std::strlen("PJRT_Client_Compile: "));
  }
}

// Two replicas in one launch: each returns the cross-replica sum and its own replica id.
const char kReplicatedSumProgram[] = R"(module attributes {mhlo.num_replicas = 2 : i32} {
  func.func @main(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<ui32>) {
    %sum = "stablehlo.all_reduce"(%x) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%s) : (tensor<f32>) -> ()
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<3xf32>) -> tensor<3xf32>
    %id = "stablehlo.replica_id"() : () -> tensor<ui32>
    return %sum, %id : tensor<3xf32>, tensor<ui32>
  }
})";

TEST(Executable, ExecuteReplicatedFollowsTheDeviceAssignment) {
  auto client = TestClient();
  const auto& devices = client->devices();
  CompileOptions options;
  options.num_replicas = 2;
  options.device_assignment = {devices[1].id(), devices[0].id()};  // replica 0 on device 1
  auto executable = client->Compile(kReplicatedSumProgram, options);
  const float a[3] = {1, 2, 3};
  const float b[3] = {10, 20, 30};
  auto x0 = client->BufferFromHost(a, ElementType::kF32, {3}, devices[1]);
  auto x1 = client->BufferFromHost(b, ElementType::kF32, {3}, devices[0]);
  auto outputs = executable->ExecuteReplicated({{x0->raw()}, {x1->raw()}});
  ASSERT_EQ(outputs.size(), 2u);
  for (uint32_t replica = 0; replica < 2; ++replica) {
    ASSERT_EQ(outputs[replica].size(), 2u);
    float sum[3] = {};
    outputs[replica][0]->ToHost(sum, sizeof(sum));
    for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(sum[i], a[i] + b[i]);
    uint32_t id = 99;
    outputs[replica][1]->ToHost(&id, sizeof(id));
    EXPECT_EQ(id, replica);
  }
}

TEST(CompileOptions, DeviceAssignmentNeedsOneDevicePerReplica) {
  CompileOptions options;
  options.num_replicas = 2;
  options.device_assignment = {0};
  EXPECT_THROW(EncodeCompileOptions(options), std::invalid_argument);
}

TEST(CompileOptions, EncodingIsNonEmptyAndStable) {
  const std::string encoded = EncodeCompileOptions(CompileOptions{});
  ASSERT_FALSE(encoded.empty());
  EXPECT_EQ(static_cast<unsigned char>(encoded[0]), (3u << 3) | 2u);
  EXPECT_EQ(encoded, EncodeCompileOptions(CompileOptions{}));
}

TEST(Printer, AConstantSharedByARegionBodyAndItsProgramIsDefinedInBoth) {
  // max over x of max(element, 0), plus 0: the body reads the program's own constant node. The
  // body defines it again inside, and the program's later use keeps the outer name.
  namespace ir = torch_tpu::ir;
  namespace ops = torch_tpu::ops;
  const ir::TensorType scalar{ir::DType::kF32, {}};
  const ir::Value x = ir::MakeBufferParameter(nullptr, ir::TensorType{ir::DType::kF32, {4}});
  const ir::Value zero = ir::ScalarConstant(0.0, ir::DType::kF32);
  auto body = ir::MakeRegion({scalar, scalar}, [&](const std::vector<ir::Value>& a) {
    return std::vector<ir::Value>{ops::Max(ops::Max(a[0], a[1]), zero)};
  });
  const ir::Value reduced = ir::MakeMultiOp("stablehlo.reduce", {x, zero}, {scalar},
                                            "dimensions = array<i64: 0>", {std::move(body)})[0];
  const ir::Value result = ops::Add(reduced, ir::ScalarConstant(0.0, ir::DType::kF32));
  ASSERT_EQ(result.node->operands[1].node, zero.node);
  const std::string text = ir::PrintProgram(ir::BuildProgram({result}));
  auto client = TestClient();
  auto executable = client->Compile(text, CompileOptions{});
  const float values[4] = {-3, 2, -1, 1.5};
  auto input = client->BufferFromHost(values, ElementType::kF32, {4}, client->devices()[0]);
  auto out = executable->Execute({input->raw()}, {false}, client->devices()[0]);
  float sum = 0;
  out[0]->ToHost(&sum, sizeof(sum));
  EXPECT_FLOAT_EQ(sum, 2.0f);
}

}  // namespace
}  // namespace torch_tpu::runtime

TEST(GrowingLayout, BucketsArePowersOfTwoFromTheFloor) {
  EXPECT_EQ(torch_tpu::exec::BucketLength(1), 16);
  EXPECT_EQ(torch_tpu::exec::BucketLength(16), 16);
  EXPECT_EQ(torch_tpu::exec::BucketLength(17), 32);
  EXPECT_EQ(torch_tpu::exec::BucketLength(1000), 1024);
}

TEST(GrowingLayout, OnlySmallAppendsArePadded) {
  EXPECT_EQ(torch_tpu::exec::AppendBucket(8, 1), 16);   // a token onto a cache
  EXPECT_EQ(torch_tpu::exec::AppendBucket(40, 8), 64);  // a chunk of 8 onto 40
  EXPECT_EQ(torch_tpu::exec::AppendBucket(8, 8), 0);    // two halves
  EXPECT_EQ(torch_tpu::exec::AppendBucket(3, 1), 0);    // too short to grow from
  EXPECT_EQ(torch_tpu::exec::AppendBucket(8, 0), 0);
}

TEST(GrowingLayout, DescribesTheTensorItPads) {
  const torch_tpu::exec::GrowingLayout layout{{2, 3, 16, 4}, 2, 11};
  EXPECT_TRUE(layout.padded());
  EXPECT_EQ(layout.physical_elements(), 2 * 3 * 16 * 4);
  EXPECT_TRUE(layout.Describes({2, 3, 11, 4}));
  EXPECT_FALSE(layout.Describes({2, 3, 16, 4}));
  EXPECT_FALSE(layout.Describes({2, 3, 11}));
  EXPECT_FALSE(layout.logical_prefix());  // heads before the grown dim interleave the padding
  EXPECT_TRUE((torch_tpu::exec::GrowingLayout{{1, 16}, 1, 9}).logical_prefix());
}

TEST(GrowingLayout, MapsViewsWithinRowsToThePaddedArray) {
  // Ids (3, 11) padded to (3, 16): the last column is offset 10, stride 11 -> offset 10, stride 16.
  const torch_tpu::exec::GrowingLayout ids{{3, 16}, 1, 11};
  std::vector<int64_t> strides{11};
  int64_t offset = 10;
  EXPECT_TRUE(ids.MapView({3}, strides, offset));
  EXPECT_EQ(strides, std::vector<int64_t>{16});
  EXPECT_EQ(offset, 10);
  // Row 2, positions 4..8: offset 26 -> 36, the inner stride unchanged.
  strides = {1};
  offset = 26;
  EXPECT_TRUE(ids.MapView({5}, strides, offset));
  EXPECT_EQ(offset, 36);
  EXPECT_EQ(strides, std::vector<int64_t>{1});
  // A flat view across rows has no such form.
  strides = {1};
  offset = 5;
  EXPECT_FALSE(ids.MapView({12}, strides, offset));
  EXPECT_EQ(offset, 5);
}

TEST(Builder, ReshapeOfAReshapeIsOneReshapeOfTheOriginal) {
  // Reading a view of a value just written to its 1-D storage: no node, or one reshape.
  namespace ir = torch_tpu::ir;
  namespace ops = torch_tpu::ops;
  const ir::Value x = ir::MakeBufferParameter(nullptr, ir::TensorType{ir::DType::kF32, {2, 6}});
  const ir::Value flat = ops::Reshape(x, {12});
  ASSERT_EQ(flat.node->op->text, "stablehlo.reshape");
  EXPECT_EQ(ops::Reshape(flat, {2, 6}).node, x.node);
  const ir::Value other = ops::Reshape(ops::Reshape(flat, {4, 3}), {3, 4});
  EXPECT_EQ(other.node->op->text, "stablehlo.reshape");
  ASSERT_EQ(other.node->operands.size(), 1u);
  EXPECT_EQ(other.node->operands[0].node, x.node);
  EXPECT_EQ(other.shape(), (ir::Shape{3, 4}));
  EXPECT_EQ(other.dtype(), ir::DType::kF32);
}

TEST(Builder, EqualConstantsAreOneNode) {
  namespace ir = torch_tpu::ir;
  const ir::Value one = ir::ScalarConstant(1.0, ir::DType::kF32);
  EXPECT_EQ(ir::ScalarConstant(1.0, ir::DType::kF32).node, one.node);
  EXPECT_EQ(ir::IntegerConstant(1, ir::DType::kF32).node, one.node);
  EXPECT_EQ(one.node->origin, nullptr);  // no op's: a shared constant belongs to none
  // Another value, dtype or sign of zero is another constant.
  EXPECT_NE(ir::ScalarConstant(2.0, ir::DType::kF32).node, one.node);
  EXPECT_NE(ir::ScalarConstant(1.0, ir::DType::kF64).node, one.node);
  EXPECT_NE(ir::IntegerConstant(1, ir::DType::kS64).node, one.node);
  EXPECT_NE(ir::ScalarConstant(-0.0, ir::DType::kF32).node,
            ir::ScalarConstant(0.0, ir::DType::kF32).node);
  EXPECT_EQ(ir::IntegerConstant(1, ir::DType::kS64).node,
            ir::IntegerConstant(1, ir::DType::kS64).node);
  EXPECT_EQ(ir::IntegerConstant(-1, ir::DType::kU8).node,
            ir::IntegerConstant(-1, ir::DType::kU8).node);
}

// ---- Program signatures: structural, hashed per node when recorded ----

namespace ir = torch_tpu::ir;
namespace ops = torch_tpu::ops;

namespace sig {

ir::Value Param(ir::Shape shape) {
  return ir::MakeBufferParameter(nullptr, ir::TensorType{ir::DType::kF32, std::move(shape)});
}

ir::Value Scalar(float value) {
  ir::HostScalar scalar;
  std::memcpy(scalar.bytes, &value, sizeof(value));
  return ir::MakeScalarParameter(scalar);
}

ir::Signature SignatureOf(const std::vector<ir::Value>& results, bool with_shapes = true) {
  return ir::ComputeSignature(ir::BuildProgram(results), 0, with_shapes);
}

// a * s - b, reduced over dim 1 with `reducer`, recorded afresh on each call.
ir::Signature Recorded(float s, const std::string& reducer, bool swap = false,
                       ir::Shape shape = {4, 8}, bool with_shapes = true) {
  const ir::Value a = Param(shape), b = Param(shape);
  const ir::Value scaled = ops::Mul(a, ops::BroadcastTo(Scalar(s), shape));
  const ir::Value difference = swap ? ops::Sub(b, scaled) : ops::Sub(scaled, b);
  return SignatureOf({ops::Reduce(difference, {1}, reducer, ops::Constant(0, ir::DType::kF32))},
                     with_shapes);
}
}  // namespace sig

TEST(Signature, SameStructureRecordedTwiceIsTheSameWhateverTheScalars) {
  EXPECT_EQ(sig::Recorded(2.0f, "stablehlo.add"), sig::Recorded(2.0f, "stablehlo.add"));
  EXPECT_EQ(sig::Recorded(2.0f, "stablehlo.add"), sig::Recorded(-7.5f, "stablehlo.add"));
}

TEST(Signature, EdgesRegionsAndShapesAreStructure) {
  const ir::Signature base = sig::Recorded(2.0f, "stablehlo.add");
  EXPECT_FALSE(base == sig::Recorded(2.0f, "stablehlo.add", /*swap=*/true));
  EXPECT_FALSE(base == sig::Recorded(2.0f, "stablehlo.maximum"));  // a reducer region's body
  EXPECT_FALSE(base == sig::Recorded(2.0f, "stablehlo.add", false, {4, 9}));
  // Without shapes, only the sizes may differ.
  EXPECT_EQ(sig::Recorded(2.0f, "stablehlo.add", false, {4, 8}, false),
            sig::Recorded(2.0f, "stablehlo.add", false, {5, 9}, false));
  EXPECT_FALSE(sig::Recorded(2.0f, "stablehlo.add", false, {4, 8}, false) ==
               sig::Recorded(2.0f, "stablehlo.maximum", false, {4, 8}, false));
}

TEST(Signature, SharedAndRepeatedValuesAreDistinguished) {
  // x + x against x + y: the same ops and types, different edges.
  const ir::Value x = sig::Param({3}), y = sig::Param({3});
  const ir::Value z = sig::Param({3});
  EXPECT_FALSE(sig::SignatureOf({ops::Add(x, x)}) == sig::SignatureOf({ops::Add(y, z)}));
  EXPECT_EQ(sig::SignatureOf({ops::Add(x, y)}), sig::SignatureOf({ops::Add(z, x)}));
}

TEST(Signature, LongProgramsAreWalkedWhole) {
  // Thousands of nodes (the node map grows many times); the last op alone changes the key.
  auto chain = [](bool last_is_max) {
    ir::Value v = sig::Param({2});
    for (int i = 0; i < 5000; ++i) v = ops::Add(v, ops::BroadcastTo(sig::Scalar(1.0f), {2}));
    const ir::Program program = ir::BuildProgram({last_is_max ? ops::Max(v, v) : ops::Add(v, v)});
    EXPECT_EQ(program.nodes.size(), 10001u);
    return ir::ComputeSignature(program, 0);
  };
  EXPECT_EQ(chain(false), chain(false));
  EXPECT_FALSE(chain(false) == chain(true));
}

TEST(GraphRelease, RetiredGraphsLiveUntilReleasedAndAFewAtMost) {
  torch_tpu::exec::ReleaseRetiredGraphs();  // none left over from other tests
  std::vector<std::weak_ptr<ir::Node>> graphs;
  auto retire_one = [&] {
    const ir::Value sum = ops::Add(sig::Param({2}), sig::Param({2}));
    graphs.push_back(sum.node);
    torch_tpu::exec::RetireGraph({sum});
  };
  for (int i = 0; i < 4; ++i) retire_one();
  for (const auto& graph : graphs) EXPECT_FALSE(graph.expired());
  // One more than the bound: the oldest half is freed on the spot, the rest is kept.
  retire_one();
  for (size_t i = 0; i < graphs.size(); ++i) EXPECT_EQ(graphs[i].expired(), i < 2) << i;
  torch_tpu::exec::ReleaseRetiredGraphs();
  for (const auto& graph : graphs) EXPECT_TRUE(graph.expired());
}
