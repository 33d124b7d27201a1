// The C API (include/kiln/kiln_c.h) through libkiln.so only: results of small models checked
// against values computed here by hand, the shipped digits model's invariants, and every error
// path (status and message, never a crash).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "../scoped_env.h"
#include "kiln/kiln_c.h"

namespace {

namespace fs = std::filesystem;

// ---- models, written with the ONNX protobuf API ------------------------------------------------

void add_value(onnx::ValueInfoProto* v, const std::string& name, int elem_type, const std::vector<std::string>& dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    for (const std::string& d : dims) {
        auto* dim = tt->mutable_shape()->add_dim();
        if (std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
        else dim->set_dim_param(d);
    }
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& in,
                          const std::vector<std::string>& out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + out[0]);
    for (const auto& s : in) n->add_input(s);
    for (const auto& s : out) n->add_output(s);
    return n;
}

/// This process's scratch directory, removed when the tests end.
fs::path scratch_dir() { return fs::temp_directory_path() / ("kiln_capi_test_" + std::to_string(::getpid())); }

struct RemoveScratchDir : ::testing::Environment {
    void TearDown() override { fs::remove_all(scratch_dir()); }
};
::testing::Environment* const kRemoveScratchDir = ::testing::AddGlobalTestEnvironment(new RemoveScratchDir);

std::string write_model(const onnx::ModelProto& m, const std::string& name) {
    fs::path dir = scratch_dir();
    fs::create_directories(dir);
    std::string path = (dir / name).string();
    std::ofstream f(path, std::ios::binary);
    m.SerializeToOstream(&f);
    return path;
}

onnx::ModelProto new_model() {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    m.mutable_graph()->set_name("capi_test");
    return m;
}

const float kW[3][2] = {{0.5f, -1.0f}, {2.0f, 0.25f}, {-1.5f, 1.0f}};
const float kB[2] = {0.1f, -0.2f};
const int64_t kC = 40;

/// Y = Relu(X @ W + B) (X f32[N,3]) and Z = K + 40 (K i64[N]).
std::string affine_model() {
    onnx::ModelProto m = new_model();
    auto* g = m.mutable_graph();
    add_value(g->add_input(), "X", onnx::TensorProto::FLOAT, {"N", "3"});
    add_value(g->add_input(), "K", onnx::TensorProto::INT64, {"N"});
    add_value(g->add_output(), "Y", onnx::TensorProto::FLOAT, {"N", "2"});
    add_value(g->add_output(), "Z", onnx::TensorProto::INT64, {"N"});
    auto* w = g->add_initializer();
    w->set_name("W");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(3);
    w->add_dims(2);
    for (const auto& row : kW)
        for (float v : row) w->add_float_data(v);
    auto* b = g->add_initializer();
    b->set_name("B");
    b->set_data_type(onnx::TensorProto::FLOAT);
    b->add_dims(2);
    for (float v : kB) b->add_float_data(v);
    auto* c = g->add_initializer();
    c->set_name("C");
    c->set_data_type(onnx::TensorProto::INT64);
    c->add_dims(1);
    c->add_int64_data(kC);
    add_node(g, "Gemm", {"X", "W", "B"}, {"G"});
    add_node(g, "Relu", {"G"}, {"Y"});
    add_node(g, "Add", {"K", "C"}, {"Z"});
    return write_model(m, "affine.onnx");
}

/// Y = Identity(X): the output is the input's value.
std::string identity_model() {
    onnx::ModelProto m = new_model();
    auto* g = m.mutable_graph();
    add_value(g->add_input(), "X", onnx::TensorProto::FLOAT, {"4"});
    add_value(g->add_output(), "Y", onnx::TensorProto::FLOAT, {"4"});
    add_node(g, "Identity", {"X"}, {"Y"});
    return write_model(m, "identity.onnx");
}

std::string digits_model() { return std::string(KILN_SOURCE_DIR) + "/models/digits/digits_cnn.onnx"; }

// ---- helpers -----------------------------------------------------------------------------------

#define EXPECT_STATUS(expected, call)                                                                  \
    do {                                                                                               \
        kiln_status st_ = (call);                                                                      \
        EXPECT_EQ(st_, expected) << #call << " -> " << kiln_status_name(st_) << ": " << kiln_last_error(); \
    } while (0)
#define ASSERT_OK(call)                                                                               \
    do {                                                                                              \
        kiln_status st_ = (call);                                                                     \
        ASSERT_EQ(st_, KILN_OK) << #call << " -> " << kiln_status_name(st_) << ": " << kiln_last_error(); \
    } while (0)

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// Every handle of one test, freed at the end.
struct Handles {
    kiln_session_options* options = nullptr;
    kiln_run_options* run_options = nullptr;
    kiln_session* session = nullptr;
    std::vector<kiln_tensor*> tensors;
    ~Handles() {
        for (kiln_tensor* t : tensors) kiln_tensor_free(t);
        kiln_session_free(session);
        kiln_run_options_free(run_options);
        kiln_session_options_free(options);
    }
    kiln_tensor* borrow(kiln_dtype dtype, std::vector<int64_t> shape, const void* data) {
        kiln_tensor* t = nullptr;
        EXPECT_STATUS(KILN_OK, kiln_tensor_borrow(dtype, shape.data(), shape.size(), data, &t));
        tensors.push_back(t);
        return t;
    }
    kiln_tensor* keep(kiln_tensor* t) {
        tensors.push_back(t);
        return t;
    }
};

/// The affine model's inputs for batch n (X[i][j] = 0.3*i - 0.7*j + 0.2 + shift, K[i] = 3*i - 5 + shift).
struct AffineInputs {
    int64_t n;
    std::vector<float> x;
    std::vector<int64_t> k;
    explicit AffineInputs(int64_t n_, int shift = 0) : n(n_) {
        for (int64_t i = 0; i < n; ++i) {
            for (int j = 0; j < 3; ++j) x.push_back(0.3f * i - 0.7f * j + 0.2f + shift);
            k.push_back(3 * i - 5 + shift);
        }
    }
    float y(int64_t i, int o) const {
        float acc = kB[o];
        for (int j = 0; j < 3; ++j) acc += x[i * 3 + j] * kW[j][o];
        return std::max(acc, 0.0f);
    }
};

/// Runs the affine model on `in` and checks Y and Z against the hand computation.
void run_and_check_affine(kiln_session* s, const AffineInputs& in, const kiln_run_options* ro = nullptr) {
    Handles h;
    const char* names[] = {"K", "X"};  // any order
    const kiln_tensor* inputs[] = {h.borrow(KILN_DTYPE_INT64, {in.n}, in.k.data()),
                                   h.borrow(KILN_DTYPE_FLOAT32, {in.n, 3}, in.x.data())};
    kiln_tensor* outs[2] = {nullptr, nullptr};
    ASSERT_OK(kiln_session_run(s, ro, names, inputs, 2, outs, 2));
    h.keep(outs[0]);
    h.keep(outs[1]);
    kiln_dtype dt;
    const int64_t* dims;
    size_t rank;
    const void* data;
    ASSERT_OK(kiln_tensor_dtype(outs[0], &dt));
    EXPECT_EQ(dt, KILN_DTYPE_FLOAT32);
    ASSERT_OK(kiln_tensor_shape(outs[0], &dims, &rank));
    ASSERT_EQ(std::vector<int64_t>(dims, dims + rank), (std::vector<int64_t>{in.n, 2}));
    ASSERT_OK(kiln_tensor_data(outs[0], &data));
    const float* y = static_cast<const float*>(data);
    for (int64_t i = 0; i < in.n; ++i)
        for (int o = 0; o < 2; ++o) EXPECT_NEAR(y[i * 2 + o], in.y(i, o), 1e-5) << "Y[" << i << "][" << o << "]";
    ASSERT_OK(kiln_tensor_dtype(outs[1], &dt));
    EXPECT_EQ(dt, KILN_DTYPE_INT64);
    ASSERT_OK(kiln_tensor_shape(outs[1], &dims, &rank));
    ASSERT_EQ(std::vector<int64_t>(dims, dims + rank), (std::vector<int64_t>{in.n}));
    ASSERT_OK(kiln_tensor_data(outs[1], &data));
    for (int64_t i = 0; i < in.n; ++i) EXPECT_EQ(static_cast<const int64_t*>(data)[i], in.k[i] + kC) << "Z[" << i << "]";
}

kiln_session* load(const std::string& path, kiln_session_options* options = nullptr) {
    kiln_session* s = nullptr;
    kiln_status st = kiln_session_create(path.c_str(), options, &s);
    EXPECT_EQ(st, KILN_OK) << kiln_last_error();
    return s;
}

// ---- results -----------------------------------------------------------------------------------

TEST(CApi, VersionStatusNamesAndDtypeSizes) {
    EXPECT_STREQ(kiln_version(), KILN_VERSION);
    EXPECT_STREQ(kiln_status_name(KILN_OK), "OK");
    EXPECT_STREQ(kiln_status_name(KILN_INVALID_ARGUMENT), "InvalidArgument");
    EXPECT_STREQ(kiln_status_name(KILN_CANCELLED), "Cancelled");
    EXPECT_STREQ(kiln_status_name(static_cast<kiln_status>(77)), "Unknown");
    EXPECT_EQ(kiln_dtype_size(KILN_DTYPE_FLOAT32), 4u);
    EXPECT_EQ(kiln_dtype_size(KILN_DTYPE_INT64), 8u);
    EXPECT_EQ(kiln_dtype_size(KILN_DTYPE_FLOAT16), 2u);
    EXPECT_EQ(kiln_dtype_size(KILN_DTYPE_BOOL), 1u);
    EXPECT_EQ(kiln_dtype_size(KILN_DTYPE_STRING), 0u);
    EXPECT_EQ(kiln_dtype_size(static_cast<kiln_dtype>(99)), 0u);
}

TEST(CApi, InputAndOutputInfo) {
    Handles h;
    h.session = load(affine_model());
    ASSERT_TRUE(h.session);
    size_t n_in = 0, n_out = 0;
    ASSERT_OK(kiln_session_input_count(h.session, &n_in));
    ASSERT_OK(kiln_session_output_count(h.session, &n_out));
    ASSERT_EQ(n_in, 2u);
    ASSERT_EQ(n_out, 2u);
    kiln_value_info x, k, y;
    ASSERT_OK(kiln_session_input_info(h.session, 0, &x));
    ASSERT_OK(kiln_session_input_info(h.session, 1, &k));
    ASSERT_OK(kiln_session_output_info(h.session, 0, &y));
    EXPECT_STREQ(x.name, "X");
    EXPECT_EQ(x.kind, KILN_VALUE_TENSOR);
    EXPECT_EQ(x.dtype, KILN_DTYPE_FLOAT32);
    ASSERT_EQ(x.rank, 2u);
    EXPECT_EQ(x.dims[0], -1);
    EXPECT_EQ(x.dims[1], 3);
    EXPECT_STREQ(x.symbols[0], "N");
    EXPECT_STREQ(x.symbols[1], "");
    EXPECT_STREQ(k.name, "K");
    EXPECT_EQ(k.dtype, KILN_DTYPE_INT64);
    EXPECT_STREQ(y.name, "Y");
    EXPECT_EQ(y.dtype, KILN_DTYPE_FLOAT32);
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_input_info(h.session, 2, &x));
    EXPECT_TRUE(has(kiln_last_error(), "input index 2: the model has 2 inputs")) << kiln_last_error();
}

