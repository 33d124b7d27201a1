// Host kernels of If, Loop, Scan (9+ and 8) and SequenceMap, with the sub-graphs emulated by
// run_graph lambdas written here (e.g. a body computing "carried + x"), checked against naive
// loops that spell out the ONNX spec's pseudo-code: trip count / condition combinations, zero
// iterations, scan axes and directions, Scan-8's batch axis and sequence_lens; plus the error
// cases (a body returning the wrong number of outputs, bad conditions, mismatched lengths).
#include <gtest/gtest.h>

#include <memory>

#include "host_test_util.h"
#include "support/error.h"

namespace kiln::op::testing {
namespace {

std::vector<double> values(const Tensor& t) {
    std::vector<double> v;
    for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get_f64(i));
    return v;
}

Tensor f32(Shape s, const std::vector<double>& v) { return make_tensor(DType::kFloat32, std::move(s), v); }
Tensor i64(int64_t v) { return make_tensor(DType::kInt64, {}, {static_cast<double>(v)}); }
Tensor boolean(bool v) { return make_tensor(DType::kBool, {}, {v ? 1.0 : 0.0}); }

Tensor add(const Tensor& a, const Tensor& b) {
    EXPECT_EQ(a.shape(), b.shape());
    Tensor out(a.dtype(), a.shape());
    for (int64_t i = 0; i < a.numel(); ++i) out.set_f64(i, a.get_f64(i) + b.get_f64(i));
    return out;
}

/// A sub-graph with the given formal input and output types (no real nodes: the test's
/// run_graph lambda is its meaning).
ir::GraphAttr make_body(const std::vector<ir::TensorType>& ins, const std::vector<ir::TensorType>& outs) {
    auto g = std::make_shared<ir::Graph>();
    for (size_t i = 0; i < ins.size(); ++i) g->add_input("x" + std::to_string(i), ins[i]);
    for (size_t i = 0; i < outs.size(); ++i) {
        ir::Node* n = g->add_node("Opaque", {}, {}, {outs[i]}, {"y" + std::to_string(i)});
        g->add_output(n->output(0));
    }
    return g;
}

const ir::TensorType kF2(DType::kFloat32, {2});
const ir::TensorType kI64(DType::kInt64, {});
const ir::TensorType kBool(DType::kBool, {});

// ---- If ----

TEST(HostIf, RunsTheSelectedBranch) {
    ir::GraphAttr then_g = make_body({}, {kF2}), else_g = make_body({}, {kF2});
    RunGraphFn run = [&](const ir::Graph& g, const std::vector<Datum>& ins) {
        EXPECT_TRUE(ins.empty());
        return std::vector<Datum>{&g == then_g.get() ? f32({2}, {1, 2}) : f32({2}, {3, 4})};
    };
    ir::AttrMap attrs{{"then_branch", then_g}, {"else_branch", else_g}};
    EXPECT_EQ(values(run_host("If", {boolean(true)}, attrs, 1, run)[0].tensor()), (std::vector<double>{1, 2}));
    EXPECT_EQ(values(run_host("If", {boolean(false)}, attrs, 1, run)[0].tensor()), (std::vector<double>{3, 4}));
    // A one-element [1] condition is fine; two elements are not.
    EXPECT_EQ(values(run_host("If", {make_tensor(DType::kBool, {1}, {1})}, attrs, 1, run)[0].tensor()),
              (std::vector<double>{1, 2}));
    expect_error(
        [&] {
            run_host("If", {make_tensor(DType::kBool, {2}, {1, 1})}, attrs, 1, run);
        },
        ErrorKind::kInvalidArgument, "one-element");
    // Branch outputs may be sequences / empty optionals: passed through.
    RunGraphFn run_seq = [](const ir::Graph&, const std::vector<Datum>&) {
        return std::vector<Datum>{Datum::sequence(DType::kFloat32, {f32({1}, {7})}), Datum::none()};
    };
    auto out = run_host("If", {boolean(true)}, attrs, 2, run_seq);
    EXPECT_TRUE(out[0].is_sequence());
    EXPECT_TRUE(out[1].is_none());
    expect_error([&] { run_host("If", {boolean(true)}, attrs, 3, run_seq); }, ErrorKind::kInvalidModel,
                 "returned 2 outputs, expected 3");
}

// ---- Loop ----

// Body: (i, cond, s) -> (i + 1 < stop, s + [i, 2i], scan = s + [i, 2i]). The naive reference
// is the spec's pseudo-code with the same arithmetic.
struct LoopFixture {
    int64_t stop;  // the body's condition output turns false after iteration stop - 1
    int calls = 0;
    ir::GraphAttr body = make_body({kI64, kBool, kF2}, {kBool, kF2, kF2});
    RunGraphFn run() {
        return [this](const ir::Graph& g, const std::vector<Datum>& ins) {
            EXPECT_EQ(&g, body.get());
            EXPECT_EQ(ins.size(), 3u);
            ++calls;
            const int64_t i = ins[0].tensor().get_i64(0);
            EXPECT_EQ(ins[1].tensor().dtype(), DType::kBool);
            Tensor next = add(ins[2].tensor(), f32({2}, {static_cast<double>(i), 2.0 * static_cast<double>(i)}));
            return std::vector<Datum>{boolean(i + 1 < stop), next, next};
        };
    }
    /// Naive loop: returns the final carried value and the scan rows.
    static std::pair<std::vector<double>, std::vector<double>> reference(bool has_m, int64_t m, bool has_cond,
                                                                         bool cond, int64_t stop) {
        std::vector<double> s = {1, 1}, scan;
        for (int64_t i = 0; (!has_m || i < m) && cond; ++i) {
            s[0] += static_cast<double>(i);
            s[1] += 2.0 * static_cast<double>(i);
            scan.insert(scan.end(), s.begin(), s.end());
            if (has_cond) cond = i + 1 < stop;
        }
        return {s, scan};
    }
};

TEST(HostLoop, TripCountAndConditionCombinations) {
    struct Case {
        bool has_m;
        int64_t m;
        bool has_cond, cond;
        int64_t stop;
    };
    std::vector<Case> cases = {
        {true, 5, true, true, 100},  // for loop with a condition that stays true
        {true, 5, true, true, 3},    // the condition ends it first
        {false, 0, true, true, 4},   // while loop
        {true, 4, false, true, 1},   // for loop: the body's condition is ignored
        {true, 0, true, true, 9},    // zero iterations: M = 0
        {true, 5, true, false, 9},   // zero iterations: cond = false
        {false, 0, true, false, 9},  // zero iterations, while form
    };
    for (const Case& c : cases) {
        LoopFixture fx{c.stop};
        std::vector<Datum> ins = {c.has_m ? Datum(i64(c.m)) : Datum::none(),
                                  c.has_cond ? Datum(boolean(c.cond)) : Datum::none(), f32({2}, {1, 1})};
        auto out = run_host("Loop", ins, {{"body", fx.body}}, 2, fx.run(), {!c.has_m, !c.has_cond});
        auto [s, scan] = LoopFixture::reference(c.has_m, c.m, c.has_cond, c.cond, c.stop);
        EXPECT_EQ(values(out[0].tensor()), s) << "M=" << c.m << " stop=" << c.stop;
        const int64_t rows = static_cast<int64_t>(scan.size() / 2);
        EXPECT_EQ(fx.calls, rows);
        EXPECT_EQ(out[1].tensor().shape(), (Shape{rows, 2})) << "M=" << c.m << " stop=" << c.stop;
        EXPECT_EQ(values(out[1].tensor()), scan);
    }
}

TEST(HostLoop, CarriesSequencesAndOptionals) {
    // Body: (i, cond, seq, opt) -> (true, seq + [i], opt unchanged): a SequenceInsert loop.
    ir::TensorType seq_t(DType::kInt64, {});
    seq_t.kind = ir::TypeKind::kSequence;
    ir::GraphAttr body = make_body({kI64, kBool, seq_t, kF2}, {kBool, seq_t, kF2});
    RunGraphFn run = [](const ir::Graph&, const std::vector<Datum>& ins) {
        std::vector<Tensor> items = ins[2].items();
        items.push_back(ins[0].tensor());
        return std::vector<Datum>{boolean(true), Datum::sequence(DType::kInt64, items), ins[3]};
    };
    auto out = run_host("Loop", {i64(3), Datum::none(), Datum::sequence(DType::kInt64, {}), Datum::none()},
                        {{"body", body}}, 2, run, {false, true});
    ASSERT_TRUE(out[0].is_sequence());
    ASSERT_EQ(out[0].items().size(), 3u);
    for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(out[0].items()[k].get_i64(0), k);
    EXPECT_TRUE(out[1].is_none());
}

TEST(HostLoop, Errors) {
    LoopFixture fx{9};
    ir::AttrMap attrs{{"body", fx.body}};
    expect_error(
        [&] {
            run_host("Loop", {Datum::none(), Datum::none(), f32({2}, {1, 1})}, attrs, 2, fx.run(), {true, true});
        },
        ErrorKind::kUnsupported, "never end");
    // The body gives 3 outputs; a Loop node with 1 carried value and 2 scan outputs needs 4.
    expect_error(
        [&] {
            run_host("Loop", {i64(2), boolean(true), f32({2}, {1, 1})}, attrs, 3, fx.run());
        },
        ErrorKind::kInvalidModel, "returned 3 outputs, expected 4");
    expect_error(
        [&] {
            run_host("Loop", {f32({}, {2}), boolean(true), f32({2}, {1, 1})}, attrs, 2, fx.run());
        },
        ErrorKind::kInvalidArgument, "M must be");
    RunGraphFn bad_cond = [](const ir::Graph&, const std::vector<Datum>& ins) {
        return std::vector<Datum>{f32({2}, {1, 1}), ins[2], ins[2]};
    };
    expect_error(
        [&] {
            run_host("Loop", {i64(2), boolean(true), f32({2}, {1, 1})}, attrs, 2, bad_cond);
        },
        ErrorKind::kInvalidArgument, "cond");
}

// ---- Scan (9+) ----

// Body: (s [2], x [2]) -> (s + x, s + x): running sums. Reference: naive prefix sums over the
// steps in scan order.
struct ScanFixture {
    ir::GraphAttr body = make_body({kF2, kF2}, {kF2, kF2});
    RunGraphFn run() {
        return [](const ir::Graph&, const std::vector<Datum>& ins) {
            EXPECT_EQ(ins.size(), 2u);
            Tensor s = add(ins[0].tensor(), ins[1].tensor());
            return std::vector<Datum>{s, s};
        };
    }
};

/// rows[t] of a [T, 2] row list in `order`, running-summed from init.
std::vector<std::vector<double>> prefix_sums(const std::vector<std::vector<double>>& rows, std::vector<double> init,
                                             bool reverse) {
    std::vector<std::vector<double>> out;
    for (size_t k = 0; k < rows.size(); ++k) {
        const auto& r = rows[reverse ? rows.size() - 1 - k : k];
        init[0] += r[0];
        init[1] += r[1];
        out.push_back(init);
    }
    return out;
}

TEST(HostScan, SumsAlongAxesAndDirections) {
    const std::vector<std::vector<double>> rows = {{1, 2}, {3, 4}, {5, 6}};  // T = 3 steps of [2]
    const std::vector<double> init = {0.5, -1};
    for (int in_axis : {0, 1}) {
        for (int in_dir : {0, 1}) {
            for (int out_axis : {0, 1, -1}) {
                for (int out_dir : {0, 1}) {
                    // X laid out with the step axis at in_axis: [3,2] or [2,3].
                    Tensor x(DType::kFloat32, in_axis == 0 ? Shape{3, 2} : Shape{2, 3});
                    for (int64_t t = 0; t < 3; ++t)
                        for (int64_t j = 0; j < 2; ++j) x.set_f64(in_axis == 0 ? t * 2 + j : j * 3 + t, rows[t][j]);
                    ScanFixture fx;
                    ir::AttrMap attrs{{"body", fx.body},
                                      {"num_scan_inputs", int64_t{1}},
                                      {"scan_input_axes", std::vector<int64_t>{in_axis}},
                                      {"scan_input_directions", std::vector<int64_t>{in_dir}},
                                      {"scan_output_axes", std::vector<int64_t>{out_axis}},
                                      {"scan_output_directions", std::vector<int64_t>{out_dir}}};
                    auto out = run_host("Scan", {f32({2}, init), x}, attrs, 2, fx.run());
                    auto sums = prefix_sums(rows, init, in_dir == 1);
                    EXPECT_EQ(values(out[0].tensor()), sums.back());
                    // Output step k (k-th produced, or reversed) at out_axis.
                    const bool steps_first = out_axis == 0;
                    Tensor y = out[1].tensor();
                    ASSERT_EQ(y.shape(), steps_first ? (Shape{3, 2}) : (Shape{2, 3}));
                    for (int64_t k = 0; k < 3; ++k) {
                        const auto& want = sums[static_cast<size_t>(out_dir ? 2 - k : k)];
                        for (int64_t j = 0; j < 2; ++j)
                            EXPECT_EQ(y.get_f64(steps_first ? k * 2 + j : j * 3 + k), want[j])
                                << "in_axis " << in_axis << " in_dir " << in_dir << " out_axis " << out_axis
                                << " out_dir " << out_dir;
                    }
                }
            }
        }
    }
}

TEST(HostScan, ZeroStepsAndErrors) {
    ScanFixture fx;
    ir::AttrMap attrs{{"body", fx.body}, {"num_scan_inputs", int64_t{1}}};
    auto out = run_host("Scan", {f32({2}, {1, 2}), Tensor(DType::kFloat32, {0, 2})}, attrs, 2, fx.run());
    EXPECT_EQ(values(out[0].tensor()), (std::vector<double>{1, 2}));
    EXPECT_EQ(out[1].tensor().shape(), (Shape{0, 2}));
    // Two scan inputs of different lengths.
    ir::GraphAttr body3 = make_body({kF2, kF2, kF2}, {kF2, kF2});
    ir::AttrMap attrs3{{"body", body3}, {"num_scan_inputs", int64_t{2}}};
    expect_error(
        [&] {
            run_host("Scan", {f32({2}, {0, 0}), Tensor(DType::kFloat32, {3, 2}), Tensor(DType::kFloat32, {4, 2})},
                     attrs3, 2, fx.run());
        },
        ErrorKind::kInvalidArgument, "steps");
    expect_error(
        [&] {
            run_host("Scan", {f32({2}, {0, 0}), Tensor(DType::kFloat32, {3, 2})}, attrs, 3, fx.run());
        },
        ErrorKind::kInvalidModel, "returned 2 outputs, expected 3");
    ir::AttrMap bad_axes{
        {"body", fx.body}, {"num_scan_inputs", int64_t{1}}, {"scan_input_axes", std::vector<int64_t>{0, 0}}};
    expect_error(
        [&] {
            run_host("Scan", {f32({2}, {0, 0}), Tensor(DType::kFloat32, {3, 2})}, bad_axes, 2, fx.run());
        },
        ErrorKind::kInvalidModel, "scan_input_axes");
}

// ---- Scan-8 ----

TEST(HostScan, Scan8BatchAndSequenceLens) {
    // Batch of 2, T = 3; state [B, 2], X [B, 3, 2]. The body is Scan-9's (no batch axis).
    ScanFixture fx;
    const std::vector<std::vector<std::vector<double>>> rows = {{{1, 2}, {3, 4}, {5, 6}}, {{-1, 0}, {7, 7}, {2, 9}}};
    const std::vector<std::vector<double>> init = {{0, 0}, {10, 20}};
    Tensor x(DType::kFloat32, {2, 3, 2}), s(DType::kFloat32, {2, 2});
    for (int64_t b = 0; b < 2; ++b) {
        for (int64_t j = 0; j < 2; ++j) s.set_f64(b * 2 + j, init[b][j]);
        for (int64_t t = 0; t < 3; ++t)
            for (int64_t j = 0; j < 2; ++j) x.set_f64((b * 3 + t) * 2 + j, rows[b][t][j]);
    }
    for (int dir : {0, 1}) {
        // No sequence_lens (all 3), a shorter entry, and an entry of length 0 (all padding).
        for (const std::vector<int64_t>& lens : {std::vector<int64_t>{}, {3, 1}, {0, 2}}) {
            const bool with_lens = !lens.empty();
            ir::AttrMap attrs{
                {"body", fx.body}, {"num_scan_inputs", int64_t{1}}, {"directions", std::vector<int64_t>{dir}}};
            Datum sl = with_lens ? Datum(make_tensor(DType::kInt64, {2},
                                                     {static_cast<double>(lens[0]), static_cast<double>(lens[1])}))
                                 : Datum::none();
            auto out = run_host("Scan", {sl, s, x}, attrs, 2, fx.run(), {!with_lens});
            ASSERT_EQ(out[0].tensor().shape(), (Shape{2, 2}));
            ASSERT_EQ(out[1].tensor().shape(), (Shape{2, 3, 2}));
            for (int64_t b = 0; b < 2; ++b) {
                const int64_t len = with_lens ? lens[b] : 3;
                std::vector<std::vector<double>> r(rows[b].begin(), rows[b].begin() + len);
                auto sums = prefix_sums(r, init[b], dir == 1);
                const std::vector<double> final_state = len > 0 ? sums.back() : init[b];
                for (int64_t j = 0; j < 2; ++j) EXPECT_EQ(out[0].tensor().get_f64(b * 2 + j), final_state[j]);
                for (int64_t t = 0; t < 3; ++t)
                    for (int64_t j = 0; j < 2; ++j)
                        EXPECT_EQ(out[1].tensor().get_f64((b * 3 + t) * 2 + j),
                                  t < len ? sums[static_cast<size_t>(t)][j] : 0.0)
                            << "b " << b << " t " << t << " dir " << dir << " lens " << with_lens;
            }
        }
    }
    ir::AttrMap attrs{{"body", fx.body}, {"num_scan_inputs", int64_t{1}}};
    expect_error(
        [&] {
            run_host("Scan", {make_tensor(DType::kInt64, {2}, {4, 1}), s, x}, attrs, 2, fx.run());
        },
        ErrorKind::kInvalidArgument, "sequence_lens[0]");
    expect_error(
        [&] {
            run_host("Scan", {Datum::none(), f32({3, 2}, {}), x}, attrs, 2, fx.run(), {true});
        },
        ErrorKind::kInvalidArgument, "batch");
}

// ---- SequenceMap ----

TEST(HostSequenceMap, MapsPositionsWithWholeTensorInputs) {
    // body(a_i, b_i, t) -> (a_i + b_i + t, a_i): a naive per-position loop is the reference.
    ir::GraphAttr body = make_body({kF2, kF2, kF2}, {kF2, kF2});
    RunGraphFn run = [](const ir::Graph&, const std::vector<Datum>& ins) {
        return std::vector<Datum>{add(add(ins[0].tensor(), ins[1].tensor()), ins[2].tensor()), ins[0]};
    };
    std::vector<Tensor> as = {f32({2}, {1, 2}), f32({2}, {3, 4}), f32({2}, {5, 6})};
    std::vector<Tensor> bs = {f32({2}, {10, 10}), f32({2}, {20, 20}), f32({2}, {30, 30})};
    Tensor t = f32({2}, {100, 200});
    auto out = run_host("SequenceMap", {Datum::sequence(DType::kFloat32, as), Datum::sequence(DType::kFloat32, bs), t},
                        {{"body", body}}, 2, run);
    ASSERT_EQ(out[0].items().size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
        std::vector<double> want;
        for (int64_t j = 0; j < 2; ++j) want.push_back(as[k].get_f64(j) + bs[k].get_f64(j) + t.get_f64(j));
        EXPECT_EQ(values(out[0].items()[k]), want);
        EXPECT_EQ(values(out[1].items()[k]), values(as[k]));
    }
    // An empty sequence: empty output sequences typed from the body.
    auto empty =
        run_host("SequenceMap", {Datum::sequence(DType::kFloat32, {}), Datum::sequence(DType::kFloat32, {}), t},
                 {{"body", body}}, 2, run);
    EXPECT_TRUE(empty[0].items().empty());
    EXPECT_EQ(empty[0].elem_dtype(), DType::kFloat32);
    expect_error(
        [&] {
            run_host("SequenceMap",
                     {Datum::sequence(DType::kFloat32, as), Datum::sequence(DType::kFloat32, {as[0]}), t},
                     {{"body", body}}, 2, run);
        },
        ErrorKind::kInvalidArgument, "expected 3");
}

}  // namespace
}  // namespace kiln::op::testing
