// Symbolic-shape kernels vs static kernels (docs/dynamic_shapes.md, "Symbolic-shape kernels").
//
// For each kernel of tests/tir/symbolic_kernel_defs.h (bias add, row softmax, a reduction over
// the rows, the tiled FFN matmul), ONE symbolic kernel (dims as parameters) is compiled and run
// at the BERT-base sizes (rows = batch*seq = 128 and 1024, hidden 768, FFN 3072; the softmax
// over attention probabilities [12*rows, 128]; the matmul also at 4 rows, where the symbolic
// kernel runs only its tail); the static kernel of the same definition and
// schedule is compiled for each size. The two are timed interleaved, in alternating order, for
// several rounds; each measurement repeats the call for >= 10 ms; the table reports medians
// per call, their symbolic/static ratio and the median of the per-round (paired) ratios
// (target <= 1.05).
//
//   build/bin/kiln-bench-symbolic-kernels [--rounds 15] [--threads 1] [--only matmul]
//   build/bin/kiln-bench-symbolic-kernels --smoke    # each kernel once per size, outputs compared
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../tests/tir/symbolic_kernel_defs.h"
#include "codegen/c_emitter.h"
#include "codegen/compile_driver.h"
#include "runtime/executable.h"
#include "runtime/thread_pool.h"
#include "support/error.h"
#include "support/tensor.h"
#include "tir/kernel_dims.h"

using namespace kiln;
using te::Expr;

namespace {

struct Options {
    bool smoke = false;
    int rounds = 15;
    int threads = 1;  // 1: no pool (the kernels' parallel loops run inline)
    std::string only;
};

/// One kernel definition at dims given as expressions (a dim Var each: the symbolic kernel).
struct Case {
    std::string name;
    std::function<tir::PrimFunc(const std::vector<Expr>&, const std::string&)> build;
    std::vector<std::string> dim_names;
    std::vector<std::vector<int64_t>> sizes;  // dim values per timed size
    size_t num_inputs;
};

std::vector<Case> cases() {
    using symtest::Built;
    const Expr H = te::int_imm(768), F = te::int_imm(3072);
    return {
        {"bias_add[rows,768]", [=](auto& d, auto& n) { return symtest::bias_add(d[0], H, n).func; }, {"rows"},
         {{128}, {1024}}, 2},
        {"softmax[12*rows,128]", [=](auto& d, auto& n) { return symtest::softmax(d[0], d[1], n).func; },
         {"rows", "cols"}, {{12 * 128, 128}, {12 * 1024, 128}}, 1},
        {"column_sum[rows,768]", [=](auto& d, auto& n) { return symtest::column_sum(d[0], H, n).func; }, {"rows"},
         {{128}, {1024}}, 1},
        {"matmul[rows,768]x[768,3072]",
         [=](auto& d, auto& n) { return symtest::matmul(d[0], H, F, 6, 64, n).func; }, {"rows"},
         {{4}, {128}, {1024}}, 2},
    };
}

/// A compiled kernel and the library that holds it.
struct Kernel {
    tir::PrimFunc func;
    std::shared_ptr<runtime::Executable> exe;
    kiln_kernel_fn fn = nullptr;

