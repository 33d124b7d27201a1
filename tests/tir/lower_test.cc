// Lowering + interpreter: each kernel is lowered, interpreted on random data, and compared with
// a naive C++ loop written here (the independent reference).
#include "tir/lower.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "support/error.h"
#include "te/schedule.h"
#include "tir/interpreter.h"
#include "tir/simplify.h"

using namespace kiln;
using te::Expr;
using te::IterVar;
using te::Var;

namespace {
kiln::Tensor random_tensor(DType t, Shape shape, uint32_t seed) {
    kiln::Tensor x(t, shape);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(-2.0, 2.0);
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, u(rng));
    return x;
}
template <typename F>
void expect_error(ErrorKind kind, F&& f) {
    try {
        f();
        ADD_FAILURE() << "expected kiln::Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
    }
}
bool contains(const std::string& s, const std::string& sub) {
    return s.find(sub) != std::string::npos;
}
}  // namespace

TEST(Lower, ElementwiseAdd) {
    te::Tensor a = te::placeholder({5, 7}, DType::kFloat32, "A");
    te::Tensor b = te::placeholder({5, 7}, DType::kFloat32, "B");
    te::Tensor c = te::compute(
        {5, 7}, [&](const std::vector<Var>& i) { return te::read(a, i) + te::read(b, i); }, "C");
    te::Schedule s = te::create_schedule({c});
    s[c].parallel(s[c].axis(0));
    tir::PrimFunc f = tir::lower(s, {a, b, c}, "add");
    std::string text = tir::func_str(f);
    EXPECT_TRUE(contains(text, "for i0 in 0..5 parallel {")) << text;
    EXPECT_TRUE(contains(text, "C[i0*7 + i1] = A[i0*7 + i1] + B[i0*7 + i1]")) << text;
    ASSERT_EQ(f.params.size(), 3u);
    std::vector<kiln::Tensor> args = {random_tensor(DType::kFloat32, {5, 7}, 1),
                                      random_tensor(DType::kFloat32, {5, 7}, 2),
                                      kiln::Tensor(DType::kFloat32, {5, 7})};
    tir::interpret(f, args);
    const float* pa = args[0].data_as<float>();
    const float* pb = args[1].data_as<float>();
    for (int i = 0; i < 35; ++i) EXPECT_EQ(args[2].data_as<float>()[i], pa[i] + pb[i]);
}

TEST(Lower, Broadcast) {
    te::Tensor a = te::placeholder({4, 6}, DType::kFloat32, "A");
    te::Tensor b = te::placeholder({6}, DType::kFloat32, "B");
    te::Tensor c = te::compute(
        {4, 6},
        [&](const std::vector<Var>& i) {
            return te::read(a, i) * te::read(b, {te::ex(i[1])}) - te::float_imm(0.5);
        },
        "C");
    te::Schedule s = te::create_schedule({c});
    tir::PrimFunc f = tir::lower(s, {a, b, c}, "bcast");
    std::vector<kiln::Tensor> args = {random_tensor(DType::kFloat32, {4, 6}, 3),
                                      random_tensor(DType::kFloat32, {6}, 4),
                                      kiln::Tensor(DType::kFloat32, {4, 6})};
    tir::interpret(f, args);
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 6; ++j)
            EXPECT_EQ(args[2].data_as<float>()[i * 6 + j],
                      args[0].data_as<float>()[i * 6 + j] * args[1].data_as<float>()[j] - 0.5f);
}

TEST(Lower, MatmulSum) {
    const int M = 6, N = 5, K = 9;
    te::Tensor a = te::placeholder({M, K}, DType::kFloat32, "A");
    te::Tensor b = te::placeholder({K, N}, DType::kFloat32, "B");
    IterVar k = te::reduce_axis(K, "k");
    te::Tensor c = te::compute(
        {M, N},
        [&](const std::vector<Var>& i) {
            return te::sum(te::read(a, {te::ex(i[0]), te::ex(k->var)}) *
                               te::read(b, {te::ex(k->var), te::ex(i[1])}),
                           {k});
        },
        "C");
    te::Schedule s = te::create_schedule({c});
    tir::PrimFunc f = tir::lower(s, {a, b, c}, "matmul");
    std::string text = tir::func_str(f);
    // Init right outside the reduce loop, then the update.
    EXPECT_TRUE(contains(text, "C[i0*5 + i1] = 0.0\n")) << text;
    EXPECT_TRUE(contains(text, "C[i0*5 + i1] = C[i0*5 + i1] + A[i0*9 + k]*B[k*5 + i1]")) << text;
    std::vector<kiln::Tensor> args = {
        random_tensor(DType::kFloat32, {M, K}, 5), random_tensor(DType::kFloat32, {K, N}, 6),
        random_tensor(DType::kFloat32, {M, N}, 7)};  // garbage output must be overwritten
    tir::interpret(f, args);
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            double ref = 0;
            for (int kk = 0; kk < K; ++kk)
                ref += static_cast<double>(args[0].data_as<float>()[i * K + kk]) *
                       args[1].data_as<float>()[kk * N + j];
            EXPECT_NEAR(args[2].data_as<float>()[i * N + j], ref, 1e-4);
        }
}

