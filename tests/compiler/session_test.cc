// Session: load -> specialize -> run, through the whole stack, on small models built with the
// ONNX protobuf API. References are naive loops written here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <atomic>

#include "../frontend/onnx_model_builder.h"
#include "kiln/kiln.h"
#include "runtime/dnnl_kernels.h"

namespace kiln {
namespace {

using namespace kiln::frontend::testing;
namespace fs = std::filesystem;

class SessionTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("kiln_session_test_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    std::string save(const onnx::ModelProto& m, const std::string& name = "model.onnx") {
        std::string path = (dir_ / name).string();
        std::ofstream f(path, std::ios::binary);
        m.SerializeToOstream(&f);
        return path;
    }

    fs::path dir_;
};

std::vector<float> iota_weights(size_t n, float scale) {
    std::vector<float> w(n);
    for (size_t i = 0; i < n; ++i) w[i] = scale * (static_cast<float>(i % 7) - 3.0f);
    return w;
}

Tensor random_tensor(Shape shape, uint32_t seed) {
    Tensor t(DType::kFloat32, shape);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = u(rng);
    return t;
}

/// y = Relu(x @ W + b) with x: [N, 4] (symbolic N), W: [4, 3], b: [3].
onnx::ModelProto mlp_model() {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), int64_t{4}});
    add_float_init(g, "W", {4, 3}, iota_weights(12, 0.25f));
    add_float_init(g, "b", {3}, {0.5f, -0.25f, 0.125f}, /*raw=*/true);
    add_node(g, "MatMul", {"x", "W"}, {"xw"}, "mm");
    add_node(g, "Add", {"xw", "b"}, {"z"}, "add");
    add_node(g, "Relu", {"z"}, {"y"}, "relu");
    add_output(g, "y", {std::string("N"), int64_t{3}});
    return m;
}

std::vector<float> mlp_reference(const Tensor& x) {
    std::vector<float> w = iota_weights(12, 0.25f), b = {0.5f, -0.25f, 0.125f};
    int64_t n = x.shape()[0];
    std::vector<float> y(n * 3);
    for (int64_t i = 0; i < n; ++i)
        for (int j = 0; j < 3; ++j) {
            float acc = 0;
            for (int k = 0; k < 4; ++k) acc += x.data_as<float>()[i * 4 + k] * w[k * 3 + j];
            y[i * 3 + j] = std::max(acc + b[j], 0.0f);
        }
    return y;
}

void expect_close(const Tensor& got, const std::vector<float>& want) {
    ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
    for (size_t i = 0; i < want.size(); ++i)
        EXPECT_NEAR(got.data_as<float>()[i], want[i], 1e-5 + 1e-5 * std::fabs(want[i])) << "element " << i;
}

/// The per-shape path (one specialization per binding of the symbolic dims): what most tests
/// here exercise. A session's default compiles a model in the symbolic subset once instead.
SessionOptions per_shape() {
    SessionOptions opts;
    opts.symbolic_shapes = false;
    return opts;
}

TEST_F(SessionTest, SymbolicByDefaultOneCompileServesEveryBatch) {
    auto s = Session::load(save(mlp_model()));
    for (int64_t n : {2, 5, 17, 2}) {
        Tensor x = random_tensor({n, 4}, static_cast<uint32_t>(n));
        std::vector<Tensor> out = s->run({{"x", x}});
        EXPECT_EQ(out[0].shape(), (Shape{n, 3}));
        expect_close(out[0], mlp_reference(x));
    }
    EXPECT_TRUE(s->stats().symbolic) << s->stats().symbolic_reason;
    EXPECT_EQ(s->stats().compiles, 1);
}

/// The error message of `f`, which must throw a kInvalidArgument kiln::Error.
template <typename F>
std::string invalid_argument_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "expected a kInvalidArgument error";
    return "";
}