    int32_t call(std::vector<void*>& ptrs, const std::vector<int64_t>& dims, const kiln_kernel_env* env) const {
        if (func.dims.empty()) return fn(ptrs.data(), env);
        return reinterpret_cast<kiln_kernel_dims_fn>(reinterpret_cast<void*>(fn))(ptrs.data(), dims.data(), env);
    }
};

Kernel compile(tir::PrimFunc f) {
    Kernel k;
    k.func = std::move(f);
    codegen::CompiledLibrary lib = codegen::compile_c(codegen::emit_c(k.func));
    k.exe = std::make_shared<runtime::Executable>();
    k.exe->kernels.push_back({lib.path, k.func.name, k.func.name});
    k.exe->load();
    k.fn = k.exe->kernel_fn(0);
    return k;
}

double seconds_per_call(const Kernel& k, std::vector<void*>& ptrs, const std::vector<int64_t>& dims,
                        const kiln_kernel_env* env, int reps) {
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) KILN_CHECK(k.call(ptrs, dims, env) == 0, kInternal) << k.func.name << " failed";
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/// Runs both kernels once on the same inputs; returns the largest relative difference of outputs.
double compare_once(const Kernel& sym, const Kernel& stat, std::vector<Tensor>& args, const std::vector<int64_t>& dims,
                    size_t num_inputs, const kiln_kernel_env* env) {
    std::vector<Tensor> other;
    for (auto& a : args) other.push_back(a.clone());
    std::vector<void*> p1, p2;
    for (auto& a : args) p1.push_back(a.data());
    for (auto& a : other) p2.push_back(a.data());
    KILN_CHECK(sym.call(p1, dims, env) == 0 && stat.call(p2, {}, env) == 0, kInternal) << "kernel failed";
    double worst = 0;
    for (size_t p = num_inputs; p < args.size(); ++p)
        for (int64_t i = 0; i < args[p].numel(); ++i) {
            double a = args[p].get_f64(i), b = other[p].get_f64(i);
            worst = std::max(worst, std::abs(a - b) / (1e-3 + std::abs(b)));
        }
    return worst;
}

int run_case(const Case& c, const Options& opt, const kiln_kernel_env* env) {
    std::vector<Expr> vars;
    for (const auto& n : c.dim_names) vars.push_back(te::make_dim(n));
    Kernel sym = compile(c.build(vars, "sym_kernel"));
    int failures = 0;
    for (const auto& dims : c.sizes) {
        std::vector<Expr> consts;
        for (int64_t d : dims) consts.push_back(te::int_imm(d));
        Kernel stat = compile(c.build(consts, "static_kernel"));
        const te::DimValues bound = tir::bind_dims(sym.func, dims);
        std::vector<Tensor> args;
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> u(-1.f, 1.f);
        for (size_t p = 0; p < sym.func.params.size(); ++p) {
            Tensor t(DType::kFloat32, tir::buffer_shape(sym.func.params[p], bound));
            for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = p < c.num_inputs ? u(rng) : 0.f;
            args.push_back(std::move(t));
        }
        std::string size;
        for (size_t i = 0; i < dims.size(); ++i) size += (i ? "," : "") + c.dim_names[i] + "=" + std::to_string(dims[i]);
        const double diff = compare_once(sym, stat, args, dims, c.num_inputs, env);
        const bool ok = diff <= 1e-4;
        failures += ok ? 0 : 1;
        if (opt.smoke) {
            std::printf("%-30s %-22s outputs %s (max rel diff %.2g)\n", c.name.c_str(), size.c_str(),
                        ok ? "match" : "DIFFER", diff);
            continue;
        }
        std::vector<void*> ptrs;
        for (auto& a : args) ptrs.push_back(a.data());
        const double once = seconds_per_call(stat, ptrs, {}, env, 1);
        const int reps = std::max(1, static_cast<int>(0.01 / std::max(once, 1e-7)));
        // Each round times the pair back to back (alternating which goes first); the paired
        // ratio of a round is robust to the slow phases of a loaded machine.
        std::vector<double> ts, tsym, ratios;
        for (int r = 0; r < opt.rounds; ++r) {
            if (r % 2 == 0) ts.push_back(seconds_per_call(stat, ptrs, {}, env, reps));
            tsym.push_back(seconds_per_call(sym, ptrs, dims, env, reps));
            if (r % 2 == 1) ts.push_back(seconds_per_call(stat, ptrs, {}, env, reps));
            ratios.push_back(tsym.back() / ts.back());
        }
        const double ms = median(ts) * 1e3, msym = median(tsym) * 1e3;
        std::printf("%-30s %-22s static %9.4f ms  symbolic %9.4f ms  ratio %.3f  paired %.3f%s\n", c.name.c_str(),
                    size.c_str(), ms, msym, msym / ms, median(ratios), ok ? "" : "  OUTPUTS DIFFER");
        std::fflush(stdout);
    }
    return failures;
}

}  // namespace

int main(int argc, char** argv) {
    Options opt;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--smoke") opt.smoke = true;
        else if (a == "--rounds") opt.rounds = std::max(1, std::atoi(next().c_str()));
        else if (a == "--threads") opt.threads = std::max(1, std::atoi(next().c_str()));
        else if (a == "--only") opt.only = next();
        else {
            std::fprintf(stderr, "usage: %s [--smoke] [--rounds N] [--threads N] [--only NAME]\n", argv[0]);
            return 2;
        }
    }
    std::unique_ptr<runtime::ThreadPool> pool;
    kiln_kernel_env env{};
    if (opt.threads > 1) {
        pool = std::make_unique<runtime::ThreadPool>(opt.threads);
        env = pool->kernel_env();
    }
    std::printf("symbolic vs static kernels: %d thread(s), %d rounds, medians per call\n", opt.threads, opt.rounds);
    int failures = 0;
    try {
        for (const auto& c : cases())
            if (opt.only.empty() || c.name.find(opt.only) != std::string::npos)
                failures += run_case(c, opt, pool ? &env : nullptr);
    } catch (const Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return failures ? 1 : 0;
}