TEST(CApi, RunsAffineModelAgainstHandComputation) {
    Handles h;
    h.session = load(affine_model());
    ASSERT_TRUE(h.session);
    run_and_check_affine(h.session, AffineInputs(5));
    run_and_check_affine(h.session, AffineInputs(2));  // another N: a new specialization
}

TEST(CApi, DimsAndOptionsGivenAtCreate) {
    Handles h;
    ASSERT_OK(kiln_session_options_create(&h.options));
    ASSERT_OK(kiln_session_options_set_dim(h.options, "N", 3));
    ASSERT_OK(kiln_session_options_set_threads(h.options, 1));
    ASSERT_OK(kiln_session_options_set_inter_op_threads(h.options, 2));
    ASSERT_OK(kiln_session_options_set_executor(h.options, KILN_EXECUTOR_DATAFLOW));
    ASSERT_OK(kiln_session_options_set_opt_level(h.options, 0));
    ASSERT_OK(kiln_session_options_set_kernels(h.options, "generated"));
    ASSERT_OK(kiln_session_options_set_memory_limit(h.options, 1u << 20));
    h.session = load(affine_model(), h.options);
    ASSERT_TRUE(h.session);
    kiln_session_options_free(h.options);  // the session keeps its own copy
    h.options = nullptr;
    run_and_check_affine(h.session, AffineInputs(3));
}

