// The compile driver: cache layout and hits, diagnostics on failure, parallel compiles.
#include "codegen/compile_driver.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "../scoped_env.h"
#include "runtime/cpu_features.h"
#include "support/error.h"

namespace kiln::codegen {
namespace {
namespace fs = std::filesystem;

using kiln::testing::ScopedEnv;  // points KILN_CACHE_DIR (and KILN_CC) at fresh values

std::string fresh_dir(const std::string& tag) {
    static int counter = 0;
    fs::path p = fs::temp_directory_path() /
                 ("kiln-cd-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(p);
    return p.string();
}

std::string unique_source(const std::string& tag) {
    // Unique per process run so a first compile is never a cache hit from an earlier run.
    return "/* " + tag + " " + std::to_string(::getpid()) + " " + std::to_string(std::rand()) +
           " */\nint answer(void) { return 42; }\n";
}

TEST(CompileDriver, CacheDirFromEnvironment) {
    ScopedEnv e("KILN_CACHE_DIR", "/some/where");
    EXPECT_EQ(cache_dir(), "/some/where");
    unsetenv("KILN_CACHE_DIR");
    ScopedEnv x("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(cache_dir(), "/xdg/kiln");
}

TEST(CompileDriver, SecondCompileIsACacheHitWithoutTheCompiler) {
    std::string dir = fresh_dir("hit");
    ScopedEnv env("KILN_CACHE_DIR", dir);
    std::string src = unique_source("hit");
    CompileStats before = compile_stats();
    CompiledLibrary a = compile_c(src);
    EXPECT_FALSE(a.from_cache);
    EXPECT_EQ(compile_stats().compiled, before.compiled + 1);
    ASSERT_TRUE(fs::exists(a.path));
    // Layout: <cache>/<hh>/<key>.so with <key>.c beside it.
    fs::path so(a.path);
    EXPECT_EQ(so.parent_path().parent_path(), fs::path(dir));
    std::string key = so.stem().string();
    EXPECT_EQ(so.parent_path().filename().string(), key.substr(0, 2));
    EXPECT_EQ(so.extension(), ".so");
    EXPECT_TRUE(fs::exists(so.parent_path() / (key + ".c")));
    // No temporary files are left behind.
    int files = 0;
    for (const auto& e : fs::directory_iterator(so.parent_path())) {
        ++files;
        EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
    }
    EXPECT_EQ(files, 2);

    CompiledLibrary b = compile_c(src);
    EXPECT_TRUE(b.from_cache);
    EXPECT_EQ(b.path, a.path);
    EXPECT_EQ(compile_stats().compiled, before.compiled + 1);  // the compiler did not run again
    EXPECT_EQ(compile_stats().cached, before.cached + 1);

    // A different source is a different key.
    CompiledLibrary c = compile_c(src + "\n");
    EXPECT_FALSE(c.from_cache);
    EXPECT_NE(c.path, a.path);
    fs::remove_all(dir);
}

TEST(CompileDriver, SyntaxErrorIsCompileErrorWithDiagnostics) {
    std::string dir = fresh_dir("err");
    ScopedEnv env("KILN_CACHE_DIR", dir);
    std::string src = "int broken(void) { return 1 +; }\n";
    try {
        compile_c(src);
        FAIL() << "expected a CompileError";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kCompileError);
        std::string msg = e.message();
        EXPECT_NE(msg.find("error"), std::string::npos) << msg;          // the compiler's diagnostic
        EXPECT_NE(msg.find("broken"), std::string::npos) << msg;         // ... quoting the source
        size_t at = msg.find(dir);
        ASSERT_NE(at, std::string::npos) << msg;                          // the kept source's path
        std::string path = msg.substr(at, msg.find(".c", at) + 2 - at);
        EXPECT_TRUE(fs::exists(path)) << path;
    }
    // Nothing was cached for the failed source: a retry fails again.
    EXPECT_THROW(compile_c(src), Error);
    fs::remove_all(dir);
}

TEST(CompileDriver, MissingCompilerIsCompileError) {
    std::string dir = fresh_dir("nocc");
    ScopedEnv env("KILN_CACHE_DIR", dir);
    ScopedEnv cc("KILN_CC", "/nonexistent/kiln-no-such-cc");
    try {
        compile_c(unique_source("nocc"));
        FAIL() << "expected a CompileError";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kCompileError);
        EXPECT_NE(e.message().find("kiln-no-such-cc"), std::string::npos) << e.message();
    }
    fs::remove_all(dir);
}

TEST(CompileDriver, ManyDedupesAndCompilesInParallel) {
    std::string dir = fresh_dir("many");
    ScopedEnv env("KILN_CACHE_DIR", dir);
    std::vector<std::string> srcs;
    for (int i = 0; i < 4; ++i) srcs.push_back(unique_source("many" + std::to_string(i)));
    srcs.push_back(srcs[1]);
    srcs.push_back(srcs[0]);
    CompileStats before = compile_stats();
    auto libs = compile_c_many(srcs, 3);
    ASSERT_EQ(libs.size(), srcs.size());
    EXPECT_EQ(compile_stats().compiled, before.compiled + 4);
    EXPECT_EQ(libs[4].path, libs[1].path);
    EXPECT_EQ(libs[5].path, libs[0].path);
    for (const auto& l : libs) EXPECT_TRUE(fs::exists(l.path));
    auto again = compile_c_many(srcs, 0);
    for (const auto& l : again) EXPECT_TRUE(l.from_cache);
    // A failure among many is reported.
    srcs.push_back("syntax error here");
    EXPECT_THROW(compile_c_many(srcs, 2), Error);
    fs::remove_all(dir);
}

TEST(CompileDriver, ConcurrentCompilesOfOneSourceCompileOnceAndAgree) {
    std::string dir = fresh_dir("conc");
    ScopedEnv env("KILN_CACHE_DIR", dir);
    std::string src = unique_source("conc");
    std::vector<std::string> paths(4);
    std::vector<std::thread> ts;
    CompileStats before = compile_stats();
    for (int i = 0; i < 4; ++i) ts.emplace_back([&, i] { paths[i] = compile_c(src).path; });
    for (auto& t : ts) t.join();
    for (const auto& p : paths) EXPECT_EQ(p, paths[0]);
    EXPECT_EQ(compile_stats().compiled, before.compiled + 1);  // the others waited for the first
    EXPECT_TRUE(fs::exists(paths[0]));
    fs::remove_all(dir);
}

/// A kernel in the C emitter's form: a static helper (the same name in every source, as the
/// prelude's are) and `kiln_kernel`, which stores `value` into its first argument.
std::string kernel_source(int value, const std::string& tag) {
    return "/* " + tag + " " + std::to_string(::getpid()) + " */\n#include <stdint.h>\n"
           "static int32_t helper(void) { return " + std::to_string(value) + "; }\n"
           "int32_t kiln_kernel(void* const* args, const void* env) { *(int32_t*)args[0] = helper(); return 0; }\n";
}

/// Calls `symbol` of the library at `path`; returns the value it stored.
int32_t call_kernel(const std::string& path, const std::string& symbol) {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(h, nullptr) << dlerror();
    if (!h) return -1;
    using Fn = int32_t (*)(void* const*, const void*);
    auto fn = reinterpret_cast<Fn>(dlsym(h, symbol.c_str()));
    EXPECT_NE(fn, nullptr) << symbol;
    int32_t out = -1;
    void* args[] = {&out};
    if (fn) EXPECT_EQ(fn(args, nullptr), 0);
    dlclose(h);
    return out;
}

TEST(CompileDriver, KernelLibraryExportsEveryKernelUnderItsOwnSymbol) {
    std::string dir = fresh_dir("lib");
    ScopedEnv env("KILN_CACHE_DIR", dir);
    std::vector<std::string> srcs = {kernel_source(7, "lib"), kernel_source(11, "lib"), kernel_source(7, "lib")};
    KernelLibrary lib = compile_c_library(srcs, 2);
    ASSERT_EQ(lib.symbols.size(), 3u);
    EXPECT_EQ(lib.objects_compiled, 2);  // identical sources: one object
    EXPECT_FALSE(lib.from_cache);
    EXPECT_EQ(lib.symbols[0], lib.symbols[2]);
    EXPECT_NE(lib.symbols[0], lib.symbols[1]);
    EXPECT_EQ(lib.symbols[1], kernel_library_symbol(srcs[1]));
    EXPECT_EQ(call_kernel(lib.path, lib.symbols[0]), 7);
    EXPECT_EQ(call_kernel(lib.path, lib.symbols[1]), 11);

    // Again: nothing is compiled or linked.
    KernelLibrary again = compile_c_library(srcs, 2);
    EXPECT_EQ(again.objects_compiled, 0);
    EXPECT_TRUE(again.from_cache);
    EXPECT_EQ(again.path, lib.path);

    // One changed kernel: one object compiled, a new link; the others keep their symbols.
    srcs[1] = kernel_source(13, "lib");
    KernelLibrary changed = compile_c_library(srcs, 2);
    EXPECT_EQ(changed.objects_compiled, 1);
    EXPECT_FALSE(changed.from_cache);
    EXPECT_NE(changed.path, lib.path);
    EXPECT_EQ(changed.symbols[0], lib.symbols[0]);
    EXPECT_EQ(call_kernel(changed.path, changed.symbols[1]), 13);

    // No kernels: still a library that loads.
    KernelLibrary empty = compile_c_library({}, 1);
    EXPECT_TRUE(empty.symbols.empty());
    void* h = dlopen(empty.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(h, nullptr) << dlerror();
    if (h) dlclose(h);
    fs::remove_all(dir);
}

// An artifact's kernel library may use only instructions its recorded feature list
// (runtime::host_cpu_features) names: a source that fails to compile when the compiler enabled a
// feature outside that list (as -march=native does on this AMD host: ADX, SHA, VAES, MOVBE, ...),
// or when a listed one is off.
TEST(CompileDriver, KernelLibraryUsesOnlyTheFeaturesAnArtifactRecords) {
#if !defined(__x86_64__)
    GTEST_SKIP() << "x86-64 only";
#endif
    std::string dir = fresh_dir("isa");
    ScopedEnv env("KILN_CACHE_DIR", dir);
    const std::vector<std::string> have = runtime::host_cpu_features();
    auto listed = [&](const std::string& f) { return std::find(have.begin(), have.end(), f) != have.end(); };
    std::string src = kernel_source(5, "isa");
    for (const char* unlisted : {"__ADX__", "__SHA__", "__VAES__", "__MOVBE__", "__AVX512VBMI2__", "__CLZERO__",
                                 "__RDSEED__", "__AVX512BITALG__", "__AVX512VPOPCNTDQ__", "__LZCNT__"})
        src += std::string("#ifdef ") + unlisted + "\n#error \"" + unlisted + " is not in the artifact's feature list\"\n#endif\n";
    const std::pair<const char*, const char*> checked[] = {{"avx2", "__AVX2__"}, {"fma", "__FMA__"}, {"avx512f", "__AVX512F__"},
                                                           {"bmi2", "__BMI2__"}, {"f16c", "__F16C__"}};
    for (const auto& [feature, macro] : checked)
        src += std::string(listed(feature) ? "#ifndef " : "#ifdef ") + macro + "\n#error \"" + macro +
               " disagrees with the host's feature list\"\n#endif\n";
    KernelLibrary lib = compile_c_library({src}, 1);
    EXPECT_EQ(call_kernel(lib.path, lib.symbols[0]), 5);
    for (const std::string& f : library_isa_flags()) EXPECT_NE(f, "-march=native");
    fs::remove_all(dir);
}

TEST(CompileDriver, KernelLibraryReportsCompileAndLinkErrors) {
    std::string dir = fresh_dir("liberr");
    ScopedEnv env("KILN_CACHE_DIR", dir);
    try {
        compile_c_library({kernel_source(1, "liberr"), "int32_t kiln_kernel(void) { return 1 +; }\n"}, 2);
        FAIL() << "expected a CompileError";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kCompileError);
        EXPECT_NE(e.message().find("kept at " + dir), std::string::npos) << e.message();
    }
    // Two sources defining the same external symbol (not the emitter's form): the link fails.
    const std::string dup = "int kiln_shared_global = 1;\n";
    try {
        compile_c_library({dup + kernel_source(1, "liberr"), dup + kernel_source(2, "liberr")}, 2);
        FAIL() << "expected a CompileError";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kCompileError);
        EXPECT_NE(e.message().find("linking 2 kernel objects"), std::string::npos) << e.message();
        EXPECT_NE(e.message().find("kiln_shared_global"), std::string::npos) << e.message();
    }
    fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::codegen
