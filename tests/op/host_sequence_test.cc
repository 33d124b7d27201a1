// Host kernels of the sequence ops (SequenceConstruct/Empty/At/Insert/Erase/Length,
// SplitToSequence, ConcatFromSequence), the optional ops (Optional, OptionalHasElement,
// OptionalGetElement) and Identity on sequences/optionals, against the Python-list and numpy
// semantics the ONNX operator docs define them by (list.insert / pop with negative positions,
// numpy.split, numpy.concatenate / numpy.stack), written out as naive loops below; plus the
// error cases.
#include <gtest/gtest.h>

#include "host_test_util.h"
#include "support/error.h"

namespace kiln::op::testing {
namespace {

std::vector<double> values(const Tensor& t) {
    std::vector<double> v;
    for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get_f64(i));
    return v;
}

Tensor iota(DType dt, Shape s, double start = 0) {
    Tensor t(dt, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, start + static_cast<double>(i));
    return t;
}

Tensor i64(int64_t v) { return make_tensor(DType::kInt64, {}, {static_cast<double>(v)}); }

Datum seq_of(const std::vector<Tensor>& items, DType dt = DType::kFloat32) { return Datum::sequence(dt, items); }

// Three distinguishable tensors: a = [0,1], b = [10,11,12], c = [20].
std::vector<Tensor> abc() {
    return {iota(DType::kFloat32, {2}, 0), iota(DType::kFloat32, {3}, 10), iota(DType::kFloat32, {1}, 20)};
}

// ---- SequenceConstruct / SequenceEmpty / SequenceLength ----

TEST(HostSequence, ConstructKeepsOrderAndDtype) {
    auto in = abc();
    auto out = run_host("SequenceConstruct", {in[0], in[1], in[2]});
    ASSERT_TRUE(out[0].is_sequence());
    ASSERT_EQ(out[0].items().size(), 3u);
    EXPECT_EQ(out[0].elem_dtype(), DType::kFloat32);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(values(out[0].items()[i]), values(in[i]));
    auto len = run_host("SequenceLength", {out[0]});
    EXPECT_EQ(len[0].tensor().dtype(), DType::kInt64);
    EXPECT_EQ(len[0].tensor().shape(), Shape{});
    EXPECT_EQ(len[0].tensor().get_i64(0), 3);
}

TEST(HostSequence, ConstructRejectsMixedDtypes) {
    expect_error(
        [] {
            run_host("SequenceConstruct", {iota(DType::kFloat32, {2}), iota(DType::kInt64, {2})});
        },
        ErrorKind::kInvalidArgument, "dtype");
}

TEST(HostSequence, EmptyDefaultsToFloatAndTakesDtype) {
    auto f = run_host("SequenceEmpty", {});
    ASSERT_TRUE(f[0].is_sequence());
    EXPECT_TRUE(f[0].items().empty());
    EXPECT_EQ(f[0].elem_dtype(), DType::kFloat32);
    auto l = run_host("SequenceEmpty", {}, {{"dtype", int64_t{7}}});  // TensorProto.INT64
    EXPECT_EQ(l[0].elem_dtype(), DType::kInt64);
    EXPECT_EQ(run_host("SequenceLength", {l[0]})[0].tensor().get_i64(0), 0);
}

// ---- SequenceAt ----

TEST(HostSequence, AtTakesPythonIndices) {
    auto in = abc();
    Datum s = seq_of(in);
    // Python: [a, b, c][i] for i in -3..2.
    for (int64_t i = -3; i < 3; ++i) {
        auto out = run_host("SequenceAt", {s, i64(i)});
        EXPECT_EQ(values(out[0].tensor()), values(in[static_cast<size_t>(i < 0 ? i + 3 : i)])) << "i=" << i;
    }
    auto out32 = run_host("SequenceAt", {s, make_tensor(DType::kInt32, {}, {1})});
    EXPECT_EQ(values(out32[0].tensor()), values(in[1]));
}

TEST(HostSequence, AtOutOfRangeIsAnError) {
    Datum s = seq_of(abc());
    expect_error([&] { run_host("SequenceAt", {s, i64(3)}); }, ErrorKind::kInvalidArgument, "[-3, 2]");
    expect_error([&] { run_host("SequenceAt", {s, i64(-4)}); }, ErrorKind::kInvalidArgument, "-4");
    expect_error([&] { run_host("SequenceAt", {seq_of({}), i64(0)}); }, ErrorKind::kInvalidArgument, "out of range");
    expect_error(
        [&] {
            run_host("SequenceAt", {s, make_tensor(DType::kFloat32, {}, {0})});
        },
        ErrorKind::kInvalidArgument, "int32 or int64");
}

// ---- SequenceInsert / SequenceErase ----

TEST(HostSequence, InsertLikeListInsert) {
    auto in = abc();
    Tensor x = iota(DType::kFloat32, {2}, 100);
    // Python list.insert(pos, x) on [a, b, c] for pos in [-3, 3]; absent position appends.
    struct Case {
        bool has_pos;
        int64_t pos;
        std::vector<int> order;  // indices into {a, b, c, x=3}
    };
    std::vector<Case> cases = {{false, 0, {0, 1, 2, 3}}, {true, 0, {3, 0, 1, 2}},  {true, 3, {0, 1, 2, 3}},
                               {true, 1, {0, 3, 1, 2}},  {true, -1, {0, 1, 3, 2}}, {true, -3, {3, 0, 1, 2}}};
    std::vector<Tensor> all = {in[0], in[1], in[2], x};
    for (const Case& c : cases) {
        std::vector<Datum> ins = {seq_of(in), x};
        if (c.has_pos) ins.push_back(i64(c.pos));
        auto out = run_host("SequenceInsert", ins);
        ASSERT_EQ(out[0].items().size(), 4u);
        for (size_t k = 0; k < 4; ++k)
            EXPECT_EQ(values(out[0].items()[k]), values(all[static_cast<size_t>(c.order[k])])) << "pos " << c.pos;
    }
}

TEST(HostSequence, InsertErrors) {
    Datum s = seq_of(abc());
    expect_error(
        [&] {
            run_host("SequenceInsert", {s, iota(DType::kFloat32, {1}), i64(4)});
        },
        ErrorKind::kInvalidArgument, "[-3, 3]");
    expect_error(
        [&] {
            run_host("SequenceInsert", {s, iota(DType::kInt32, {1})});
        },
        ErrorKind::kInvalidArgument, "i32");
}

TEST(HostSequence, EraseLikeListPop) {
    auto in = abc();
    // [a, b, c].pop(pos); absent position pops the last.
    auto last = run_host("SequenceErase", {seq_of(in)});
    ASSERT_EQ(last[0].items().size(), 2u);
    EXPECT_EQ(values(last[0].items()[1]), values(in[1]));
    auto first = run_host("SequenceErase", {seq_of(in), i64(0)});
    EXPECT_EQ(values(first[0].items()[0]), values(in[1]));
    EXPECT_EQ(values(first[0].items()[1]), values(in[2]));
    auto neg = run_host("SequenceErase", {seq_of(in), i64(-2)});
    EXPECT_EQ(values(neg[0].items()[0]), values(in[0]));
    EXPECT_EQ(values(neg[0].items()[1]), values(in[2]));
    expect_error([&] { run_host("SequenceErase", {seq_of(in), i64(3)}); }, ErrorKind::kInvalidArgument, "[-3, 2]");
    expect_error([&] { run_host("SequenceErase", {seq_of({})}); }, ErrorKind::kInvalidArgument, "empty");
    expect_error([&] { run_host("SequenceErase", {in[0]}); }, ErrorKind::kInvalidArgument, "expected a sequence");
}

// ---- SplitToSequence ----

/// numpy: x[:, start:start+len] of a row-major [rows, cols] tensor (naive).
std::vector<double> cols_of(const Tensor& x, int64_t start, int64_t len) {
    std::vector<double> v;
    const int64_t rows = x.shape()[0], cols = x.shape()[1];
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = start; c < start + len; ++c) v.push_back(x.get_f64(r * cols + c));
    return v;
}