TEST(CApi, SpecializationsGivenAtCreate) {
    Handles h;
    ASSERT_OK(kiln_session_options_create(&h.options));
    const int64_t sizes[] = {2, 5};
    ASSERT_OK(kiln_session_options_set_specialize(h.options, "N", sizes, 2));
    ASSERT_OK(kiln_session_options_set_max_specializations(h.options, 2));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_specialize(h.options, "N", sizes, 0));
    EXPECT_TRUE(has(kiln_last_error(), "at least one size")) << kiln_last_error();
    const int64_t negative[] = {-3};
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_specialize(h.options, "N", negative, 1));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_max_specializations(h.options, 0));
    EXPECT_TRUE(has(kiln_last_error(), "max_specializations")) << kiln_last_error();
    h.session = load(affine_model(), h.options);
    ASSERT_TRUE(h.session);
    for (int n : {5, 2, 5}) run_and_check_affine(h.session, AffineInputs(n));
    // A dim the model does not have is an error at create, naming it.
    kiln_session_options* bad = nullptr;
    ASSERT_OK(kiln_session_options_create(&bad));
    ASSERT_OK(kiln_session_options_set_specialize(bad, "Q", sizes, 1));
    kiln_session* none = nullptr;
    const std::string path = affine_model();
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_create(path.c_str(), bad, &none));
    EXPECT_TRUE(has(kiln_last_error(), "'Q'")) << kiln_last_error();
    kiln_session_options_free(bad);
}

