// Host kernels whose output shapes depend on the data: NonZero, Unique, NonMaxSuppression.
// References: the ONNX spec's documented examples (operators doc), naive loops written here
// (numpy.nonzero / numpy.unique semantics spelled out), and the spec's NMS examples (the boxes
// and expected selections of the ONNX NonMaxSuppression documentation).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "host_test_util.h"
#include "support/error.h"

namespace kiln::op {
namespace {

using testing::make_strings;
using testing::make_tensor;
using testing::run_host;
using testing::expect_error_kind;
using testing::ints_of;
using testing::doubles_of;

// ---------------------------------------------------------------------------------------------
// NonZero

TEST(HostNonZero, SpecExample) {
    // onnx operators doc: condition [[1, 0], [1, 1]] -> [[0, 1, 1], [0, 0, 1]].
    auto out = run_host("NonZero", {make_tensor(DType::kBool, {2, 2}, {1, 0, 1, 1})});
    EXPECT_EQ(out[0].tensor().shape(), (Shape{2, 3}));
    EXPECT_EQ(ints_of(out[0]), (std::vector<int64_t>{0, 1, 1, 0, 0, 1}));
}

TEST(HostNonZero, RandomAllDtypesMatchNaiveLoop) {
    std::mt19937 rng(7);
    const Shape shape{3, 4, 5};
    for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt8, DType::kInt32,
                    DType::kInt64, DType::kUInt8, DType::kUInt16, DType::kUInt64, DType::kBool}) {
        std::vector<double> vals;
        for (int i = 0; i < 60; ++i)
            vals.push_back(rng() % 3 == 0 ? 1.0 + static_cast<double>(rng() % 5) : 0.0);
        Tensor x = make_tensor(t, shape, vals);
        // numpy.nonzero: for each dimension, the coordinates of the non-zero elements.
        std::vector<std::vector<int64_t>> ref(3);
        for (int64_t a = 0; a < 3; ++a)
            for (int64_t b = 0; b < 4; ++b)
                for (int64_t c = 0; c < 5; ++c)
                    if (vals[static_cast<size_t>((a * 4 + b) * 5 + c)] != 0) {
                        ref[0].push_back(a);
                        ref[1].push_back(b);
                        ref[2].push_back(c);
                    }
        auto out = run_host("NonZero", {x});
        const auto nnz = static_cast<int64_t>(ref[0].size());
        ASSERT_EQ(out[0].tensor().shape(), (Shape{3, nnz})) << dtype_name(t);
        std::vector<int64_t> flat;
        for (auto& r : ref) flat.insert(flat.end(), r.begin(), r.end());
        EXPECT_EQ(ints_of(out[0]), flat) << dtype_name(t);
    }
}

TEST(HostNonZero, ScalarNaNStringsAndWideInts) {
    // A rank-0 input gives [0, nnz] (the ONNX spec, unlike numpy's [1, nnz]).
    EXPECT_EQ(run_host("NonZero", {make_tensor(DType::kFloat32, {}, {2.5})})[0].tensor().shape(),
              (Shape{0, 1}));
    EXPECT_EQ(run_host("NonZero", {make_tensor(DType::kFloat32, {}, {0})})[0].tensor().shape(),
              (Shape{0, 0}));
    // NaN and -0.0: NaN != 0 is true, -0.0 == 0.
    const double nan = std::numeric_limits<double>::quiet_NaN();
    EXPECT_EQ(ints_of(run_host("NonZero", {make_tensor(DType::kFloat32, {3}, {nan, -0.0, 1})})[0]),
              (std::vector<int64_t>{0, 2}));
    // Strings: non-empty is non-zero.
    EXPECT_EQ(ints_of(run_host("NonZero", {make_strings({4}, {"a", "", "", "b"})})[0]),
              (std::vector<int64_t>{0, 3}));
    // uint64 2^63 and int64 values beyond 2^53 are non-zero.
    Tensor u(DType::kUInt64, {2});
    u.data_as<uint64_t>()[1] = uint64_t{1} << 63;
    EXPECT_EQ(ints_of(run_host("NonZero", {u})[0]), (std::vector<int64_t>{1}));
    // Empty input.
    EXPECT_EQ(run_host("NonZero", {Tensor(DType::kInt32, {2, 0})})[0].tensor().shape(),
              (Shape{2, 0}));
}