TEST(Lower, MaxReduceAndIntDtype) {
    const int R = 4, C = 11;
    te::Tensor a = te::placeholder({R, C}, DType::kInt32, "A");
    IterVar r = te::reduce_axis(C, "r");
    te::Tensor m = te::compute(
        {R},
        [&](const std::vector<Var>& i) {
            return te::max_reduce(te::read(a, {te::ex(i[0]), te::ex(r->var)}), {r});
        },
        "M");
    EXPECT_EQ(m->dtype, DType::kInt32);
    te::Schedule s = te::create_schedule({m});
    tir::PrimFunc f = tir::lower(s, {a, m}, "rowmax");
    kiln::Tensor in(DType::kInt32, {R, C});
    std::mt19937 rng(9);
    for (int i = 0; i < R * C; ++i)
        in.data_as<int32_t>()[i] = static_cast<int32_t>(rng() % 2001) - 1000 - 5000 * (i < C);
    std::vector<kiln::Tensor> args = {in, kiln::Tensor(DType::kInt32, {R})};
    tir::interpret(f, args);
    for (int i = 0; i < R; ++i) {
        int32_t ref = in.data_as<int32_t>()[i * C];
        for (int j = 1; j < C; ++j) ref = std::max(ref, in.data_as<int32_t>()[i * C + j]);
        EXPECT_EQ(args[1].data_as<int32_t>()[i], ref);
    }
}

TEST(Lower, RankZeroSum) {
    te::Tensor a = te::placeholder({3, 4}, DType::kFloat64, "A");
    IterVar r0 = te::reduce_axis(3, "r0"), r1 = te::reduce_axis(4, "r1");
    te::Tensor t = te::compute(
        {},
        [&](const std::vector<Var>&) {
            return te::sum(te::read(a, {te::ex(r0->var), te::ex(r1->var)}), {r0, r1});
        },
        "T");
    te::Tensor u = te::compute(
        {},
        [&](const std::vector<Var>&) {
            return te::read(t, std::vector<Expr>{}) * te::float_imm(2.0, DType::kFloat64);
        },
        "U");
    te::Schedule s = te::create_schedule({u});
    tir::PrimFunc f = tir::lower(s, {a, u}, "total");
    std::vector<kiln::Tensor> args = {random_tensor(DType::kFloat64, {3, 4}, 11),
                                      kiln::Tensor(DType::kFloat64, {})};
    tir::interpret(f, args);
    double ref = 0;
    for (int i = 0; i < 12; ++i) ref += args[0].data_as<double>()[i];
    EXPECT_DOUBLE_EQ(args[1].data_as<double>()[0], ref * 2);
}

TEST(Lower, IntermediateAllocateAndInline) {
    te::Tensor a = te::placeholder({3, 8}, DType::kFloat32, "A");
    te::Tensor b = te::compute(
        {3, 8}, [&](const std::vector<Var>& i) { return te::read(a, i) * te::float_imm(2); }, "B");
    te::Tensor c = te::compute(
        {3, 8},
        [&](const std::vector<Var>& i) {
            return te::unary(te::UnaryOp::kExp, te::read(b, i)) + te::float_imm(1);
        },
        "C");
    te::Tensor d = te::compute(
        {8, 3},
        [&](const std::vector<Var>& i) {
            Expr v = te::read(c, {te::ex(i[1]), te::ex(i[0])});
            return v * v;
        },
        "D");
    auto reference = [](const kiln::Tensor& in, int i, int j) {
        float bb = in.data_as<float>()[j * 8 + i] * 2.0f;
        float cc = static_cast<float>(std::exp(static_cast<double>(bb))) + 1.0f;
        return cc * cc;
    };
    for (int inline_mode = 0; inline_mode < 3; ++inline_mode) {
        te::Schedule s = te::create_schedule({d});
        if (inline_mode >= 1) s[c].compute_inline();
        if (inline_mode >= 2) s[b].compute_inline();  // chain: D reads C reads B, both inlined
        tir::PrimFunc f = tir::lower(s, {a, d}, "chain");
        std::string text = tir::func_str(f);
        EXPECT_EQ(contains(text, "allocate B"), inline_mode < 2) << text;
        EXPECT_EQ(contains(text, "allocate C"), inline_mode < 1) << text;
        std::vector<kiln::Tensor> args = {random_tensor(DType::kFloat32, {3, 8}, 21),
                                          kiln::Tensor(DType::kFloat32, {8, 3})};
        tir::interpret(f, args);
        for (int i = 0; i < 8; ++i)
            for (int j = 0; j < 3; ++j)
                EXPECT_FLOAT_EQ(args[1].data_as<float>()[i * 3 + j], reference(args[0], i, j));
    }
}