TEST(CApi, DeclaredDimRangeRefusesRunsOutsideIt) {
    Handles h;
    ASSERT_OK(kiln_session_options_create(&h.options));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_dim_range(h.options, "N", 5, 2));
    EXPECT_TRUE(has(kiln_last_error(), "0 <= min <= max")) << kiln_last_error();
    ASSERT_OK(kiln_session_options_set_dim_range(h.options, "N", 2, 6));
    h.session = load(affine_model(), h.options);
    ASSERT_TRUE(h.session);
    for (int n : {2, 6}) run_and_check_affine(h.session, AffineInputs(n));
    AffineInputs big(7);
    Handles r;
    const char* names[] = {"K", "X"};
    const kiln_tensor* inputs[] = {r.borrow(KILN_DTYPE_INT64, {big.n}, big.k.data()),
                                   r.borrow(KILN_DTYPE_FLOAT32, {big.n, 3}, big.x.data())};
    kiln_tensor* outs[2] = {nullptr, nullptr};
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_run(h.session, nullptr, names, inputs, 2, outs, 2));
    EXPECT_TRUE(has(kiln_last_error(), "dimension 'N' is 7, outside its declared range 2..6")) << kiln_last_error();
    run_and_check_affine(h.session, AffineInputs(3));  // still serves
}

TEST(CApi, OutputsOutliveTheirInputs) {
    Handles h;
    h.session = load(identity_model());
    ASSERT_TRUE(h.session);
    std::vector<float> x = {1, 2, 3, 4};
    int64_t shape[] = {4};
    kiln_tensor* in = nullptr;
    ASSERT_OK(kiln_tensor_borrow(KILN_DTYPE_FLOAT32, shape, 1, x.data(), &in));
    const char* names[] = {"X"};
    const kiln_tensor* inputs[] = {in};
    kiln_tensor* out = nullptr;
    ASSERT_OK(kiln_session_run(h.session, nullptr, names, inputs, 1, &out, 1));
    h.keep(out);
    kiln_tensor_free(in);
    std::fill(x.begin(), x.end(), -7.0f);  // the caller reuses its buffer
    const void* data;
    ASSERT_OK(kiln_tensor_data(out, &data));
    EXPECT_EQ(std::vector<float>(static_cast<const float*>(data), static_cast<const float*>(data) + 4),
              (std::vector<float>{1, 2, 3, 4}));
    void* writable;
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_tensor_mutable_data(out, &writable));
    EXPECT_EQ(writable, nullptr);
}

TEST(CApi, ConcurrentRunsOfOneSession) {
    Handles h;
    h.session = load(affine_model());
    ASSERT_TRUE(h.session);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int r = 0; r < 20; ++r) run_and_check_affine(h.session, AffineInputs(3, t - 2 * r));
        });
    for (auto& t : threads) t.join();
}

TEST(CApi, ConcurrentRunsWithDifferentDims) {
    // Each N is its own specialization: a run must never start on another one's executable.
    Handles h;
    h.session = load(affine_model());
    ASSERT_TRUE(h.session);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int r = 0; r < 5; ++r) run_and_check_affine(h.session, AffineInputs(1 + (t + r) % 3));
        });
    for (auto& t : threads) t.join();
}

TEST(CApi, DigitsModelInvariants) {
    // The shipped digits CNN: each row of `probabilities` is a softmax (sums to 1) and `digit`
    // is its argmax; the comparison with ONNX Runtime is tests/capi/test_capi_vs_ort.py.
    Handles h;
    ASSERT_OK(kiln_session_options_create(&h.options));
    ASSERT_OK(kiln_session_options_set_dim(h.options, "N", 4));
    h.session = load(digits_model(), h.options);
    ASSERT_TRUE(h.session);
    kiln_tensor* image = nullptr;
    int64_t shape[] = {4, 1, 8, 8};
    ASSERT_OK(kiln_tensor_create(KILN_DTYPE_FLOAT32, shape, 4, &image));
    h.keep(image);
    void* data;
    ASSERT_OK(kiln_tensor_mutable_data(image, &data));
    for (int i = 0; i < 4 * 64; ++i) static_cast<float*>(data)[i] = std::sin(0.1f * i) * 2.0f;
    const char* names[] = {"image"};
    const kiln_tensor* inputs[] = {image};
    kiln_tensor* outs[2];
    ASSERT_OK(kiln_session_run(h.session, nullptr, names, inputs, 1, outs, 2));
    h.keep(outs[0]);
    h.keep(outs[1]);
    const void *p, *d;
    ASSERT_OK(kiln_tensor_data(outs[0], &p));
    ASSERT_OK(kiln_tensor_data(outs[1], &d));
    const float* prob = static_cast<const float*>(p);
    for (int i = 0; i < 4; ++i) {
        float sum = 0;
        for (int c = 0; c < 10; ++c) sum += prob[i * 10 + c];
        EXPECT_NEAR(sum, 1.0f, 1e-5);
        EXPECT_EQ(static_cast<const int64_t*>(d)[i], std::max_element(prob + i * 10, prob + i * 10 + 10) - (prob + i * 10));
    }
}