TEST(HostNonZero, RejectsNonTensor) {
    expect_error_kind([] { run_host("NonZero", {Datum::sequence(DType::kFloat32, {})}); },
                      ErrorKind::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Unique

struct UniqueOut {
    std::vector<double> y;
    std::vector<int64_t> indices, inverse, counts;
};

UniqueOut run_unique(const Tensor& x, ir::AttrMap attrs) {
    auto out = run_host("Unique", {x}, std::move(attrs), 4);
    return {doubles_of(out[0]), ints_of(out[1]), ints_of(out[2]), ints_of(out[3])};
}

TEST(HostUnique, SpecExamples) {
    // Example 1: not sorted.
    auto r1 =
        run_unique(make_tensor(DType::kFloat32, {6}, {2, 1, 1, 3, 4, 3}), {{"sorted", int64_t{0}}});
    EXPECT_EQ(r1.y, (std::vector<double>{2, 1, 3, 4}));
    EXPECT_EQ(r1.indices, (std::vector<int64_t>{0, 1, 3, 4}));
    EXPECT_EQ(r1.inverse, (std::vector<int64_t>{0, 1, 1, 2, 3, 2}));
    EXPECT_EQ(r1.counts, (std::vector<int64_t>{1, 2, 2, 1}));
    // Example 2: sorted, no axis (flattened).
    auto r2 = run_unique(make_tensor(DType::kFloat32, {2, 2}, {1, 3, 2, 3}), {});
    EXPECT_EQ(r2.y, (std::vector<double>{1, 2, 3}));
    EXPECT_EQ(r2.indices, (std::vector<int64_t>{0, 2, 1}));
    EXPECT_EQ(r2.inverse, (std::vector<int64_t>{0, 2, 1, 2}));
    EXPECT_EQ(r2.counts, (std::vector<int64_t>{1, 1, 2}));
    // Example 3: axis 0.
    auto out3 =
        run_host("Unique", {make_tensor(DType::kFloat32, {3, 3}, {1, 0, 0, 1, 0, 0, 2, 3, 4})},
                 {{"axis", int64_t{0}}}, 4);
    EXPECT_EQ(out3[0].tensor().shape(), (Shape{2, 3}));
    EXPECT_EQ(doubles_of(out3[0]), (std::vector<double>{1, 0, 0, 2, 3, 4}));
    EXPECT_EQ(ints_of(out3[1]), (std::vector<int64_t>{0, 2}));
    EXPECT_EQ(ints_of(out3[2]), (std::vector<int64_t>{0, 0, 1}));
    EXPECT_EQ(ints_of(out3[3]), (std::vector<int64_t>{2, 1}));
    // Example 4: axis 1 of a [2, 4, 2] tensor (and the same with axis -2).
    Tensor x4 =
        make_tensor(DType::kFloat32, {2, 4, 2}, {1, 1, 0, 1, 2, 1, 0, 1, 1, 1, 0, 1, 2, 1, 0, 1});
    for (int64_t axis : {1, -2}) {
        auto out4 = run_host("Unique", {x4}, {{"axis", axis}}, 4);
        EXPECT_EQ(out4[0].tensor().shape(), (Shape{2, 3, 2}));
        EXPECT_EQ(doubles_of(out4[0]), (std::vector<double>{0, 1, 1, 1, 2, 1, 0, 1, 1, 1, 2, 1}));
        EXPECT_EQ(ints_of(out4[1]), (std::vector<int64_t>{1, 0, 2}));
        EXPECT_EQ(ints_of(out4[2]), (std::vector<int64_t>{1, 0, 2, 0}));
        EXPECT_EQ(ints_of(out4[3]), (std::vector<int64_t>{2, 1, 1}));
    }
}

// numpy.unique spelled out with naive loops: the distinct values, ascending (or in order of
// first occurrence), each with its first index and count; inverse maps each element to its value.
UniqueOut naive_unique(const std::vector<int64_t>& x, bool sorted) {
    UniqueOut r;
    std::vector<int64_t> vals;
    for (int64_t v : x)
        if (std::find(vals.begin(), vals.end(), v) == vals.end()) vals.push_back(v);
    if (sorted) std::sort(vals.begin(), vals.end());
    for (int64_t v : vals) {
        r.y.push_back(static_cast<double>(v));
        r.indices.push_back(std::find(x.begin(), x.end(), v) - x.begin());
        r.counts.push_back(std::count(x.begin(), x.end(), v));
    }
    for (int64_t v : x) r.inverse.push_back(std::find(vals.begin(), vals.end(), v) - vals.begin());
    return r;
}

TEST(HostUnique, RandomIntsMatchNaiveLoops) {
    std::mt19937 rng(3);
    for (DType t : {DType::kInt8, DType::kInt32, DType::kInt64, DType::kUInt8, DType::kFloat32,
                    DType::kFloat64}) {
        for (int64_t sorted : {0, 1}) {
            std::vector<int64_t> x;
            for (int i = 0; i < 40; ++i)
                x.push_back(static_cast<int64_t>(rng() % 9) - (dtype_is_unsigned_int(t) ? 0 : 4));
            std::vector<double> xd(x.begin(), x.end());
            UniqueOut got = run_unique(make_tensor(t, {5, 8}, xd), {{"sorted", sorted}});
            UniqueOut want = naive_unique(x, sorted == 1);
            EXPECT_EQ(got.y, want.y) << dtype_name(t);
            EXPECT_EQ(got.indices, want.indices) << dtype_name(t);
            EXPECT_EQ(got.inverse, want.inverse) << dtype_name(t);
            EXPECT_EQ(got.counts, want.counts) << dtype_name(t);
        }
    }
}

TEST(HostUnique, RandomRowsAlongAxisMatchNaiveLoops) {
    // Unique rows (axis 0) of a [12, 3] int tensor with few distinct rows, vs a naive
    // lexicographic reference (std::vector comparison is lexicographic).
    std::mt19937 rng(11);
    std::vector<std::vector<int64_t>> rows;
    std::vector<double> flat;
    for (int i = 0; i < 12; ++i) {
        std::vector<int64_t> row{static_cast<int64_t>(rng() % 2), static_cast<int64_t>(rng() % 2),
                                 5};
        rows.push_back(row);
        flat.insert(flat.end(), row.begin(), row.end());
    }
    std::map<std::vector<int64_t>, std::pair<int64_t, int64_t>> first_and_count;
    for (size_t i = 0; i < rows.size(); ++i) {
        auto it = first_and_count.find(rows[i]);
        if (it == first_and_count.end())
            first_and_count[rows[i]] = {static_cast<int64_t>(i), 1};
        else
            it->second.second++;
    }
    auto out =
        run_host("Unique", {make_tensor(DType::kInt32, {12, 3}, flat)}, {{"axis", int64_t{0}}}, 4);
    std::vector<double> want_y;
    std::vector<int64_t> want_idx, want_counts, want_inverse;
    std::map<std::vector<int64_t>, int64_t> pos;
    for (const auto& [row, fc] : first_and_count) {
        pos[row] = static_cast<int64_t>(want_idx.size());
        want_y.insert(want_y.end(), row.begin(), row.end());
        want_idx.push_back(fc.first);
        want_counts.push_back(fc.second);
    }
    for (const auto& row : rows) want_inverse.push_back(pos[row]);
    EXPECT_EQ(out[0].tensor().shape(), (Shape{static_cast<int64_t>(want_idx.size()), 3}));
    EXPECT_EQ(doubles_of(out[0]), want_y);
    EXPECT_EQ(ints_of(out[1]), want_idx);
    EXPECT_EQ(ints_of(out[2]), want_inverse);
    EXPECT_EQ(ints_of(out[3]), want_counts);
}

TEST(HostUnique, NaNsStringsAndFewerOutputs) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    // numpy.unique([nan, 1, nan, 0]) -> [0, 1, nan]: all NaNs are one value, sorted last.
    auto r = run_unique(make_tensor(DType::kFloat32, {4}, {nan, 1, nan, 0}), {});
    ASSERT_EQ(r.y.size(), 3u);
    EXPECT_EQ(r.y[0], 0);
    EXPECT_EQ(r.y[1], 1);
    EXPECT_TRUE(std::isnan(r.y[2]));
    EXPECT_EQ(r.indices, (std::vector<int64_t>{3, 1, 0}));
    EXPECT_EQ(r.inverse, (std::vector<int64_t>{2, 1, 2, 0}));
    EXPECT_EQ(r.counts, (std::vector<int64_t>{1, 1, 2}));
    // With an axis numpy compares rows with !=: rows holding a NaN never merge.
    auto ra = run_host("Unique", {make_tensor(DType::kFloat64, {3, 2}, {1, nan, 1, nan, 0, 0})},
                       {{"axis", int64_t{0}}}, 4);
    EXPECT_EQ(ints_of(ra[1]), (std::vector<int64_t>{2, 0, 1}));
    EXPECT_EQ(ints_of(ra[3]), (std::vector<int64_t>{1, 1, 1}));
    // Strings, and a node with only Y.
    auto rs = run_host("Unique", {make_strings({5}, {"b", "a", "b", "", "a"})}, {}, 1);
    ASSERT_EQ(rs.size(), 1u);
    const Tensor& ys = rs[0].tensor();
    ASSERT_EQ(ys.shape(), (Shape{3}));
    EXPECT_EQ(ys.data_as<std::string>()[0], "");
    EXPECT_EQ(ys.data_as<std::string>()[1], "a");
    EXPECT_EQ(ys.data_as<std::string>()[2], "b");
    // Empty input.
    auto re = run_unique(Tensor(DType::kInt64, {0}), {});
    EXPECT_TRUE(re.y.empty());
    EXPECT_TRUE(re.counts.empty());
}

TEST(HostUnique, BadAxisAndSorted) {
    Tensor x = make_tensor(DType::kFloat32, {2, 2}, {1, 2, 3, 4});
    expect_error_kind(
        [&] {
            run_host("Unique", {x}, {{"axis", int64_t{2}}});
        },
        ErrorKind::kInvalidArgument);
    expect_error_kind(
        [&] {
            run_host("Unique", {x}, {{"axis", int64_t{-3}}});
        },
        ErrorKind::kInvalidArgument);
    expect_error_kind(
        [&] {
            run_host("Unique", {make_tensor(DType::kFloat32, {}, {1})}, {{"axis", int64_t{0}}});
        },
        ErrorKind::kInvalidArgument);
    expect_error_kind(
        [&] {
            run_host("Unique", {x}, {{"sorted", int64_t{2}}});
        },
        ErrorKind::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// NonMaxSuppression: the ONNX documentation's examples (6 boxes, one class).

const std::vector<double> kScores{0.9, 0.75, 0.6, 0.95, 0.5, 0.3};

std::vector<int64_t> run_nms(const std::vector<double>& boxes, const std::vector<double>& scores,
                             int64_t batches, int64_t classes, std::vector<Datum> extra,
                             int64_t center = 0) {
    const auto nb = static_cast<int64_t>(boxes.size() / 4 / static_cast<size_t>(batches));
    std::vector<Datum> in{make_tensor(DType::kFloat32, {batches, nb, 4}, boxes),
                          make_tensor(DType::kFloat32, {batches, classes, nb}, scores)};
    in.insert(in.end(), extra.begin(), extra.end());
    auto out = run_host("NonMaxSuppression", in, {{"center_point_box", center}});
    EXPECT_EQ(out[0].tensor().shape().size(), 2u);
    EXPECT_EQ(out[0].tensor().shape()[1], 3);
    return ints_of(out[0]);
}

std::vector<Datum> nms_params(int64_t max_boxes, double iou, double score) {
    return {make_tensor(DType::kInt64, {1}, {static_cast<double>(max_boxes)}),
            make_tensor(DType::kFloat32, {1}, {iou}), make_tensor(DType::kFloat32, {1}, {score})};
}

TEST(HostNonMaxSuppression, SpecExamples) {
    const std::vector<double> boxes{0, 0,  1, 1,  0, 0.1,  1, 1.1,  0, -0.1, 1, 0.9,
                                    0, 10, 1, 11, 0, 10.1, 1, 11.1, 0, 100,  1, 101};
    const std::vector<int64_t> want{0, 0, 3, 0, 0, 0, 0, 0, 5};
    EXPECT_EQ(run_nms(boxes, kScores, 1, 1, nms_params(3, 0.5, 0.0)), want);  // suppress_by_IOU
    // flipped_coordinates: the same boxes with corners swapped.
    const std::vector<double> flipped{1, 1,  0, 0,  0, 0.1,  1, 1.1,  0, 0.9, 1, -0.1,
                                      0, 10, 1, 11, 1, 10.1, 0, 11.1, 1, 101, 0, 100};
    EXPECT_EQ(run_nms(flipped, kScores, 1, 1, nms_params(3, 0.5, 0.0)), want);
    // center_point_box_format.
    const std::vector<double> centers{0.5, 0.5,  1, 1, 0.5, 0.6,  1, 1, 0.5, 0.4,   1, 1,
                                      0.5, 10.5, 1, 1, 0.5, 10.6, 1, 1, 0.5, 100.5, 1, 1};
    EXPECT_EQ(run_nms(centers, kScores, 1, 1, nms_params(3, 0.5, 0.0), 1), want);
    // limit_output_size and suppress_by_IOU_and_scores.
    EXPECT_EQ(run_nms(boxes, kScores, 1, 1, nms_params(2, 0.5, 0.0)),
              (std::vector<int64_t>{0, 0, 3, 0, 0, 0}));
    EXPECT_EQ(run_nms(boxes, kScores, 1, 1, nms_params(3, 0.5, 0.4)),
              (std::vector<int64_t>{0, 0, 3, 0, 0, 0}));
    // two_classes (the scores repeated), two_batches (the boxes and scores repeated), max 2.
    std::vector<double> two_scores = kScores;
    two_scores.insert(two_scores.end(), kScores.begin(), kScores.end());
    EXPECT_EQ(run_nms(boxes, two_scores, 1, 2, nms_params(2, 0.5, 0.0)),
              (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 1, 3, 0, 1, 0}));
    std::vector<double> two_boxes = boxes;
    two_boxes.insert(two_boxes.end(), boxes.begin(), boxes.end());
    EXPECT_EQ(run_nms(two_boxes, two_scores, 2, 1, nms_params(2, 0.5, 0.0)),
              (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 1, 0, 3, 1, 0, 0}));
    // identical_boxes: ten copies of one box, equal scores -> the first only.
    std::vector<double> same, same_scores(10, 0.9);
    for (int i = 0; i < 10; ++i) same.insert(same.end(), {0, 0, 1, 1});
    EXPECT_EQ(run_nms(same, same_scores, 1, 1, nms_params(3, 0.5, 0.0)),
              (std::vector<int64_t>{0, 0, 0}));
    // single_box.
    EXPECT_EQ(run_nms({0, 0, 1, 1}, {0.9}, 1, 1, nms_params(3, 0.5, 0.0)),
              (std::vector<int64_t>{0, 0, 0}));
    // max_output_boxes_per_class omitted: nothing selected.
    EXPECT_TRUE(run_nms(boxes, kScores, 1, 1, {}).empty());
}

// A naive reference: IoU in double from areas, greedy selection by repeatedly taking the
// highest-scored (lowest index on ties) box not yet visited.
std::vector<int64_t> naive_nms(const std::vector<double>& boxes, const std::vector<double>& scores,
                               int64_t nb, int64_t max_boxes, double iou_thr) {
    auto iou = [&](int64_t i, int64_t j) {
        const double* a = &boxes[static_cast<size_t>(i * 4)];
        const double* b = &boxes[static_cast<size_t>(j * 4)];
        double ay0 = std::min(a[0], a[2]), ay1 = std::max(a[0], a[2]), ax0 = std::min(a[1], a[3]),
               ax1 = std::max(a[1], a[3]);
        double by0 = std::min(b[0], b[2]), by1 = std::max(b[0], b[2]), bx0 = std::min(b[1], b[3]),
               bx1 = std::max(b[1], b[3]);
        double w = std::max(0.0, std::min(ax1, bx1) - std::max(ax0, bx0));
        double h = std::max(0.0, std::min(ay1, by1) - std::max(ay0, by0));
        double inter = w * h;
        double uni = (ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter;
        return uni > 0 ? inter / uni : 0.0;
    };
    std::vector<bool> visited(static_cast<size_t>(nb), false);
    std::vector<int64_t> kept;
    while (static_cast<int64_t>(kept.size()) < max_boxes) {
        int64_t best = -1;
        for (int64_t i = 0; i < nb; ++i)
            if (!visited[static_cast<size_t>(i)] &&
                (best < 0 || scores[static_cast<size_t>(i)] > scores[static_cast<size_t>(best)]))
                best = i;
        if (best < 0) break;
        visited[static_cast<size_t>(best)] = true;
        bool ok = true;
        for (int64_t k : kept) ok = ok && iou(best, k) <= iou_thr;
        if (ok) kept.push_back(best);
    }
    std::vector<int64_t> out;
    for (int64_t k : kept) out.insert(out.end(), {0, 0, k});
    return out;
}

TEST(HostNonMaxSuppression, RandomBoxesMatchNaiveGreedy) {
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> pos(0, 10), size(0.5, 4), sc(0, 1);
    for (int trial = 0; trial < 20; ++trial) {
        const int64_t nb = 30;
        std::vector<double> boxes, scores;
        for (int64_t i = 0; i < nb; ++i) {
            double y = pos(rng), x = pos(rng), h = size(rng), w = size(rng);
            // Round to values exact in float so both sides see the same boxes.
            auto f = [](double v) { return static_cast<double>(static_cast<float>(v)); };
            if (rng() % 2)
                boxes.insert(boxes.end(), {f(y), f(x), f(y + h), f(x + w)});
            else
                boxes.insert(boxes.end(), {f(y + h), f(x + w), f(y), f(x)});
            scores.push_back(f(sc(rng)));
        }
        const double thr = 0.05 + 0.04 * trial;
        EXPECT_EQ(run_nms(boxes, scores, 1, 1, nms_params(8, thr, 0.0)),
                  naive_nms(boxes, scores, nb, 8, thr))
            << "trial " << trial;
    }
}

TEST(HostNonMaxSuppression, BadInputs) {
    auto nms = [](Shape bs, Shape ss, int64_t center, double iou) {
        run_host("NonMaxSuppression",
                 {Tensor(DType::kFloat32, bs), Tensor(DType::kFloat32, ss),
                  make_tensor(DType::kInt64, {1}, {3}), make_tensor(DType::kFloat32, {1}, {iou})},
                 {{"center_point_box", center}});
    };
    expect_error_kind(
        [&] {
            nms({1, 6, 3}, {1, 1, 6}, 0, 0.5);
        },
        ErrorKind::kInvalidArgument);  // box width 3
    expect_error_kind(
        [&] {
            nms({1, 6, 4}, {1, 1, 5}, 0, 0.5);
        },
        ErrorKind::kInvalidArgument);  // box count
    expect_error_kind(
        [&] {
            nms({2, 6, 4}, {1, 1, 6}, 0, 0.5);
        },
        ErrorKind::kInvalidArgument);  // batches
    expect_error_kind([&] { nms({6, 4}, {1, 6}, 0, 0.5); }, ErrorKind::kInvalidArgument);  // rank
    expect_error_kind(
        [&] {
            nms({1, 6, 4}, {1, 1, 6}, 2, 0.5);
        },
        ErrorKind::kInvalidArgument);  // center_point_box
    expect_error_kind(
        [&] {
            nms({1, 6, 4}, {1, 1, 6}, 0, 1.5);
        },
        ErrorKind::kInvalidArgument);  // iou_threshold
    expect_error_kind(
        [&] {
            run_host("NonMaxSuppression",
                     {Tensor(DType::kFloat64, {1, 6, 4}), Tensor(DType::kFloat64, {1, 1, 6})});
        },
        ErrorKind::kInvalidArgument);
    expect_error_kind(
        [&] {
            run_host("NonMaxSuppression",
                     {Tensor(DType::kFloat32, {1, 6, 4}), Tensor(DType::kFloat32, {1, 1, 6}),
                      make_tensor(DType::kInt64, {2}, {1, 2})});
        },
        ErrorKind::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::op