// SessionOptions::dim_ranges: runs inside the range match the reference on the symbolic and the
// per-shape path; a run outside it is an error naming the input, the axis, the value and the
// range, and the session still serves the next good run.
TEST_F(SessionTest, DeclaredDimRangeRefusesRunsOutsideIt) {
    for (bool symbolic : {true, false}) {
        SessionOptions opts = symbolic ? SessionOptions{} : per_shape();
        opts.dim_ranges["N"] = {2, 8};
        auto s = Session::load(save(mlp_model()), opts);
        for (int64_t n : {2, 8}) {
            Tensor x = random_tensor({n, 4}, static_cast<uint32_t>(n));
            expect_close(s->run({{"x", x}})[0], mlp_reference(x));
        }
        for (int64_t n : {1, 9}) {
            const std::string msg = invalid_argument_of([&] { s->run({{"x", random_tensor({n, 4}, 3)}}); });
            EXPECT_NE(msg.find("input 'x' (axis 0): dimension 'N' is " + std::to_string(n) +
                               ", outside its declared range 2..8"),
                      std::string::npos)
                << msg;
        }
        Tensor x = random_tensor({5, 4}, 5);
        expect_close(s->run({{"x", x}})[0], mlp_reference(x));
        EXPECT_EQ(s->stats().symbolic, symbolic) << s->stats().symbolic_reason;
    }
}

TEST_F(SessionTest, DimRangeOptionErrorsNameTheDim) {
    const std::string path = save(mlp_model());
    SessionOptions unknown;
    unknown.dim_ranges["seq"] = {1, 4};
    EXPECT_NE(invalid_argument_of([&] { Session::load(path, unknown); }).find("no input has a symbolic dimension 'seq'"),
              std::string::npos);
    SessionOptions reversed;
    reversed.dim_ranges["N"] = {4, 2};
    EXPECT_NE(invalid_argument_of([&] { Session::load(path, reversed); }).find("expected 0 <= min <= max, got 4..2"),
              std::string::npos);
    SessionOptions bound = per_shape();
    bound.dims["N"] = 9;
    bound.dim_ranges["N"] = {1, 8};
    EXPECT_NE(invalid_argument_of([&] { Session::load(path, bound); })
                  .find("dims: dimension 'N' is 9, outside its declared range 1..8"),
              std::string::npos);
    SessionOptions special = per_shape();
    special.specialize["N"] = {4, 16};
    special.dim_ranges["N"] = {1, 8};
    EXPECT_NE(invalid_argument_of([&] { Session::load(path, special); }).find("specialize: dimension 'N' is 16"),
              std::string::npos);
}

TEST_F(SessionTest, SymbolicBatchCompilesPerShape) {
    auto s = Session::load(save(mlp_model()), per_shape());
    ASSERT_EQ(s->inputs().size(), 1u);
    EXPECT_EQ(s->inputs()[0].symbols[0], "N");
    for (int64_t n : {2, 5, 2}) {
        Tensor x = random_tensor({n, 4}, static_cast<uint32_t>(n));
        std::vector<Tensor> out = s->run({{"x", x}});
        ASSERT_EQ(out.size(), 1u);
        EXPECT_EQ(out[0].shape(), (Shape{n, 3}));
        expect_close(out[0], mlp_reference(x));
    }
}

TEST_F(SessionTest, DimsGivenInOptionsCompileAtLoad) {
    SessionOptions opts = per_shape();
    opts.dims["N"] = 3;
    auto s = Session::load(save(mlp_model()), opts);
    EXPECT_GT(s->stats().kernels, 0);  // compiled in load()
    Tensor x = random_tensor({3, 4}, 7);
    expect_close(s->run({{"x", x}})[0], mlp_reference(x));
    // A run disagreeing with the bound dim is an error naming the input and the dim.
    try {
        s->run({{"x", random_tensor({4, 4}, 1)}});
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
        EXPECT_NE(std::string(e.what()).find("'N'"), std::string::npos) << e.what();
    }
}

