// The C emitter: hand-built tir kernels compiled with the system compiler and compared with
// naive C++ loops written here and with the tir interpreter.
#include "codegen/c_emitter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "kernel_test_util.h"
#include "te/dims.h"
#include "tir/interpreter.h"

namespace kiln::codegen {
namespace {

using namespace kiln::codegen::testing;
using te::BinaryOp;
using te::Expr;
using te::LoopKind;
using te::UnaryOp;
using tir::PrimFunc;

Expr load(const te::Buffer& b, Expr idx) {
    return std::make_shared<te::BufferLoadNode>(te::compute_dtype(b->dtype), b, std::move(idx));
}
Expr bin(BinaryOp op, Expr a, Expr b) {
    DType t = (op >= BinaryOp::kEQ && op <= BinaryOp::kOr) ? DType::kBool : a->dtype;
    return std::make_shared<te::BinaryNode>(t, op, std::move(a), std::move(b));
}
Expr un(UnaryOp op, Expr a) {
    DType t = (op == UnaryOp::kNot || op == UnaryOp::kIsNaN) ? DType::kBool : a->dtype;
    return std::make_shared<te::UnaryNode>(t, op, std::move(a));
}
Expr cast_to(DType t, Expr a) { return std::make_shared<te::CastNode>(t, std::move(a)); }
Expr i64(int64_t v) { return std::make_shared<te::IntImmNode>(DType::kInt64, v); }

/// out[i] = body(i) over a 1-d loop of `n` with the given loop kind.
PrimFunc map_func(const std::string& name, std::vector<te::Buffer> params, int64_t n,
                  const std::function<Expr(Expr)>& body, LoopKind kind = LoopKind::kSerial) {
    te::Var i = te::make_var("i");
    const te::Buffer& out = params.back();
    PrimFunc f{name, params, tir::make_for(i, i64(n), kind, tir::make_store(out, i, body(i)))};
    return f;
}

std::vector<double> interesting_floats() {
    return {0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.5, 2.5, 1e-3, -7.25, 100.0, 1e20, -1e20, 88.0, -90.0, 0.1,
            std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(), NAN, 1e-40,
            65504.0, 300.7, 255.9, -128.5, 3e9, -3e9, 1.5e19, 2.0e19};
}

TEST(CEmitter, VectorizedAddMatchesNaiveLoop) {
    auto A = te::make_buffer("A", DType::kFloat32, {1000});
    auto B = te::make_buffer("B", DType::kFloat32, {1000});
    auto C = te::make_buffer("C", DType::kFloat32, {1000});
    PrimFunc f = map_func("vadd", {A, B, C}, 1000, [&](Expr i) { return bin(BinaryOp::kAdd, load(A, i), load(B, i)); },
                          LoopKind::kVectorized);
    std::string src = emit_c(f);
    EXPECT_NE(src.find("#pragma GCC ivdep"), std::string::npos) << src;
    EXPECT_NE(src.find("float* restrict A = (float*)args[0];"), std::string::npos) << src;
    EXPECT_NE(src.find("int32_t vadd(void* const* args, const kiln_kernel_env* env)"), std::string::npos);
    LoadedKernel k = compile_func(f);
    auto args = make_args(f, [](size_t p, int64_t i) { return p == 0 ? i * 0.5 : p == 1 ? 3.0 - i : 0.0; });
    ASSERT_EQ(k.run(args), 0);
    for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(args[2].data_as<float>()[i], float(i * 0.5f + (3.0f - i)));
}

TEST(CEmitter, EmittedAbiMatchesRuntimeHeader) {
    std::ifstream in(std::string(KILN_SOURCE_DIR) + "/src/runtime/kernel_abi.h");
    ASSERT_TRUE(in.good());
    std::stringstream ss;
    ss << in.rdbuf();
    std::string header = ss.str();
    auto A = te::make_buffer("A", DType::kFloat32, {1});
    std::string src = emit_c(map_func("k", {A}, 1, [](Expr) { return std::make_shared<te::FloatImmNode>(DType::kFloat32, 1.0); }));
    // The dims part of the ABI (kiln_kernel_dims_fn) is printed for kernels with symbolic dims only.
    EXPECT_EQ(src.find("kiln_kernel_dims_fn"), std::string::npos);
    te::Var n = te::make_dim("n");
    PrimFunc fd = map_func("kd", {te::make_sym_buffer("B", DType::kFloat32, {n})}, 1,
                           [](Expr) { return std::make_shared<te::FloatImmNode>(DType::kFloat32, 1.0); });
    fd.dims = {n};
    src += emit_c(fd);
    // Every typedef line of the runtime header appears verbatim in the generated sources.
    std::istringstream lines(header);
    int checked = 0;
    for (std::string line; std::getline(lines, line);) {
        if (line.find("typedef") != std::string::npos || line.find("parallel_for)(") != std::string::npos ||
            line.find("#ifndef KILN_RUNTIME_KERNEL_ABI_H_") != std::string::npos) {
            EXPECT_NE(src.find(line), std::string::npos) << "missing: " << line;
            ++checked;
        }
    }
    EXPECT_GE(checked, 5);
}

// Unary float intrinsics vs the interpreter (and libm written here).
class FloatUnary : public ::testing::TestWithParam<DType> {};

TEST_P(FloatUnary, MatchesInterpreterAndLibm) {
    DType t = GetParam();
    std::vector<double> xs = interesting_floats();
    int64_t n = static_cast<int64_t>(xs.size());
    const UnaryOp ops[] = {UnaryOp::kNeg, UnaryOp::kAbs,   UnaryOp::kExp,     UnaryOp::kLog,  UnaryOp::kSqrt,
                           UnaryOp::kTanh, UnaryOp::kSigmoid, UnaryOp::kErf, UnaryOp::kFloor, UnaryOp::kCeil,
                           UnaryOp::kRound, UnaryOp::kSin, UnaryOp::kCos, UnaryOp::kTan, UnaryOp::kAsin,
                           UnaryOp::kAcos, UnaryOp::kAtan, UnaryOp::kSinh, UnaryOp::kCosh, UnaryOp::kAsinh,
                           UnaryOp::kAcosh, UnaryOp::kAtanh, UnaryOp::kLog1p};
    for (UnaryOp op : ops) {
        auto X = te::make_buffer("X", t, {n});
        auto Y = te::make_buffer("Y", t, {n});
        PrimFunc f = map_func("unary", {X, Y}, n, [&](Expr i) { return un(op, load(X, i)); });
        LoadedKernel k = compile_func(f);
        auto args = make_args(f, [&](size_t p, int64_t i) { return p == 0 ? xs[i] : 0.0; });
        auto ref = clone_all(args);
        ASSERT_EQ(k.run(args), 0);
        tir::interpret(f, ref);
        bool exact = op == UnaryOp::kNeg || op == UnaryOp::kAbs || op == UnaryOp::kSqrt || op == UnaryOp::kFloor ||
                     op == UnaryOp::kCeil || op == UnaryOp::kRound;
        double rtol = exact ? 0 : (t == DType::kFloat32 ? 4e-7 : 1e-15);
        EXPECT_TRUE(all_close(args[1], ref[1], rtol, 1e-45)) << te::unary_op_name(op) << "\n" << k.source;
        // Independent spot checks with libm in double.
        for (int64_t i = 0; i < n; ++i) {
            double x = args[0].get_f64(i), y = args[1].get_f64(i), want = 0;
            switch (op) {
                case UnaryOp::kNeg: want = -x; break;
                case UnaryOp::kAbs: want = std::fabs(x); break;
                case UnaryOp::kExp: want = std::exp(x); break;
                case UnaryOp::kLog: want = std::log(x); break;
                case UnaryOp::kSqrt: want = std::sqrt(x); break;
                case UnaryOp::kTanh: want = std::tanh(x); break;
                case UnaryOp::kSigmoid: want = 1.0 / (1.0 + std::exp(-x)); break;
                case UnaryOp::kErf: want = std::erf(x); break;
                case UnaryOp::kFloor: want = std::floor(x); break;
                case UnaryOp::kCeil: want = std::ceil(x); break;
                case UnaryOp::kRound: want = std::nearbyint(x); break;
                case UnaryOp::kSin: want = std::sin(x); break;
                case UnaryOp::kCos: want = std::cos(x); break;
                case UnaryOp::kTan: want = std::tan(x); break;
                case UnaryOp::kAsin: want = std::asin(x); break;
                case UnaryOp::kAcos: want = std::acos(x); break;
                case UnaryOp::kAtan: want = std::atan(x); break;
                case UnaryOp::kSinh: want = std::sinh(x); break;
                case UnaryOp::kCosh: want = std::cosh(x); break;
                case UnaryOp::kAsinh: want = std::asinh(x); break;
                case UnaryOp::kAcosh: want = std::acosh(x); break;
                case UnaryOp::kAtanh: want = std::atanh(x); break;
                case UnaryOp::kLog1p: want = std::log1p(x); break;
                default: break;
            }
            if (t == DType::kFloat32) want = static_cast<float>(want);
            if (std::isnan(want)) {
                EXPECT_TRUE(std::isnan(y)) << te::unary_op_name(op) << "(" << x << ")";
            } else if (y == want) {
                continue;
            } else if (!(std::fabs(x) > 1e15 && (op == UnaryOp::kSin || op == UnaryOp::kCos || op == UnaryOp::kTan))) {
                EXPECT_NEAR(y, want, std::fabs(want) * 1e-6 + 1e-30) << te::unary_op_name(op) << "(" << x << ")";
            }
        }
    }
}
INSTANTIATE_TEST_SUITE_P(Types, FloatUnary, ::testing::Values(DType::kFloat32, DType::kFloat64));

TEST(CEmitter, FloatBinaryOpsMatchInterpreter) {
    std::vector<double> xs = interesting_floats();
    int64_t n = static_cast<int64_t>(xs.size());
    for (DType t : {DType::kFloat32, DType::kFloat64}) {
        const BinaryOp ops[] = {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv, BinaryOp::kMod,
                                BinaryOp::kMin, BinaryOp::kMax, BinaryOp::kPow, BinaryOp::kEQ,  BinaryOp::kNE,
                                BinaryOp::kLT,  BinaryOp::kLE,  BinaryOp::kGT,  BinaryOp::kGE};
        for (BinaryOp op : ops) {
            bool cmp = op >= BinaryOp::kEQ;
            auto X = te::make_buffer("X", t, {n, n});
            auto Y = te::make_buffer("Y", t, {n, n});
            auto Z = te::make_buffer("Z", cmp ? DType::kBool : t, {n, n});
            PrimFunc f = map_func("binop", {X, Y, Z}, n * n, [&](Expr i) { return bin(op, load(X, i), load(Y, i)); });
            LoadedKernel k = compile_func(f);
            auto args = make_args(f, [&](size_t p, int64_t i) { return p == 0 ? xs[i / n] : p == 1 ? xs[i % n] : 0.0; });
            auto ref = clone_all(args);
            ASSERT_EQ(k.run(args), 0);
            tir::interpret(f, ref);
            double rtol = op == BinaryOp::kPow ? (t == DType::kFloat32 ? 4e-7 : 1e-15) : 0;
            EXPECT_TRUE(all_close(args[2], ref[2], rtol, 0)) << dtype_name(t) << " " << te::binary_op_name(op);
        }
    }
}

TEST(CEmitter, IntegerOpsMatchInterpreterAndNaiveFloorDiv) {
    std::vector<int64_t> xs = {0, 1, -1, 7, -7, 3, -3, 100, -100, 127, -128, 255, 1 << 20, -(1 << 20),
                               std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
    std::vector<int64_t> ds = {1, -1, 2, -2, 3, -3, 7, -7, 64, 1000};  // no zero: the interpreter rejects it
    int64_t n = xs.size() * ds.size();
    for (DType t : {DType::kInt64, DType::kInt32, DType::kInt8, DType::kUInt8, DType::kInt16, DType::kUInt32,
                    DType::kUInt64}) {
        for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv, BinaryOp::kMod,
                            BinaryOp::kFloorDiv, BinaryOp::kFloorMod, BinaryOp::kMin, BinaryOp::kMax, BinaryOp::kPow,
                            BinaryOp::kLT, BinaryOp::kGE, BinaryOp::kBitAnd, BinaryOp::kBitOr, BinaryOp::kBitXor,
                            BinaryOp::kShl, BinaryOp::kShr}) {
            bool cmp = op == BinaryOp::kLT || op == BinaryOp::kGE;
            auto X = te::make_buffer("X", t, {n});
            auto Y = te::make_buffer("Y", t, {n});
            auto Z = te::make_buffer("Z", cmp ? DType::kBool : t, {n});
            PrimFunc f = map_func("intop", {X, Y, Z}, n, [&](Expr i) { return bin(op, load(X, i), load(Y, i)); });
            LoadedKernel k = compile_func(f);
            std::vector<Tensor> args;
            for (size_t p = 0; p < 3; ++p) args.emplace_back(f.params[p]->dtype, f.params[p]->shape);
            for (int64_t i = 0; i < n; ++i) {
                args[0].set_i64(i, te::wrap_int(t, xs[i / ds.size()]));
                int64_t d = te::wrap_int(t, ds[i % ds.size()]);
                args[1].set_i64(i, d == 0 ? 1 : d);
            }
            auto ref = clone_all(args);
            ASSERT_EQ(k.run(args), 0);
            tir::interpret(f, ref);
            EXPECT_TRUE(bits_equal(args[2], ref[2])) << dtype_name(t) << " " << te::binary_op_name(op);
        }
    }
    // Naive floor division reference for i64.
    auto X = te::make_buffer("X", DType::kInt64, {4});
    auto Y = te::make_buffer("Y", DType::kInt64, {4});
    auto Q = te::make_buffer("Q", DType::kInt64, {4});
    PrimFunc f{"fdiv", {X, Y, Q}, nullptr};
    te::Var i = te::make_var("i");
    f.body = tir::make_for(i, i64(4), LoopKind::kSerial,
                           tir::make_store(Q, i, bin(BinaryOp::kAdd, bin(BinaryOp::kMul, bin(BinaryOp::kFloorDiv, load(X, i), load(Y, i)), i64(1000)),
                                                     bin(BinaryOp::kFloorMod, load(X, i), load(Y, i)))));
    LoadedKernel k = compile_func(f);
    std::vector<Tensor> args = {Tensor(DType::kInt64, {4}), Tensor(DType::kInt64, {4}), Tensor(DType::kInt64, {4})};
    int64_t a[] = {7, -7, 7, -7}, b[] = {2, 2, -2, -2};
    for (int j = 0; j < 4; ++j) args[0].set_i64(j, a[j]), args[1].set_i64(j, b[j]);
    ASSERT_EQ(k.run(args), 0);
    // floor(7/2)=3 r1; floor(-7/2)=-4 r1; floor(7/-2)=-4 r-1; floor(-7/-2)=3 r-1.
    int64_t want[] = {3 * 1000 + 1, -4 * 1000 + 1, -4 * 1000 - 1, 3 * 1000 - 1};
    for (int j = 0; j < 4; ++j) EXPECT_EQ(args[2].get_i64(j), want[j]) << j;
}

// Bitwise ops, shifts (counts past the width included) and IsNaN against naive C++ written here.
TEST(CEmitter, BitwiseShiftAndIsNaNMatchNaive) {
    const std::vector<uint64_t> xs = {0, 1, 0x80, 0xff, 0x1234, 0xdeadbeefcafef00dULL, ~0ULL};
    const std::vector<uint64_t> ns = {0, 1, 3, 7, 8, 15, 31, 63, 64, 200};
    const int64_t n = static_cast<int64_t>(xs.size() * ns.size());
    for (DType t : {DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64, DType::kInt8, DType::kInt32}) {
        const int bits = static_cast<int>(dtype_size(t)) * 8;
        const uint64_t mask = bits == 64 ? ~0ULL : (1ULL << bits) - 1;
        for (BinaryOp op : {BinaryOp::kShl, BinaryOp::kShr, BinaryOp::kBitAnd, BinaryOp::kBitXor}) {
            auto X = te::make_buffer("X", t, {n});
            auto Y = te::make_buffer("Y", t, {n});
            auto Z = te::make_buffer("Z", t, {n});
            PrimFunc f = map_func("bitop", {X, Y, Z}, n, [&](Expr i) { return bin(op, load(X, i), load(Y, i)); });
            LoadedKernel k = compile_func(f);
            std::vector<Tensor> args;
            for (size_t p = 0; p < 3; ++p) args.emplace_back(t, Shape{n});
            for (int64_t i = 0; i < n; ++i) {
                args[0].set_i64(i, te::wrap_int(t, static_cast<int64_t>(xs[i / ns.size()])));
                args[1].set_i64(i, te::wrap_int(t, static_cast<int64_t>(ns[i % ns.size()])));
            }
            auto ref = clone_all(args);
            ASSERT_EQ(k.run(args), 0);
            tir::interpret(f, ref);
            EXPECT_TRUE(bits_equal(args[2], ref[2])) << dtype_name(t) << " " << te::binary_op_name(op);
            if (dtype_is_signed_int(t)) continue;
            for (int64_t i = 0; i < n; ++i) {
                const uint64_t a = xs[i / ns.size()] & mask, c = ns[i % ns.size()] & mask;
                uint64_t want = 0;
                if (op == BinaryOp::kShl) want = c >= static_cast<uint64_t>(bits) ? 0 : (a << c) & mask;
                if (op == BinaryOp::kShr) want = c >= static_cast<uint64_t>(bits) ? 0 : a >> c;
                if (op == BinaryOp::kBitAnd) want = a & c;
                if (op == BinaryOp::kBitXor) want = a ^ c;
                ASSERT_EQ(static_cast<uint64_t>(args[2].get_i64(i)) & mask, want)
                    << dtype_name(t) << " " << te::binary_op_name(op) << " " << a << ", " << c;
            }
        }
        // BitNot: ~x within the width.
        auto X = te::make_buffer("X", t, {n});
        auto Z = te::make_buffer("Z", t, {n});
        PrimFunc f = map_func("bitnot", {X, Z}, n, [&](Expr i) { return un(UnaryOp::kBitNot, load(X, i)); });
        LoadedKernel k = compile_func(f);
        std::vector<Tensor> args = {Tensor(t, Shape{n}), Tensor(t, Shape{n})};
        for (int64_t i = 0; i < n; ++i) args[0].set_i64(i, te::wrap_int(t, static_cast<int64_t>(xs[i / ns.size()] + i)));
        auto ref = clone_all(args);
        ASSERT_EQ(k.run(args), 0);
        tir::interpret(f, ref);
        EXPECT_TRUE(bits_equal(args[1], ref[1])) << dtype_name(t) << " bitnot";
        for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(static_cast<uint64_t>(args[1].get_i64(i)) & mask, ~static_cast<uint64_t>(args[0].get_i64(i)) & mask);
    }
    std::vector<double> fs = interesting_floats();
    const int64_t m = static_cast<int64_t>(fs.size());
    for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16}) {
        auto X = te::make_buffer("X", t, {m});
        auto Z = te::make_buffer("Z", DType::kBool, {m});
        PrimFunc f = map_func("isnan_k", {X, Z}, m, [&](Expr i) { return un(UnaryOp::kIsNaN, load(X, i)); });
        LoadedKernel k = compile_func(f);
        auto args = make_args(f, [&](size_t p, int64_t i) { return p == 0 ? fs[i] : 0.0; });
        auto ref = clone_all(args);
        ASSERT_EQ(k.run(args), 0);
        tir::interpret(f, ref);
        EXPECT_TRUE(bits_equal(args[1], ref[1])) << dtype_name(t) << " isnan";
        for (int64_t i = 0; i < m; ++i) EXPECT_EQ(args[1].get_i64(i), std::isnan(fs[i]) ? 1 : 0) << fs[i];
    }
}