TEST(Lower, ZeroSizeDims) {
    te::Tensor a = te::placeholder({0, 5}, DType::kFloat32, "A");
    te::Tensor b = te::compute(
        {0, 5}, [&](const std::vector<Var>& i) { return te::read(a, i) + te::float_imm(1); }, "B");
    IterVar r = te::reduce_axis(0, "r");
    te::Tensor c = te::compute(
        {5},
        [&](const std::vector<Var>& i) {
            return te::sum(te::read(a, {te::ex(r->var), te::ex(i[0])}), {r});
        },
        "C");
    te::Schedule s = te::create_schedule({b, c});
    s[b].split(s[b].axis(0), 4);
    tir::PrimFunc f = tir::simplify(tir::lower(s, {a, b, c}, "empty"));
    std::vector<kiln::Tensor> args = {kiln::Tensor(DType::kFloat32, {0, 5}),
                                      kiln::Tensor(DType::kFloat32, {0, 5}),
                                      random_tensor(DType::kFloat32, {5}, 1)};
    tir::interpret(f, args);
    for (int i = 0; i < 5; ++i)
        EXPECT_EQ(args[2].data_as<float>()[i], 0.0f);  // empty sum = identity
}

TEST(Lower, HalfStorage) {
    te::Tensor a = te::placeholder({9}, DType::kFloat16, "A");
    te::Tensor b = te::compute(
        {9},
        [&](const std::vector<Var>& i) {
            return te::read(a, i) * te::float_imm(3.0) + te::float_imm(0.25);
        },
        "B", DType::kFloat16);
    te::Schedule s = te::create_schedule({b});
    tir::PrimFunc f = tir::lower(s, {a, b}, "half");
    std::vector<kiln::Tensor> args = {random_tensor(DType::kFloat16, {9}, 2),
                                      kiln::Tensor(DType::kFloat16, {9})};
    tir::interpret(f, args);
    for (int i = 0; i < 9; ++i) {
        float x = half_to_float(args[0].data_as<uint16_t>()[i]);
        uint16_t ref = float_to_half(x * 3.0f + 0.25f);
        EXPECT_EQ(args[1].data_as<uint16_t>()[i], ref) << i;
    }
}

TEST(Lower, Errors) {
    te::Tensor a = te::placeholder({4}, DType::kFloat32, "A");
    te::Tensor b = te::compute(
        {4}, [&](const std::vector<Var>& i) { return te::read(a, i) + te::float_imm(1); }, "B");
    te::Schedule s = te::create_schedule({b});
    // Placeholder A missing from args.
    expect_error(ErrorKind::kInvalidArgument, [&] { tir::lower(s, {b}, "missing"); });
    tir::PrimFunc f = tir::lower(s, {a, b}, "ok");
    // Wrong dtype, wrong element count, wrong arity.
    std::vector<kiln::Tensor> bad_dtype = {kiln::Tensor(DType::kFloat64, {4}),
                                           kiln::Tensor(DType::kFloat32, {4})};
    expect_error(ErrorKind::kInvalidArgument, [&] { tir::interpret(f, bad_dtype); });
    std::vector<kiln::Tensor> bad_numel = {kiln::Tensor(DType::kFloat32, {5}),
                                           kiln::Tensor(DType::kFloat32, {4})};
    expect_error(ErrorKind::kInvalidArgument, [&] { tir::interpret(f, bad_numel); });
    std::vector<kiln::Tensor> bad_arity = {kiln::Tensor(DType::kFloat32, {4})};
    expect_error(ErrorKind::kInvalidArgument, [&] { tir::interpret(f, bad_arity); });
}

TEST(Interpreter, OutOfBoundsAndDivByZero) {
    te::Buffer buf = te::make_buffer("X", DType::kFloat32, {4});
    Var i = te::make_var("i");
    tir::PrimFunc f{"oob",
                    {buf},
                    tir::make_for(i, te::int_imm(5), te::LoopKind::kSerial,
                                  tir::make_store(buf, te::ex(i), te::float_imm(1)))};
    std::vector<kiln::Tensor> args = {kiln::Tensor(DType::kFloat32, {4})};
    expect_error(ErrorKind::kInternal, [&] { tir::interpret(f, args); });

    te::Buffer ib = te::make_buffer("Y", DType::kInt32, {3});
    Expr load = std::make_shared<te::BufferLoadNode>(DType::kInt32, ib, te::ex(i));
    tir::PrimFunc g{
        "div",
        {ib},
        tir::make_for(i, te::int_imm(3), te::LoopKind::kSerial,
                      tir::make_store(ib, te::ex(i), te::int_imm(7, DType::kInt32) / load))};
    std::vector<kiln::Tensor> gargs = {kiln::Tensor(DType::kInt32, {3})};
    expect_error(ErrorKind::kInvalidArgument, [&] { tir::interpret(g, gargs); });
}