TEST_F(SessionTest, InputErrorsNameTheInputWithExpectedAndGot) {
    auto s = Session::load(save(mlp_model()), per_shape());
    auto expect_error = [&](const std::map<std::string, Tensor>& in, const std::vector<std::string>& parts) {
        try {
            s->run(in);
            FAIL() << "expected an error";
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
            for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
        }
    };
    expect_error({}, {"missing input 'x'"});
    expect_error({{"x", random_tensor({2, 4}, 1)}, {"bogus", random_tensor({1}, 1)}}, {"'bogus'", "'x'"});
    expect_error({{"x", random_tensor({2, 5}, 1)}}, {"input 'x'", "expected", "got", "[2,5]"});
    expect_error({{"x", random_tensor({2, 4, 1}, 1)}}, {"input 'x'", "rank 2", "[2,4,1]"});
    expect_error({{"x", Tensor(DType::kInt64, {2, 4})}}, {"input 'x'", "f32", "i64"});
    // The session stays usable after errors.
    Tensor x = random_tensor({2, 4}, 3);
    expect_close(s->run({{"x", x}})[0], mlp_reference(x));
}

TEST_F(SessionTest, ReshapeTargetFromGraphInputSpecializesOnItsValue) {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "data", {int64_t{2}, int64_t{6}});
    add_input(g, "shape", {int64_t{2}}, onnx::TensorProto::INT64);
    add_node(g, "Reshape", {"data", "shape"}, {"r"}, "reshape");
    add_node(g, "Relu", {"r"}, {"y"}, "relu");
    add_output(g, "y");
    auto s = Session::load(save(m), per_shape());
    Tensor data = random_tensor({2, 6}, 11);
    for (Shape target : {Shape{3, 4}, Shape{4, -1}, Shape{12, 1}}) {
        Tensor shape(DType::kInt64, {2});
        shape.data_as<int64_t>()[0] = target[0];
        shape.data_as<int64_t>()[1] = target[1];
        std::vector<Tensor> out = s->run({{"data", data}, {"shape", shape}});
        Shape want = target[1] == -1 ? Shape{target[0], 12 / target[0]} : target;
        EXPECT_EQ(out[0].shape(), want);
        for (int64_t i = 0; i < 12; ++i)
            EXPECT_EQ(out[0].data_as<float>()[i], std::max(data.data_as<float>()[i], 0.0f));
    }
}

TEST_F(SessionTest, SecondLoadCompilesNothing) {
    fs::path cache = dir_ / "cache";
    ::setenv("KILN_CACHE_DIR", cache.c_str(), 1);
    SessionOptions opts = per_shape();
    opts.dims["N"] = 2;
    std::string path = save(mlp_model());
    auto first = Session::load(path, opts);
    EXPECT_GT(first->stats().compiled, 0);
    auto second = Session::load(path, opts);
    EXPECT_EQ(second->stats().compiled, 0);
    EXPECT_EQ(second->stats().kernels, first->stats().kernels);
    Tensor x = random_tensor({2, 4}, 5);
    expect_close(second->run({{"x", x}})[0], mlp_reference(x));
    ::unsetenv("KILN_CACHE_DIR");
}

TEST_F(SessionTest, UnsupportedOpFailsAtLoadNamingNodeAndOp) {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{2}});
    add_node(g, "NoSuchOp", {"x"}, {"y"}, "mystery");
    add_output(g, "y");
    try {
        Session::load(save(m), per_shape());
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
        EXPECT_NE(std::string(e.what()).find("NoSuchOp"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("mystery"), std::string::npos) << e.what();
    }
}

TEST_F(SessionTest, InspectShowsIrAndKernelSource) {
    SessionOptions opts = per_shape();
    opts.dims["N"] = 1;
    auto s = Session::load(save(mlp_model()), opts);
    std::string text = s->inspect();
    EXPECT_NE(text.find("MatMul("), std::string::npos);
    EXPECT_NE(text.find("int32_t kiln_kernel("), std::string::npos);
    EXPECT_NE(text.find("for "), std::string::npos);
}

