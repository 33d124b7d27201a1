// The schedule templates' knobs (te/schedule_config.h): for one representative op per template,
// the declared space (lowering with an empty config) holds the template's knobs, and the
// default config, each knob's extreme values and a few random configs all compile (C, through
// the kernel ABI with a parallel_for that really splits the range) and compute what the tir
// interpreter computes for the UNSCHEDULED lowering, within 1e-4 (relative to max(1, |want|):
// float sums run in a different order). An empty config and one naming every knob's default
// emit the same C; a value that is not among a knob's choices falls back to its default.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <set>

#include "codegen/c_emitter.h"
#include "codegen/compile_driver.h"
#include "op/op_def.h"
#include "op/registry.h"
#include "op_test_util.h"
#include "runtime/kernel_abi.h"
#include "te/schedule_config.h"
#include "tir/interpreter.h"
#include "tir/lower.h"
#include "tir/simplify.h"

namespace kiln::op::testing {
namespace {

using Ints = std::vector<int64_t>;
constexpr double kTol = 1e-4;

// parallel_for that really splits: runs [0, n) as three chunks.
void split_parallel_for(void*, int64_t n, kiln_task_fn fn, void* ctx) {
    int64_t a = n / 3, b = 2 * n / 3;
    if (a > 0) fn(0, a, ctx);
    if (b > a) fn(a, b, ctx);
    if (n > b) fn(b, n, ctx);
}

struct KnobCase {
    std::string name, op;
    std::vector<Shape> inputs;  // f32 graph inputs (the output: the op's dtype)
    ir::AttrMap attrs;
    std::vector<std::string> knobs;  // the knobs the template must declare for this shape
};

/// One op built once; lower(knobs) schedules it as compiler::lower_unit does for a one-node unit.
class OpUnderTest {
public:
    explicit OpUnderTest(const KnobCase& c) : case_(c) {
        std::mt19937 rng(42);
        std::uniform_real_distribution<double> dist(-1.0, 1.0);
        std::vector<ir::Value*> ins;
        for (size_t i = 0; i < c.inputs.size(); ++i) {
            ins.push_back(g_.add_input("in" + std::to_string(i), ir::TensorType::of_static(DType::kFloat32, c.inputs[i])));
            Tensor t(DType::kFloat32, c.inputs[i]);
            for (int64_t k = 0; k < t.numel(); ++k) t.set_f64(k, dist(rng));
            host_.push_back(t);
        }
        def_ = OpRegistry::global().find(c.op);
        node_ = g_.add_node(c.op, ins, c.attrs, std::vector<ir::TensorType>(1), {}, c.name);
        check_node(*node_, *def_);
        infer_node(*node_);
    }

    struct Lowered {
        tir::PrimFunc func;
        std::string source;
        std::vector<te::Knob> space;
        te::KnobValues applied;
    };

    Lowered lower(const te::KnobValues& knobs, const std::string& fname) {
        std::vector<te::Tensor> args, outs;
        build(args, outs);
        te::Schedule sch = te::create_schedule(outs, te::ScheduleConfig(knobs));
        if (def_->schedule)
            def_->schedule(sch, outs);
        else
            default_schedule(sch, outs);
        Lowered l;
        l.func = tir::simplify(tir::lower(sch, args, fname));
        l.source = codegen::emit_c(l.func);
        l.space = sch.config().space();
        l.applied = sch.config().applied();
        return l;
    }

    /// The unscheduled lowering, interpreted: the oracle.
    Tensor reference() {
        std::vector<te::Tensor> args, outs;
        build(args, outs);
        te::Schedule plain = te::create_schedule(outs);
        tir::PrimFunc f = tir::simplify(tir::lower(plain, args, "k_plain"));
        std::vector<Tensor> bufs = host_;
        bufs.emplace_back(node_->output(0)->type().dtype, out_shape());
        tir::interpret(f, bufs);
        return bufs.back();
    }

