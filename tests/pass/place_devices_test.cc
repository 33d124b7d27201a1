// Device placement (pass/place_devices.h) and copy insertion (pass/insert_device_copies.h) on
// CPU-only graphs with a fake cost model: pins and rules win over the cost model, the estimate
// it reports is the one an independent count of kernels and copies gives, no single move
// lowers it, and a placed graph with its copies computes bit for bit what the graph did.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "compiler/compile.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "pass/insert_device_copies.h"
#include "pass/place_devices.h"
#include "runtime/sequential_executor.h"
#include "support/error.h"

namespace kiln::pass {
namespace {

/// Costs by node name (first node of a cluster): CPU and GPU seconds per kernel, and a copy's
/// fixed cost plus a cost per byte.
struct FakeCost : DeviceCostModel {
    std::map<std::string, std::pair<double, double>> kernel;  // name -> (cpu, cuda)
    double copy_fixed = 10, copy_per_byte = 0;
    double kernel_seconds(const std::vector<const ir::Node*>& nodes, Device d) const override {
        double s = 0;
        for (const ir::Node* n : nodes) {
            auto it = kernel.find(n->name());
            const std::pair<double, double> c = it == kernel.end() ? std::make_pair(1.0, 1.0) : it->second;
            s += d == Device::kCpu ? c.first : c.second;
        }
        return s;
    }
    double copy_seconds(int64_t bytes) const override { return copy_fixed + copy_per_byte * static_cast<double>(bytes); }
};

const char* kChain = R"(
graph g(%x: f32[64,64], %w: f32[64,64]) {
  %a = MatMul(%x, %w) : f32[64,64] # name="a"
  %b = Relu(%a) : f32[64,64] # name="b"
  %c = MatMul(%b, %w) : f32[64,64] # name="c"
  %d = Neg(%c) : f32[64,64] # name="d"
  return %d
})";

std::map<std::string, Device> devices(const ir::Graph& g, const Placement& p) {
    std::map<std::string, Device> out;
    for (const ir::Node* n : g.nodes()) out[n->name()] = p.device(n);
    return out;
}

TEST(PlaceDevices, TheCostModelWeighsKernelsAgainstCopies) {
    ir::Graph g = ir::parse_graph(kChain);
    FakeCost cost;
    cost.kernel = {{"a", {100, 1}}, {"b", {3, 4}}, {"c", {100, 1}}, {"d", {1, 2}}};
    Placement p = place_devices(g, {.cost = &cost});
    // b is cheaper on the CPU by 1 but would cost two copies; d is cheaper there and its result
    // leaves for the host either way.
    std::map<std::string, Device> want = {{"a", Device::kCuda}, {"b", Device::kCuda}, {"c", Device::kCuda}, {"d", Device::kCpu}};
    EXPECT_EQ(devices(g, p), want);
    EXPECT_EQ(p.copies, 3);  // x and w in, c out
    EXPECT_DOUBLE_EQ(p.kernel_seconds, 1 + 4 + 1 + 1);
    EXPECT_DOUBLE_EQ(p.copy_seconds, 30);
    for (const auto& [node, place] : p.of) EXPECT_EQ(place.reason, PlaceReason::kCost);

    cost.copy_fixed = 1000;  // copies dearer than any kernel: everything stays on the host
    p = place_devices(g, {.cost = &cost});
    for (const auto& [name, d] : devices(g, p)) EXPECT_EQ(d, Device::kCpu) << name;
    EXPECT_EQ(p.copies, 0);
}

TEST(PlaceDevices, PinsAndRulesComeBeforeTheCostModel) {
    ir::Graph g = ir::parse_graph(R"(
graph g(%x: f32[64,64], %w: f32[64,64]) {
  %a = MatMul(%x, %w) : f32[64,64] # name="a"
  %b = Relu(%a) {kiln.device="cpu"} : f32[64,64] # name="b"
  %c = MatMul(%b, %w) : f32[64,64] # name="c"
  %s = Shape(%c) : i64[2] # name="s"
  %t = Neg(%s) : i64[2] # name="t"
  %d = Reshape(%c, %t) : f32[64,64] # name="d"
  %e = Exp(%d) : f32[64,64] # name="e"
  return %e
})");
    FakeCost cost;
    cost.kernel = {{"a", {100, 1}}, {"c", {100, 1}}, {"d", {100, 1}}, {"e", {100, 1}}};
    PlacementOptions o{.pins = {{"a", Device::kCpu}}, .op_pins = {{"Exp", Device::kCpu}}, .cost = &cost};
    o.has_kernel = [](const ir::Node& n, Device d) { return d == Device::kCpu || n.name() != "d"; };
    Placement p = place_devices(g, o);
    auto at = [&](const char* name) {
        for (const ir::Node* n : g.nodes())
            if (n->name() == name) return p.of.at(n);
        throw std::runtime_error(name);
    };
    EXPECT_EQ(at("a").reason, PlaceReason::kPinned);  // by name
    EXPECT_EQ(at("a").device, Device::kCpu);
    EXPECT_EQ(at("b").reason, PlaceReason::kPinned);  // by attribute
    EXPECT_EQ(at("e").reason, PlaceReason::kPinned);  // by op
    EXPECT_EQ(at("e").device, Device::kCpu);
    EXPECT_EQ(at("d").reason, PlaceReason::kNoKernel);
    EXPECT_EQ(at("d").device, Device::kCpu);
    EXPECT_EQ(at("s").reason, PlaceReason::kShapeComputation);
    EXPECT_EQ(at("t").reason, PlaceReason::kShapeComputation);
    EXPECT_EQ(at("c").reason, PlaceReason::kCost);
    EXPECT_EQ(at("c").device, Device::kCuda);

    o.host_shape_elements = -1;  // the rule off: the cost model places the shape nodes
    EXPECT_EQ(place_devices(g, o).of.size(), g.num_nodes());
    for (const auto& [n, np] : place_devices(g, o).of) EXPECT_NE(np.reason, PlaceReason::kShapeComputation);

    o.by_cost = false;  // the rest on the target
    EXPECT_EQ(place_devices(g, o).of.at(g.nodes()[2]).reason, PlaceReason::kTarget);
}

void expect_invalid(const std::function<void()>& f, const std::string& needle) {
    try {
        f();
        ADD_FAILURE() << "expected kInvalidArgument mentioning " << needle;
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

TEST(PlaceDevices, BadPinsAreClearErrors) {
    ir::Graph g = ir::parse_graph(kChain);
    expect_invalid([&] { place_devices(g, {.pins = {{"nope", Device::kCpu}}}); }, "'nope=cpu'");
    expect_invalid([&] { place_devices(g, {.op_pins = {{"Conv", Device::kCuda}}}); }, "no node of that op");
    PlacementOptions o{.pins = {{"b", Device::kCuda}}};
    o.has_kernel = [](const ir::Node& n, Device d) { return d == Device::kCpu || n.name() != "b"; };
    expect_invalid([&] { place_devices(g, o); }, "no kernel for op Relu");
    expect_invalid([&] { place_devices(g, {.target = Device::kCpu, .pins = {{"b", Device::kCuda}}}); }, "does not target");
    expect_invalid([&] { parse_device_pins({"a=cpu,b"}); }, "expected NAME=DEVICE");
    expect_invalid([&] { parse_device_pins({"a=tpu"}); }, "unknown device 'tpu'");
    EXPECT_EQ(parse_device_pins({"a=cpu,b=cuda", "c=cpu"}).size(), 3u);

    ir::Graph grouped = ir::parse_graph(kChain);  // a and b one fusion group, pinned apart
    grouped.nodes()[0]->set_group(0);
    grouped.nodes()[1]->set_group(0);
    expect_invalid([&] { place_devices(grouped, {.pins = {{"a", Device::kCpu}, {"b", Device::kCuda}}}); },
                   "a fusion group runs on one device");
    Placement p = place_devices(grouped, {.pins = {{"b", Device::kCpu}}});  // the pin moves the whole group
    EXPECT_EQ(p.device(grouped.nodes()[0]), Device::kCpu);
}

/// The estimate of a placement counted independently: every node's own kernel (no groups here)
/// and, per value, one copy per device other than its holder that reads it.
double independent_estimate(const ir::Graph& g, const std::map<const ir::Node*, Device>& at, const FakeCost& cost) {
    double s = 0;
    for (const ir::Node* n : g.nodes()) s += cost.kernel_seconds({n}, at.at(n));
    std::vector<const ir::Value*> values(g.inputs().begin(), g.inputs().end());
    for (const ir::Node* n : g.nodes()) values.push_back(n->output(0));
    for (const ir::Value* v : values) {
        const Device holder = v->producer() ? at.at(v->producer()) : Device::kCpu;
        std::set<Device> readers;
        for (const ir::Node* u : v->users()) readers.insert(at.at(u));
        for (const ir::Value* o : g.outputs())
            if (o == v) readers.insert(Device::kCpu);
        readers.erase(holder);
        s += static_cast<double>(readers.size()) * cost.copy_seconds(0);
    }
    return s;
}

TEST(PlaceDevices, RandomGraphsEndAtALocalMinimumOfTheEstimate) {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 40; ++trial) {
        // A random DAG of binary Adds over two inputs; node i reads two earlier values.
        std::string text = "graph g(%x0: f32[8], %x1: f32[8]) {\n";
        std::vector<std::string> vals = {"x0", "x1"};
        FakeCost cost;
        std::uniform_real_distribution<double> u(0.1, 20);
        cost.copy_fixed = u(rng);
        const int n = 4 + trial % 9;
        for (int i = 0; i < n; ++i) {
            std::uniform_int_distribution<size_t> pick(0, vals.size() - 1);
            const std::string name = "n" + std::to_string(i);
            text += "  %" + name + " = Add(%" + vals[pick(rng)] + ", %" + vals[pick(rng)] + ") : f32[8] # name=\"" + name + "\"\n";
            cost.kernel[name] = {u(rng), u(rng)};
            vals.push_back(name);
        }
        text += "  return %" + vals.back() + ", %n0\n}";
        ir::Graph g = ir::parse_graph(text);
        const Placement p = place_devices(g, {.cost = &cost});
        std::map<const ir::Node*, Device> at;
        for (const ir::Node* node : g.nodes()) at[node] = p.device(node);
        const double estimate = independent_estimate(g, at, cost);
        EXPECT_NEAR(p.kernel_seconds + p.copy_seconds, estimate, 1e-9) << text;
        for (const ir::Node* node : g.nodes()) {  // no single move is cheaper
            at[node] = at[node] == Device::kCpu ? Device::kCuda : Device::kCpu;
            EXPECT_GE(independent_estimate(g, at, cost), estimate - 1e-9) << "moving " << node->name() << " in\n" << text;
            at[node] = at[node] == Device::kCpu ? Device::kCuda : Device::kCpu;
        }
    }
}

std::vector<Tensor> run_on_cpu(ir::Graph& g, const std::vector<Tensor>& inputs) {
    compiler::CompiledModel cm = compiler::compile(g);
    auto alloc = std::make_shared<runtime::CpuAllocator>();
    runtime::SequentialExecutor ex(cm.executable, nullptr, alloc.get());
    std::vector<Tensor> outs;
    Status s = ex.run(inputs, outs);
    EXPECT_TRUE(s.ok()) << s.message();
    return outs;
}

TEST(InsertDeviceCopies, OneCopyPerValueAndDeviceAndTheSameResults) {
    const char* text = R"(
graph g(%x: f32[16,32], %w: f32[32,32]) {
  %a = MatMul(%x, %w) : f32[16,32] # name="a"
  %b = Relu(%a) : f32[16,32] # name="b"
  %c = Sigmoid(%a) : f32[16,32] # name="c"
  %d = Add(%b, %c) : f32[16,32] # name="d"
  %e = Tanh(%x) : f32[16,32] # name="e"
  return %d, %e
})";
    ir::Graph g = ir::parse_graph(text);
    FakeCost cost;
    Placement p = place_devices(g, {.pins = {{"a", Device::kCuda}, {"b", Device::kCpu}, {"c", Device::kCpu}, {"d", Device::kCuda},
                                            {"e", Device::kCpu}},
                                    .cost = &cost});
    EXPECT_EQ(p.copies, 6);
    const int copies = insert_device_copies(g, p);
    ir::verify_graph(g);
    // x and w -> cuda (for a; x's host readers read it where it is); a -> cpu (one copy, read by
    // b and c); b, c -> cuda (for d); d -> cpu (a model output computed on the GPU).
    EXPECT_EQ(copies, 6);
    int copy_nodes = 0;
    for (const ir::Node* n : g.nodes()) {
        ASSERT_TRUE(n->has_attr(kDeviceAttr)) << n->describe();
        if (n->op() != "KilnDeviceCopy") continue;
        ++copy_nodes;
        if (n->input(0)->name() == "a") EXPECT_EQ(n->output(0)->users().size(), 2u);
    }
    EXPECT_EQ(copy_nodes, 6);
    EXPECT_EQ(g.outputs()[0]->name(), "d");  // the model's names stay
    EXPECT_EQ(g.outputs()[0]->producer()->op(), "KilnDeviceCopy");
    EXPECT_EQ(g.outputs()[1]->name(), "e");
    EXPECT_EQ(g.outputs()[1]->producer()->op(), "Tanh");

    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<Tensor> in = {Tensor(DType::kFloat32, {16, 32}), Tensor(DType::kFloat32, {32, 32})};
    for (Tensor& t : in)
        for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = u(rng);
    ir::Graph original = ir::parse_graph(text);
    std::vector<Tensor> want = run_on_cpu(original, in), got = run_on_cpu(g, in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].nbytes(), want[i].nbytes());
        EXPECT_EQ(std::memcmp(got[i].data(), want[i].data(), got[i].nbytes()), 0) << "output " << i;
    }
}

}  // namespace
}  // namespace kiln::pass