/// The digits model's probabilities for a fixed batch of 4 images, from a session made with `options`.
std::vector<float> digits_probabilities(kiln_session_options* options) {
    Handles h;
    h.session = load(digits_model(), options);
    if (!h.session) return {};
    std::vector<float> image(4 * 64);
    for (size_t i = 0; i < image.size(); ++i) image[i] = std::cos(0.07f * static_cast<float>(i)) * 1.5f;
    const char* names[] = {"image"};
    const kiln_tensor* inputs[] = {h.borrow(KILN_DTYPE_FLOAT32, {4, 1, 8, 8}, image.data())};
    kiln_tensor* outs[2] = {nullptr, nullptr};
    EXPECT_STATUS(KILN_OK, kiln_session_run(h.session, nullptr, names, inputs, 1, outs, 2));
    h.keep(outs[0]);
    h.keep(outs[1]);
    const void* p = nullptr;
    EXPECT_STATUS(KILN_OK, kiln_tensor_data(outs[0], &p));
    const float* prob = static_cast<const float*>(p);
    return prob ? std::vector<float>(prob, prob + 40) : std::vector<float>{};
}

// kiln_session_options_set_preemptible compiles kernels for preemption (the server's setting):
// the results are those of the default kernels -- the affine model's against the hand
// computation, the digits CNN's against a default session within float rounding.
TEST(CApi, PreemptibleSessionGivesTheSameResults) {
    Handles h;
    ASSERT_OK(kiln_session_options_create(&h.options));
    ASSERT_OK(kiln_session_options_set_preemptible(h.options, 1));
    h.session = load(affine_model(), h.options);
    ASSERT_TRUE(h.session);
    for (int n : {1, 5}) run_and_check_affine(h.session, AffineInputs(n));
    ASSERT_OK(kiln_session_options_set_dim(h.options, "N", 4));
    const std::vector<float> preemptible = digits_probabilities(h.options);
    ASSERT_OK(kiln_session_options_set_preemptible(h.options, 0));
    const std::vector<float> plain = digits_probabilities(h.options);
    ASSERT_EQ(preemptible.size(), 40u);
    ASSERT_EQ(plain.size(), 40u);
    for (size_t i = 0; i < plain.size(); ++i)
        EXPECT_NEAR(preemptible[i], plain[i], 1e-6) << "probabilities[" << i << "]";
}

// A tiered compile (the default) from a cold kernel cache: its first call (on the quick kernels)
// gives the results of an -O3 compile from the start (another cold cache) within float rounding;
// waiting for the -O3 kernels returns, at once the second time.
TEST(CApi, TieredCompileMatchesAnO3CompileAndWaitsForTheOptimizedKernels) {
    Handles h;
    fs::create_directories(scratch_dir());
    ASSERT_OK(kiln_session_options_create(&h.options));
    ASSERT_OK(kiln_session_options_set_dim(h.options, "N", 4));
    std::vector<float> tiered, plain;
    {
        kiln::testing::ScopedEnv cache("KILN_CACHE_DIR", (scratch_dir() / "tiered_cache").string());
        ASSERT_OK(kiln_session_options_set_tiered_compile(h.options, 1));
        tiered = digits_probabilities(h.options);
        h.session = load(digits_model(), h.options);
        ASSERT_TRUE(h.session);
        ASSERT_OK(kiln_session_wait_for_optimized_kernels(h.session));
        ASSERT_OK(kiln_session_wait_for_optimized_kernels(h.session));
    }
    {
        kiln::testing::ScopedEnv cache("KILN_CACHE_DIR", (scratch_dir() / "o3_cache").string());
        ASSERT_OK(kiln_session_options_set_tiered_compile(h.options, 0));
        plain = digits_probabilities(h.options);
    }
    ASSERT_EQ(tiered.size(), 40u);
    ASSERT_EQ(plain.size(), 40u);
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_NEAR(tiered[i], plain[i], 1e-6) << "probabilities[" << i << "]";
}

TEST(CApi, ProfilePathWritesATrace) {
    Handles h;
    std::string trace = (scratch_dir() / "trace.json").string();
    fs::create_directories(scratch_dir());
    ASSERT_OK(kiln_session_options_create(&h.options));
    ASSERT_OK(kiln_session_options_set_profile_path(h.options, trace.c_str()));
    h.session = load(affine_model(), h.options);
    ASSERT_TRUE(h.session);
    run_and_check_affine(h.session, AffineInputs(2));
    kiln_session_free(h.session);  // writes the trace
    h.session = nullptr;
    std::ifstream f(trace);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(has(text, "traceEvents")) << text.substr(0, 200);
    fs::remove(trace);
}

