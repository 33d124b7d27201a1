// Kernel units: several emitted kernels compiled as one translation unit (codegen/kernel_units.h),
// each loaded under its own symbol and checked against the tir interpreter.
#include "codegen/kernel_units.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "codegen/c_emitter.h"
#include "codegen/compile_driver.h"
#include "runtime/executable.h"
#include "runtime/thread_pool.h"
#include "support/error.h"
#include "tir/interpreter.h"
#include "tir/stmt.h"

namespace kiln::codegen {
namespace {
namespace fs = std::filesystem;
using te::BinaryOp;
using te::Expr;

Expr i64(int64_t v) { return std::make_shared<te::IntImmNode>(DType::kInt64, v); }
Expr f32(double v) { return std::make_shared<te::FloatImmNode>(DType::kFloat32, v); }
Expr bin(BinaryOp op, Expr a, Expr b) { return std::make_shared<te::BinaryNode>(a->dtype, op, a, b); }
Expr load(const te::Buffer& b, Expr idx) {
    return std::make_shared<te::BufferLoadNode>(te::compute_dtype(b->dtype), b, std::move(idx));
}

/// out[r, j] = A[r, j] * scale + r, rows in parallel (an outlined task) and `tasks` such loops
/// in sequence (task0, task1, ...), each adding its own offset: kernels that differ by `scale`.
/// `inner`: the kind of the loop over j (kUnrolled: KILN_UNROLL(13) in the source).
tir::PrimFunc scaled_rows(double scale, int tasks, te::LoopKind inner = te::LoopKind::kSerial) {
    const int64_t rows = 29, cols = 13;
    auto A = te::make_buffer("A", DType::kFloat32, {rows, cols});
    auto O = te::make_buffer("out", DType::kFloat32, {rows, cols});
    std::vector<tir::Stmt> loops;
    for (int t = 0; t < tasks; ++t) {
        te::Var r = te::make_var("r"), j = te::make_var("j");
        Expr idx = bin(BinaryOp::kAdd, bin(BinaryOp::kMul, r, i64(cols)), j);
        Expr in = t == 0 ? load(A, idx) : load(O, idx);
        Expr v = bin(BinaryOp::kAdd, bin(BinaryOp::kMul, in, f32(scale)),
                     std::make_shared<te::CastNode>(DType::kFloat32, r));
        loops.push_back(tir::make_for(r, i64(rows), te::LoopKind::kParallel,
                                      tir::make_for(j, i64(cols), inner, tir::make_store(O, idx, v))));
    }
    return tir::PrimFunc{"kiln_kernel", {A, O}, tir::make_seq(loops)};
}

/// Points KILN_CACHE_DIR at a fresh folder for one test.
class FreshCache {
public:
    FreshCache() : dir_((fs::temp_directory_path() / ("kiln-units-" + std::to_string(::getpid()) + "-" +
                                                      std::to_string(std::rand())))
                            .string()) {
        if (const char* old = std::getenv("KILN_CACHE_DIR")) old_ = old;
        setenv("KILN_CACHE_DIR", dir_.c_str(), 1);
    }
    ~FreshCache() {
        if (old_.empty()) unsetenv("KILN_CACHE_DIR");
        else setenv("KILN_CACHE_DIR", old_.c_str(), 1);
        fs::remove_all(dir_);
    }
    const std::string& dir() const { return dir_; }

private:
    std::string dir_, old_;
};

std::vector<Tensor> inputs_for(const tir::PrimFunc& f) {
    std::vector<Tensor> args;
    for (const auto& b : f.params) args.emplace_back(b->dtype, b->shape);
    float* a = args[0].data_as<float>();
    for (int64_t e = 0; e < args[0].numel(); ++e) a[e] = 0.25f * static_cast<float>(e % 17) - 1.5f;
    return args;
}

TEST(KernelUnits, BalanceIsEvenAndDeterministic) {
    const std::vector<size_t> sizes = {10, 90, 30, 30, 40, 20};
    std::vector<std::vector<size_t>> g = balance_units(sizes, 2);
    ASSERT_EQ(g.size(), 2u);
    size_t a = 0, b = 0;
    for (size_t i : g[0]) a += sizes[i];
    for (size_t i : g[1]) b += sizes[i];
    EXPECT_EQ(a + b, 220u);
    EXPECT_LE(std::max(a, b), 120u);  // largest first, each to the lighter unit
    EXPECT_EQ(g, balance_units(sizes, 2));
    EXPECT_EQ(g[0].front(), 0u);  // units ordered by their first kernel
    EXPECT_EQ(balance_units(sizes, 10).size(), sizes.size());  // never an empty unit
    std::vector<int> seen(sizes.size(), 0);  // every kernel in exactly one unit
    for (const auto& unit : g)
        for (size_t i : unit) ++seen.at(i);
    EXPECT_EQ(seen, std::vector<int>(sizes.size(), 1));
}

TEST(KernelUnits, UnrolledLengthCountsEachUnrolledBodyItsFactorOfTimes) {
    EXPECT_EQ(unrolled_length("abc"), 3u);
    // "for {" and "}" once; the body "{x}" (3 characters) 4 times.
    EXPECT_EQ(unrolled_length("KILN_UNROLL(4)\nfor {x}"), std::string("KILN_UNROLL(4)\nfor ").size() + 3 * 4);
    // Nested: the inner body 2 x 3 times, the outer body's own text 2 times.
    const std::string inner = "{y}", outer = "{a KILN_UNROLL(3) " + inner + " b}";
    const std::string text = "KILN_UNROLL(2)" + outer;
    const size_t outer_own = outer.size() - inner.size();
    EXPECT_EQ(unrolled_length(text), std::string("KILN_UNROLL(2)").size() + 2 * outer_own + 6 * inner.size());
    EXPECT_EQ(unrolled_length("{ { } } {}"), 10u);  // braces of loops that are not unrolled count once
}

TEST(KernelUnits, QuickCompileCostGrowsWithTheTextAndItsUnrolledLoops) {
    const std::string plain = emit_c(scaled_rows(2.0, 1));
    const std::string longer = emit_c(scaled_rows(2.0, 3));
    const std::string unrolled = emit_c(scaled_rows(2.0, 1, te::LoopKind::kUnrolled));
    ASSERT_NE(unrolled.find("KILN_UNROLL(13)"), std::string::npos) << unrolled;
    EXPECT_EQ(kernel_body(plain)->find("KILN_UNROLL("), std::string::npos);
    EXPECT_LT(quick_compile_cost(plain), quick_compile_cost(longer));
    EXPECT_LT(quick_compile_cost(plain), quick_compile_cost(unrolled));
    // The prelude every kernel shares is not counted: a kernel's cost is its own text's.
    const size_t body = kernel_body(plain)->size();
    EXPECT_EQ(quick_compile_cost(plain), 7000 + (body * 193 + body * 67) / 100);
}

TEST(KernelUnits, UnrolledLoopsWeighOnTheCompileCost) {
    const std::string plain(1000, ' ');
    std::string unrolled = plain;
    for (int k = 0; k < 10; ++k) unrolled += "for (;;) {  /* unrolled */ }\n";
    EXPECT_EQ(compile_cost(plain), plain.size());
    EXPECT_EQ(compile_cost(unrolled), 2 * unrolled.size());  // ten unrolled loops: twice the text
}

/// Runs kernel k of `exe` on funcs[k]'s inputs and compares with the tir interpreter.
void expect_kernels_match_interpreter(const runtime::Executable& exe, const std::vector<tir::PrimFunc>& funcs) {
    runtime::ThreadPool pool(2);
    for (size_t k = 0; k < funcs.size(); ++k) {
        std::vector<Tensor> got = inputs_for(funcs[k]), want = inputs_for(funcs[k]);
        std::vector<void*> ptrs = {got[0].data(), got[1].data()};
        exe.run_kernel(static_cast<int>(k), ptrs.data(), pool.kernel_env()).throw_if_error();
        tir::interpret(funcs[k], want);
        const float* g = got[1].data_as<float>();
        const float* w = want[1].data_as<float>();
        for (int64_t e = 0; e < got[1].numel(); ++e)
            ASSERT_NEAR(g[e], w[e], 1e-5 * (1 + std::abs(w[e]))) << "kernel " << k << " element " << e;
    }
}

TEST(KernelUnits, ManyKernelsShareUnitsAndEachMatchesTheInterpreter) {
    FreshCache cache;
    std::vector<tir::PrimFunc> funcs;
    std::vector<std::string> sources;
    for (int k = 0; k < 5; ++k) {
        funcs.push_back(scaled_rows(0.5 + k, 1 + k % 3));
        sources.push_back(emit_c(funcs.back()));
        ASSERT_TRUE(kernel_body(sources.back()).has_value());
    }
    sources.push_back(sources[1]);  // a duplicate: built once
    std::vector<KernelBuild> builds = compile_c_kernels(sources, 2);
    ASSERT_EQ(builds.size(), sources.size());
    std::set<std::string> libraries;
    for (const KernelBuild& b : builds) {
        libraries.insert(b.library.path);
        EXPECT_FALSE(b.library.from_cache);
        EXPECT_NE(b.symbol, "kiln_kernel");  // 5 kernels on 2 processes: every one in a unit
    }
    EXPECT_EQ(libraries.size(), 2u);
    EXPECT_EQ(builds[5].symbol, builds[1].symbol);

    runtime::Executable exe;
    for (const KernelBuild& b : builds) exe.kernels.push_back({b.library.path, b.symbol, "unit kernel"});
    exe.load();
    expect_kernels_match_interpreter(exe, funcs);

    // The same kernels again: the units come from the cache, under the same symbols.
    std::vector<KernelBuild> again = compile_c_kernels(sources, 2);
    for (size_t k = 0; k < sources.size(); ++k) {
        EXPECT_TRUE(again[k].library.from_cache) << k;
        EXPECT_EQ(again[k].symbol, builds[k].symbol);
        EXPECT_EQ(again[k].library.path, builds[k].library.path);
    }
}

// A tiered compile's two builds (compiler/kernel_upgrade.h): the quick kernels load and run, the
// -O3 builds of the same sources replace them in the executable, and the cache then holds the
// -O3 units a later compile looks for.
TEST(KernelUnits, QuickKernelsAreReplacedByTheirO3Builds) {
    FreshCache cache;
    std::vector<tir::PrimFunc> funcs;
    std::vector<std::string> sources;
    for (int k = 0; k < 5; ++k) {
        funcs.push_back(scaled_rows(1.5 + k, 1 + k % 2));
        sources.push_back(emit_c(funcs.back()));
    }
    EXPECT_EQ(kernels_to_compile(sources, 2, Optimization::kHot), 5u);
    std::vector<KernelBuild> quick = compile_c_kernels(sources, 2, Optimization::kQuick);
    EXPECT_EQ(kernels_to_compile(sources, 2, Optimization::kQuick), 0u);
    EXPECT_EQ(kernels_to_compile(sources, 2, Optimization::kHot), 5u);

    runtime::Executable exe;
    for (const KernelBuild& b : quick) exe.kernels.push_back({b.library.path, b.symbol, "quick kernel"});
    exe.load();
    expect_kernels_match_interpreter(exe, funcs);

    std::vector<KernelBuild> hot = compile_c_kernels(sources, 2, Optimization::kHot);
    EXPECT_EQ(kernels_to_compile(sources, 2, Optimization::kHot), 0u);  // the units are cached
    std::vector<int> ids;
    std::vector<std::string> libraries, symbols;
    for (size_t k = 0; k < hot.size(); ++k) {
        EXPECT_NE(hot[k].library.path, quick[k].library.path);
        EXPECT_EQ(hot[k].symbol, quick[k].symbol);  // the symbol is the source's
        ids.push_back(static_cast<int>(k));
        libraries.push_back(hot[k].library.path);
        symbols.push_back(hot[k].symbol);
    }
    // A replacement that cannot load changes nothing.
    std::vector<kiln_kernel_fn> before;
    for (size_t k = 0; k < sources.size(); ++k) before.push_back(exe.kernel_fn(static_cast<int>(k)));
    std::vector<std::string> wrong = symbols;
    wrong.back() = "no_such_symbol";
    EXPECT_THROW(exe.replace_kernels(ids, libraries, wrong), Error);
    for (size_t k = 0; k < sources.size(); ++k) EXPECT_EQ(exe.kernel_fn(static_cast<int>(k)), before[k]);

    exe.replace_kernels(ids, libraries, symbols);
    for (size_t k = 0; k < sources.size(); ++k) EXPECT_NE(exe.kernel_fn(static_cast<int>(k)), before[k]) << k;
    expect_kernels_match_interpreter(exe, funcs);
}

// The quick tier drops the schedule's unroll requests (KILN_QUICK_TIER), -O3 keeps them: both
// builds of kernels with an unrolled loop match the interpreter.
TEST(KernelUnits, UnrolledLoopsMatchTheInterpreterAtBothTiers) {
    FreshCache cache;
    std::vector<tir::PrimFunc> funcs;
    std::vector<std::string> sources;
    for (int k = 0; k < 4; ++k) {
        funcs.push_back(scaled_rows(0.75 + k, 1 + k % 2, te::LoopKind::kUnrolled));
        sources.push_back(emit_c(funcs.back()));
    }
    for (Optimization opt : {Optimization::kQuick, Optimization::kHot}) {
        runtime::Executable exe;
        for (const KernelBuild& b : compile_c_kernels(sources, 2, opt))
            exe.kernels.push_back({b.library.path, b.symbol, "unrolled kernel"});
        exe.load();
        expect_kernels_match_interpreter(exe, funcs);
    }
}

TEST(KernelUnits, AKernelThatFailsInAUnitIsReportedByItself) {
    FreshCache cache;
    std::vector<std::string> sources;
    for (int k = 0; k < 4; ++k) sources.push_back(emit_c(scaled_rows(1.0 + k, 1)));
    sources[2] += "static int kiln_broken_kernel(void) { return 1 +; }\n";
    try {
        compile_c_kernels(sources, 1);
        FAIL() << "expected a CompileError";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kCompileError);
        EXPECT_NE(e.message().find("kept at " + cache.dir()), std::string::npos) << e.message();
        EXPECT_NE(e.message().find("kiln_broken_kernel"), std::string::npos) << e.message();
        EXPECT_EQ(e.message().find("Kiln kernel unit"), std::string::npos) << e.message();
    }
}

}  // namespace
}  // namespace kiln::codegen
