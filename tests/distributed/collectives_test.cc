// Collectives across the ranks of mpiexec (2 or 3: tests/CMakeLists.txt), against references
// computed here with plain loops over every rank's inputs (each rank can generate all ranks'
// inputs: they are functions of the rank and the index). Values are small integers, so sums,
// minima, maxima and products are exact in every dtype whatever order MPI reduces in; means
// are checked to the dtype's rounding. Sizes are odd, so nothing divides by the rank count.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "distributed/agreement.h"
#include "distributed/collectives.h"
#include "kiln/error.h"

namespace kiln::distributed {
namespace {

const std::vector<DType> kDtypes{DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                                 DType::kInt8,    DType::kInt16,   DType::kInt32,   DType::kInt64,
                                 DType::kUInt8,   DType::kUInt16,  DType::kUInt32,  DType::kUInt64};
const std::vector<ReduceOp> kOps{ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProd};

Communicator& comm() { return Communicator::get(); }

/// Rank `rank`'s element i: 0..3 unsigned, -3..3 otherwise; products over {1,2} / {-2..2}.
double value(int rank, int64_t i, DType dt, ReduceOp op) {
    bool u = dtype_is_unsigned_int(dt);
    if (op == ReduceOp::kProd) return u ? 1 + (rank + i) % 2 : (rank + 2 * i) % 5 - 2;
    return u ? (rank * 7 + i * 3) % 4 : (rank * 7 + i * 3) % 7 - 3;
}

Tensor make(int rank, DType dt, ReduceOp op, Shape shape) {
    Tensor t(dt, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, value(rank, i, dt, op));
    return t;
}

double reference(int64_t i, DType dt, ReduceOp op, int n) {
    double acc = value(0, i, dt, op);
    for (int r = 1; r < n; ++r) {
        double v = value(r, i, dt, op);
        acc = op == ReduceOp::kMin ? std::min(acc, v) : op == ReduceOp::kMax ? std::max(acc, v)
            : op == ReduceOp::kProd ? acc * v : acc + v;
    }
    if (op == ReduceOp::kMean) acc = dtype_is_int(dt) ? std::trunc(acc / n) : acc / n;
    return acc;
}

double tolerance(DType dt, ReduceOp op, double want) {
    if (op != ReduceOp::kMean || dtype_is_int(dt)) return 0;
    double eps = dt == DType::kFloat64 ? 1e-15 : dt == DType::kFloat32 ? 1e-7 : dt == DType::kFloat16 ? 1e-3 : 8e-3;
    return eps * std::max(1.0, std::abs(want));
}

// Every dtype and op in one call per op: two tensors per dtype (odd-sized and a scalar), which
// fusion packs into one buffer per dtype.
TEST(Collectives, AllreduceEveryDtypeAndOp) {
    const int n = comm().size(), me = comm().rank();
    for (ReduceOp op : kOps) {
        std::vector<NamedTensor> ts;
        for (DType dt : kDtypes) {
            ts.push_back({std::string("a_") + dtype_name(dt), make(me, dt, op, {3, 5})});
            ts.push_back({std::string("s_") + dtype_name(dt), make(me, dt, op, {})});
        }
        allreduce(comm(), ts, op);
        for (size_t k = 0; k < ts.size(); ++k) {
            const Tensor& t = ts[k].tensor;
            for (int64_t i = 0; i < t.numel(); ++i) {
                double want = reference(i, t.dtype(), op, n);
                ASSERT_NEAR(t.get_f64(i), want, tolerance(t.dtype(), op, want))
                    << ts[k].name << " " << reduce_op_name(op) << " element " << i;
            }
        }
    }
}

// Calls whose data packs into one buffer of at most kRidingBytes travel in the agreement
// check's record (one tensor in place; several of one dtype packed); one element more takes the
// separate blocking allreduce. Each is one data call.
TEST(Collectives, SmallAllreducesRideInTheAgreementCheck) {
    const int n = comm().size(), me = comm().rank();
    for (ReduceOp op : kOps) {
        for (DType dt : kDtypes) {
            const int64_t fits = static_cast<int64_t>(kRidingBytes / dtype_size(dt));
            for (std::vector<Shape> shapes : {std::vector<Shape>{{3}}, {{}}, {{2}, {}}, {{fits}}, {{fits + 1}},
                                              {{fits - 1}, {}}, {{fits}, {}}}) {
                std::vector<NamedTensor> ts;
                for (size_t k = 0; k < shapes.size(); ++k) ts.push_back({"t" + std::to_string(k), make(me, dt, op, shapes[k])});
                const size_t calls = collective_data_calls();
                allreduce(comm(), ts, op);
                EXPECT_EQ(collective_data_calls(), calls + 1) << dtype_name(dt);
                for (const NamedTensor& t : ts)
                    for (int64_t i = 0; i < t.tensor.numel(); ++i) {
                        double want = reference(i, dt, op, n);
                        ASSERT_NEAR(t.tensor.get_f64(i), want, tolerance(dt, op, want))
                            << t.name << " " << dtype_name(dt) << shape_str(t.tensor.shape()) << " "
                            << reduce_op_name(op) << " element " << i;
                    }
            }
        }
    }
}

// A fusion limit smaller than the tensors: several buffers per dtype, all in flight at once.
TEST(Collectives, AllreduceAcrossSeveralFusionBuffers) {
    const int n = comm().size(), me = comm().rank();
    comm().set_fusion_bytes(64);
    std::vector<NamedTensor> ts;
    for (int k = 0; k < 9; ++k) ts.push_back({"g" + std::to_string(k), make(me, DType::kFloat32, ReduceOp::kSum, {k + 3})});
    allreduce(comm(), ts, ReduceOp::kSum);
    comm().set_fusion_bytes(CommOptions().fusion_bytes);
    for (const NamedTensor& t : ts)
        for (int64_t i = 0; i < t.tensor.numel(); ++i)
            ASSERT_EQ(t.tensor.get_f64(i), reference(i, DType::kFloat32, ReduceOp::kSum, n)) << t.name << " " << i;
}

TEST(Collectives, BroadcastFromTheLastRank) {
    const int root = comm().size() - 1, me = comm().rank();
    std::vector<NamedTensor> ts;
    for (DType dt : kDtypes) ts.push_back({dtype_name(dt), make(me, dt, ReduceOp::kSum, {7})});
    broadcast(comm(), ts, root);
    for (const NamedTensor& t : ts)
        for (int64_t i = 0; i < 7; ++i) ASSERT_EQ(t.tensor.get_f64(i), value(root, i, t.tensor.dtype(), ReduceOp::kSum)) << t.name;
    EXPECT_THROW(broadcast(comm(), ts, comm().size()), Error);
}

// Rank r contributes r+1 rows of 3: the result is every rank's rows in rank order.
TEST(Collectives, AllgatherOfUnequalRowCounts) {
    const int n = comm().size(), me = comm().rank();
    for (DType dt : {DType::kFloat32, DType::kInt64, DType::kFloat16}) {
        Tensor mine(dt, {me + 1, 3});
        for (int64_t i = 0; i < mine.numel(); ++i) mine.set_f64(i, 100 * me + i);
        Tensor all = allgather(comm(), {"x", mine});
        ASSERT_EQ(all.shape(), (Shape{n * (n + 1) / 2, 3}));
        int64_t at = 0;
        for (int r = 0; r < n; ++r)
            for (int64_t i = 0; i < (r + 1) * 3; ++i) ASSERT_EQ(all.get_f64(at++), 100 * r + i) << dtype_name(dt);
    }
    Tensor scalar(DType::kInt32, {});
    scalar.set_f64(0, me * 2);
    Tensor s = allgather(comm(), {"s", scalar});
    ASSERT_EQ(s.shape(), (Shape{n}));
    for (int r = 0; r < n; ++r) EXPECT_EQ(s.get_f64(r), 2 * r);
}

// 5 rows over 2 or 3 ranks: array_split's blocks (3+2, or 2+2+1); 1 row: empty blocks.
TEST(Collectives, ReduceScatterSplitsAxisZeroAsArraySplit) {
    const int n = comm().size(), me = comm().rank();
    for (int64_t rows : {5, 1}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
            for (DType dt : {DType::kFloat32, DType::kInt32, DType::kBFloat16}) {
                Tensor out = reduce_scatter(comm(), {"x", make(me, dt, op, {rows, 2})}, op);
                int64_t begin = 0;
                for (int r = 0; r < me; ++r) begin += rows / n + (r < rows % n ? 1 : 0);
                int64_t mine = rows / n + (me < rows % n ? 1 : 0);
                ASSERT_EQ(out.shape(), (Shape{mine, 2}));
                for (int64_t i = 0; i < out.numel(); ++i) {
                    double want = reference(begin * 2 + i, dt, op, n);
                    ASSERT_NEAR(out.get_f64(i), want, tolerance(dt, op, want)) << dtype_name(dt) << " " << reduce_op_name(op);
                }
            }
        }
    }
}

// The last rank passes a different shape, dtype, count or collective: every rank gets the same
// error naming that rank and the tensor, and the next call still works.
TEST(Collectives, MismatchIsAnErrorNamingTheRankAndTensor) {
    const int n = comm().size(), me = comm().rank(), odd = n - 1;
    auto call = [&](Shape b_shape, DType b_dtype, bool extra) {
        std::vector<NamedTensor> ts{{"a", Tensor(DType::kFloat32, {2})}, {"b", Tensor(b_dtype, b_shape)}};
        if (extra) ts.push_back({"c", Tensor(DType::kFloat32, {1})});
        allreduce(comm(), ts, ReduceOp::kSum);
    };
    auto message = [&](auto&& fn) {
        try {
            fn();
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    std::string shape = message([&] { call(me == odd ? Shape{4} : Shape{3}, DType::kFloat32, false); });
    EXPECT_NE(shape.find("rank " + std::to_string(odd) + " disagrees with rank 0 at tensor 1"), std::string::npos) << shape;
    EXPECT_NE(shape.find("rank " + std::to_string(odd) + " has 'b f32[4]'"), std::string::npos) << shape;
    std::string dtype = message([&] { call({3}, me == odd ? DType::kInt32 : DType::kFloat32, false); });
    EXPECT_NE(dtype.find("has 'b i32[3]'"), std::string::npos) << dtype;
    std::string count = message([&] { call({3}, DType::kFloat32, me == odd); });
    EXPECT_NE(count.find("rank 0 has no more tensors"), std::string::npos) << count;
    std::string kind = message([&] {
        std::vector<NamedTensor> ts{{"a", Tensor(DType::kFloat32, {2})}};
        if (me == odd) broadcast(comm(), ts, 0); else allreduce(comm(), ts, ReduceOp::kSum);
    });
    EXPECT_NE(kind.find("out of step"), std::string::npos) << kind;
    // Still in step afterwards.
    std::vector<NamedTensor> ok{{"ok", make(me, DType::kInt64, ReduceOp::kSum, {3})}};
    allreduce(comm(), ok, ReduceOp::kSum);
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(ok[0].tensor.get_f64(i), reference(i, DType::kInt64, ReduceOp::kSum, n));
}

TEST(Collectives, UncarriedDtypeIsAnErrorNamingTheTensor) {
    std::vector<NamedTensor> ts{{"mask", Tensor(DType::kBool, {3})}};
    try {
        allreduce(comm(), ts, ReduceOp::kMax);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
        EXPECT_NE(std::string(e.what()).find("tensor 'mask': dtype bool"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace kiln::distributed