// ---- errors ------------------------------------------------------------------------------------

TEST(CApiErrors, MissingFile) {
    kiln_session* s = reinterpret_cast<kiln_session*>(0x1);
    EXPECT_STATUS(KILN_IO_ERROR, kiln_session_create("/no/such/model.onnx", nullptr, &s));
    EXPECT_EQ(s, nullptr);
    EXPECT_TRUE(has(kiln_last_error(), "/no/such/model.onnx")) << kiln_last_error();
}

struct CApiRunErrors : ::testing::Test {
    Handles h;
    AffineInputs in{2};
    kiln_tensor* outs[2] = {nullptr, nullptr};
    void SetUp() override {
        h.session = load(affine_model());
        ASSERT_TRUE(h.session);
    }
    /// Runs with the given inputs; expects `status` and a message holding every part.
    void expect_run(kiln_status status, std::vector<const char*> names, std::vector<const kiln_tensor*> inputs,
                    const std::vector<std::string>& parts, size_t n_out = 2) {
        kiln_status st = kiln_session_run(h.session, h.run_options, names.data(), inputs.data(), names.size(), outs, n_out);
        EXPECT_EQ(st, status) << kiln_status_name(st) << ": " << kiln_last_error();
        for (const std::string& p : parts) EXPECT_TRUE(has(kiln_last_error(), p)) << "'" << p << "' not in: " << kiln_last_error();
        EXPECT_EQ(outs[0], nullptr);
        EXPECT_EQ(outs[1], nullptr);
    }
    kiln_tensor* x() { return h.borrow(KILN_DTYPE_FLOAT32, {in.n, 3}, in.x.data()); }
    kiln_tensor* k() { return h.borrow(KILN_DTYPE_INT64, {in.n}, in.k.data()); }
};

TEST_F(CApiRunErrors, MissingInput) {
    expect_run(KILN_INVALID_ARGUMENT, {"X"}, {x()}, {"missing input 'K'"});
}

TEST_F(CApiRunErrors, WrongDtype) {
    std::vector<int64_t> xi(in.n * 3);
    expect_run(KILN_INVALID_ARGUMENT, {"X", "K"}, {h.borrow(KILN_DTYPE_INT64, {in.n, 3}, xi.data()), k()},
               {"input 'X'", "expected dtype f32", "got i64"});
}

TEST_F(CApiRunErrors, WrongShape) {
    std::vector<float> big(in.n * 4);
    expect_run(KILN_INVALID_ARGUMENT, {"X", "K"}, {h.borrow(KILN_DTYPE_FLOAT32, {in.n, 4}, big.data()), k()},
               {"input 'X'", "expected shape f32[N,3]", "got [2,4]"});
    expect_run(KILN_INVALID_ARGUMENT, {"X", "K"}, {h.borrow(KILN_DTYPE_FLOAT32, {in.n * 3}, in.x.data()), k()},
               {"input 'X'", "rank 2", "got [6]"});
}

TEST_F(CApiRunErrors, UnknownAndRepeatedNames) {
    expect_run(KILN_INVALID_ARGUMENT, {"X", "K", "Q"}, {x(), k(), k()}, {"'Q' is not an input", "'X', 'K'"});
    expect_run(KILN_INVALID_ARGUMENT, {"X", "X", "K"}, {x(), x(), k()}, {"input 'X' is given twice"});
}

TEST_F(CApiRunErrors, WrongOutputCount) {
    expect_run(KILN_INVALID_ARGUMENT, {"X", "K"}, {x(), k()}, {"the model has 2 outputs, got 1"}, 1);
}

TEST_F(CApiRunErrors, NullsInTheRunCall) {
    expect_run(KILN_INVALID_ARGUMENT, {nullptr, "K"}, {x(), k()}, {"input_names[0] is NULL"});
    expect_run(KILN_INVALID_ARGUMENT, {"X", "K"}, {x(), nullptr}, {"inputs[1] (input 'K') is NULL"});
    const char* names[] = {"X", "K"};
    const kiln_tensor* inputs[] = {x(), k()};
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_run(nullptr, nullptr, names, inputs, 2, outs, 2));
    EXPECT_TRUE(has(kiln_last_error(), "session is NULL")) << kiln_last_error();
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_run(h.session, nullptr, nullptr, inputs, 2, outs, 2));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_run(h.session, nullptr, names, nullptr, 2, outs, 2));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_run(h.session, nullptr, names, inputs, 2, nullptr, 2));
    EXPECT_TRUE(has(kiln_last_error(), "outputs (output_count > 0) is NULL")) << kiln_last_error();
}