TEST_F(SessionTest, ConcurrentRunsEachGetTheirOwnResult) {
    // Several threads run one session at once, with different batch sizes too (two
    // specializations alternate); every result matches the naive reference.
    auto s = Session::load(save(mlp_model()), per_shape());
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t) {
        threads.emplace_back([&, t] {
            for (int r = 0; r < 40; ++r) {
                const int64_t n = (t % 2) ? 3 : 5;
                Tensor x = random_tensor({n, 4}, static_cast<uint32_t>(100 * t + r));
                std::vector<Tensor> out = s->run({{"x", x}});
                std::vector<float> want = mlp_reference(x);
                for (size_t i = 0; i < want.size(); ++i)
                    if (std::fabs(out[0].data_as<float>()[i] - want[i]) > 1e-5 + 1e-5 * std::fabs(want[i])) ++failures;
            }
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
}

TEST_F(SessionTest, TerminateStopsARunWithCancelled) {
    SessionOptions opts = per_shape();
    opts.dims["N"] = 2;
    auto s = Session::load(save(mlp_model()), opts);
    std::atomic<bool> stop{true};
    RunOptions ro;
    ro.terminate = &stop;
    try {
        s->run({{"x", random_tensor({2, 4}, 1)}}, ro);
        FAIL() << "expected kCancelled";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kCancelled) << e.what();
        EXPECT_NE(std::string(e.what()).find("terminate"), std::string::npos) << e.what();
    }
    stop = false;  // the same options, flag cleared: the session runs normally afterwards
    Tensor x = random_tensor({2, 4}, 2);
    expect_close(s->run({{"x", x}}, ro)[0], mlp_reference(x));
}

/// y = x @ W + r with x: [N, K] and r: [N, M] (one symbol N in both inputs), W: [K, M] constant.
onnx::ModelProto residual_model(int64_t k, int64_t m_out) {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), k});
    add_input(g, "r", {std::string("N"), m_out});
    add_float_init(g, "W", {k, m_out}, iota_weights(static_cast<size_t>(k * m_out), 0.125f), /*raw=*/true);
    add_node(g, "MatMul", {"x", "W"}, {"xw"}, "mm");
    add_node(g, "Add", {"xw", "r"}, {"y"}, "add");
    add_output(g, "y", {std::string("N"), m_out});
    return m;
}

std::vector<float> residual_reference(const Tensor& x, const Tensor& r, int64_t k, int64_t m_out) {
    std::vector<float> w = iota_weights(static_cast<size_t>(k * m_out), 0.125f);
    const int64_t n = x.shape()[0];
    std::vector<float> y(static_cast<size_t>(n * m_out));
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < m_out; ++j) {
            double acc = r.data_as<float>()[i * m_out + j];
            for (int64_t q = 0; q < k; ++q) acc += double(x.data_as<float>()[i * k + q]) * w[q * m_out + j];
            y[i * m_out + j] = static_cast<float>(acc);
        }
    return y;
}

void expect_near_rel(const Tensor& got, const std::vector<float>& want, double tol) {
    ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
    for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got.data_as<float>()[i], want[i], tol * (1 + std::fabs(want[i]))) << "element " << i;
}

TEST_F(SessionTest, AlternatingShapesCompileOncePerShape) {
    auto s = Session::load(save(mlp_model()), per_shape());
    EXPECT_EQ(s->stats().compiles, 0);  // N unbound: compiles at the first run
    for (int64_t n : {2, 5, 2, 5, 2}) {
        Tensor x = random_tensor({n, 4}, static_cast<uint32_t>(n * 31));
        expect_close(s->run({{"x", x}})[0], mlp_reference(x));
    }
    SessionStats st = s->stats();
    EXPECT_EQ(st.compiles, 2);  // A, B, A, B, A: each shape compiled once
    EXPECT_EQ(st.specializations, 2);
    EXPECT_EQ(st.specialization_evictions, 0);
}

