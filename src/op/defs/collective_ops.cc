// Collectives as graph ops, domain ai.kiln.distributed (opset 1): AllReduce, Broadcast,
// AllGather, ReduceScatter. A model holding them runs once per rank (`mpiexec -n N kiln run`);
// each node exchanges its input with the same node on every other rank. They have no compute:
// distributed/collective_model.h cuts the graph at them, compiles the pieces, and lowers each
// node to distributed/collectives.h (docs/distributed.md, "Collectives as graph ops").
//
//   %s = AllReduce(%x) {reduce="sum"}                   sum|mean|min|max|prod; type of %x
//   %b = Broadcast(%x) {root=0}                         rank root's %x; type of %x
//   %g = AllGather(%x) {axis=0, world_size=2}           f32[3,4] -> f32[6,4]: ranks' %x, rank order
//   %r = ReduceScatter(%x) {axis=0, reduce="sum", world_size=2}   f32[6,4] -> f32[3,4]
//
// Gradient (AllReduce only, reduce sum or mean): every rank's output reads every rank's input,
// so d loss / d input on rank r sums the output gradients of all ranks: the AllReduce (same
// reduction) of the incoming gradient. Each rank's backward issues it at the same place, as the
// forward did (autodiff/sync_batch_norm.h differentiates through it). min, max and prod have none.
//
// NOTE: the output type of AllGather and ReduceScatter depends on the number of ranks, which is
// not known when a model is imported or compiled; the `world_size` attribute states it, and the
// run checks it against the job's size (an error naming the node when they differ). Every
// rank's AllGather input has the same shape (the run's agreement check), and ReduceScatter's
// axis must divide evenly by world_size: rank r keeps block r of size dim / world_size. A
// symbolic gathered/scattered dim gives an anonymous "?" dim until the shapes are bound.
#include <string>
#include <vector>

#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {
namespace {

constexpr const char* kDomain = "ai.kiln.distributed";

AttrSpec reduce_attr() {
    return {"reduce", AttrKind::kString, ir::Attr(std::string("sum")), false};
}

void check_reduce(const ir::Node& n) {
    const std::string r = n.attr_string("reduce", "sum");
    KILN_CHECK(r == "sum" || r == "mean" || r == "min" || r == "max" || r == "prod", kInvalidModel)
        << n.op() << " node '" << n.name() << "': attribute reduce must be sum, mean, min, max or prod, got '" << r
        << "'";
}

/// The axis attribute normalised against the input's rank; kInvalidModel naming the node.
size_t axis_of(const ir::Node& n, const ir::TensorType& t) {
    const int64_t rank = static_cast<int64_t>(t.shape.size());
    int64_t axis = n.attr_int("axis", 0);
    KILN_CHECK(rank > 0, kInvalidModel) << n.op() << " node '" << n.name() << "': input is a scalar; it has no axis";
    if (axis < 0) axis += rank;
    KILN_CHECK(axis >= 0 && axis < rank, kInvalidModel)
        << n.op() << " node '" << n.name() << "': axis " << n.attr_int("axis", 0) << " out of range for "
        << t.str();
    return static_cast<size_t>(axis);
}

int64_t world_size_of(const ir::Node& n) {
    const int64_t w = n.attr_int("world_size", 0);
    KILN_CHECK(w >= 1, kInvalidModel) << n.op() << " node '" << n.name() << "': world_size must be >= 1, got " << w;
    return w;
}

std::vector<ir::TensorType> infer_all_gather(const ir::Node& n) {
    ir::TensorType t = n.input(0)->type();
    const size_t axis = axis_of(n, t);
    const int64_t w = world_size_of(n);
    ir::Dim& d = t.shape[axis];
    d = d.is_static() ? ir::Dim(d.value * w) : ir::Dim::sym("?");
    return {t};
}

std::vector<ir::TensorType> infer_reduce_scatter(const ir::Node& n) {
    check_reduce(n);
    ir::TensorType t = n.input(0)->type();
    const size_t axis = axis_of(n, t);
    const int64_t w = world_size_of(n);
    ir::Dim& d = t.shape[axis];
    if (!d.is_static()) {
        d = ir::Dim::sym("?");
        return {t};
    }
    KILN_CHECK(d.value % w == 0, kInvalidModel)
        << "ReduceScatter node '" << n.name() << "': axis " << axis << " of " << n.input(0)->type().str()
        << " has " << d.value << " elements, which " << w
        << " ranks cannot split evenly (every rank keeps dim / world_size)";
    d = ir::Dim(d.value / w);
    return {t};
}

OpDef collective(const std::string& name) {
    OpDef d;
    d.name = name;
    d.domain = kDomain;
    d.onnx_versions = {1};
    d.min_inputs = d.max_inputs = 1;
    d.min_outputs = d.max_outputs = 1;
    // The exchange is an effect: two ranks must call the same collectives, so no pass may drop
    // a node on one rank only (DCE runs alike everywhere, but a collective's peers may read it).
    d.has_side_effect = true;
    d.flops = [](const ir::Node&) { return 0.0; };
    return d;
}

std::vector<ir::Value*> all_reduce_gradient(GradientBuilder& b) {
    const std::string r = b.node().attr_string("reduce", "sum");
    KILN_CHECK(r == "sum" || r == "mean", kUnsupported)
        << "AllReduce node '" << b.node().name() << "': reduce=" << r << " has no gradient (sum and mean have)";
    return {b.emit1("AllReduce", {b.output_grad_or_zeros(0)}, {{"reduce", ir::Attr(r)}})};
}

}  // namespace

void register_collective_ops(OpRegistry& r) {
    {
        OpDef d = collective("AllReduce");
        d.attrs = {reduce_attr()};
        d.infer = [](const ir::Node& n) {
            check_reduce(n);
            return std::vector<ir::TensorType>{n.input(0)->type()};
        };
        d.gradient = all_reduce_gradient;
        r.add(std::move(d));
    }
    {
        OpDef d = collective("Broadcast");
        d.attrs = {{"root", AttrKind::kInt, ir::Attr(int64_t{0}), false}};
        d.infer = [](const ir::Node& n) {
            KILN_CHECK(n.attr_int("root", 0) >= 0, kInvalidModel)
                << "Broadcast node '" << n.name() << "': root must be >= 0, got " << n.attr_int("root", 0);
            return std::vector<ir::TensorType>{n.input(0)->type()};
        };
        r.add(std::move(d));
    }
    {
        OpDef d = collective("AllGather");
        d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{0}), false}, {"world_size", AttrKind::kInt, std::nullopt, true}};
        d.infer = infer_all_gather;
        r.add(std::move(d));
    }
    {
        OpDef d = collective("ReduceScatter");
        d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{0}), false},
                   reduce_attr(),
                   {"world_size", AttrKind::kInt, std::nullopt, true}};
        d.infer = infer_reduce_scatter;
        r.add(std::move(d));
    }
}

}  // namespace kiln::op
