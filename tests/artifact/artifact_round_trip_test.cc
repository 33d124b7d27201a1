// save_artifact + load_artifact: the loaded executable computes what the saved one did (and
// what the plain-loop reference says), its constants are views into the file's mapping, its
// tables and info come back as written, and what cannot be saved is refused.
#include <cstring>
#include <functional>
#include <fstream>
#include <sstream>
#include <tuple>

#include "artifact_test_util.h"
#include <cmath>
#include <random>

#include "runtime/allocator.h"
#include "runtime/artifact_format.h"
#include "runtime/extern_kernel.h"
#include "runtime/memory_library.h"
#include "runtime/sequential_executor.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime::testing {
namespace {

Tensor run_once(const std::shared_ptr<Executable>& exe, const Tensor& x) {
    ThreadPool pool(2);
    CpuAllocator alloc;
    SequentialExecutor ex(exe, &pool, &alloc);
    std::vector<Tensor> outs;
    Status st = ex.run({x}, outs);
    EXPECT_TRUE(st.ok()) << st.message();
    return outs.empty() ? Tensor() : outs[0].clone();  // outs[0]'s storage goes back to `alloc`
}

void expect_same_floats(const Tensor& a, const Tensor& b) {
    ASSERT_EQ(a.shape(), b.shape());
    ASSERT_EQ(a.dtype(), b.dtype());
    for (int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(a.data_as<float>()[i], b.data_as<float>()[i]) << "element " << i;
}

/// [start, end) of the mapping of `path` in this process (0, 0 when none).
std::pair<uintptr_t, uintptr_t> mapping_of(const std::string& path) {
    const std::string canonical = std::filesystem::canonical(path).string();
    std::ifstream maps("/proc/self/maps");
    uintptr_t lo = 0, hi = 0;
    for (std::string line; std::getline(maps, line);) {
        if (line.size() < canonical.size() || line.compare(line.size() - canonical.size(), canonical.size(), canonical) != 0)
            continue;
        uintptr_t s = 0, e = 0;
        std::sscanf(line.c_str(), "%lx-%lx", &s, &e);
        if (lo == 0 || s < lo) lo = s;
        hi = std::max(hi, e);
    }
    return {lo, hi};
}

TEST(ArtifactRoundTrip, OutputsMatchBeforeAndAfterAndTheReference) {
    ScratchDir dir;
    auto exe = make_test_executable();
    const Tensor x = test_input(3);
    const Tensor before = run_once(exe, x);
    expect_same_floats(before, reference_output(x));

    const std::string path = dir.file("model.kiln");
    save_artifact(path, *exe, test_library_path(), {});
    LoadedArtifact a = load_artifact(path);
    ASSERT_TRUE(a.exe->loaded());
    for (int seed = 0; seed < 3; ++seed) {
        const Tensor xs = test_input(seed);
        expect_same_floats(run_once(a.exe, xs), reference_output(xs));
    }
    expect_same_floats(run_once(a.exe, x), before);
}

TEST(ArtifactRoundTrip, ConstantsAreViewsOfTheMappedFileAtPageOffsets) {
    ScratchDir dir;
    auto exe = make_test_executable();
    const std::string path = dir.file("model.kiln");
    save_artifact(path, *exe, test_library_path(), {});
    LoadedArtifact a = load_artifact(path);
    const auto [lo, hi] = mapping_of(path);
    ASSERT_NE(lo, 0u) << "the artifact is not mapped";
    for (int id : {1, 2}) {
        const BufferDesc& b = a.exe->buffers[id];
        ASSERT_EQ(b.role, BufferRole::kConstant);
        const auto p = reinterpret_cast<uintptr_t>(b.constant.data());
        EXPECT_GE(p, lo) << b.name;
        EXPECT_LE(p + b.nbytes(), hi) << b.name;
        EXPECT_EQ((p - lo) % 4096, 0u) << b.name << " is not page-aligned in the file";
        EXPECT_NE(b.constant.data(), exe->buffers[id].constant.data());
        EXPECT_EQ(std::memcmp(b.constant.data(), exe->buffers[id].constant.data(), b.nbytes()), 0) << b.name;
    }
    // The tensors keep the mapping alive after the executable is gone.
    Tensor w = a.exe->buffers[2].constant;
    a.exe.reset();
    EXPECT_NE(mapping_of(path).first, 0u);
    EXPECT_EQ(w.get_f64(3), 4.0);
    w = Tensor();
    EXPECT_EQ(mapping_of(path).first, 0u) << "the mapping outlived every view";
}

TEST(ArtifactRoundTrip, TablesAndInfoComeBackAsWritten) {
    ScratchDir dir;
    auto exe = make_test_executable();
    exe->planned_for_concurrency = true;
    ArtifactInfo info;
    info.metadata = {{"producer", "test"}, {"dims", "N=2"}, {"model.description", std::string("a\0b\nc", 5)}};
    const std::string path = dir.file("model.kiln");
    save_artifact(path, *exe, test_library_path(), info);
    LoadedArtifact a = load_artifact(path);
    EXPECT_EQ(a.info.metadata, info.metadata);
    EXPECT_EQ(a.info.cpu_features, host_cpu_features()) << "filled from this host when empty";
    const Executable& e = *a.exe;
    ASSERT_EQ(e.buffers.size(), exe->buffers.size());
    for (size_t i = 0; i < e.buffers.size(); ++i) {
        EXPECT_EQ(e.buffers[i].name, exe->buffers[i].name);
        EXPECT_EQ(e.buffers[i].dtype, exe->buffers[i].dtype);
        EXPECT_EQ(e.buffers[i].shape, exe->buffers[i].shape);
        EXPECT_EQ(e.buffers[i].role, exe->buffers[i].role);
        EXPECT_EQ(e.buffers[i].arena_offset, exe->buffers[i].arena_offset);
    }
    ASSERT_EQ(e.kernels.size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
        EXPECT_EQ(e.kernels[k].symbol, exe->kernels[k].symbol);
        EXPECT_EQ(e.kernels[k].description, exe->kernels[k].description);
        EXPECT_EQ(e.kernels[k].is_async, exe->kernels[k].is_async);
    }
    EXPECT_EQ(e.kernels[0].library, path + "#kernels") << "kernels resolve in the embedded library";
    ASSERT_EQ(e.steps.size(), 3u);
    for (size_t s = 0; s < 3; ++s) {
        EXPECT_EQ(e.steps[s].kernel, exe->steps[s].kernel);
        EXPECT_EQ(e.steps[s].args, exe->steps[s].args);
        EXPECT_EQ(e.steps[s].node_name, exe->steps[s].node_name);
        EXPECT_EQ(e.steps[s].num_inputs, exe->steps[s].num_inputs);
        EXPECT_EQ(e.steps[s].flops, exe->steps[s].flops);
    }
    EXPECT_EQ(e.inputs, exe->inputs);
    EXPECT_EQ(e.outputs, exe->outputs);
    EXPECT_TRUE(e.planned_for_concurrency);
    EXPECT_EQ(e.arena_bytes, 256u);
}

/// An executable with symbolic dims (tables only: decode does not load kernels): x[n,4] ->
/// y[2*n,4] by one kernel that takes both dims.
std::shared_ptr<Executable> symbolic_tables() {
    auto exe = std::make_shared<Executable>();
    exe->dims = {"n", "2*n"};
    exe->kernels = {{"lib.so", "k_dims", "Concat"}};
    exe->kernels[0].takes_dims = true;
    exe->buffers.push_back({"x", DType::kFloat32, {0, 4}, BufferRole::kInput, {}});
    exe->buffers.push_back({"y", DType::kFloat32, {0, 4}, BufferRole::kOutput, {}});
    exe->buffers[0].dim_of = {0, -1};
    exe->buffers[1].dim_of = {1, -1};
    StepDesc step;
    step.kernel = 0;
    step.args = {0, 1};
    step.num_inputs = 1;
    step.dims = {0, 1};
    exe->steps = {step};
    exe->inputs = {0};
    exe->outputs = {1};
    exe->dim_limits = {{0, 0, 512, "node 'positions' (KilnDimRange)"}, {1, 2, 64, ""}};  // a bound, a declared range
    return exe;
}

std::shared_ptr<Executable> decode_tables(const Executable& exe) {
    const std::string bytes = artifact_format::encode_executable(exe, std::vector<uint64_t>(exe.buffers.size(), 0));
    return artifact_format::decode_executable(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 0,
                                              [](DType, const Shape&, uint64_t) { return Tensor(); });
}

TEST(ArtifactRoundTrip, SymbolicDimsComeBackAsWritten) {
    auto exe = symbolic_tables();
    auto e = decode_tables(*exe);
    EXPECT_EQ(e->dims, exe->dims);
    EXPECT_EQ(e->buffers[0].dim_of, exe->buffers[0].dim_of);
    EXPECT_EQ(e->buffers[1].dim_of, exe->buffers[1].dim_of);
    EXPECT_TRUE(e->kernels[0].takes_dims);
    EXPECT_EQ(e->steps[0].dims, exe->steps[0].dims);
    EXPECT_EQ(e->buffers[1].shape_at({3, 6}), (Shape{6, 4}));
    ASSERT_EQ(e->dim_limits.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(e->dim_limits[i].dim, exe->dim_limits[i].dim);
        EXPECT_EQ(e->dim_limits[i].min, exe->dim_limits[i].min);
        EXPECT_EQ(e->dim_limits[i].max, exe->dim_limits[i].max);
        EXPECT_EQ(e->dim_limits[i].node, exe->dim_limits[i].node);
    }
}

TEST(ArtifactRoundTrip, BadSymbolicTablesAreInvalidModelErrors) {
    struct Case {
        const char* what;
        std::function<void(Executable&)> damage;
    };
    const std::vector<Case> cases = {
        {"names dim 7", [](Executable& e) { e.buffers[1].dim_of = {7, -1}; }},
        {"has 1 dim_of entries", [](Executable& e) { e.buffers[1].dim_of = {0}; }},
        {"takes dim 2", [](Executable& e) { e.steps[0].dims = {2}; }},
        {"expected a name or an expression", [](Executable& e) { e.dims[1] = "2*(n"; }},
        {"passes dims to a kernel that takes none", [](Executable& e) { e.kernels[0].takes_dims = false; }},
        {"bounds dim 3", [](Executable& e) { e.dim_limits[0].dim = 3; }},
        {"0 <= min <= max", [](Executable& e) { e.dim_limits[1].min = 65; }},
    };
    for (const Case& c : cases) {
        auto exe = symbolic_tables();
        c.damage(*exe);
        try {
            (void)decode_tables(*exe);
            ADD_FAILURE() << c.what << ": decoded without an error";
        } catch (const Error& err) {
            EXPECT_EQ(err.kind(), ErrorKind::kInvalidModel) << err.what();
            EXPECT_NE(std::string(err.what()).find(c.what), std::string::npos) << err.what();
        }
    }
}

/// symbolic_tables with an int64 input: Gather-like indices checked against dim 0 (GatherND-style
/// phase 1 of 2) and a loss target against a static 10 with an ignored -100.
std::shared_ptr<Executable> index_check_tables() {
    auto exe = symbolic_tables();
    exe->buffers[0].dtype = DType::kInt64;
    exe->index_checks = {{0, 0, 0, 0, 2, 1, true, false, 0, "node 'g' (GatherND)", "indices"},
                         {0, 0, 10, -1, 1, 0, false, true, -100, "node 'l' (SoftmaxCrossEntropyLoss)", "target"}};
    return exe;
}

TEST(ArtifactRoundTrip, IndexChecksComeBackAsWrittenAndForgedOnesAreRefused) {
    auto exe = index_check_tables();
    auto e = decode_tables(*exe);
    ASSERT_EQ(e->index_checks.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        const IndexCheck &a = e->index_checks[i], &b = exe->index_checks[i];
        EXPECT_EQ(std::tie(a.step, a.arg, a.extent, a.extent_dim, a.period, a.phase, a.negative_from_end, a.has_ignore,
                           a.ignore, a.node, a.what),
                  std::tie(b.step, b.arg, b.extent, b.extent_dim, b.period, b.phase, b.negative_from_end, b.has_ignore,
                           b.ignore, b.node, b.what));
    }
    const std::vector<std::pair<const char*, std::function<void(Executable&)>>> forged = {
        {"names step 3", [](Executable& x) { x.index_checks[0].step = 3; }},
        {"argument 2", [](Executable& x) { x.index_checks[0].arg = 2; }},
        {"dim 5", [](Executable& x) { x.index_checks[0].extent_dim = 5; }},
        {"0 <= phase < period (2, 2)", [](Executable& x) { x.index_checks[0].phase = 2; }},
        {"reads a f32 buffer", [](Executable& x) { x.buffers[0].dtype = DType::kFloat32; }},
    };
    for (const auto& [what, damage] : forged) {
        auto bad = index_check_tables();
        damage(*bad);
        Error err = error_of([&] { (void)decode_tables(*bad); });
        EXPECT_EQ(err.kind(), ErrorKind::kInvalidModel) << err.what();
        EXPECT_NE(std::string(err.what()).find(what), std::string::npos) << what << ": " << err.what();
    }
}

TEST(ArtifactRoundTrip, SaveIsAtomicAndReplacesTheOldFile) {
    ScratchDir dir;
    auto exe = make_test_executable();
    const std::string path = dir.file("model.kiln");
    write_bytes(path, "old contents");
    save_artifact(path, *exe, test_library_path(), {});
    EXPECT_TRUE(is_artifact_file(path));
    int files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) ++files, (void)entry;
    EXPECT_EQ(files, 1) << "a temp file was left behind";
    // A failed save leaves the old artifact and no temp file.
    exe->kernels[0].symbol = "no_such_kernel";
    Error e = error_of([&] { save_artifact(path, *exe, test_library_path(), {}); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(e.message().find("does not export 'no_such_kernel' (kernel for Add)"), std::string::npos) << e.what();
    EXPECT_NO_THROW(load_artifact(path));
    files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) ++files, (void)entry;
    EXPECT_EQ(files, 1);
}

TEST(ArtifactRoundTrip, ARelativeLibraryPathIsAFileNotALibrarySearch) {
    ScratchDir dir;
    std::filesystem::copy_file(test_library_path(), dir.file("kernels.so"));
    const std::filesystem::path cwd = std::filesystem::current_path();
    std::filesystem::current_path(dir.path());
    EXPECT_NO_THROW(save_artifact("model.kiln", *make_test_executable(), "kernels.so", {}));
    std::filesystem::current_path(cwd);
    LoadedArtifact a = load_artifact(dir.file("model.kiln"));
    expect_same_floats(run_once(a.exe, test_input(2)), reference_output(test_input(2)));
}

TEST(ArtifactRoundTrip, RefusesWhatCannotBeSaved) {
    ScratchDir dir;
    auto exe = make_test_executable();
    // Strings cannot be mapped.
    exe->buffers[2] = BufferDesc{"names", DType::kString, {1}, BufferRole::kConstant, Tensor(DType::kString, {1})};
    Error e = error_of([&] { save_artifact(dir.file("a.kiln"), *exe, test_library_path(), {}); });
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(e.message().find("constant 'names' holds strings"), std::string::npos) << e.what();
    // A constant without its data.
    exe = make_test_executable();
    exe->buffers[1].constant = Tensor();
    e = error_of([&] { save_artifact(dir.file("a.kiln"), *exe, test_library_path(), {}); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(e.message().find("constant 'bias': expected f32[2,3,4] data, got none"), std::string::npos) << e.what();
    // Generated kernels need the library.
    e = error_of([&] { save_artifact(dir.file("a.kiln"), *make_test_executable(), "", {}); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    // An unwritable place.
    e = error_of([&] { save_artifact(dir.file("no/such/dir/a.kiln"), *make_test_executable(), test_library_path(), {}); });
    EXPECT_EQ(e.kind(), ErrorKind::kIOError);
    EXPECT_FALSE(std::filesystem::exists(dir.file("a.kiln")));
}

TEST(ArtifactRoundTrip, AnExecutableWithoutGeneratedKernelsNeedsNoLibrary) {
    ScratchDir dir;
    auto exe = std::make_shared<Executable>();
    exe->kernels = {{"", kAsyncCopySymbol, "Copy", true}};
    exe->buffers = {BufferDesc{"x", DType::kInt64, {3}, BufferRole::kInput, {}},
                    BufferDesc{"y", DType::kInt64, {3}, BufferRole::kOutput, {}}};
    exe->steps = {{0, {0, 1}, "copy", 1, 0}};
    exe->inputs = {0};
    exe->outputs = {1};
    save_artifact(dir.file("copy.kiln"), *exe, "", {});
    LoadedArtifact a = load_artifact(dir.file("copy.kiln"));
    Tensor x(DType::kInt64, {3});
    for (int i = 0; i < 3; ++i) x.set_i64(i, 10 * i - 7);
    Tensor y = run_once(a.exe, x);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(y.get_i64(i), 10 * i - 7);
}

TEST(ArtifactRoundTrip, SeveralArtifactsLoadSideBySide) {
    // Each load's kernel library is its own (same symbol names, separate libraries), including
    // after earlier ones were unloaded and their memfd numbers reused.
    ScratchDir dir;
    const std::string path = dir.file("model.kiln");
    save_artifact(path, *make_test_executable(), test_library_path(), {});
    std::vector<LoadedArtifact> live;
    for (int i = 0; i < 6; ++i) {
        live.push_back(load_artifact(path));
        if (i % 2) live.erase(live.begin());
    }
    for (LoadedArtifact& a : live) expect_same_floats(run_once(a.exe, test_input(1)), reference_output(test_input(1)));
}

TEST(ArtifactRoundTrip, TheKernelLibraryIsLoadedFromAMemfd) {
    ScratchDir dir;
    save_artifact(dir.file("m.kiln"), *make_test_executable(), test_library_path(), {});
    LoadedArtifact a = load_artifact(dir.file("m.kiln"));
    std::ifstream maps("/proc/self/maps");
    std::string all((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
    EXPECT_NE(all.find("/memfd:kiln-kernels"), std::string::npos) << "no memfd mapping: the temp-file fallback ran";
    for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
        EXPECT_EQ(entry.path().filename().string().rfind("kiln-kernels-", 0), std::string::npos)
            << "a temp kernel library was left behind: " << entry.path();
}

TEST(MemoryLibrary, TheTempFileRouteLoadsAndLeavesNoFile) {
    ScratchDir dir;
    setenv("TMPDIR", dir.path().c_str(), 1);
    const std::string bytes = read_bytes(test_library_path());
    auto lib = load_library_from_memory(bytes.data(), bytes.size(), "test kernels", /*allow_memfd=*/false);
    unsetenv("TMPDIR");
    EXPECT_NE(lib->symbol("art_add"), nullptr);
    EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "the temp file was not removed";
    Error e = error_of([&] { lib->symbol("nope"); });
    EXPECT_NE(e.message().find("kernel symbol 'nope' not found in 'test kernels'"), std::string::npos) << e.what();
    const std::string junk(100, 'j');
    e = error_of([&] { load_library_from_memory(junk.data(), junk.size(), "junk"); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
    EXPECT_NE(e.message().find("kernel library 'junk' is not an ELF file"), std::string::npos) << e.what();
}

TEST(ArtifactRoundTrip, ExternKernelsPrepareFromMappedWeights) {
    // oneDNN reorders its constant weights at load, reading them from the read-only mapping.
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    ScratchDir dir;
    const int64_t m = 6, k = 40, n = 24;
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1, 1);
    auto exe = std::make_shared<Executable>();
    BufferDesc b{"B", DType::kFloat32, {k, n}, BufferRole::kConstant, Tensor(DType::kFloat32, {k, n})};
    for (int64_t i = 0; i < k * n; ++i) b.constant.data_as<float>()[i] = u(rng);
    exe->buffers = {BufferDesc{"A", DType::kFloat32, {m, k}, BufferRole::kInput, {}}, b,
                    BufferDesc{"Y", DType::kFloat32, {m, n}, BufferRole::kOutput, {}}};
    KernelDesc kd;
    kd.description = "MatMul";
    kd.extern_name = "dnnl_matmul";
    kd.extern_params = ExternParams::format({{"a", "0"}, {"bm", "1"}, {"out", "2"}, {"batch", "1"},
                                            {"m", std::to_string(m)}, {"k", std::to_string(k)}, {"n", std::to_string(n)},
                                            {"a_strides", std::to_string(m * k) + "," + std::to_string(k) + ",1"},
                                            {"b_strides", "0," + std::to_string(n) + ",1"}});
    exe->kernels = {kd};
    exe->steps = {{0, {0, 1, 2}, "mm", 2, 2.0 * m * k * n}};
    exe->inputs = {0};
    exe->outputs = {2};
    save_artifact(dir.file("mm.kiln"), *exe, "", {});
    LoadedArtifact a = load_artifact(dir.file("mm.kiln"));
    Tensor x(DType::kFloat32, {m, k});
    for (int64_t i = 0; i < m * k; ++i) x.data_as<float>()[i] = u(rng);
    const Tensor y = run_once(a.exe, x);
    const float* bw = b.constant.data_as<float>();
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            double acc = 0;
            for (int64_t t = 0; t < k; ++t) acc += static_cast<double>(x.data_as<float>()[i * k + t]) * bw[t * n + j];
            EXPECT_NEAR(y.data_as<float>()[i * n + j], acc, 1e-5 + 1e-5 * std::fabs(acc)) << i << "," << j;
        }
}

TEST(ArtifactFile, IsArtifactFileLooksAtTheMagic) {
    ScratchDir dir;
    save_artifact(dir.file("m.kiln"), *make_test_executable(), test_library_path(), {});
    EXPECT_TRUE(is_artifact_file(dir.file("m.kiln")));
    EXPECT_FALSE(is_artifact_file(dir.file("missing.kiln")));
    write_bytes(dir.file("model.onnx"), std::string("\x08\x07\x12\x04kiln", 8));
    EXPECT_FALSE(is_artifact_file(dir.file("model.onnx")));
    write_bytes(dir.file("short"), "\x89KI");
    EXPECT_FALSE(is_artifact_file(dir.file("short")));
    EXPECT_FALSE(is_artifact_file(dir.path()));
}

}  // namespace
}  // namespace kiln::runtime::testing

namespace kiln::runtime::testing {
namespace {

// Writes seed artifacts for tests/artifact/fuzz/fuzz_artifact_loader.sh when it asks
// (KILN_ARTIFACT_SEED_DIR); skipped otherwise.
TEST(ArtifactFuzzSeeds, Write) {
    const char* dir = std::getenv("KILN_ARTIFACT_SEED_DIR");
    if (!dir) GTEST_SKIP() << "KILN_ARTIFACT_SEED_DIR is not set";
    ArtifactInfo info;
    info.metadata = {{"producer", "seed"}, {"dims", "N=2"}};
    save_artifact(std::string(dir) + "/small.kiln", *make_test_executable(), test_library_path(), info);
    auto copy = std::make_shared<Executable>();
    copy->kernels = {{"", kAsyncCopySymbol, "Copy", true}};
    copy->buffers = {BufferDesc{"x", DType::kInt64, {3}, BufferRole::kInput, {}},
                     BufferDesc{"c", DType::kInt8, {5}, BufferRole::kConstant, Tensor(DType::kInt8, {5})},
                     BufferDesc{"y", DType::kInt64, {3}, BufferRole::kOutput, {}}};
    copy->steps = {{0, {0, 2}, "copy", 1, 0}};
    copy->inputs = {0};
    copy->outputs = {2};
    save_artifact(std::string(dir) + "/copy.kiln", *copy, "", {});
}

}  // namespace
}  // namespace kiln::runtime::testing