TEST_F(SessionTest, LeastRecentlyUsedSpecializationIsEvictedAtCapacity) {
    SessionOptions opts = per_shape();
    opts.max_specializations = 2;
    auto s = Session::load(save(mlp_model()), opts);
    auto run_n = [&](int64_t n) {
        Tensor x = random_tensor({n, 4}, static_cast<uint32_t>(n));
        expect_close(s->run({{"x", x}})[0], mlp_reference(x));
    };
    run_n(1);
    run_n(2);
    run_n(1);  // 1 is now the most recently used, 2 the least
    EXPECT_EQ(s->stats().compiles, 2);
    run_n(3);  // evicts 2
    SessionStats st = s->stats();
    EXPECT_EQ(st.compiles, 3);
    EXPECT_EQ(st.specializations, 2);
    EXPECT_EQ(st.specialization_evictions, 1);
    run_n(1);  // held
    EXPECT_EQ(s->stats().compiles, 3);
    run_n(2);  // evicted before: compiled again, evicting 3
    st = s->stats();
    EXPECT_EQ(st.compiles, 4);
    EXPECT_EQ(st.specialization_evictions, 2);
    run_n(1);
    EXPECT_EQ(s->stats().compiles, 4);
}

TEST_F(SessionTest, MaxSpecializationsBelowOneIsAnError) {
    SessionOptions opts = per_shape();
    opts.max_specializations = 0;
    try {
        Session::load(save(mlp_model()), opts);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
        EXPECT_NE(std::string(e.what()).find("max_specializations"), std::string::npos) << e.what();
    }
}

TEST_F(SessionTest, FourThreadsRunTwoShapesEachCompiledOnce) {
    const int64_t k = 24, m_out = 40;
    auto s = Session::load(save(residual_model(k, m_out)), per_shape());
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int r = 0; r < 30; ++r) {
                const int64_t n = (t + r) % 2 ? 3 : 7;  // every thread alternates between the shapes
                Tensor x = random_tensor({n, k}, static_cast<uint32_t>(1000 * t + r));
                Tensor res = random_tensor({n, m_out}, static_cast<uint32_t>(7000 + 1000 * t + r));
                std::vector<Tensor> out = s->run({{"x", x}, {"r", res}});
                std::vector<float> want = residual_reference(x, res, k, m_out);
                for (size_t i = 0; i < want.size(); ++i)
                    if (std::fabs(out[0].data_as<float>()[i] - want[i]) > 1e-4 * (1 + std::fabs(want[i]))) ++failures;
            }
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(s->stats().compiles, 2);  // a key being compiled is waited for, never compiled twice
    EXPECT_EQ(s->stats().specializations, 2);
}