TEST(HostSequence, SplitToSequenceNoSplit) {
    Tensor x = iota(DType::kFloat32, {3, 4});
    auto keep = run_host("SplitToSequence", {x}, {{"axis", int64_t{1}}});
    ASSERT_EQ(keep[0].items().size(), 4u);
    for (int64_t c = 0; c < 4; ++c) {
        EXPECT_EQ(keep[0].items()[c].shape(), (Shape{3, 1}));
        EXPECT_EQ(values(keep[0].items()[c]), cols_of(x, c, 1));
    }
    auto drop = run_host("SplitToSequence", {x}, {{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}});
    ASSERT_EQ(drop[0].items().size(), 4u);
    EXPECT_EQ(drop[0].items()[2].shape(), (Shape{3}));
    EXPECT_EQ(values(drop[0].items()[2]), cols_of(x, 2, 1));
}

TEST(HostSequence, SplitToSequenceScalarAndListSplit) {
    Tensor x = iota(DType::kInt64, {3, 4});
    // scalar 3 along axis 1: numpy.array_split-like chunks [0:3], [3:4]; keepdims is ignored.
    auto sc = run_host("SplitToSequence", {x, i64(3)}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}});
    ASSERT_EQ(sc[0].items().size(), 2u);
    EXPECT_EQ(sc[0].elem_dtype(), DType::kInt64);
    EXPECT_EQ(sc[0].items()[0].shape(), (Shape{3, 3}));
    EXPECT_EQ(values(sc[0].items()[0]), cols_of(x, 0, 3));
    EXPECT_EQ(values(sc[0].items()[1]), cols_of(x, 3, 1));
    // [1, 0, 3] along axis 1 (a zero-length chunk included).
    auto ls = run_host("SplitToSequence", {x, make_tensor(DType::kInt32, {3}, {1, 0, 3})}, {{"axis", int64_t{1}}});
    ASSERT_EQ(ls[0].items().size(), 3u);
    EXPECT_EQ(ls[0].items()[1].shape(), (Shape{3, 0}));
    EXPECT_EQ(values(ls[0].items()[2]), cols_of(x, 1, 3));
    // axis 0 [2, 1]: rows.
    auto rows = run_host("SplitToSequence", {x, make_tensor(DType::kInt64, {2}, {2, 1})});
    EXPECT_EQ(values(rows[0].items()[1]), (std::vector<double>{8, 9, 10, 11}));
}