TEST(CEmitter, IntegerDivisionByZeroDoesNotTrap) {
    auto X = te::make_buffer("X", DType::kInt32, {3});
    auto Y = te::make_buffer("Y", DType::kInt32, {3});
    auto Z = te::make_buffer("Z", DType::kInt32, {3});
    PrimFunc f = map_func("div0", {X, Y, Z}, 3, [&](Expr i) {
        return bin(BinaryOp::kAdd, bin(BinaryOp::kDiv, load(X, i), load(Y, i)), bin(BinaryOp::kMod, load(X, i), load(Y, i)));
    });
    LoadedKernel k = compile_func(f);
    std::vector<Tensor> args = {Tensor(DType::kInt32, {3}), Tensor(DType::kInt32, {3}), Tensor(DType::kInt32, {3})};
    args[0].set_i64(0, 5), args[0].set_i64(1, std::numeric_limits<int32_t>::min()), args[0].set_i64(2, 9);
    args[1].set_i64(0, 0), args[1].set_i64(1, -1), args[1].set_i64(2, 4);
    ASSERT_EQ(k.run(args), 0);
    EXPECT_EQ(args[2].get_i64(0), 0);
    EXPECT_EQ(args[2].get_i64(1), std::numeric_limits<int32_t>::min());  // wraps, as the interpreter does
    EXPECT_EQ(args[2].get_i64(2), 9 / 4 + 9 % 4);
}