TEST_F(SessionTest, BadDimNamesTheInputAndTheDimWithSpecializationsHeld) {
    auto s = Session::load(save(residual_model(4, 3)), per_shape());
    Tensor x = random_tensor({2, 4}, 1), r = random_tensor({2, 3}, 2);
    expect_near_rel(s->run({{"x", x}, {"r", r}})[0], residual_reference(x, r, 4, 3), 1e-5);
    try {  // N is 2 by x, 5 by r
        s->run({{"x", x}, {"r", random_tensor({5, 3}, 3)}});
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
        const std::string what = e.what();
        EXPECT_NE(what.find("input 'r'"), std::string::npos) << what;
        EXPECT_NE(what.find("dimension 'N'"), std::string::npos) << what;
        EXPECT_NE(what.find("got 5"), std::string::npos) << what;
    }
    try {  // a static dim that disagrees
        s->run({{"x", random_tensor({2, 5}, 4)}, {"r", r}});
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
        EXPECT_NE(std::string(e.what()).find("input 'x'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("[2,5]"), std::string::npos) << e.what();
    }
    EXPECT_EQ(s->stats().compiles, 1);  // a bad run compiles nothing
}

TEST_F(SessionTest, SpecializeAtLoadMakesFirstRunsWarm) {
    SessionOptions opts = per_shape();
    opts.specialize["N"] = {2, 4, 6};
    auto s = Session::load(save(mlp_model()), opts);
    EXPECT_EQ(s->stats().compiles, 3);
    EXPECT_EQ(s->stats().specializations, 3);
    for (int64_t n : {4, 2, 6}) {
        Tensor x = random_tensor({n, 4}, static_cast<uint32_t>(n + 50));
        expect_close(s->run({{"x", x}})[0], mlp_reference(x));
    }
    EXPECT_EQ(s->stats().compiles, 3);  // no run compiled
    s->specialize({{"N", 8}});
    s->specialize({{"N", 8}});  // held: nothing to do
    EXPECT_EQ(s->stats().compiles, 4);
}

TEST_F(SessionTest, SpecializeErrorsNameTheDim) {
    auto expect_error = [&](const SessionOptions& opts, const std::string& part) {
        try {
            Session::load(save(mlp_model()), opts);
            FAIL() << "expected an error";
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
        }
    };
    SessionOptions unknown = per_shape();
    unknown.specialize["seq"] = {16};
    expect_error(unknown, "no input has a symbolic dimension 'seq'");
    SessionOptions bound = per_shape();
    bound.dims["N"] = 2;
    bound.specialize["N"] = {4};
    expect_error(bound, "dimension 'N' is bound to 2");
    auto s = Session::load(save(mlp_model()), per_shape());
    try {
        s->specialize({});
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'N' has no value"), std::string::npos) << e.what();
    }
}

TEST_F(SessionTest, WeightsAreHeldOnceAcrossSpecializations) {
    const int64_t k = 128, m_out = 96;  // 48 KiB of weights
    auto s = Session::load(save(residual_model(k, m_out)), per_shape());
    auto run_n = [&](int64_t n) {
        Tensor x = random_tensor({n, k}, static_cast<uint32_t>(n)), r = random_tensor({n, m_out}, 99);
        expect_near_rel(s->run({{"x", x}, {"r", r}})[0], residual_reference(x, r, k, m_out), 1e-4);
    };
    run_n(1);
    const SessionStats one = s->stats();
    EXPECT_EQ(one.weight_bytes, static_cast<size_t>(k * m_out * 4));
    EXPECT_GE(one.constant_bytes, one.weight_bytes * 9 / 10);  // the weights (perhaps packed) are there
    for (int64_t n : {3, 8, 17}) run_n(n);
    const SessionStats four = s->stats();
    EXPECT_EQ(four.specializations, 4);
    // Three more specializations add no copy of the weights (shape constants are a few bytes).
    EXPECT_LT(four.constant_bytes, one.constant_bytes + one.weight_bytes / 4)
        << "1 specialization: " << one.constant_bytes << " bytes, 4: " << four.constant_bytes;
}

#if KILN_HAVE_DNNL
TEST_F(SessionTest, OneDnnWeightCopiesAreSharedAcrossSpecializations) {
    const int64_t k = 128, m_out = 96;  // 48 KiB of weights, reordered by oneDNN's matmul
    const size_t before = runtime::dnnl_weight_copy_bytes();
    SessionOptions opts = per_shape();
    opts.kernels = "dnnl";
    auto s = Session::load(save(residual_model(k, m_out)), opts);
    auto run_n = [&](int64_t n) {
        Tensor x = random_tensor({n, k}, static_cast<uint32_t>(n)), r = random_tensor({n, m_out}, 98);
        expect_near_rel(s->run({{"x", x}, {"r", r}})[0], residual_reference(x, r, k, m_out), 1e-4);
    };
    run_n(2);
    const size_t one = runtime::dnnl_weight_copy_bytes() - before;
    EXPECT_GE(one, static_cast<size_t>(k * m_out * 4)) << "the matmul did not run on oneDNN";
    for (int64_t n : {5, 16, 33}) run_n(n);
    EXPECT_EQ(s->stats().specializations, 4);
    // Four kernels (one per specialization) reorder the one pooled constant alike: one copy.
    EXPECT_LT(runtime::dnnl_weight_copy_bytes() - before, one + static_cast<size_t>(k * m_out * 4) / 4);
    s.reset();
    EXPECT_EQ(runtime::dnnl_weight_copy_bytes(), before);  // released with the last kernel
}
#endif

}  // namespace
}  // namespace kiln