TEST(HostSequence, SplitToSequenceStrings) {
    Tensor x = make_strings({3}, {"a", "bb", "c"});
    auto out = run_host("SplitToSequence", {x, make_tensor(DType::kInt64, {2}, {2, 1})});
    ASSERT_EQ(out[0].items().size(), 2u);
    EXPECT_EQ(out[0].elem_dtype(), DType::kString);
    EXPECT_EQ(out[0].items()[0].data_as<std::string>()[1], "bb");
    EXPECT_EQ(out[0].items()[1].data_as<std::string>()[0], "c");
}

TEST(HostSequence, SplitToSequenceErrors) {
    Tensor x = iota(DType::kFloat32, {3, 4});
    expect_error(
        [&] {
            run_host("SplitToSequence", {x, make_tensor(DType::kInt64, {2}, {1, 1})});
        },
        ErrorKind::kInvalidArgument, "sum to 2");
    expect_error([&] { run_host("SplitToSequence", {x, i64(0)}); }, ErrorKind::kInvalidArgument, "> 0");
    expect_error(
        [&] {
            run_host("SplitToSequence", {x, make_tensor(DType::kInt64, {1, 1}, {3})});
        },
        ErrorKind::kInvalidArgument, "scalar or 1-D");
    EXPECT_THROW(run_host("SplitToSequence", {x}, {{"axis", int64_t{2}}}), Error);
}

// ---- ConcatFromSequence ----

TEST(HostSequence, ConcatFromSequenceLikeNumpyConcatenate) {
    // [[0,1],[2,3]] (2x2) and [[10,11,12],[13,14,15]] (2x3) along axis 1 -> 2x5.
    Tensor a = iota(DType::kFloat32, {2, 2}), b = iota(DType::kFloat32, {2, 3}, 10);
    auto out = run_host("ConcatFromSequence", {seq_of({a, b})}, {{"axis", int64_t{-1}}});
    EXPECT_EQ(out[0].tensor().shape(), (Shape{2, 5}));
    std::vector<double> want;
    for (int64_t r = 0; r < 2; ++r) {
        for (int64_t c = 0; c < 2; ++c) want.push_back(a.get_f64(r * 2 + c));
        for (int64_t c = 0; c < 3; ++c) want.push_back(b.get_f64(r * 3 + c));
    }
    EXPECT_EQ(values(out[0].tensor()), want);
}

TEST(HostSequence, ConcatFromSequenceNewAxisLikeNumpyStack) {
    // numpy.stack([x0, x1, x2], axis=1) of [2] vectors -> [2, 3], out[i][k] = xk[i]; axis -1 too.
    std::vector<Tensor> xs = {iota(DType::kInt32, {2}, 0), iota(DType::kInt32, {2}, 5), iota(DType::kInt32, {2}, 9)};
    for (int64_t axis : {1, -1}) {
        auto out =
            run_host("ConcatFromSequence", {seq_of(xs, DType::kInt32)}, {{"axis", axis}, {"new_axis", int64_t{1}}});
        EXPECT_EQ(out[0].tensor().shape(), (Shape{2, 3}));
        std::vector<double> want;
        for (int64_t i = 0; i < 2; ++i)
            for (size_t k = 0; k < 3; ++k) want.push_back(xs[k].get_f64(i));
        EXPECT_EQ(values(out[0].tensor()), want);
    }
    auto front =
        run_host("ConcatFromSequence", {seq_of(xs, DType::kInt32)}, {{"axis", int64_t{0}}, {"new_axis", int64_t{1}}});
    EXPECT_EQ(front[0].tensor().shape(), (Shape{3, 2}));
    EXPECT_EQ(values(front[0].tensor()), (std::vector<double>{0, 1, 5, 6, 9, 10}));
}