TEST(CEmitter, CastsMatchInterpreter) {
    std::vector<double> xs = interesting_floats();
    int64_t n = xs.size();
    for (DType from : {DType::kFloat32, DType::kFloat64}) {
        for (DType to : {DType::kInt32, DType::kInt64, DType::kUInt8, DType::kInt8, DType::kUInt64, DType::kBool,
                         DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
            auto X = te::make_buffer("X", from, {n});
            auto Y = te::make_buffer("Y", to, {n});
            PrimFunc f = map_func("castk", {X, Y}, n, [&](Expr i) { return cast_to(te::compute_dtype(to), load(X, i)); });
            LoadedKernel k = compile_func(f);
            auto args = make_args(f, [&](size_t p, int64_t i) { return p == 0 ? xs[i] : 0.0; });
            auto ref = clone_all(args);
            ASSERT_EQ(k.run(args), 0);
            tir::interpret(f, ref);
            EXPECT_TRUE(bits_equal(args[1], ref[1])) << dtype_name(from) << " -> " << dtype_name(to);
        }
    }
    // Int -> float and int -> int.
    std::vector<int64_t> is = {0, 1, -1, 300, -300, 1 << 30, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
    for (DType from : {DType::kInt64, DType::kInt32, DType::kUInt8}) {
        for (DType to : {DType::kFloat32, DType::kFloat64, DType::kInt8, DType::kUInt16, DType::kBool}) {
            auto X = te::make_buffer("X", from, {(int64_t)is.size()});
            auto Y = te::make_buffer("Y", to, {(int64_t)is.size()});
            PrimFunc f = map_func("casti", {X, Y}, is.size(), [&](Expr i) { return cast_to(to, load(X, i)); });
            LoadedKernel k = compile_func(f);
            std::vector<Tensor> args = {Tensor(from, X->shape), Tensor(to, Y->shape)};
            for (size_t i = 0; i < is.size(); ++i) args[0].set_i64(i, te::wrap_int(from, is[i]));
            auto ref = clone_all(args);
            ASSERT_EQ(k.run(args), 0);
            tir::interpret(f, ref);
            EXPECT_TRUE(bits_equal(args[1], ref[1])) << dtype_name(from) << " -> " << dtype_name(to);
        }
    }
}

// QuantizeLinear's saturation, cast(min(max(round(x / s) + zp, lo), hi)): with bounds inside
// int32 the emitter converts f32 -> int32 directly (kiln_f2i32_f32: no double, no branches, so
// the loop vectorizes); NaN, infinities, ties and out-of-range values as the interpreter has them.
TEST(CEmitter, ClampedCastsMatchInterpreter) {
    std::vector<double> xs = interesting_floats();
    for (double v : {127.5, 128.5, -128.5, -129.5, 254.5, 255.5, 65535.5, -32768.5, 2147483520.0, -2147483648.0})
        xs.push_back(v);
    const int64_t n = static_cast<int64_t>(xs.size());
    struct Case { DType to; double lo, hi; bool fast; };
    for (const Case& c : {Case{DType::kUInt8, 0, 255, true}, Case{DType::kInt8, -128, 127, true},
                          Case{DType::kInt16, -32768, 32767, true}, Case{DType::kUInt16, 0, 65535, true},
                          Case{DType::kInt32, -2147483520.0, 2147483520.0, true}, Case{DType::kUInt32, -5, 70000, true},
                          Case{DType::kInt32, -3e9, 3e9, false}, Case{DType::kInt64, -128, 127, false}}) {
        for (bool min_outside : {true, false}) {
            auto X = te::make_buffer("X", DType::kFloat32, {n});
            auto Y = te::make_buffer("Y", c.to, {n});
            PrimFunc f = map_func("clampk", {X, Y}, n, [&](Expr i) {
                Expr v = bin(BinaryOp::kAdd, un(UnaryOp::kRound, bin(BinaryOp::kDiv, load(X, i), te::float_imm(0.5))),
                             te::float_imm(3.0));
                Expr lo = te::float_imm(c.lo), hi = te::float_imm(c.hi);
                v = min_outside ? bin(BinaryOp::kMin, bin(BinaryOp::kMax, v, lo), hi)
                                : bin(BinaryOp::kMax, bin(BinaryOp::kMin, v, hi), lo);
                return cast_to(te::compute_dtype(c.to), v);
            }, LoopKind::kVectorized);
            LoadedKernel k = compile_func(f);
            const std::string label =
                std::string(dtype_name(c.to)) + " [" + std::to_string(c.lo) + ", " + std::to_string(c.hi) + "]";
            // A call of the helper (the prelude defines it in every kernel).
            EXPECT_EQ(k.source.find("kiln_f2i32_f32(kiln_") != std::string::npos, c.fast) << label;
            auto args = make_args(f, [&](size_t p, int64_t i) { return p == 0 ? xs[i] : 0.0; });
            auto ref = clone_all(args);
            ASSERT_EQ(k.run(args), 0);
            tir::interpret(f, ref);
            EXPECT_TRUE(bits_equal(args[1], ref[1])) << label;
        }
    }
}

// Loop indices are non-negative in every kernel: floordiv / floormod of one by a positive constant
// print as C's / and % (GCC hoists them out of the inner loop of a parallel task), not the
// sign-correcting helpers; values as the interpreter's.
TEST(CEmitter, FloorDivOfLoopIndexIsPlainDivision) {
    const int64_t rows = 96, cols = 64;
    auto X = te::make_buffer("X", DType::kFloat32, {rows * cols});
    auto Y = te::make_buffer("Y", DType::kFloat32, {rows * cols});
    te::Var r = te::make_var("r"), c = te::make_var("c");
    // Y[r, c] = X[(r % 8) * 12 + r / 8, c]: a transpose of a [12, 8] row grid.
    Expr row = bin(BinaryOp::kAdd, bin(BinaryOp::kMul, bin(BinaryOp::kFloorMod, r, i64(8)), i64(12)),
                   bin(BinaryOp::kFloorDiv, r, i64(8)));
    Expr src = bin(BinaryOp::kAdd, bin(BinaryOp::kMul, row, i64(cols)), c);
    Expr dst = bin(BinaryOp::kAdd, bin(BinaryOp::kMul, r, i64(cols)), c);
    tir::Stmt body = tir::make_for(r, i64(rows), LoopKind::kParallel,
                                   tir::make_for(c, i64(cols), LoopKind::kVectorized, tir::make_store(Y, dst, load(X, src))));
    PrimFunc f{"transposek", {X, Y}, body};
    LoadedKernel k = compile_func(f);
    const std::string code = k.source.substr(k.source.find("static void"));  // past the prelude
    EXPECT_EQ(code.find("kiln_floordiv_i64("), std::string::npos) << code;
    EXPECT_EQ(code.find("kiln_floormod_i64("), std::string::npos) << code;
    auto args = make_args(f, [&](size_t p, int64_t i) { return p == 0 ? static_cast<double>(i) * 0.5 : 0.0; });
    auto ref = clone_all(args);
    runtime::ThreadPool pool(2);
    ASSERT_EQ(k.run(args, &pool), 0);
    tir::interpret(f, ref);
    EXPECT_TRUE(bits_equal(args[1], ref[1]));
}

// A matrix-vector product in the shape of a blocked 1x1 conv on one pixel (the squeeze-and-
// excitation convs): per output block o, Y[o, i] += X[r] * W[o, r, i] over r, i one 16-lane
// vector. The 16-lane loop keeps `#pragma GCC unroll 1` (else GCC 12 peeled it and vectorized
// the reduction over r instead, with permutes: 7x slower; codegen/one_vector_loop.h).
// The result is compared with a naive loop in the test's order of additions (the kernel's;
// no reassociation, FMA contraction only: a tolerance).
TEST(CEmitter, OneVectorLoopKeepsItsLoopForTheVectorizer) {
    const int64_t blocks = 9, red = 576, lanes = 16;
    auto X = te::make_buffer("X", DType::kFloat32, {red});
    auto W = te::make_buffer("W", DType::kFloat32, {blocks * red * lanes});
    auto Y = te::make_buffer("Y", DType::kFloat32, {blocks * lanes});
    te::Var o = te::make_var("o"), r = te::make_var("r"), i = te::make_var("i"), z = te::make_var("z");
    Expr y_at = bin(BinaryOp::kAdd, bin(BinaryOp::kMul, o, i64(lanes)), i);
    Expr w_at = bin(BinaryOp::kAdd, bin(BinaryOp::kMul, bin(BinaryOp::kAdd, bin(BinaryOp::kMul, o, i64(red)), r), i64(lanes)), i);
    Expr zero = std::make_shared<te::FloatImmNode>(DType::kFloat32, 0.0);
    tir::Stmt init = tir::make_for(
        z, i64(lanes), LoopKind::kVectorized,
        tir::make_store(Y, bin(BinaryOp::kAdd, bin(BinaryOp::kMul, o, i64(lanes)), z), zero));
    tir::Stmt acc = tir::make_for(
        r, i64(red), LoopKind::kSerial,
        tir::make_for(i, i64(lanes), LoopKind::kVectorized,
                      tir::make_store(Y, y_at, bin(BinaryOp::kAdd, load(Y, y_at), bin(BinaryOp::kMul, load(X, r), load(W, w_at))))));
    PrimFunc f{"gemv_blocks", {X, W, Y}, tir::make_for(o, i64(blocks), LoopKind::kParallel, tir::make_seq({init, acc}))};
    LoadedKernel k = compile_func(f);
    EXPECT_NE(k.source.find("#pragma GCC unroll 1\n"), std::string::npos) << k.source;
    // Not on a longer loop, nor on a short one that reads with a stride (a gather: the peeled
    // code was faster there).
    const std::string copy64 = emit_c(map_func("copy64", {X, Y}, 64, [&](Expr j) { return load(X, j); }, LoopKind::kVectorized));
    EXPECT_EQ(copy64.find("#pragma GCC unroll 1\n"), std::string::npos) << copy64;
    const std::string strided = emit_c(map_func(
        "strided16", {X, Y}, 16, [&](Expr j) { return load(X, bin(BinaryOp::kMul, j, i64(16))); }, LoopKind::kVectorized));
    EXPECT_EQ(strided.find("#pragma GCC unroll 1\n"), std::string::npos) << strided;
    EXPECT_NE(strided.find("#pragma GCC ivdep\n"), std::string::npos) << strided;
    auto args = make_args(f, [](size_t p, int64_t n) { return p == 2 ? 0.0 : std::sin(0.37 * n + p); });
    runtime::ThreadPool pool(2);
    ASSERT_EQ(k.run(args, &pool), 0);
    const float* x = args[0].data_as<float>();
    const float* w = args[1].data_as<float>();
    for (int64_t ob = 0; ob < blocks; ++ob)
        for (int64_t l = 0; l < lanes; ++l) {
            double ref = 0;
            for (int64_t q = 0; q < red; ++q) ref += double(x[q]) * double(w[(ob * red + q) * lanes + l]);
            ASSERT_NEAR(args[2].data_as<float>()[ob * lanes + l], ref, 1e-3) << "block " << ob << " lane " << l;
        }
}

// A pixel shuffle's interleave then tanh (DCGAN's last step): Y[r, j] = tanh(X[r, (j % 2) * 8 +
// j / 2]) over 16 lanes j. GCC cannot analyse the floormod/floordiv load, so the emitter reads it
// into an array first (codegen/staged_gathers.h) and the tanh loop reads that with unit stride;
// values within 2 ulp of std::tanh of the element the shuffle names. Not staged: the same gather copied without math, and a
// loop that writes the buffer it gathers from.
TEST(CEmitter, GatherUnderCostlyMathIsStagedAheadOfTheVectorLoop) {
    const int64_t rows = 37, lanes = 16;
    auto X = te::make_buffer("X", DType::kFloat32, {rows * lanes});
    auto Y = te::make_buffer("Y", DType::kFloat32, {rows * lanes});
    te::Var r = te::make_var("r"), j = te::make_var("j");
    auto gather_at = [&](Expr lane) {
        return bin(BinaryOp::kAdd, bin(BinaryOp::kMul, r, i64(lanes)),
                   bin(BinaryOp::kAdd, bin(BinaryOp::kMul, bin(BinaryOp::kFloorMod, lane, i64(2)), i64(8)),
                       bin(BinaryOp::kFloorDiv, lane, i64(2))));
    };
    Expr out_at = bin(BinaryOp::kAdd, bin(BinaryOp::kMul, r, i64(lanes)), j);
    auto nest = [&](const te::Buffer& dst, Expr value) {
        return tir::make_for(r, i64(rows), LoopKind::kParallel,
                             tir::make_for(j, i64(lanes), LoopKind::kVectorized, tir::make_store(dst, out_at, value)));
    };
    PrimFunc f{"shuffle_tanh", {X, Y}, nest(Y, un(UnaryOp::kTanh, load(X, gather_at(j))))};
    LoadedKernel k = compile_func(f);
    EXPECT_NE(k.source.find("1 gather(s) staged"), std::string::npos) << k.source;
    auto args = make_args(f, [](size_t p, int64_t n) { return p == 0 ? std::sin(0.61 * n) * 4.0 : 0.0; });
    runtime::ThreadPool pool(2);
    ASSERT_EQ(k.run(args, &pool), 0);
    const float* x = args[0].data_as<float>();
    const float* y = args[1].data_as<float>();
    for (int64_t row = 0; row < rows; ++row)
        for (int64_t lane = 0; lane < lanes; ++lane) {
            const double want = std::tanh(double(x[row * lanes + (lane % 2) * 8 + lane / 2]));
            ASSERT_NEAR(y[row * lanes + lane], want, 2.5e-7 * std::max(1e-3, std::fabs(want))) << row << ", " << lane;
        }

    const std::string copy = emit_c(PrimFunc{"shuffle_copy", {X, Y}, nest(Y, load(X, gather_at(j)))});
    EXPECT_EQ(copy.find("staged"), std::string::npos) << copy;
    const std::string in_place = emit_c(PrimFunc{"shuffle_in_place", {X}, nest(X, un(UnaryOp::kTanh, load(X, gather_at(j))))});
    EXPECT_EQ(in_place.find("staged"), std::string::npos) << in_place;
}

// A transpose's 16 x 16 tile nest (op/defs/shape.cc, transpose_schedule): Y[r, c] = X[c, r]
// for X [48, 64], tiles (row tile, column tile) then (row, vectorized column). Printed as one
// call of the prelude's tile helper; each of its three forms (AVX-512, AVX 8 x 8, scalar: the
// ISA macros undefined ahead of the source) moves every element exactly, NaN payloads and
// int32 bit patterns included. Not a tile: a copy within one buffer, a store that does not
// move by one element per vectorized step.
TEST(CEmitter, TransposeTileNestIsOneShuffleTile) {
    const int64_t rows = 64, cols = 48, t = 16;
    for (DType dt : {DType::kFloat32, DType::kInt32}) {
        auto X = te::make_buffer("X", dt, {cols * rows});
        auto Y = te::make_buffer("Y", dt, {rows * cols});
        te::Var ro = te::make_var("ro"), co = te::make_var("co"), ri = te::make_var("ri"), ci = te::make_var("ci");
        auto at = [&](Expr o, Expr i) { return bin(BinaryOp::kAdd, bin(BinaryOp::kMul, o, i64(t)), i); };
        auto nest = [&](const te::Buffer& dst, int64_t inner_step) {
            Expr y_at = bin(BinaryOp::kAdd, bin(BinaryOp::kMul, at(ro, ri), i64(cols)), bin(BinaryOp::kMul, at(co, ci), i64(inner_step)));
            Expr x_at = bin(BinaryOp::kAdd, bin(BinaryOp::kMul, at(co, ci), i64(rows)), at(ro, ri));
            tir::Stmt tile = tir::make_for(
                ri, i64(t), LoopKind::kSerial, tir::make_for(ci, i64(t), LoopKind::kVectorized, tir::make_store(dst, y_at, load(X, x_at))));
            return tir::make_for(ro, i64(rows / t), LoopKind::kParallel,
                                 tir::make_for(co, i64(cols / (t * inner_step)), LoopKind::kSerial, tile));
        };
        PrimFunc f{"transpose_tiles", {X, Y}, nest(Y, 1)};
        const std::string source = emit_c(f);
        ASSERT_NE(source.find("kiln_transpose_16x16_4b(&"), std::string::npos) << source;
        for (const char* isa : {"", "#undef __AVX512F__\n", "#undef __AVX512F__\n#undef __AVX__\n"}) {
            LoadedKernel k = load_source(std::string(isa) + source, f.name);
            auto args = make_args(f, [](size_t p, int64_t n) { return p == 0 ? (n % 7 == 3 ? NAN : n * 1.25 - 900.0) : 0.0; });
            if (dt == DType::kInt32)
                for (int64_t n = 0; n < cols * rows; ++n) args[0].data_as<int32_t>()[n] = static_cast<int32_t>(n * 2654435761u);
            runtime::ThreadPool pool(2);
            ASSERT_EQ(k.run(args, &pool), 0);
            const auto* x = static_cast<const uint32_t*>(args[0].data());
            const auto* y = static_cast<const uint32_t*>(args[1].data());
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t c = 0; c < cols; ++c)
                    ASSERT_EQ(y[r * cols + c], x[c * rows + r]) << dtype_name(dt) << " '" << isa << "' at " << r << ", " << c;
        }
        EXPECT_EQ(emit_c(PrimFunc{"in_place", {X}, nest(X, 1)}).find("kiln_transpose"), std::string::npos);
        EXPECT_EQ(emit_c(PrimFunc{"strided_store", {X, Y}, nest(Y, 2)}).find("kiln_transpose"), std::string::npos);
    }
}

// A window max / min accumulated in place, as a MaxPool's register tile is: Y[l] = max(Y[l],
// X[t, l]) over taps t, 16 lanes vectorized. The prelude's max keeps the NaN check on its second
// operand only (the tap), the accumulator's NaN carried by vmaxps itself: every lane must be NaN
// where any of its taps is (first, middle, last, every one), whichever the tap values around
// it, and otherwise the naive maximum / minimum; in f32 and f64.
TEST(CEmitter, WindowMaxAndMinKeepANaNFromAnyTap) {
    const int64_t taps = 9, lanes = 16;
    for (DType t : {DType::kFloat32, DType::kFloat64}) {
        for (BinaryOp op : {BinaryOp::kMax, BinaryOp::kMin}) {
            auto X = te::make_buffer("X", t, {taps * lanes});
            auto Y = te::make_buffer("Y", t, {lanes});
            te::Var k = te::make_var("k"), l = te::make_var("l");
            Expr x_at = bin(BinaryOp::kAdd, bin(BinaryOp::kMul, k, i64(lanes)), l);
            tir::Stmt body = tir::make_for(
                k, i64(taps), LoopKind::kSerial,
                tir::make_for(l, i64(lanes), LoopKind::kVectorized, tir::make_store(Y, l, bin(op, load(Y, l), load(X, x_at)))));
            PrimFunc f{"window_minmax", {X, Y}, body};
            LoadedKernel kern = compile_func(f);
            const double init = op == BinaryOp::kMax ? -INFINITY : INFINITY;
            // Lane l: NaN at tap (l % 10) for l < 10 (tap 9 = none), every tap NaN at lane 10, else
            // finite values with infinities mixed in.
            auto value = [&](int64_t tap, int64_t lane) -> double {
                if (lane == 10 || (lane < 10 && tap == lane % 10)) return NAN;
                if (lane == 11 && tap == 4) return INFINITY;
                if (lane == 12 && tap == 2) return -INFINITY;
                return std::sin(0.7 * tap + 1.3 * lane) * 100.0;
            };
            auto args = make_args(f, [&](size_t p, int64_t i) { return p == 0 ? value(i / lanes, i % lanes) : init; });
            ASSERT_EQ(kern.run(args), 0);
            for (int64_t lane = 0; lane < lanes; ++lane) {
                bool nan = false;
                double want = init;
                for (int64_t tap = 0; tap < taps; ++tap) {
                    double v = value(tap, lane);
                    if (std::isnan(v)) nan = true;
                    if (t == DType::kFloat32) v = static_cast<float>(v);
                    want = op == BinaryOp::kMax ? std::max(want, v) : std::min(want, v);
                }
                const double got = args[1].get_f64(lane);
                const std::string label = std::string(dtype_name(t)) + " " + te::binary_op_name(op) + " lane " +
                                          std::to_string(lane);
                if (nan) EXPECT_TRUE(std::isnan(got)) << label << ": " << got;
                else EXPECT_EQ(got, want) << label;
            }
        }
    }
}

TEST(CEmitter, Float16LoadsAreExactForAllBitPatterns) {
    const int64_t n = 65536;
    for (DType ht : {DType::kFloat16, DType::kBFloat16}) {
        auto H = te::make_buffer("H", ht, {n});
        auto F = te::make_buffer("F", DType::kFloat32, {n});
        PrimFunc f = map_func("widen", {H, F}, n, [&](Expr i) { return load(H, i); }, LoopKind::kVectorized);
        LoadedKernel k = compile_func(f);
        std::vector<Tensor> args = {Tensor(ht, {n}), Tensor(DType::kFloat32, {n})};
        for (int64_t i = 0; i < n; ++i) args[0].data_as<uint16_t>()[i] = static_cast<uint16_t>(i);
        ASSERT_EQ(k.run(args), 0);
        for (int64_t i = 0; i < n; ++i) {
            float want = ht == DType::kFloat16 ? half_to_float(i) : bfloat16_to_float(i);
            uint32_t a, b;
            std::memcpy(&a, &args[1].data_as<float>()[i], 4);
            std::memcpy(&b, &want, 4);
            ASSERT_EQ(a, b) << dtype_name(ht) << " bits " << i;
        }
    }
}

TEST(CEmitter, Float16StoresRoundLikeSupport) {
    const int64_t n = 1 << 18;
    std::mt19937 rng(42);
    for (DType ht : {DType::kFloat16, DType::kBFloat16}) {
        auto F = te::make_buffer("F", DType::kFloat32, {n});
        auto H = te::make_buffer("H", ht, {n});
        // Store through f16 then multiply by 1 so the load path is exercised too.
        PrimFunc f = map_func("narrow", {F, H}, n, [&](Expr i) { return load(F, i); });
        LoadedKernel k = compile_func(f);
        std::vector<Tensor> args = {Tensor(DType::kFloat32, {n}), Tensor(ht, {n})};
        for (int64_t i = 0; i < n; ++i) {
            uint32_t bits = i < 65536 ? (static_cast<uint32_t>(i) << 13) ^ (i & 1 ? 0x80000000u : 0)  // near the f16 grid
                                      : static_cast<uint32_t>(rng());
            if (i >= 65536 && i < 131072) bits = (bits & 0x80001fffu) | (static_cast<uint32_t>(100 + i % 60) << 23);
            std::memcpy(&args[0].data_as<float>()[i], &bits, 4);
        }
        ASSERT_EQ(k.run(args), 0);
        for (int64_t i = 0; i < n; ++i) {
            float x = args[0].data_as<float>()[i];
            uint16_t want = ht == DType::kFloat16 ? float_to_half(x) : float_to_bfloat16(x);
            ASSERT_EQ(args[1].data_as<uint16_t>()[i], want) << dtype_name(ht) << " of " << x;
        }
    }
}

TEST(CEmitter, ImmediatesRoundTrip) {
    std::vector<double> fs = {0.0, -0.0, 1.0, 0.1, -0.1, 1e30, 1e-30, 3.4028234663852886e38, 1.17549435e-38,
                              1.4e-45, 123456789.0, std::numeric_limits<double>::infinity(),
                              -std::numeric_limits<double>::infinity(), NAN, 1.0 / 3.0, 2.5e-310};
    for (DType t : {DType::kFloat32, DType::kFloat64}) {
        int64_t n = fs.size();
        auto Y = te::make_buffer("Y", t, {n});
        std::vector<tir::Stmt> stores;
        for (int64_t i = 0; i < n; ++i) {
            double v = t == DType::kFloat32 ? static_cast<double>(static_cast<float>(fs[i])) : fs[i];
            stores.push_back(tir::make_store(Y, i64(i), std::make_shared<te::FloatImmNode>(t, v)));
        }
        PrimFunc f{"imms", {Y}, tir::make_seq(stores)};
        LoadedKernel k = compile_func(f);
        std::vector<Tensor> args = {Tensor(t, {n})};
        ASSERT_EQ(k.run(args), 0);
        for (int64_t i = 0; i < n; ++i) {
            double want = t == DType::kFloat32 ? static_cast<double>(static_cast<float>(fs[i])) : fs[i];
            double got = args[0].get_f64(i);
            if (std::isnan(want)) {
                EXPECT_TRUE(std::isnan(got));
            } else {
                EXPECT_EQ(got, want) << i;
                EXPECT_EQ(std::signbit(got), std::signbit(want)) << i;
            }
        }
    }
    std::vector<int64_t> is = {0, -1, 1, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                               std::numeric_limits<int32_t>::min(), 1LL << 40};
    for (DType t : {DType::kInt64, DType::kInt32, DType::kUInt64, DType::kInt8, DType::kUInt32}) {
        int64_t n = is.size();
        auto Y = te::make_buffer("Y", t, {n});
        std::vector<tir::Stmt> stores;
        for (int64_t i = 0; i < n; ++i)
            stores.push_back(tir::make_store(Y, i64(i), std::make_shared<te::IntImmNode>(t, te::wrap_int(t, is[i]))));
        PrimFunc f{"intimms", {Y}, tir::make_seq(stores)};
        LoadedKernel k = compile_func(f);
        std::vector<Tensor> args = {Tensor(t, {n})};
        ASSERT_EQ(k.run(args), 0);
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(args[0].get_i64(i), te::wrap_int(t, is[i])) << dtype_name(t) << " " << i;
    }
}

TEST(CEmitter, SelectIfAndLogicalOps) {
    // Y[i] = (X[i] > 0 && X[i] < 10) ? X[i] * 2 : -1; and if (i % 3 == 0) Y[i] += 100 via a second store.
    const int64_t n = 40;
    auto X = te::make_buffer("X", DType::kFloat32, {n});
    auto Y = te::make_buffer("Y", DType::kFloat32, {n});
    te::Var i = te::make_var("i");
    auto x = load(X, i);
    auto f0 = [](double v) { return std::make_shared<te::FloatImmNode>(DType::kFloat32, v); };
    Expr cond = bin(BinaryOp::kAnd, bin(BinaryOp::kGT, x, f0(0)), bin(BinaryOp::kLT, x, f0(10)));
    Expr sel = std::make_shared<te::SelectNode>(DType::kFloat32, cond, bin(BinaryOp::kMul, x, f0(2)), f0(-1));
    tir::Stmt body = tir::make_seq({tir::make_store(Y, i, sel),
                                    tir::make_if(bin(BinaryOp::kEQ, bin(BinaryOp::kFloorMod, i, i64(3)), i64(0)),
                                                 tir::make_store(Y, i, bin(BinaryOp::kAdd, load(Y, i), f0(100))),
                                                 tir::make_store(Y, i, un(UnaryOp::kNeg, load(Y, i))))});
    PrimFunc f{"selif", {X, Y}, tir::make_for(i, i64(n), LoopKind::kSerial, body)};
    LoadedKernel k = compile_func(f);
    auto args = make_args(f, [](size_t p, int64_t j) { return p == 0 ? j - 15.0 : 0.0; });
    ASSERT_EQ(k.run(args), 0);
    for (int64_t j = 0; j < n; ++j) {
        double xv = j - 15.0;
        double y = (xv > 0 && xv < 10) ? xv * 2 : -1;
        y = j % 3 == 0 ? y + 100 : -y;
        EXPECT_EQ(args[1].get_f64(j), y) << j;
    }
}

TEST(CEmitter, NamesThatClashWithCAreRenamed) {
    // Two distinct vars both named "i", buffers named like C keywords / libm functions / our prefix.
    auto A = te::make_buffer("for", DType::kFloat32, {4, 5});
    auto B = te::make_buffer("exp", DType::kFloat32, {4, 5});
    auto C = te::make_buffer("kiln_ctx", DType::kFloat32, {4, 5});
    te::Var i = te::make_var("i"), j = te::make_var("i");
    Expr idx = bin(BinaryOp::kAdd, bin(BinaryOp::kMul, i, i64(5)), j);
    tir::Stmt s = tir::make_store(C, idx, bin(BinaryOp::kAdd, un(UnaryOp::kExp, load(A, idx)), load(B, idx)));
    PrimFunc f{"clash", {A, B, C},
               tir::make_for(i, i64(4), LoopKind::kParallel, tir::make_for(j, i64(5), LoopKind::kSerial, s))};
    LoadedKernel k = compile_func(f);
    auto args = make_args(f, [](size_t p, int64_t e) { return p == 0 ? e * 0.1 : p == 1 ? e : 0.0; });
    runtime::ThreadPool pool(2);
    ASSERT_EQ(k.run(args, &pool), 0);
    for (int64_t e = 0; e < 20; ++e) EXPECT_FLOAT_EQ(args[2].get_f64(e), std::exp(float(e * 0.1f)) + e) << e;
}

}  // namespace
}  // namespace kiln::codegen