    Tensor run(const std::string& lib, const std::string& fname) {
        void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
        EXPECT_NE(h, nullptr) << dlerror();
        auto fn = reinterpret_cast<kiln_kernel_fn>(dlsym(h, fname.c_str()));
        EXPECT_NE(fn, nullptr) << fname;
        std::vector<Tensor> bufs = host_;
        bufs.emplace_back(node_->output(0)->type().dtype, out_shape());
        std::vector<void*> ptrs;
        for (Tensor& t : bufs) ptrs.push_back(t.data());
        kiln_kernel_env env{nullptr, &split_parallel_for};
        EXPECT_EQ(fn(ptrs.data(), &env), 0);
        return bufs.back();
    }

private:
    Shape out_shape() const { return node_->output(0)->type().static_shape(); }

    void build(std::vector<te::Tensor>& args, std::vector<te::Tensor>& outs) {
        std::vector<te::Tensor> ph;
        for (size_t i = 0; i < case_.inputs.size(); ++i)
            ph.push_back(te::placeholder(case_.inputs[i], DType::kFloat32, "in" + std::to_string(i)));
        ComputeArgs cargs{*node_, ph, {node_->output(0)->type()}};
        outs = def_->compute(cargs);
        args = ph;
        args.insert(args.end(), outs.begin(), outs.end());
    }

    KnobCase case_;
    ir::Graph g_;
    ir::Node* node_ = nullptr;
    const OpDef* def_ = nullptr;
    std::vector<Tensor> host_;
};

// Representative ops, small but with every knob of their template in play.
std::vector<KnobCase> knob_cases() {
    const ir::AttrMap pad1 = {{"pads", Ints{1, 1, 1, 1}}};
    return {
        // blocked conv micro-kernel: 4 output-channel blocks, 2 input-channel blocks, 3x3, OW 10.
        {"conv_nchwc", "KilnConv2dNCHWc", {{1, 2, 5, 10, 8}, {4, 2, 3, 3, 8, 16}, {4, 16}}, pad1,
         {"conv.ob", "conv.t", "conv.par", "conv.order"}},
        // blocked depthwise conv and max pool (OW 12: blocks 1, 2, 3, 4, 6, 8 with a tail, 12).
        {"depthwise_nchwc", "KilnDepthwiseConv2dNCHWc", {{1, 3, 6, 12, 16}, {3, 3, 3, 16}, {3, 16}}, pad1,
         {"bwin.t", "bwin.par"}},
        {"maxpool_nchwc", "KilnMaxPoolNCHWc", {{1, 2, 9, 12, 16}},
         {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}}, {"bwin.t", "bwin.par"}},
        // NCHW pool and conv.
        {"avgpool", "AveragePool", {{1, 3, 12, 20}}, {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}},
         {"pool.vec"}},
        {"conv_nchw", "Conv", {{1, 4, 8, 40}, {6, 4, 3, 3}, {6}}, pad1, {"conv_nchw.t", "conv_nchw.par"}},
        // matmul: M 13 (tails for mr), N 40 (2.5 vectors), K 24, batched.
        {"matmul", "MatMul", {{2, 13, 24}, {24, 40}}, {}, {"matmul.nr", "matmul.mr", "matmul.ku", "matmul.par"}},
        {"matmul_packed", "KilnMatMulPackedB", {{20, 32}, {3, 32, 16}}, {{"n", int64_t{40}}},
         {"matmul.mr", "matmul.ku", "matmul.par"}},
        // row reductions: 40 rows of 512 (32 lane steps of 16).
        {"softmax", "Softmax", {{40, 512}}, {{"axis", int64_t{-1}}}, {"row.unroll", "row.par"}},
        {"layernorm", "LayerNormalization", {{40, 512}, {512}, {512}}, {}, {"row.unroll", "row.par"}},
        // Reduce*/ArgMax (flat_reduce.h): along 40 rows of 512 the flat form's lane partials
        // (max, then the first position); along axis 0 of [64, 40] the column tile (2.5 vectors).
        {"argmax_rows", "ArgMax", {{40, 512}}, {{"axis", int64_t{-1}}}, {"row.unroll", "row.par"}},
        {"argmax_cols", "ArgMax", {{64, 40}}, {{"axis", int64_t{0}}}, {"colred.nr"}},
        // fused elementwise (default_schedule): 16400 elements, not a multiple of 64.
        {"add", "Add", {{4, 4100}, {4, 4100}}, {}, {"ew.vec", "ew.par"}},
        // a channel scale over a blocked activation (squeeze-and-excitation): broadcast rows.
        {"se_gate", "Mul", {{1, 8, 12, 12, 16}, {1, 8, 1, 1, 16}}, {}, {"ew.vec", "ew.par"}},
    };
}