TEST(HostSequence, ConcatFromSequenceErrors) {
    expect_error(
        [] {
            run_host("ConcatFromSequence", {seq_of({})}, {{"axis", int64_t{0}}});
        },
        ErrorKind::kInvalidArgument, "empty");
    Datum s = seq_of({iota(DType::kFloat32, {2, 2}), iota(DType::kFloat32, {3, 3})});
    expect_error(
        [&] {
            run_host("ConcatFromSequence", {s}, {{"axis", int64_t{0}}});
        },
        ErrorKind::kInvalidArgument, "[3,3]");
    EXPECT_THROW(run_host("ConcatFromSequence", {s}, {{"axis", int64_t{2}}}), Error);
    EXPECT_THROW(run_host("ConcatFromSequence", {s}), Error);  // axis is required
}

// ---- Optional ops and Identity ----

TEST(HostOptional, OptionalWrapsOrIsEmpty) {
    Tensor x = iota(DType::kFloat32, {2});
    auto some = run_host("Optional", {x});
    ASSERT_TRUE(some[0].is_tensor());
    EXPECT_EQ(values(some[0].tensor()), values(x));
    auto none = run_host("Optional", {}, {{"type", std::string("f32")}});
    EXPECT_TRUE(none[0].is_none());
    auto seq = run_host("Optional", {seq_of(abc())});
    EXPECT_TRUE(seq[0].is_sequence());
}

TEST(HostOptional, HasElement) {
    auto b = [](const std::vector<Datum>& out) {
        EXPECT_EQ(out[0].tensor().dtype(), DType::kBool);
        EXPECT_EQ(out[0].tensor().shape(), Shape{});
        return out[0].tensor().get_i64(0) != 0;
    };
    EXPECT_TRUE(b(run_host("OptionalHasElement", {iota(DType::kFloat32, {0})})));  // an empty tensor is present
    EXPECT_TRUE(b(run_host("OptionalHasElement", {seq_of({})})));
    EXPECT_FALSE(b(run_host("OptionalHasElement", {Datum::none()})));
    EXPECT_FALSE(b(run_host("OptionalHasElement", {})));
    EXPECT_FALSE(b(run_host("OptionalHasElement", {Datum::none()}, {}, 1, {}, {true})));
}

TEST(HostOptional, GetElement) {
    Tensor x = iota(DType::kInt64, {3});
    EXPECT_EQ(values(run_host("OptionalGetElement", {x})[0].tensor()), values(x));
    auto s = run_host("OptionalGetElement", {seq_of(abc())});
    EXPECT_EQ(s[0].items().size(), 3u);
    expect_error([] { run_host("OptionalGetElement", {Datum::none()}); }, ErrorKind::kInvalidArgument, "empty");
}

TEST(HostOptional, IdentityPassesAnyDatum) {
    auto s = run_host("Identity", {seq_of(abc())});
    ASSERT_TRUE(s[0].is_sequence());
    EXPECT_EQ(values(s[0].items()[1]), values(abc()[1]));
    EXPECT_TRUE(run_host("Identity", {Datum::none()})[0].is_none());
    EXPECT_EQ(values(run_host("Identity", {iota(DType::kFloat32, {2})})[0].tensor()), (std::vector<double>{0, 1}));
}

TEST(HostOptional, InferKinds) {
    // infer: Optional(tensor) is an optional tensor, OptionalGetElement unwraps, SequenceAt gives
    // the element type.
    ir::Graph g;
    ir::TensorType seq_t(DType::kInt32, {2});
    seq_t.kind = ir::TypeKind::kSequence;
    ir::Value* s = g.add_input("s", seq_t);
    ir::Value* p = g.add_input("p", ir::TensorType(DType::kInt64, {}));
    ir::Node* at = g.add_node("SequenceAt", {s, p}, {}, {ir::TensorType()}, {}, "n0");
    infer_node(*at);
    EXPECT_EQ(at->output(0)->type(), ir::TensorType(DType::kInt32, {2}));
    ir::Node* opt = g.add_node("Optional", {at->output(0)}, {}, {ir::TensorType()}, {}, "n1");
    infer_node(*opt);
    EXPECT_EQ(opt->output(0)->type().kind, ir::TypeKind::kOptionalTensor);
    ir::Node* get = g.add_node("OptionalGetElement", {opt->output(0)}, {}, {ir::TensorType()}, {}, "n2");
    infer_node(*get);
    EXPECT_EQ(get->output(0)->type(), ir::TensorType(DType::kInt32, {2}));
    ir::Node* split = g.add_node("SplitToSequence", {get->output(0)}, {{"axis", int64_t{0}}, {"keepdims", int64_t{0}}},
                                 {ir::TensorType()}, {}, "n3");
    infer_node(*split);
    EXPECT_EQ(split->output(0)->type().kind, ir::TypeKind::kSequence);
    EXPECT_EQ(split->output(0)->type().rank(), 0);
}

}  // namespace
}  // namespace kiln::op::testing
