#include "distributed/collective_wave.h"

#include <cstring>

#include "distributed/agreement.h"
#include "distributed/collectives.h"
#include "support/error.h"

namespace kiln::distributed {
namespace {

std::string label(const CollectiveNode& c) { return c.op + " node '" + c.name + "'"; }

/// The node's own description for the wave's agreement check: the collective, its attributes
/// and the input's full type (AllGather's included: its ranks' shapes must be equal here).
std::string describe_node(const CollectiveNode& c, const Tensor& t) {
    std::string attrs;
    if (c.op == "AllReduce" || c.op == "ReduceScatter") attrs += std::string(" reduce=") + reduce_op_name(c.reduce);
    if (c.op == "Broadcast") attrs += " root=" + std::to_string(c.root);
    if (c.op == "AllGather" || c.op == "ReduceScatter") attrs += " axis=" + std::to_string(c.axis);
    return c.op + attrs + " " + describe({c.name, t});
}

/// Errors every rank finds alike (the model is the same everywhere): attributes that do not fit
/// the job, before anything moves.
void check_fits_job(const CollectiveNode& c, int size) {
    if (c.op == "Broadcast") {
        KILN_CHECK(c.root >= 0 && c.root < size, kInvalidArgument)
            << label(c) << ": root " << c.root << " is not a rank of this job of " << size << " rank(s)";
    }
    if (c.op == "AllGather" || c.op == "ReduceScatter") {
        KILN_CHECK(c.world_size == size, kInvalidArgument)
            << label(c) << ": world_size=" << c.world_size << " in the model, but the job has " << size
            << " rank(s) (its output type was inferred for world_size ranks)";
    }
}

/// `t` as [outer, dim, inner] around `axis`, copied to [dim, outer * inner] (to_front), or the
/// inverse: a [dim, outer * inner] tensor back to `shape` (whose axis holds dim).
Tensor move_axis(const Tensor& t, const Shape& shape, int64_t axis, bool to_front) {
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
    for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
    const int64_t dim = shape[axis];
    Tensor out = to_front ? Tensor(t.dtype(), {dim, outer * inner}) : Tensor(t.dtype(), shape);
    const size_t block = static_cast<size_t>(inner) * dtype_size(t.dtype());
    const char* src = static_cast<const char*>(t.data());
    char* dst = static_cast<char*>(out.data());
    for (int64_t a = 0; a < outer; ++a)
        for (int64_t d = 0; d < dim; ++d) {
            const size_t front = static_cast<size_t>(d * outer + a) * block, natural = static_cast<size_t>(a * dim + d) * block;
            std::memcpy(dst + (to_front ? front : natural), src + (to_front ? natural : front), block);
        }
    return out;
}

Tensor gather_or_scatter(Communicator& comm, const CollectiveNode& c, const Tensor& in) {
    Shape out_shape = in.shape();
    const int n = comm.size();
    out_shape[c.axis] = c.op == "AllGather" ? out_shape[c.axis] * n : out_shape[c.axis] / n;
    KILN_CHECK(c.op == "AllGather" || in.shape()[c.axis] % n == 0, kInvalidArgument)
        << label(c) << ": axis " << c.axis << " of " << shape_str(in.shape()) << " does not split evenly over " << n
        << " ranks";
    const Tensor front = move_axis(in, in.shape(), c.axis, true);
    const NamedTensor named{c.name, front};
    const Tensor result = c.op == "AllGather" ? allgather(comm, named) : reduce_scatter(comm, named, c.reduce);
    return move_axis(result, out_shape, c.axis, false);
}

/// AllReduce nodes grouped by reduction, Broadcast nodes by root: one library call per group.
void run_fused(Communicator& comm, const std::vector<CollectiveNode>& wave, std::map<std::string, Tensor>& values) {
    std::vector<bool> done(wave.size(), false);
    for (size_t i = 0; i < wave.size(); ++i) {
        const CollectiveNode& first = wave[i];
        if (done[i] || (first.op != "AllReduce" && first.op != "Broadcast")) continue;
        std::vector<NamedTensor> group;
        std::vector<size_t> members;
        for (size_t j = i; j < wave.size(); ++j) {
            const CollectiveNode& c = wave[j];
            const bool same = c.op == first.op && (c.op == "AllReduce" ? c.reduce == first.reduce : c.root == first.root);
            if (done[j] || !same) continue;
            group.push_back({c.name, values.at(c.input).clone()});  // in place: the input stays the caller's
            members.push_back(j);
            done[j] = true;
        }
        if (first.op == "AllReduce")
            allreduce(comm, group, first.reduce);
        else
            broadcast(comm, group, static_cast<int>(first.root));
        for (size_t k = 0; k < members.size(); ++k) values[wave[members[k]].output] = group[k].tensor;
    }
}

}  // namespace

void run_collective_wave(Communicator* comm, const std::vector<CollectiveNode>& wave,
                         std::map<std::string, Tensor>& values) {
    const int size = comm ? comm->size() : 1;
    for (const CollectiveNode& c : wave) {
        check_fits_job(c, size);
        KILN_CHECK(values.count(c.input), kInternal) << "bug in Kiln: " << label(c) << " reads '" << c.input
                                                      << "', which no stage computed";
    }
    if (!comm) {  // one rank: each collective is the identity
        for (const CollectiveNode& c : wave) values[c.output] = values.at(c.input);
        return;
    }
    if (comm->options().check_agreement) {
        std::vector<std::string> described;
        for (const CollectiveNode& c : wave) described.push_back(describe_node(c, values.at(c.input)));
        check_agreement(*comm, "collective graph nodes", described);
    }
    run_fused(*comm, wave, values);
    for (const CollectiveNode& c : wave)
        if (c.op == "AllGather" || c.op == "ReduceScatter") values[c.output] = gather_or_scatter(*comm, c, values.at(c.input));
}

}  // namespace kiln::distributed
