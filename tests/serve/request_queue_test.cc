// The dynamic batcher's choice (RequestQueue::take_batch, a pure function of the queue, the
// policy and the time), in the spirit of Triton's L0_batcher: waiting for the delay, going at once
// when full or at the largest preferred size, the longest preferred prefix, requests of other
// shapes left for a later batch, never jumping a request that does not fit; and the deadline
// queries; admission under a class's queue policy (capacity, deadlines). REVIEW 20: only
// test_batching.py covered the batcher before, through a server. Times are given, never read. (Suite
// names start with serve_ so that `ctest -R serve` selects them.)
#include "serve/request_queue.h"

#include <gtest/gtest.h>

namespace kiln::serve {
namespace {

using std::chrono::microseconds;

const Clock::time_point kT0 = Clock::time_point() + std::chrono::seconds(100);

/// A request of `rows` rows and non-batch shape `key`, arrived at kT0 + at_us; its id names it.
std::unique_ptr<PendingRequest> request(const std::string& id, int64_t rows, const std::string& key = "3x4",
                                        int at_us = 0) {
    auto r = std::make_unique<PendingRequest>();
    r->request.id = id;
    r->rows = rows;
    r->batch_key = key;
    r->arrival = kT0 + microseconds(at_us);
    return r;
}

std::vector<std::string> ids(const Batch& b) {
    std::vector<std::string> out;
    for (const auto& r : b) out.push_back(r->request.id);
    return out;
}

BatchPolicy policy(int max_batch, std::vector<int> preferred, int delay_us) {
    BatchPolicy p;
    p.max_batch_size = max_batch;
    p.preferred_batch_sizes = std::move(preferred);
    p.max_queue_delay = microseconds(delay_us);
    return p;
}

using Ids = std::vector<std::string>;

TEST(serve_RequestQueue, WithoutBatchingEachRequestGoesAloneInArrivalOrder) {
    RequestQueue q;
    q.push(request("a", 1));
    q.push(request("b", 1));
    Clock::time_point wake{};
    EXPECT_EQ(ids(q.take_batch(policy(0, {}, 1000), kT0, wake)), Ids{"a"});
    EXPECT_EQ(ids(q.take_batch(policy(0, {}, 1000), kT0, wake)), Ids{"b"});
    EXPECT_TRUE(q.empty());
}

TEST(serve_RequestQueue, APartialBatchWaitsForTheOldestRequestsDelay) {
    RequestQueue q;
    q.push(request("a", 1, "3x4", 0));
    q.push(request("b", 1, "3x4", 30));
    Clock::time_point wake{};
    EXPECT_TRUE(q.take_batch(policy(8, {}, 100), kT0 + microseconds(50), wake).empty());
    EXPECT_EQ(wake, kT0 + microseconds(100));  // the oldest's delay, not the newest's
    EXPECT_EQ(q.size(), 2u);
    EXPECT_EQ(ids(q.take_batch(policy(8, {}, 100), kT0 + microseconds(100), wake)), (Ids{"a", "b"}));
    EXPECT_TRUE(q.empty());
}

TEST(serve_RequestQueue, AFullBatchGoesAtOnce) {
    RequestQueue q;
    for (const char* id : {"a", "b", "c", "d", "e"}) q.push(request(id, 2));
    Clock::time_point wake{};
    // 4 x 2 rows reach max_batch_size 8 before any delay passed; the fifth waits.
    EXPECT_EQ(ids(q.take_batch(policy(8, {}, 1000000), kT0, wake)), (Ids{"a", "b", "c", "d"}));
    EXPECT_EQ(q.size(), 1u);
}

TEST(serve_RequestQueue, TheLargestPreferredSizeGoesAtOnce) {
    RequestQueue q;
    for (const char* id : {"a", "b", "c", "d"}) q.push(request(id, 1));
    Clock::time_point wake{};
    EXPECT_EQ(ids(q.take_batch(policy(8, {2, 4}, 1000000), kT0, wake)), (Ids{"a", "b", "c", "d"}));
}

TEST(serve_RequestQueue, AfterTheDelayTheLongestPreferredPrefixGoes) {
    RequestQueue q;
    for (const char* id : {"a", "b", "c"}) q.push(request(id, 1));
    Clock::time_point wake{};
    // 3 rows are no preferred size; the longest prefix that is one has 2 rows.
    EXPECT_EQ(ids(q.take_batch(policy(8, {2, 4}, 100), kT0 + microseconds(100), wake)), (Ids{"a", "b"}));
    EXPECT_EQ(ids(q.take_batch(policy(8, {2, 4}, 100), kT0 + microseconds(100), wake)), Ids{"c"});
}

TEST(serve_RequestQueue, WithNoPreferredPrefixEverythingThatFitsGoes) {
    RequestQueue q;
    q.push(request("a", 3));
    q.push(request("b", 2));
    Clock::time_point wake{};
    EXPECT_EQ(ids(q.take_batch(policy(8, {4}, 100), kT0 + microseconds(100), wake)), (Ids{"a", "b"}));
}

TEST(serve_RequestQueue, RequestsOfAnotherShapeWaitForALaterBatch) {
    RequestQueue q;
    q.push(request("a", 1, "3x4"));
    q.push(request("b", 1, "5x4"));
    q.push(request("c", 1, "3x4"));
    Clock::time_point wake{};
    const BatchPolicy p = policy(8, {}, 100);
    EXPECT_EQ(ids(q.take_batch(p, kT0 + microseconds(100), wake)), (Ids{"a", "c"}));
    EXPECT_EQ(ids(q.take_batch(p, kT0 + microseconds(100), wake)), Ids{"b"});
}

TEST(serve_RequestQueue, ARequestThatDoesNotFitIsNeverJumped) {
    RequestQueue q;
    q.push(request("a", 3));
    q.push(request("b", 2));  // 3 + 2 > 4: the batch ends here
    q.push(request("c", 1));  // would fit, but would overtake b
    Clock::time_point wake{};
    const BatchPolicy p = policy(4, {}, 100);
    EXPECT_EQ(ids(q.take_batch(p, kT0 + microseconds(100), wake)), Ids{"a"});
    EXPECT_EQ(ids(q.take_batch(p, kT0 + microseconds(100), wake)), (Ids{"b", "c"}));
}

TEST(serve_RequestQueue, TheOldestRequestStartsTheBatchWhateverItsShape) {
    RequestQueue q;
    q.push(request("odd", 1, "5x4"));
    for (const char* id : {"a", "b", "c", "d"}) q.push(request(id, 1, "3x4", 10));
    Clock::time_point wake{};
    const BatchPolicy p = policy(4, {}, 100);
    // Four later requests of another shape would fill a batch, but the oldest one leads: nothing
    // goes before its delay, and then it goes alone.
    EXPECT_TRUE(q.take_batch(p, kT0 + microseconds(50), wake).empty());
    EXPECT_EQ(wake, kT0 + microseconds(100));
    EXPECT_EQ(ids(q.take_batch(p, kT0 + microseconds(100), wake)), Ids{"odd"});
    EXPECT_EQ(ids(q.take_batch(p, kT0 + microseconds(100), wake)), (Ids{"a", "b", "c", "d"}));
    EXPECT_TRUE(q.empty());
}

TEST(serve_RequestQueue, ARequestLargerThanTheMaximumGoesAlone) {
    RequestQueue q;
    q.push(request("big", 6));
    q.push(request("small", 1));
    Clock::time_point wake{};
    EXPECT_EQ(ids(q.take_batch(policy(4, {}, 100), kT0, wake)), Ids{"big"});
    EXPECT_EQ(q.size(), 1u);
}

TEST(serve_RequestQueue, ExpiredRequestsLeaveAndTheNextDeadlineIsTheEarliest) {
    RequestQueue q;
    auto a = request("a", 1);
    a->deadline = kT0 + microseconds(50);
    auto b = request("b", 1);
    auto c = request("c", 1);
    c->deadline = kT0 + microseconds(20);
    q.push(std::move(a));
    q.push(std::move(b));
    q.push(std::move(c));
    ASSERT_TRUE(q.next_deadline().has_value());
    EXPECT_EQ(*q.next_deadline(), kT0 + microseconds(20));
    EXPECT_EQ(ids(q.take_expired(kT0 + microseconds(20))), Ids{"c"});
    EXPECT_EQ(*q.next_deadline(), kT0 + microseconds(50));
    EXPECT_EQ(ids(q.take_expired(kT0 + microseconds(60))), Ids{"a"});
    EXPECT_FALSE(q.next_deadline().has_value());
    EXPECT_EQ(ids(q.take_all()), Ids{"b"});
}

// Admission (Triton's PolicyQueue, moved out of ModelVersion::infer: REVIEW 20): capacity and
// the deadline a request gets from its class's policy, the model's SLA and its own timeout.
QueuePolicy queue_policy(uint32_t max_size, std::optional<int> default_timeout_us, bool allow_override) {
    QueuePolicy p;
    p.max_queue_size = max_size;
    if (default_timeout_us) p.default_timeout = microseconds(*default_timeout_us);
    p.allow_timeout_override = allow_override;
    return p;
}

std::unique_ptr<PendingRequest> timed(const std::string& id, std::optional<int> timeout_us, int at_us = 0) {
    auto r = request(id, 1, "3x4", at_us);
    if (timeout_us) r->request.timeout = microseconds(*timeout_us);
    return r;
}

TEST(serve_RequestQueue, AFullQueueRefusesAndLeavesTheRequestWithTheCaller) {
    RequestQueue q;
    const QueuePolicy p = queue_policy(2, std::nullopt, true);
    for (const char* id : {"a", "b"}) {
        auto r = timed(id, std::nullopt);
        EXPECT_EQ(q.admit(r, p, std::nullopt).refused, "");
        EXPECT_EQ(r, nullptr);
    }
    auto c = timed("c", std::nullopt);
    RequestQueue::Admission in = q.admit(c, p, std::nullopt);
    EXPECT_EQ(in.refused, "queue is full (max_queue_size 2)");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->request.id, "c");
    EXPECT_EQ(q.size(), 2u);
    RequestQueue big;  // 0: unbounded
    for (int i = 0; i < 100; ++i) {
        auto r = timed("r" + std::to_string(i), std::nullopt);
        ASSERT_EQ(big.admit(r, queue_policy(0, std::nullopt, true), std::nullopt).refused, "");
    }
}

TEST(serve_RequestQueue, TheDeadlineComesFromTheRequestThePolicyOrTheSla) {
    RequestQueue q;
    auto deadline_of = [&](std::unique_ptr<PendingRequest> r, const QueuePolicy& p, std::optional<int> sla_us) {
        std::optional<microseconds> sla;
        if (sla_us) sla = microseconds(*sla_us);
        RequestQueue::Admission in = q.admit(r, p, sla);
        EXPECT_EQ(in.refused, "");
        return in.deadline;
    };
    const int at = 40;  // arrival kT0 + 40 us: deadlines count from the arrival
    // The policy's default timeout; the request's own where the policy allows it.
    EXPECT_EQ(deadline_of(timed("a", std::nullopt, at), queue_policy(0, 500, true), 900), kT0 + microseconds(at + 500));
    EXPECT_EQ(deadline_of(timed("b", 200, at), queue_policy(0, 500, true), std::nullopt), kT0 + microseconds(at + 200));
    EXPECT_EQ(deadline_of(timed("c", 200, at), queue_policy(0, 500, false), std::nullopt), kT0 + microseconds(at + 500));
    // No default timeout: the model's SLA, else the request's own even where overrides are off.
    EXPECT_EQ(deadline_of(timed("d", std::nullopt, at), queue_policy(0, std::nullopt, false), 900),
              kT0 + microseconds(at + 900));
    EXPECT_EQ(deadline_of(timed("e", 300, at), queue_policy(0, std::nullopt, false), std::nullopt),
              kT0 + microseconds(at + 300));
    // Nothing, or a zero timeout: no deadline.
    EXPECT_EQ(deadline_of(timed("f", std::nullopt, at), queue_policy(0, std::nullopt, true), std::nullopt), std::nullopt);
    EXPECT_EQ(deadline_of(timed("g", 0, at), queue_policy(0, std::nullopt, true), std::nullopt), std::nullopt);
    // The queue's deadline query sees them: the earliest is b's.
    EXPECT_EQ(q.next_deadline(), kT0 + microseconds(at + 200));
    EXPECT_EQ(ids(q.take_expired(kT0 + microseconds(at + 300))), (Ids{"b", "e"}));
}

}  // namespace
}  // namespace kiln::serve