te::KnobValues defaults_of(const std::vector<te::Knob>& space) {
    te::KnobValues v;
    for (const te::Knob& k : space) v[k.name] = k.default_value;
    return v;
}

void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
    ASSERT_EQ(got.numel(), want.numel()) << what;
    int bad = 0;
    for (int64_t i = 0; i < got.numel() && bad < 5; ++i) {
        double g = got.get_f64(i), w = want.get_f64(i);
        if (!(std::abs(g - w) <= kTol * std::max(1.0, std::abs(w)))) {
            ADD_FAILURE() << what << ": element " << i << " got " << g << " want " << w;
            ++bad;
        }
    }
}

class ScheduleKnobs : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        if (std::getenv("KILN_CACHE_DIR") == nullptr) {
            char tmpl[] = "/tmp/kiln_knobs_cache_XXXXXX";
            const char* dir = mkdtemp(tmpl);
            ASSERT_NE(dir, nullptr);
            setenv("KILN_CACHE_DIR", dir, 1);
        }
    }
};

// Every template declares the knobs expected for its case, each with at least two choices
// (the space holds real alternatives only) and the default among them.
TEST_F(ScheduleKnobs, SpaceDeclared) {
    for (const KnobCase& c : knob_cases()) {
        SCOPED_TRACE(c.name);
        OpUnderTest op(c);
        auto l = op.lower({}, "k_space");
        std::set<std::string> names;
        std::string listing;
        for (const te::Knob& k : l.space) {
            listing += " " + k.name + "{";
            for (int64_t v : k.choices) listing += std::to_string(v) + (v == k.default_value ? "*," : ",");
            listing.back() = '}';
            names.insert(k.name);
            EXPECT_GE(k.choices.size(), 2u) << k.name;
            EXPECT_TRUE(std::count(k.choices.begin(), k.choices.end(), k.default_value)) << k.name;
        }
        std::cout << "[ space ] " << c.name << ":" << listing << "\n";  // * marks the default
        for (const std::string& k : c.knobs) EXPECT_TRUE(names.count(k)) << "missing knob " << k;
        EXPECT_EQ(l.applied, defaults_of(l.space));
    }
}

// Knobs that cannot change the code are not declared: OW = 1, a single channel block, a
// 1-row matmul with one column vector, a tiny elementwise op.
TEST_F(ScheduleKnobs, NoKnobWithoutAlternatives) {
    std::vector<KnobCase> cases = {
        {"conv_nchwc_1x1", "KilnConv2dNCHWc", {{1, 1, 4, 1, 8}, {1, 1, 1, 1, 8, 16}}, {}, {}},
        {"matmul_row", "MatMul", {{1, 6}, {6, 16}}, {}, {}},
        {"add_small", "Add", {{3, 5}, {3, 5}}, {}, {}},
    };
    for (const KnobCase& c : cases) {
        SCOPED_TRACE(c.name);
        OpUnderTest op(c);
        auto l = op.lower({}, "k_none");
        for (const te::Knob& k : l.space) ADD_FAILURE() << "declared " << k.name;
    }
}

// The default config reproduces the untuned schedule; unknown values fall back to the default;
// every other choice of a knob changes the kernel.
TEST_F(ScheduleKnobs, DefaultsAndFallback) {
    for (const KnobCase& c : knob_cases()) {
        SCOPED_TRACE(c.name);
        OpUnderTest op(c);
        auto base = op.lower({}, "k_same");
        te::KnobValues explicit_defaults = defaults_of(base.space);
        EXPECT_EQ(op.lower(explicit_defaults, "k_same").source, base.source);
        te::KnobValues off;  // every knob one past its largest choice, plus an unknown name
        for (const te::Knob& k : base.space) off[k.name] = k.choices.back() + 1;
        off["nosuch.knob"] = 3;
        auto fallback = op.lower(off, "k_same");
        EXPECT_EQ(fallback.source, base.source);
        EXPECT_EQ(fallback.applied, explicit_defaults);
        for (const te::Knob& k : base.space)  // every other choice is a different kernel
            for (int64_t v : k.choices)
                if (v != k.default_value)
                    EXPECT_NE(op.lower({{k.name, v}}, "k_same").source, base.source) << k.name << "=" << v;
    }
}

