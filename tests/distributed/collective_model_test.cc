// Collective graph ops over MPI (distributed/collective_model.h) in the ctest binaries
// distributed_collectives_np2, _np3 and _netns (TCP across two network namespaces): a model's
// AllReduce, Broadcast, AllGather (axis 1) and ReduceScatter nodes against plain loops over every
// rank's inputs (functions of rank and index: small integers, exact in f32), the fusion count,
// and shapes differing across ranks named as an error on every rank. The numpy-referenced runs
// through `kiln run` are tests/distributed/test_collective_ops.py.
#include <gtest/gtest.h>

#include <string>

#include "distributed/collective_model.h"
#include "distributed/collectives.h"
#include "ir/parser.h"

namespace kiln::distributed {
namespace {

Communicator& comm() { return Communicator::get(); }

float x_at(int rank, int64_t i) { return static_cast<float>((rank * 5 + i * 3) % 7 - 3); }

Tensor x_of(int rank, Shape shape) {
    Tensor t(DType::kFloat32, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = x_at(rank, i);
    return t;
}

SessionOptions one_thread() {
    SessionOptions o;
    o.threads = 1;
    return o;
}

// x: f32[2,3]; n ranks. Wave 0: four nodes, two of them AllReduce(sum) (fused).
std::string model_text(int n) {
    const std::string w = std::to_string(n);
    return "graph m(%x: f32[2,3], %r: f32[2," + std::to_string(2 * n) + "]) {\n"
           "  %s = AllReduce(%x) {reduce=\"sum\"} : f32[2,3] # name=\"s\"\n"
           "  %e = Exp(%x) : f32[2,3] # name=\"e\"\n"
           "  %n = Neg(%x) : f32[2,3] # name=\"neg\"\n"
           "  %s2 = AllReduce(%n) {reduce=\"sum\"} : f32[2,3] # name=\"s2\"\n"
           "  %b = Broadcast(%x) {root=" + std::to_string(n - 1) + "} : f32[2,3] # name=\"b\"\n"
           "  %g = AllGather(%x) {axis=1, world_size=" + w + "} : f32[2," + std::to_string(3 * n) + "] # name=\"g\"\n"
           "  %rs = ReduceScatter(%r) {axis=1, reduce=\"max\", world_size=" + w + "} : f32[2,2] # name=\"rs\"\n"
           "  return %s, %s2, %b, %g, %rs\n}\n";
}

TEST(CollectiveModel, EveryOpAgainstLoopsOverTheRanks) {
    const int n = comm().size(), me = comm().rank();
    CollectiveModel m(ir::parse_graph(model_text(n)), one_thread(), &comm());
    const std::vector<Tensor> out = m.run({{"x", x_of(me, {2, 3})}, {"r", x_of(me + 1, {2, 2 * n})}});
    ASSERT_EQ(out.size(), 5u);
    for (int64_t i = 0; i < 6; ++i) {
        float sum = 0;
        for (int r = 0; r < n; ++r) sum += x_at(r, i);
        EXPECT_EQ(out[0].data_as<float>()[i], sum) << i;
        EXPECT_EQ(out[1].data_as<float>()[i], -sum) << i;
        EXPECT_EQ(out[2].data_as<float>()[i], x_at(n - 1, i)) << i;
    }
    for (int64_t row = 0; row < 2; ++row)
        for (int64_t c = 0; c < 3 * n; ++c)  // rank c / 3's row, column c % 3
            EXPECT_EQ(out[3].data_as<float>()[row * 3 * n + c], x_at(static_cast<int>(c / 3), row * 3 + c % 3));
    for (int64_t row = 0; row < 2; ++row)
        for (int64_t c = 0; c < 2; ++c) {
            float mx = -1e9f;
            for (int r = 0; r < n; ++r) mx = std::max(mx, x_at(r + 1, row * 2 * n + 2 * me + c));
            EXPECT_EQ(out[4].data_as<float>()[row * 2 + c], mx) << row << "," << c;
        }
    // 5 nodes in one wave: the two AllReduce(sum) nodes are one fused call.
    EXPECT_EQ(m.collective_nodes(), 5u);
    EXPECT_EQ(m.last_run_data_calls(), n > 1 ? 4u : 2u);  // one rank: the sum is the identity
}

TEST(CollectiveModel, ShapesDifferingAcrossRanksNameTheRankAndTheNode) {
    if (comm().size() < 2) GTEST_SKIP() << "needs 2 ranks";
    const int len = comm().rank() == 1 ? 4 : 3;  // rank 1's model differs
    const std::string text = "graph d(%x: f32[" + std::to_string(len) + "]) {\n  %y = AllReduce(%x) : f32[" +
                             std::to_string(len) + "] # name=\"ar_x\"\n  return %y\n}\n";
    CollectiveModel m(ir::parse_graph(text), one_thread(), &comm());
    try {
        m.run({{"x", x_of(comm().rank(), {len})}});
        FAIL() << "expected an error";
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("rank 1 disagrees with rank 0 at tensor 0: rank 0 has 'AllReduce reduce=sum ar_x f32[3]', "
                            "rank 1 has 'AllReduce reduce=sum ar_x f32[4]'"),
                  std::string::npos)
            << what;
    }
    // The communicator still works afterwards.
    std::vector<NamedTensor> t{{"after", x_of(0, {2})}};
    allreduce(comm(), t, ReduceOp::kMax);
    EXPECT_EQ(t[0].tensor.data_as<float>()[0], x_at(0, 0));
}

}  // namespace
}  // namespace kiln::distributed