TEST(Interpreter, ScalarSemantics) {
    // out[i] = expression i of a list, evaluated on loaded inputs, compared with C++.
    te::Buffer in_i = te::make_buffer("I", DType::kInt32, {2});
    te::Buffer in_f = te::make_buffer("F", DType::kFloat32, {2});
    te::Buffer out = te::make_buffer("O", DType::kFloat64, {12});
    auto li = [&](int k) -> Expr {
        return std::make_shared<te::BufferLoadNode>(DType::kInt32, in_i, te::int_imm(k));
    };
    auto lf = [&](int k) -> Expr {
        return std::make_shared<te::BufferLoadNode>(DType::kFloat32, in_f, te::int_imm(k));
    };
    std::vector<Expr> exprs = {li(0) / li(1),
                               te::binary(te::BinaryOp::kMod, li(0), li(1)),
                               te::floordiv(li(0), li(1)),
                               te::floormod(li(0), li(1)),
                               te::cast(DType::kInt32, lf(0)),
                               te::unary(te::UnaryOp::kRound, lf(1)),
                               te::binary(te::BinaryOp::kMod, lf(0), lf(1)),
                               te::unary(te::UnaryOp::kSigmoid, lf(0)),
                               te::cast(DType::kInt8, li(0) * te::int_imm(100, DType::kInt32)),
                               te::select(lf(0) < lf(1), lf(0), lf(1)),
                               te::unary(te::UnaryOp::kAbs, li(0)),
                               te::binary(te::BinaryOp::kPow, lf(1), te::float_imm(2))};
    std::vector<tir::Stmt> stores;
    for (size_t k = 0; k < exprs.size(); ++k)
        stores.push_back(tir::make_store(out, te::int_imm(static_cast<int64_t>(k)),
                                         te::cast(DType::kFloat64, exprs[k])));
    tir::PrimFunc f{"sem", {in_i, in_f, out}, tir::make_seq(stores)};
    kiln::Tensor ti(DType::kInt32, {2}), tf(DType::kFloat32, {2});
    ti.data_as<int32_t>()[0] = -7;
    ti.data_as<int32_t>()[1] = 2;
    tf.data_as<float>()[0] = -2.7f;
    tf.data_as<float>()[1] = 2.5f;
    std::vector<kiln::Tensor> args = {ti, tf, kiln::Tensor(DType::kFloat64, {12})};
    tir::interpret(f, args);
    const double* o = args[2].data_as<double>();
    EXPECT_EQ(o[0], -3);
    EXPECT_EQ(o[1], -1);
    EXPECT_EQ(o[2], -4);
    EXPECT_EQ(o[3], 1);
    EXPECT_EQ(o[4], -2);
    EXPECT_EQ(o[5], 2);
    EXPECT_EQ(o[6], static_cast<double>(std::fmod(-2.7f, 2.5f)));
    EXPECT_NEAR(o[7], 1.0 / (1.0 + std::exp(2.7)), 1e-6);
    EXPECT_EQ(o[8], static_cast<double>(static_cast<int8_t>(-700)));
    EXPECT_EQ(o[9], static_cast<double>(-2.7f));
    EXPECT_EQ(o[10], 7);
    EXPECT_EQ(o[11], 6.25);
}

TEST(Lower, HalfReductionAccumulatesInFloat) {
    const int R = 3, C = 500;
    te::Tensor a = te::placeholder({R, C}, DType::kFloat16, "A");
    IterVar r = te::reduce_axis(C, "r");
    te::Tensor s = te::compute(
        {R},
        [&](const std::vector<Var>& i) {
            return te::sum(te::read(a, {te::ex(i[0]), te::ex(r->var)}), {r});
        },
        "S", DType::kFloat16);
    te::Schedule sch = te::create_schedule({s});
    tir::PrimFunc f = tir::lower(sch, {a, s}, "hsum");
    EXPECT_TRUE(contains(tir::func_str(f), "allocate S_acc: f32[3]")) << tir::func_str(f);
    std::vector<kiln::Tensor> args = {random_tensor(DType::kFloat16, {R, C}, 5),
                                      kiln::Tensor(DType::kFloat16, {R})};
    tir::interpret(f, args);
    for (int i = 0; i < R; ++i) {
        float acc = 0;  // f32 accumulation, one narrowing at the end
        for (int j = 0; j < C; ++j) acc += half_to_float(args[0].data_as<uint16_t>()[i * C + j]);
        EXPECT_EQ(args[1].data_as<uint16_t>()[i], float_to_half(acc)) << i;
    }
}