// The fingerprint a tuning log records beside a setting: the knobs' names and choices, in any
// declaration order, not their defaults; a changed choice or name is another space.
TEST(SpaceFingerprint, NamesAndChoicesNotDefaultsOrOrder) {
    const std::vector<te::Knob> space = {{"conv.ob", {1, 2, 4}, 2}, {"conv.t", {4, 7}, 7}};
    const std::string f = te::space_fingerprint(space);
    EXPECT_EQ(f.size(), 16u);
    EXPECT_EQ(te::space_fingerprint({space[1], space[0]}), f);
    EXPECT_EQ(te::space_fingerprint({{"conv.ob", {1, 2, 4}, 4}, space[1]}), f);
    EXPECT_NE(te::space_fingerprint({{"conv.ob", {1, 2, 4, 8}, 2}, space[1]}), f);
    EXPECT_NE(te::space_fingerprint({{"conv.oc", {1, 2, 4}, 2}, space[1]}), f);
    EXPECT_NE(te::space_fingerprint({space[0]}), f);
    EXPECT_NE(te::space_fingerprint({}), f);
    for (const KnobCase& c : knob_cases()) {  // a template's lowering declares the same space again
        SCOPED_TRACE(c.name);
        OpUnderTest op(c);
        EXPECT_EQ(te::space_fingerprint(op.lower({}, "k_same").space), te::space_fingerprint(op.lower({}, "k_same").space));
    }
}

// Default, each knob's extremes (others default) and random configs: compiled outputs match
// the interpreted unscheduled lowering.
TEST_F(ScheduleKnobs, ConfigsComputeTheSame) {
    struct Trial {
        size_t op;
        te::KnobValues knobs;
        std::string fname;
    };
    std::vector<KnobCase> cases = knob_cases();
    std::vector<std::unique_ptr<OpUnderTest>> ops;
    std::vector<Tensor> refs;
    std::vector<Trial> trials;
    std::vector<std::string> sources;
    std::mt19937 rng(7);
    for (size_t ci = 0; ci < cases.size(); ++ci) {
        ops.push_back(std::make_unique<OpUnderTest>(cases[ci]));
        refs.push_back(ops.back()->reference());
        const std::vector<te::Knob> space = ops.back()->lower({}, "k_space").space;
        std::vector<te::KnobValues> configs = {{}};
        for (const te::Knob& k : space)
            for (int64_t v : {k.choices.front(), k.choices.back()}) {
                te::KnobValues kv = defaults_of(space);
                kv[k.name] = v;
                configs.push_back(kv);
            }
        for (int r = 0; r < 4; ++r) {
            te::KnobValues kv;
            for (const te::Knob& k : space) kv[k.name] = k.choices[rng() % k.choices.size()];
            configs.push_back(kv);
        }
        for (const te::KnobValues& kv : configs) {
            SCOPED_TRACE(cases[ci].name + " {" + te::ScheduleConfig::format(kv) + "}");
            std::string fname = "kiln_knobs_" + cases[ci].name + "_" + std::to_string(trials.size());
            auto l = ops.back()->lower(kv, fname);
            // a dependent knob (conv.t given conv.ob, matmul.mr given matmul.nr) may fall back
            for (const auto& [name, value] : kv)
                if (l.applied.count(name) && l.applied.at(name) != value)
                    EXPECT_TRUE(name == "conv.t" || name == "matmul.mr" || name == "matmul.par" || name == "conv.par")
                        << name << " took " << l.applied.at(name) << " for " << value;
            trials.push_back({ci, kv, fname});
            sources.push_back(l.source);
        }
    }
    std::vector<codegen::CompiledLibrary> libs = codegen::compile_c_many(sources, 2);
    ASSERT_EQ(libs.size(), trials.size());
    for (size_t i = 0; i < trials.size(); ++i) {
        const Trial& t = trials[i];
        std::string what = cases[t.op].name + " {" + te::ScheduleConfig::format(t.knobs) + "}";
        expect_close(ops[t.op]->run(libs[i].path, t.fname), refs[t.op], what);
    }
    std::cout << "[ knobs ] " << trials.size() << " configs over " << cases.size() << " ops\n";
}

}  // namespace
}  // namespace kiln::op::testing
