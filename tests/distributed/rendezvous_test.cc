// Keyed point-to-point transfers (src/distributed/rendezvous.h) under mpiexec: a ring of every
// dtype and shape (scalar and empty included), receives taken in the opposite order of the
// sends (matched by key, not arrival), many transfers in flight, and a receive that never
// arrives timing out with the key in the message. Expected values are functions of the sender
// rank and the index, computed here.
#include <gtest/gtest.h>

#include "distributed/rendezvous.h"
#include "kiln/error.h"

namespace kiln::distributed {
namespace {

Communicator& comm() { return Communicator::get(); }

Tensor filled(DType dt, Shape shape, int rank, int salt) {
    Tensor t(dt, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, (rank * 7 + salt + i) % 11);
    return t;
}

void expect_filled(const Tensor& t, DType dt, const Shape& shape, int rank, int salt) {
    ASSERT_EQ(t.dtype(), dt);
    ASSERT_EQ(t.shape(), shape);
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.get_f64(i), (rank * 7 + salt + i) % 11) << i;
}

TEST(Rendezvous, RingOfEveryDtypeAndShape) {
    const int n = comm().size(), me = comm().rank(), next = (me + 1) % n, prev = (me + n - 1) % n;
    Rendezvous rv(comm());
    const std::vector<DType> dtypes{DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt8,
                                    DType::kInt64, DType::kUInt8, DType::kUInt32};
    const std::vector<Shape> shapes{{}, {0}, {3}, {2, 5}};
    int salt = 0;
    for (DType dt : dtypes)
        for (const Shape& s : shapes) {
            Tensor v = filled(dt, s, me, salt);
            rv.send({me, 0, next, "t" + std::to_string(salt), 0, 0, 1}, v);
            if (v.numel() > 0) v.set_f64(0, 99);  // send() copied: overwriting is safe
            ++salt;
        }
    salt = 0;
    for (DType dt : dtypes)
        for (const Shape& s : shapes) {
            Tensor got = rv.recv({prev, 0, me, "t" + std::to_string(salt), 0, 0, 1});
            expect_filled(got, dt, s, prev, salt++);
        }
}

TEST(Rendezvous, MatchesByKeyNotArrivalOrder) {
    const int n = comm().size(), me = comm().rank(), next = (me + 1) % n, prev = (me + n - 1) % n;
    Rendezvous rv(comm());
    // Steps 0..9 of one tensor, and a loop's iterations: received newest first.
    for (int64_t step = 0; step < 10; ++step)
        rv.send({me, 0, next, "act", 0, 0, step}, filled(DType::kFloat32, {4}, me, static_cast<int>(step)));
    for (int64_t iter = 0; iter < 3; ++iter)
        rv.send({me, 0, next, "h", 1, iter, 0}, filled(DType::kInt32, {2}, me, 100 + static_cast<int>(iter)));
    for (int64_t iter = 2; iter >= 0; --iter)
        expect_filled(rv.recv({prev, 0, me, "h", 1, iter, 0}), DType::kInt32, {2}, prev, 100 + static_cast<int>(iter));
    for (int64_t step = 9; step >= 0; --step)
        expect_filled(rv.recv({prev, 0, me, "act", 0, 0, step}), DType::kFloat32, {4}, prev, static_cast<int>(step));
    MPI_Barrier(comm().comm());  // every rank has received: every send can complete
    EXPECT_EQ(rv.pending_sends(), 0u);
}

TEST(Rendezvous, AReceiveThatNeverArrivesTimesOutNamingTheKey) {
    const int n = comm().size(), me = comm().rank(), prev = (me + n - 1) % n;
    Rendezvous rv(comm());
    TransferKey key{prev, 0, me, "never_sent", 0, 0, 3};
    try {
        rv.recv(key, 0.3);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kIOError);
        EXPECT_NE(std::string(e.what()).find("recv of " + key.to_string() + " did not arrive within 0.3 s"), std::string::npos)
            << e.what();
    }
    EXPECT_EQ(key.to_string(), std::to_string(prev) + "/0 -> " + std::to_string(me) + " 'never_sent' frame 0:0 step 3");
    // Not this rank's key to send.
    EXPECT_THROW(rv.send({prev, 0, me, "x", 0, 0, 0}, Tensor(DType::kFloat32, {1})), Error);
}

}  // namespace
}  // namespace kiln::distributed