TEST_F(CApiRunErrors, TerminateBeforeRunCancels) {
    ASSERT_OK(kiln_run_options_create(&h.run_options));
    ASSERT_OK(kiln_run_options_set_terminate(h.run_options, 1));
    expect_run(KILN_CANCELLED, {"X", "K"}, {x(), k()}, {"terminate"});
    ASSERT_OK(kiln_run_options_set_terminate(h.run_options, 0));
    run_and_check_affine(h.session, in, h.run_options);
}

TEST_F(CApiRunErrors, MemoryLimitIsOutOfMemory) {
    Handles small;
    ASSERT_OK(kiln_session_options_create(&small.options));
    ASSERT_OK(kiln_session_options_set_memory_limit(small.options, 64));
    AffineInputs big(4096);
    kiln_session* s = nullptr;
    kiln_status st = kiln_session_create(affine_model().c_str(), small.options, &s);
    small.session = s;
    if (st == KILN_OK) {
        const char* names[] = {"X", "K"};
        const kiln_tensor* inputs[] = {small.borrow(KILN_DTYPE_FLOAT32, {big.n, 3}, big.x.data()),
                                       small.borrow(KILN_DTYPE_INT64, {big.n}, big.k.data())};
        st = kiln_session_run(s, nullptr, names, inputs, 2, outs, 2);
    }
    EXPECT_EQ(st, KILN_OUT_OF_MEMORY) << kiln_status_name(st) << ": " << kiln_last_error();
    EXPECT_TRUE(has(kiln_last_error(), "64")) << kiln_last_error();
}

TEST(CApiErrors, NullHandlesAndOutPointers) {
    size_t n;
    kiln_value_info info;
    kiln_dtype dt;
    const int64_t* dims;
    size_t rank;
    int64_t count;
    const void* data;
    const char* str;
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_create(nullptr));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_run_options_create(nullptr));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_threads(nullptr, 1));
    EXPECT_TRUE(has(kiln_last_error(), "options is NULL")) << kiln_last_error();
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_inter_op_threads(nullptr, 1));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_executor(nullptr, KILN_EXECUTOR_AUTO));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_opt_level(nullptr, 1));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_memory_limit(nullptr, 1));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_dim(nullptr, "N", 1));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_profile_path(nullptr, "x"));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_kernels(nullptr, "auto"));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_preemptible(nullptr, 1));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_tiered_compile(nullptr, 1));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_wait_for_optimized_kernels(nullptr));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_run_options_set_terminate(nullptr, 1));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_create(nullptr, nullptr, nullptr));
    EXPECT_TRUE(has(kiln_last_error(), "path is NULL")) << kiln_last_error();
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_create(digits_model().c_str(), nullptr, nullptr));
    EXPECT_TRUE(has(kiln_last_error(), "out is NULL")) << kiln_last_error();
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_input_count(nullptr, &n));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_output_count(nullptr, &n));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_input_info(nullptr, 0, &info));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_output_info(nullptr, 0, &info));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_tensor_dtype(nullptr, &dt));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_tensor_shape(nullptr, &dims, &rank));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_tensor_element_count(nullptr, &count));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_tensor_nbytes(nullptr, &n));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_tensor_data(nullptr, &data));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_tensor_mutable_data(nullptr, nullptr));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_tensor_string(nullptr, 0, &str, nullptr));
    // Out-pointers NULL on a live handle.
    Handles h;
    h.session = load(affine_model());
    ASSERT_TRUE(h.session);
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_input_count(h.session, nullptr));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_input_info(h.session, 0, nullptr));
    float v = 1;
    kiln_tensor* t = h.borrow(KILN_DTYPE_FLOAT32, {}, &v);
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_tensor_shape(t, nullptr, &rank));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_tensor_data(t, nullptr));
    // Freeing NULL is a no-op.
    kiln_tensor_free(nullptr);
    kiln_session_free(nullptr);
    kiln_session_options_free(nullptr);
    kiln_run_options_free(nullptr);
}

TEST(CApiErrors, BadTensorArguments) {
    kiln_tensor* t = reinterpret_cast<kiln_tensor*>(0x1);
    int64_t shape[] = {2, 3};
    float data[6] = {};
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_tensor_borrow(KILN_DTYPE_FLOAT32, nullptr, 2, data, &t));
    EXPECT_EQ(t, nullptr);
    EXPECT_TRUE(has(kiln_last_error(), "shape (rank > 0) is NULL")) << kiln_last_error();
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_tensor_borrow(KILN_DTYPE_FLOAT32, shape, 2, nullptr, &t));
    EXPECT_TRUE(has(kiln_last_error(), "data (the shape has elements) is NULL")) << kiln_last_error();
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_tensor_borrow(static_cast<kiln_dtype>(99), shape, 2, data, &t));
    EXPECT_TRUE(has(kiln_last_error(), "unknown dtype 99")) << kiln_last_error();
    EXPECT_STATUS(KILN_UNSUPPORTED, kiln_tensor_borrow(KILN_DTYPE_STRING, shape, 2, data, &t));
    int64_t negative[] = {2, -3};
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_tensor_create(KILN_DTYPE_FLOAT32, negative, 2, &t));
    EXPECT_TRUE(has(kiln_last_error(), "dimension 1 is negative")) << kiln_last_error();
    int64_t huge[] = {int64_t(1) << 40, int64_t(1) << 40};
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_tensor_create(KILN_DTYPE_FLOAT32, huge, 2, &t));
    EXPECT_TRUE(has(kiln_last_error(), "overflows")) << kiln_last_error();
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_tensor_borrow(KILN_DTYPE_FLOAT32, shape, 2, data, nullptr));
    // A zero-size tensor needs no data; a borrowed tensor is not writable; a numeric one has no strings.
    int64_t empty[] = {0, 3};
    ASSERT_OK(kiln_tensor_borrow(KILN_DTYPE_FLOAT32, empty, 2, nullptr, &t));
    int64_t count = -1;
    ASSERT_OK(kiln_tensor_element_count(t, &count));
    EXPECT_EQ(count, 0);
    void* w;
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_tensor_mutable_data(t, &w));
    const char* s;
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_tensor_string(t, 0, &s, nullptr));
    EXPECT_TRUE(has(kiln_last_error(), "expected a string tensor, got dtype f32")) << kiln_last_error();
    kiln_tensor_free(t);
}

TEST(CApiErrors, BadOptionValues) {
    Handles h;
    ASSERT_OK(kiln_session_options_create(&h.options));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_threads(h.options, -1));
    EXPECT_TRUE(has(kiln_last_error(), "threads: expected >= 0")) << kiln_last_error();
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_inter_op_threads(h.options, -2));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_opt_level(h.options, 7));
    EXPECT_TRUE(has(kiln_last_error(), "opt_level: expected 0..3, got 7")) << kiln_last_error();
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_executor(h.options, static_cast<kiln_executor>(9)));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_dim(h.options, "N", -4));
    EXPECT_TRUE(has(kiln_last_error(), "dim 'N': expected >= 0, got -4")) << kiln_last_error();
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_dim(h.options, "", 4));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_dim(h.options, nullptr, 4));
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_kernels(h.options, "fastest"));
    EXPECT_TRUE(has(kiln_last_error(), "got \"fastest\"")) << kiln_last_error();
}

TEST(CApiErrors, LastErrorIsPerThread) {
    EXPECT_STATUS(KILN_INVALID_ARGUMENT, kiln_session_options_set_opt_level(nullptr, 1));
    const std::string mine = kiln_last_error();
    std::string theirs;
    std::thread([&] {
        EXPECT_STREQ(kiln_last_error(), "");  // nothing failed on this thread yet
        kiln_session* s = nullptr;
        EXPECT_STATUS(KILN_IO_ERROR, kiln_session_create("/no/such/file.onnx", nullptr, &s));
        theirs = kiln_last_error();
    }).join();
    EXPECT_EQ(kiln_last_error(), mine);
    EXPECT_TRUE(has(theirs, "/no/such/file.onnx")) << theirs;
    // A success leaves the message of the last failure.
    kiln_run_options* ro = nullptr;
    ASSERT_OK(kiln_run_options_create(&ro));
    kiln_run_options_free(ro);
    EXPECT_EQ(kiln_last_error(), mine);
}

TEST(CApiErrors, BadModelFile) {
    onnx::ModelProto m = new_model();
    auto* g = m.mutable_graph();
    add_value(g->add_input(), "X", onnx::TensorProto::FLOAT, {"4"});
    add_value(g->add_output(), "Y", onnx::TensorProto::FLOAT, {"4"});
    add_node(g, "NoSuchOp", {"X"}, {"Y"});
    kiln_session* s = nullptr;
    EXPECT_STATUS(KILN_UNSUPPORTED, kiln_session_create(write_model(m, "bad_op.onnx").c_str(), nullptr, &s));
    EXPECT_TRUE(has(kiln_last_error(), "NoSuchOp")) << kiln_last_error();
    std::string garbage = (scratch_dir() / "garbage.onnx").string();
    std::ofstream(garbage) << "this is not a protobuf";
    kiln_status st = kiln_session_create(garbage.c_str(), nullptr, &s);
    EXPECT_TRUE(st == KILN_INVALID_MODEL || st == KILN_PARSE_ERROR) << kiln_status_name(st) << ": " << kiln_last_error();
    EXPECT_EQ(s, nullptr);
}

}  // namespace
