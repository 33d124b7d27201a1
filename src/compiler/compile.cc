// compile(): Graph -> Executable.
//
// 1. Bind symbolic dims of the graph inputs, then run the pass pipeline of the -O level
//    (pass/pipeline.h): type inference and shape arithmetic at every level; folding, CSE, DCE,
//    simplification and fusion above -O0. Folding evaluates through fold_constant_node.
// 2. Assign one runtime buffer per value: inputs, constants (data copied by reference),
//    intermediates, outputs. An output that is not a fresh node result (a graph input, a
//    constant, or a value listed twice) gets its own buffer and a copy kernel. A Reshape /
//    Flatten / Squeeze / Unsqueeze / Identity kernel of its own is a view instead: its value
//    names its input's buffer and it gets no kernel.
// 3. Lower each kernel unit — a fusion group or a single node (compiler/lower_group.h):
//    composed computes -> schedule -> tir -> simplify -> C. Identical sources share one kernel.
// 4. Compile all distinct sources through the cached compile driver, in parallel (into one
//    library with CompileOptions::one_library).
// 5. Plan memory: every intermediate gets an offset in one arena (compiler/plan_executable.h);
//    elementwise kernels that may run in place are emitted without `restrict`.
#include "compiler/compile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "codegen/c_emitter.h"
#include "codegen/compile_driver.h"
#include "compiler/donation.h"
#include "compiler/fold_constant_node.h"
#include "compiler/graph_interpreter.h"
#include "compiler/index_checks.h"
#include "compiler/kernel_probe.h"
#include "compiler/int8_layout.h"
#include "compiler/qconv_add_fusion.h"
#include "compiler/kernel_upgrade.h"
#include "compiler/lower_group.h"
#include "compiler/lower_frame_control.h"
#include "compiler/plan_executable.h"
#include "compiler/layer_norm_pattern.h"
#include "compiler/shape_values.h"
#include "compiler/symbolic_compile.h"
#include "compiler/workload.h"
#include "ir/verifier.h"
#include "op/registry.h"
#include "op/view_ops.h"
#include "pass/pass_manager.h"
#include "pass/pipeline.h"
#include "runtime/async_kernel.h"
#include "runtime/dnnl_warmup.h"
#include "runtime/extern_split.h"
#include "support/error.h"
#include "te/schedule.h"
#include "tir/lower.h"
#include "tir/simplify.h"
#include "topi/dnnl_int8_match.h"
#include "topi/dnnl_match.h"
#include "topi/batchnorm_training_match.h"
#include "topi/pool_grad_match.h"
#include "topi/index_match.h"
#include "topi/softmax_match.h"
#include "topi/attention_match.h"
#include "runtime/extern_kernel.h"

namespace kiln::compiler {
namespace {

using runtime::BufferDesc;
using runtime::BufferRole;

Shape bind_shape(const ir::Value& v, const std::map<std::string, int64_t>& dims) {
    Shape out;
    for (const ir::Dim& d : v.type().shape) {
        if (d.is_static()) {
            out.push_back(d.value);
            continue;
        }
        auto it = dims.find(d.symbol);
        KILN_CHECK(it != dims.end(), kInvalidArgument)
            << "input '" << v.name() << "' has symbolic dimension '" << d.symbol
            << "': give it a value (kiln run --dim " << d.symbol << "=VALUE)";
        KILN_CHECK(it->second >= 0, kInvalidArgument)
            << "dimension '" << d.symbol << "' must be >= 0, got " << it->second;
        out.push_back(it->second);
    }
    return out;
}

/// Ops that only reinterpret their input's buffer: with the same dtype and element count, the
/// output is a view (the input's buffer under another shape) with no kernel and no copy.
bool is_view_node(const ir::Node* n, const ir::Graph& g) {
    if (!op::is_view_op(n->op()) || n->num_outputs() != 1 || n->num_inputs() < 1 || !n->input(0)) return false;
    const ir::Value* in = n->input(0);
    const ir::Value* out = n->output(0);
    if (!in->type().is_static() || !out->type().is_static() || in->type().dtype != out->type().dtype ||
        in->type().dtype == DType::kString || shape_numel(in->type().static_shape()) != shape_numel(out->type().static_shape()))
        return false;
    for (const ir::Value* o : g.outputs())  // a graph output gets a buffer of its own
        if (o == out) return false;
    return true;
}

/// Below this many flops a oneDNN call costs more than it saves (primitive creation, argument
/// binding and the split across threads cost a few microseconds); auto keeps such units generated.
constexpr double kDnnlMinFlops = 2e5;

/// oneDNN's implementation of a dnnl_conv choice on one thread; "" when it rejects the parameters.
std::string dnnl_conv_impl(const topi::ExternChoice& c) {
    return runtime::dnnl_implementation(c.name, runtime::ExternParams::format(c.params));
}

/// auto's rule until the tuner measures per workload (figures: one thread, docs/kernels.md):
/// oneDNN for convolutions (ResNet-50 40 ms vs 54 ms generated) except one image of at most
/// 7x7 outputs, for matrix products whose B is computed at run time and for unpacked ones of
/// fewer than 32 rows; Kiln's packed micro-kernel for a constant B (BERT's projections 228 vs
/// 173-185 GFLOP/s, FFN-up with its erf GELU 217 vs 160, classifier GEMVs below).
bool auto_prefers_dnnl(const KernelUnit& unit, const topi::ExternChoice& c) {
    // The fused recurrent kernel at any size: the generated one unrolls time (compile time
    // linear in T, 1-4.5 GFLOP/s; docs/kernels.md).
    if (c.name == "kiln_rnn") return true;
    // The int8 kernels at any size: the generated QLinearConv / QLinearMatMul are integer loops.
    if (c.name == "dnnl_qconv" || c.name == "dnnl_qmatmul" || c.name == "dnnl_dqmatmul") return true;
    // Conv gradients at any size: the generated KilnConvGrad* kernel is an unscheduled gather.
    if (c.name == "dnnl_conv_bwd") return true;
    // A 1-D convolution takes oneDNN at any size: the generated kernel runs it as a 2-D one with
    // a unit height, and at Silero VAD's encoder sizes (64-128 channels, 1-4 frames, 25-100
    // kflop) it was slower than oneDNN's call costs (VAD chunk 0.11 -> 0.06 ms, 2 threads).
    const bool conv1d = c.name == "dnnl_conv" && unit.nodes.front()->op() == "Conv" &&
                        unit.nodes.front()->input(0)->type().rank() == 3;
    if (unit_flops(unit) < kDnnlMinFlops && !conv1d) return false;
    if (c.name == "dnnl_conv") {
        // oneDNN's reference kernels (what it falls back to where no jit kernel takes the
        // shape) run at ~1 GFLOP/s, 100x below its jit kernels and far below a generated
        // kernel: never chosen by the rule. Asking costs one primitive descriptor (microseconds).
        const std::string impl = dnnl_conv_impl(c);
        if (impl.rfind("ref", 0) == 0) return false;
        // Its Winograd kernels (3x3, stride 1; runtime/dnnl_kernels.cc winograd_shape) do 2.25-4x
        // fewer multiplications: ResNet-50's 3x3 512->512 at 7x7, where the rule below takes the
        // generated kernel (1.12 ms on one thread), ran in 0.58 ms.
        if (impl.find("wino") != std::string::npos) return true;
        const ir::Node* conv = unit.nodes.front();
        // A depthwise conv with a channel multiplier (one input channel per group, several
        // outputs): Kiln's NCHW schedule streams it at memory speed, oneDNN 2.6 runs it through
        // a layout change or its GEMM kernel (bench/cliffs_conv.py, 32->64 at 112x112: 0.84 vs
        // 5.9 ms at 2 threads, 1.09 vs 2.43 at 1).
        if (conv->op() == "Conv") {
            const int64_t g = conv->attr_int("group", 1);
            const Shape x = conv->input(0)->type().static_shape(), y = conv->output(0)->type().static_shape();
            if (g > 1 && x[1] == g && y[1] > g) return false;
            // A few output maps over a long last axis (HiFi-GAN's 8 -> 1 channel k7 conv over
            // 16384 samples): oneDNN pads the output channels to a block of 16 and ran it at
            // 5.6 GFLOP/s (336 us, one thread); the NCHW schedule's tiles of 64 in registers,
            // in parallel (op/defs/conv.cc few_long_maps), 74 us.
            if (y.size() >= 3 && y[0] * y[1] <= 4 && y.back() >= 256) return false;
        }
        // One image of at most 7x7 outputs (ResNet's last stage): Kiln's micro-kernel keeps
        // its 2 x 16-channel x T-column tile busy where oneDNN 2.6's jit conv runs at 55-70 %
        // of peak (bench/kernels.py: 3x3 512->512 at 7x7 212 vs 142 GFLOP/s).
        const ir::Node* a = unit.nodes.front();
        if (a->op() == "KilnConv2dNCHWc") {
            const Shape y = a->output(0)->type().static_shape();
            // Only with 16-channel blocks: with blocks of 8 (440 channels, RegNetY's last stage)
            // the tile is half a vector wide and ran at 2.5 GFLOP/s, where oneDNN's ran 4x faster.
            if (y[0] == 1 && y[2] * y[3] <= 49 && y[4] == 16) return false;
        }
        return true;
    }
    // A B computed at run time (a training step's weights, a gradient's X^T dY): Kiln's packed
    // micro-kernel needs a constant B (pack-matmul-weights), the generated kernel on a plain B
    // is slower than oneDNN's (docs/kernels.md, training).
    const ir::Value* b = unit.nodes.front()->num_inputs() > 1 ? unit.nodes.front()->input(1) : nullptr;
    if (b && !b->is_constant()) return true;
    // A packed constant B: Kiln's micro-kernel at every row count. Few rows (a classifier at
    // batch 1..8) read the packed weight once at about the memory bandwidth, since the pack's
    // block is the tile's full width (zero-padded); bench/cliffs_matvec_reduce.py, one thread:
    // ResNet-50's fc at batch 1 0.087 vs 0.117 ms (oneDNN), at batch 8 0.29 vs 0.32 ms.
    if (unit.nodes.front()->op() == "KilnMatMulPackedB") return false;
    // Few rows of an unpacked product (transA=1): the plain micro-kernel's row tile idles.
    const Shape& out = unit.outputs[0]->type().static_shape();
    return out.size() >= 2 && shape_numel(out) / out.back() < 32;
}

/// Whether oneDNN's split would leave so many of `threads` idle that the generated blocked conv,
/// which keeps them all busy, is faster. oneDNN runs one part per thread, and a conv of one
/// image splits only by 16-channel blocks (runtime/extern_split.h): 64 channels make 4 parts at
/// any thread count. The generated conv runs (images x output rows x channel blocks) in
/// parallel (op/defs/conv_nchwc.cc), at least N * OH chunks. Measured on the 16-core Xeon
/// (ResNet-50, 16 threads): layer 1's 3x3 convs generated 270 us (850 GFLOP/s), layer 2's on 8
/// oneDNN parts 370 us (620 GFLOP/s) for the same FLOPs: oneDNN's edge per busy thread is about
/// 1.5x, so the generated conv wins below threads / 1.5 parts. Only where that measurement
/// holds: 16-channel blocks (with blocks of 8 the generated tile is half a vector wide: RegNetY's
/// 440 channels ran at 2.5 GFLOP/s), not depthwise, and with an epilogue of Relu / residual Add
/// (fused into the tile's store; MobileNetV2's Clip runs as a second pass: its 16->96 expand conv
/// took 760 us generated on 16 threads, 209 us on 4 oneDNN parts, and its depthwise convs
/// generated 3.5x oneDNN's one-thread time). On two threads only a conv of one part, 16 output
/// channels, qualifies, with SiLU (Sigmoid, Mul) too: YOLO-style 16-channel convs ran on one
/// thread (3 -> 16 k6 s2 at 320x320: oneDNN 757 us, generated 461; 16 -> 16 3x3 + SiLU +
/// residual at 80x80: 346 against 187).
bool dnnl_leaves_threads_idle(const KernelUnit& unit, const topi::ExternChoice& c, int threads) {
    const ir::Node* conv = unit.nodes.front();
    if (threads < 2 || c.name != "dnnl_conv" || conv->op() != "KilnConv2dNCHWc") return false;
    for (size_t i = 1; i < unit.nodes.size(); ++i) {
        const std::string& op = unit.nodes[i]->op();
        const bool swish = threads == 2 && (op == "Sigmoid" || op == "Mul");
        if (op != "Relu" && op != "Add" && !swish) return false;
    }
    const Shape y = conv->output(0)->type().static_shape();
    if (y.size() != 5 || y[4] != 16) return false;
    const runtime::ExternParams p(runtime::ExternParams::format(c.params));
    const std::vector<int64_t> src = p.ints("src"), dst = p.ints("dst");
    if (src.size() != 4 || dst.size() != 4) return false;
    const runtime::ConvSplit split =
        runtime::dnnl_conv_split(src[0], src[1], dst[1], p.integer_or("groups", 1), threads, 16);
    // A Winograd part does the work of about two direct ones (0.33-0.63x their time on one
    // thread): its edge is taken as 3x, an estimate not yet measured on 16 cores.
    const int edge_tenths = dnnl_conv_impl(c).find("wino") != std::string::npos ? 30 : 15;
    // Two threads: measured on undilated dense convs only (a dilated one's generated kernel has
    // no fast path: tests/models/test_conv_variants_vs_ort.py conv2d_dilated_partial).
    if (threads == 2) {
        if (split.parts > 1 || p.integer_or("groups", 1) != 1) return false;
        for (int64_t d : p.has("dilations") ? p.ints("dilations") : std::vector<int64_t>{})
            if (d != 1) return false;
    }
    return 10 * split.parts * edge_tenths < 100 * threads && dst[0] * dst[2] >= threads;
}

/// A dnnl_conv that oneDNN runs by Winograd has its parts planned for the compile's thread
/// count, whatever a run's thread count or preemption (runtime/dnnl_kernels.cc winograd_shape:
/// its rounding depends on the split, and a run's results must not).
void plan_winograd_for(std::optional<topi::ExternChoice>& c, int threads) {
    if (!c || c->name != "dnnl_conv") return;
    c->params.emplace_back("plan_threads", std::to_string(std::max(1, threads)));
    if (dnnl_conv_impl(*c).find("wino") == std::string::npos) c->params.pop_back();
}

/// plan_winograd_for on symbolic shapes, where oneDNN cannot be asked before the run: a 2-D
/// 3x3 conv of stride 1, no dilation and one group (the shapes winograd_shape may take; its
/// kernel at each run-time shape asks oneDNN, and stays direct where oneDNN declines).
void plan_symbolic_winograd_for(std::optional<topi::ExternChoice>& c, int threads) {
    if (!c || c->name != "dnnl_conv") return;
    const runtime::ExternParams p(runtime::ExternParams::format(c->params));
    const std::vector<int64_t> ones = {1, 1};
    if (p.has("kind") && p.str("kind") != "conv") return;
    if (p.ints("kernel") != std::vector<int64_t>{3, 3} || p.ints("strides") != ones || p.ints("dilations") != ones ||
        p.integer_or("groups", 1) != 1)
        return;
    c->params.emplace_back("plan_threads", std::to_string(std::max(1, threads)));
}

}  // namespace

std::optional<topi::ExternChoice> extern_choice(const KernelUnit& unit, KernelSource source, const te::KnobValues& knobs,
                                                int threads) {
    // TopK, CumSum, ScatterND: the runtime's kernels whatever the source (the generated forms
    // are O(n^2) per line; runtime/index_kernels.h).
    if (auto c = topi::match_index_kernel(unit.nodes, unit.inputs, unit.outputs)) return c;
    if (auto c = topi::match_qadd(unit.nodes, unit.inputs, unit.outputs)) return c;  // int8 residual add
    if (source != KernelSource::kGenerated) {
        // dynamic quantization's DynamicQuantizeLinear; an int8 MaxPool (NHWC between int8 convs)
        if (auto c = topi::match_dynamic_quantize(unit.nodes, unit.inputs, unit.outputs)) return c;
        if (auto c = topi::match_qmaxpool(unit.nodes, unit.inputs, unit.outputs)) return c;
        if (auto c = topi::match_row_softmax(unit.nodes, unit.inputs, unit.outputs)) return c;  // one pass per row
    }
    if (auto c = topi::match_pool_grad(unit.nodes, unit.inputs, unit.outputs)) return c;  // MaxPool gradient scatter
    if (auto c = topi::match_max_pool_indices(unit.nodes, unit.inputs, unit.outputs)) return c;  // + its Indices
    if (auto c = topi::match_batchnorm_training(unit.nodes, unit.inputs, unit.outputs)) return c;  // BN training, 2 passes
    if (!runtime::have_dnnl()) return std::nullopt;
    if (source != KernelSource::kGenerated)  // long-sequence attention by blocks of queries
        if (auto c = topi::match_blocked_attention(unit.nodes, unit.inputs, unit.outputs)) return c;
    auto tuned = knobs.find(kSourceKnob);
    if (tuned != knobs.end()) {
        if (tuned->second != 1) return std::nullopt;
        std::optional<topi::ExternChoice> c = topi::match_dnnl(unit.nodes, unit.inputs, unit.outputs);
        plan_winograd_for(c, threads);
        return c;
    }
    if (source == KernelSource::kGenerated) return std::nullopt;
    std::optional<topi::ExternChoice> c = topi::match_dnnl(unit.nodes, unit.inputs, unit.outputs);
    plan_winograd_for(c, threads);
    // A shape the matcher passes but oneDNN rejects stays generated (never a load-time failure).
    if (c && (c->name == "dnnl_conv" || c->name == "dnnl_qconv" || c->name == "dnnl_conv_bwd") && dnnl_conv_impl(*c).empty())
        return std::nullopt;
    if (c && source == KernelSource::kAuto) {
        // Where the rule is unsure, a measurement on this machine decides (compiler/kernel_probe.h).
        const bool rule = auto_prefers_dnnl(unit, *c);
        if (!probe_prefers_dnnl(unit, *c, rule).value_or(rule)) return std::nullopt;
        // The probe times one thread; the run's thread count decides whether oneDNN's split fills them.
        if (dnnl_leaves_threads_idle(unit, *c, threads)) return std::nullopt;
    }
    return c;
}

bool is_conv_anchor(const std::string& op) {
    return op == "Conv" || op == "ConvTranspose" || op == "KilnConv2dNCHWc" || op == "KilnDepthwiseConv2dNCHWc";
}

bool is_recurrent(const std::string& op) { return op == "RNN" || op == "GRU" || op == "LSTM"; }

/// A symbolic compile's conv that Kiln generates instead of calling oneDNN: a blocked conv over
/// a 1x1 map whose only symbolic dim is the batch (squeeze-and-excitation's two convs). oneDNN's
/// fixed cost per call (about 5 us) is most of such a conv; the generated kernel takes the batch
/// as its outer loop's extent and fuses the excitation's scale (EfficientNet-B0 with a symbolic
/// batch: 1.15x its per-shape compile, where these are generated).
bool generated_symbolic_conv(const ir::Node* conv) {
    if (conv->op() != "KilnConv2dNCHWc") return false;
    for (const ir::Value* v : {conv->input(0), conv->output(0)}) {
        const std::vector<ir::Dim>& d = v->type().shape;
        if (d.size() != 5) return false;
        for (size_t k = 1; k < d.size(); ++k)
            if (!d[k].is_static()) return false;
    }
    const std::vector<ir::Dim>& out = conv->output(0)->type().shape;
    return out[2].value == 1 && out[3].value == 1;
}

/// A symbolic compile's extern kernel for `unit` (docs/dynamic_shapes.md): a convolution or
/// deconvolution (with the epilogue oneDNN can fuse) runs on oneDNN at every shape, and an RNN,
/// GRU or LSTM on the fused recurrent kernel at every sequence length and batch, each made per
/// run-time shape (runtime/extern_at_shapes.h); everything else is generated over the dims.
std::optional<topi::ExternChoice> symbolic_extern_choice(const KernelUnit& unit) {
    const std::string& op = unit.nodes.front()->op();
    if (op == "Softmax") return topi::match_row_softmax(unit.nodes, unit.inputs, unit.outputs, true);
    if (!runtime::have_dnnl() || !(is_conv_anchor(op) || is_recurrent(op))) return std::nullopt;
    if (generated_symbolic_conv(unit.nodes.front())) return std::nullopt;
    return topi::match_dnnl(unit.nodes, unit.inputs, unit.outputs);
}

/// Symbolic compiles: a conv whose unit oneDNN cannot take whole (an epilogue it has no post-op
/// for, a layout conversion fused before it) leaves the unit, to run on oneDNN alone: there is
/// no generated conv over symbolic dims but generated_symbolic_conv's. Unit nodes before the conv (its producers: fusion keeps
/// groups convex) become kernels of their own, so the rest of the group never wraps around it.
void detach_symbolic_conv_anchors(ir::Graph& g) {
    if (!runtime::have_dnnl()) return;
    for (const KernelUnit& unit : partition_kernels(g)) {
        auto anchor = std::find_if(unit.nodes.begin(), unit.nodes.end(),
                                   [](const ir::Node* n) { return is_conv_anchor(n->op()); });
        if (unit.nodes.size() < 2 || anchor == unit.nodes.end() || generated_symbolic_conv(*anchor) ||
            (anchor == unit.nodes.begin() && symbolic_extern_choice(unit)))
            continue;
        for (auto it = unit.nodes.begin(); it != std::next(anchor); ++it) (*it)->set_group(-1);
    }
}

/// Whether oneDNN's matcher takes the whole unit and oneDNN accepts its parameters.
bool whole_unit_fits_dnnl(const KernelUnit& unit) {
    std::optional<topi::ExternChoice> c = topi::match_dnnl(unit.nodes, unit.inputs, unit.outputs);
    return c && !((c->name == "dnnl_conv" || c->name == "dnnl_qconv" || c->name == "dnnl_conv_bwd") &&
                  dnnl_conv_impl(*c).empty());
}

void detach_dnnl_anchors(ir::Graph& g, KernelSource source, int threads) {
    if (!runtime::have_dnnl() || source == KernelSource::kGenerated) return;
    static const te::KnobValues kUntuned;
    for (const KernelUnit& unit : partition_kernels(g)) {
        if (unit.nodes.size() < 2 || extern_choice(unit, source, kUntuned, threads)) continue;
        // oneDNN could take the unit whole (its epilogue as post-ops) and the rule or the probe
        // left it generated: the anchor alone on oneDNN and the epilogue as a kernel of its own
        // would only add a pass (a noisy probe ran ShuffleNetV2's 24->58 1x1 conv so, its Relu
        // apart). Detach only what oneDNN cannot take whole (a training mask around a conv).
        if (whole_unit_fits_dnnl(unit)) continue;
        ir::Node* anchor = nullptr;
        for (ir::Node* n : unit.nodes)
            if (n->op() == "Conv" || n->op() == "ConvTranspose" || n->op() == "MatMul" || n->op() == "Gemm")
                anchor = anchor ? anchor : n;
        if (!anchor) continue;
        // By convexity a group node upstream of the anchor would be one of its producers: then
        // the rest of the group would wrap around the anchor's unit.
        KernelUnit alone;
        alone.nodes = {anchor};
        bool fed = false;
        for (ir::Value* in : anchor->inputs()) {
            if (!in) continue;
            fed |= in->producer() && in->producer()->group() == anchor->group();
            if (std::find(alone.inputs.begin(), alone.inputs.end(), in) == alone.inputs.end()) alone.inputs.push_back(in);
        }
        alone.outputs = anchor->outputs();
        if (!fed && extern_choice(alone, source, kUntuned, threads)) anchor->set_group(-1);
    }
}

bool is_view_unit(const KernelUnit& unit, const ir::Graph& g, int opt_level) {
    return unit.nodes.size() == 1 && opt_level > 0 && is_view_node(unit.nodes[0], g);
}

namespace {
/// Whether transform_layout makes activations of 8-but-not-16-divisible channel counts NHWC
/// (docs/kernels.md): where oneDNN computes the convs, unless KILN_NHWC8=0 (blocks of 8, for A/Bs).
/// Not in a symbolic compile: its depthwise convs on an NHWC block would be generated ones, which
/// do not compile over symbolic dims (PP-OCR's classifier fell back to per-shape compiles).
bool nhwc_8_channel_blocks(const CompileOptions& opts) {
    const char* v = std::getenv("KILN_NHWC8");
    return opts.kernels != KernelSource::kGenerated && !opts.symbolic && runtime::have_dnnl() &&
           !(v && std::string(v) == "0");
}
}  // namespace

std::vector<pass::PassRecord> optimize_graph(ir::Graph& g, const CompileOptions& opts) {
    // What only the graph interpreter runs (Session routes such models there). A data-dependent
    // value input fails later, naming the node.
    std::string why = host_only_reason(g);
    KILN_CHECK(why.empty(), kUnsupported) << "cannot compile graph '" << g.name << "': " << why
                                          << "; it runs in the graph interpreter (kiln::Session picks it)";
    KILN_CHECK(opts.kernels != KernelSource::kDnnl || runtime::have_dnnl(), kUnsupported)
        << "kernels=dnnl: this build of Kiln has no oneDNN (install libdnnl-dev and rebuild)";
    pass::PassContext ctx = pass_context();
    ctx.nhwc_8_channel_blocks = nhwc_8_channel_blocks(opts);
    ctx.preemptible = opts.preemptible;
    if (opts.symbolic) {
        name_unknown_input_dims(g);
        bind_known_dims(g, opts.dims);
        decompose_batch_norms(g);
        lower_dim_ranges(g);
        fold_shape_values(g);
        collapse_softmax_coercions(g);
        fuse_decomposed_layer_norms(g);
        ctx.keep_symbols = true;
    } else {
        bind_input_shapes(g, opts.dims);
    }
    std::vector<pass::PassRecord> records = pass::run_passes(g, pass::passes_for_level(opts.opt_level), ctx, opts.passes);
    ir::verify_graph(g);
    return records;
}

KernelSource parse_kernel_source(const std::string& s) {
    if (s == "auto") return KernelSource::kAuto;
    if (s == "generated") return KernelSource::kGenerated;
    if (s == "dnnl") return KernelSource::kDnnl;
    KILN_CHECK(false, kInvalidArgument) << "kernels must be auto, generated or dnnl, got '" << s << "'";
    return KernelSource::kAuto;
}

void bind_input_shapes(ir::Graph& g, const std::map<std::string, int64_t>& dims) {
    for (ir::Value* in : g.inputs()) in->set_type(ir::TensorType::of_static(in->type().dtype, bind_shape(*in, dims)));
}

pass::PassContext pass_context() {
    pass::PassContext ctx;
    ctx.evaluate = [](ir::Graph& g, ir::Node* n) {
        return fold_constant_node(g, n, std::numeric_limits<int64_t>::max());
    };
    ctx.evaluate_all = [](ir::Graph& g, const std::vector<ir::Node*>& nodes) {
        return fold_constant_nodes(g, nodes, std::numeric_limits<int64_t>::max());
    };
    return ctx;
}

/// The bounds KilnDimRange nodes carry (their `limit`) on the dims they count up to.
std::vector<runtime::DimLimit> dim_limits_of(const ir::Graph& g, const SymbolicDims& sym) {
    std::vector<runtime::DimLimit> limits;
    for (const ir::Node* n : g.nodes()) {
        if (n->op() != "KilnDimRange" || !n->attrs().count("limit")) continue;
        const ir::Dim& d = n->output(0)->type().shape.at(0);
        auto it = std::find(sym.names.begin(), sym.names.end(), d.symbol);
        if (d.is_static() || it == sym.names.end()) continue;
        limits.push_back({static_cast<int>(it - sym.names.begin()), 0, n->attr_int("limit", 0), n->describe()});
    }
    return limits;
}

namespace {

/// kQuick for a tiered compile (CompileOptions::tiered) that would run the compiler on more
/// kernels than processes at once (a cold cache), else kHot.
codegen::Optimization first_tier(const std::vector<std::string>& sources, const CompileOptions& opts) {
    if (!opts.tiered || opts.one_library) return codegen::Optimization::kHot;
    const size_t jobs = static_cast<size_t>(codegen::compile_processes(opts.compile_jobs));
    return codegen::kernels_to_compile(sources, opts.compile_jobs) > jobs ? codegen::Optimization::kQuick
                                                                         : codegen::Optimization::kHot;
}

/// Lowers `unit` with its tuned setting when the current templates lower it in the space the
/// setting was chosen in (te::space_fingerprint), else untuned, adding the unit's description to
/// `stale`: a template that changed since the tuning must not get half a setting.
LoweredKernel lower_tuned(const KernelUnit& unit, bool params_may_alias, const te::TunedKnobs* tuned,
                          const SymbolicDims* sym, const CompileOptions& opts, std::vector<std::string>& stale,
                          bool donations) {
    LoweredKernel k = lower_unit(unit, params_may_alias, tuned ? tuned->values : te::KnobValues{}, sym,
                                 opts.intra_op_threads, opts.preemptible, donations);
    if (!tuned || te::space_fingerprint(k.space) == tuned->space) return k;
    stale.push_back(k.description);
    return lower_unit(unit, params_may_alias, {}, sym, opts.intra_op_threads, opts.preemptible, donations);
}

/// Whether one of the unit's outputs is a graph output the caller offers to write over an input.
bool writes_offered_output(const KernelUnit& unit, const std::set<const ir::Value*>& offered) {
    return std::any_of(unit.outputs.begin(), unit.outputs.end(), [&](const ir::Value* v) { return offered.count(v) > 0; });
}

void warn_stale_tuning(const std::vector<std::string>& stale) {
    if (stale.empty()) return;
    std::fprintf(stderr,
                 "kiln: tuning log: %zu tuned workload(s) not applied, their schedule's knobs changed since they were "
                 "tuned (e.g. %s): they run untuned; run kiln tune again\n",
                 stale.size(), stale.front().c_str());
}

}  // namespace

CompiledModel compile(ir::Graph& g, const CompileOptions& opts) {
    auto t0 = std::chrono::steady_clock::now();
    // The compiler's identity and flags, asked once per process, and oneDNN's one-time set-up
    // where the model may have oneDNN steps (runtime/dnnl_warmup.h), while the passes run; the
    // futures wait for them when the compile returns or throws.
    const std::future<void> probes = codegen::start_compiler_probes();
    std::future<void> dnnl_warmup;
    if (opts.kernels != KernelSource::kGenerated && runtime::have_dnnl())
        for (const ir::Node* n : g.nodes())
            if (n->op() == "Conv" || n->op() == "ConvTranspose" || n->op() == "MatMul" || n->op() == "Gemm") {
                dnnl_warmup = runtime::start_dnnl_warmup();
                break;
            }
    CompiledModel result;
    result.pass_records = optimize_graph(g, opts);

    auto exe = std::make_shared<runtime::Executable>();
    std::unordered_map<const ir::Value*, int> buffer_of;
    SymbolicDims sym;
    if (opts.symbolic) {
        sym = symbolic_dims_of(g);
        exe->dims = sym.names;
        for (const SymbolicEquality& e : pin_unit_dims(g))  // checked per run: the dim is 1
            exe->dim_equalities.push_back({sym.add(e.a), -1, 1, e.node});
    }
    auto add_buffer = [&](const ir::Value* v, BufferRole role) {
        BufferDesc b;
        b.name = v->name();
        b.dtype = v->type().dtype;
        if (v->type().is_static()) {
            b.shape = v->type().static_shape();
        } else {  // a symbolic axis: dim_of names the dim, shape holds 0 there
            for (const ir::Dim& d : v->type().shape) {
                b.shape.push_back(d.is_static() ? d.value : 0);
                b.dim_of.push_back(d.is_static() ? -1 : sym.add(d.symbol));
            }
        }
        b.role = role;
        if (role == BufferRole::kConstant) b.constant = v->constant();
        exe->buffers.push_back(std::move(b));
        int id = static_cast<int>(exe->buffers.size()) - 1;
        buffer_of[v] = id;
        return id;
    };
    for (ir::Value* in : g.inputs()) exe->inputs.push_back(add_buffer(in, BufferRole::kInput));
    // Views: units of one reinterpreting node (not fused into a kernel); none at -O0, where
    // every node is its own kernel by definition.
    if (opts.opt_level > 0 && opts.tuned.empty() && !opts.symbolic) {
        detach_dnnl_anchors(g, opts.kernels, opts.intra_op_threads);
        fuse_qconv_residual_adds(g, opts.kernels, opts.intra_op_threads);
    }
    if (opts.symbolic) detach_symbolic_conv_anchors(g);
    std::vector<KernelUnit> units = partition_kernels(g);
    std::set<const ir::Value*> offered;  // graph outputs the caller offers to write over an input
    for (const auto& [o, i] : opts.donate)
        if (o >= 0 && static_cast<size_t>(o) < g.outputs().size()) offered.insert(g.outputs()[static_cast<size_t>(o)]);
    std::set<const ir::Node*> views;
    for (const KernelUnit& unit : units)
        if (opts.symbolic ? unit.nodes.size() == 1 && opts.opt_level > 0 && is_symbolic_view(unit.nodes[0], g)
                          : is_view_unit(unit, g, opts.opt_level))
            views.insert(unit.nodes[0]);
    if (opts.symbolic) {
        std::set<const ir::Node*> externs;
        for (const KernelUnit& unit : units)
            if (symbolic_extern_choice(unit)) externs.insert(unit.nodes.front());
        std::vector<SymbolicEquality> equalities;
        const std::string why = symbolic_refusal(g, units, views, externs, &equalities);
        KILN_CHECK(why.empty(), kUnsupported) << "cannot compile graph '" << g.name << "' symbolically: " << why;
        std::set<std::pair<int, int>> seen;
        for (const SymbolicEquality& e : equalities) {
            const int a = sym.add(e.a), b = sym.add(e.b);
            if (seen.insert({std::min(a, b), std::max(a, b)}).second) exe->dim_equalities.push_back({a, b, 0, e.node});
        }
        unify_equal_dims(g, equalities);
    }
    for (ir::Node* n : g.nodes()) {
        for (ir::Value* in : n->inputs())
            if (in && in->is_constant() && !buffer_of.count(in)) add_buffer(in, BufferRole::kConstant);
        if (views.count(n)) {
            buffer_of[n->output(0)] = buffer_of.at(n->input(0));  // a view: no buffer of its own
            continue;
        }
        for (ir::Value* out : n->outputs()) add_buffer(out, BufferRole::kIntermediate);
    }

    std::vector<LoweredKernel> lowered;
    std::vector<const KernelUnit*> lowered_units;  // the unit of each lowered kernel
    std::vector<std::vector<int>> step_args;
    std::vector<std::vector<std::pair<int, int>>> step_inplace;  // per step: (output, input) buffer ids
    std::vector<std::string> stale_tuned;  // workloads whose tuned setting is from another knob space
    for (const KernelUnit& unit : units) {
        if (views.count(unit.nodes[0])) continue;
        lowered_units.push_back(&unit);
        std::vector<int> arg_ids;
        for (const ir::Value* v : unit.inputs) arg_ids.push_back(buffer_of.at(v));
        for (const ir::Value* v : unit.outputs) arg_ids.push_back(buffer_of.at(v));
        step_inplace.resize(lowered.size());
        step_args.push_back(std::move(arg_ids));
        const te::TunedKnobs* tuned = nullptr;
        if (!opts.tuned.empty()) {
            auto it = opts.tuned.find(workload_key(unit));
            if (it != opts.tuned.end()) tuned = &it->second;
        }
        static const te::KnobValues kUntuned;
        const te::KnobValues& knobs = tuned ? tuned->values : kUntuned;
        if (is_frame_control_unit(unit)) {  // Switch/Merge/Enter/Exit/NextIteration (frames executor)
            step_args.back() = frame_control_args(*unit.nodes[0], buffer_of);  // every slot, in order
            step_inplace.push_back({});
            lowered.push_back(lower_frame_control(unit));
            continue;
        }
        std::optional<topi::ExternChoice> ext;
        if (opts.symbolic) {
            ext = symbolic_extern_choice(unit);
            plan_symbolic_winograd_for(ext, opts.intra_op_threads);
        } else {
            ext = extern_choice(unit, opts.kernels, knobs, opts.intra_op_threads);
        }
        if (ext) {
            // In place only over the residual that oneDNN's sum post-op accumulates onto.
            std::vector<std::pair<int, int>> inplace;
            if (ext->inplace_input >= 0) {
                const ir::Value* r = unit.inputs.at(static_cast<size_t>(ext->inplace_input));
                if (!r->is_constant() && r->type() == unit.outputs[0]->type())
                    inplace.emplace_back(buffer_of.at(unit.outputs[0]), buffer_of.at(r));
            }
            step_inplace.push_back(std::move(inplace));
            LoweredKernel k;
            k.description = unit.ops();
            k.node_name = unit.nodes.front()->name();
            k.extern_name = ext->name;
            k.extern_params = runtime::ExternParams::format(ext->params);
            k.num_inputs = static_cast<int>(unit.inputs.size());
            k.flops = unit_flops(unit);
            lowered.push_back(std::move(k));
            continue;
        }
        // Memory planning: the (output, input) pairs this step may compute in place, as its
        // lowered schedule allows (LoweredKernel::inplace_inputs); such kernels drop `restrict`.
        lowered.push_back(lower_tuned(unit, true, tuned, opts.symbolic ? &sym : nullptr, opts, stale_tuned,
                                      writes_offered_output(unit, offered)));
        std::vector<std::pair<int, int>> inplace;
        for (int i : lowered.back().inplace_inputs)
            inplace.emplace_back(buffer_of.at(unit.outputs[0]), buffer_of.at(unit.inputs.at(static_cast<size_t>(i))));
        step_inplace.push_back(std::move(inplace));
    }

    warn_stale_tuning(stale_tuned);
    result.stats.stale_tuned = static_cast<int>(stale_tuned.size());

    {  // 8-bit activations between int8 kernels stay NHWC (compiler/int8_layout.h)
        std::vector<LoweredKernel*> ks;
        for (LoweredKernel& k : lowered) ks.push_back(&k);
        assign_int8_layouts(g, lowered_units, ks);
    }

    // Graph outputs: mark fresh node results as outputs; copy anything else into its own buffer.
    std::unordered_map<int, bool> is_output;
    for (ir::Value* v : g.outputs()) {
        if (!buffer_of.count(v)) {
            KILN_ICHECK(v->is_constant()) << "graph output '" << v->name() << "' has no definition";
            add_buffer(v, BufferRole::kConstant);
        }
        int id = buffer_of.at(v);
        const BufferDesc b = exe->buffers[id];  // a copy: buffers grows below
        if (b.role == BufferRole::kIntermediate && !is_output[id]) {
            exe->buffers[id].role = BufferRole::kOutput;
            is_output[id] = true;
            exe->outputs.push_back(id);
            continue;
        }
        BufferDesc copy = b;
        copy.role = BufferRole::kOutput;
        copy.constant = Tensor();
        exe->buffers.push_back(copy);
        int out_id = static_cast<int>(exe->buffers.size()) - 1;
        exe->outputs.push_back(out_id);
        // An asynchronous host copy (runtime/async_kernel.h): overlaps with other steps.
        LoweredKernel copy_kernel;
        copy_kernel.description = "Copy";
        copy_kernel.node_name = v->name();
        copy_kernel.async_copy = true;
        copy_kernel.num_inputs = 1;
        copy_kernel.flops = static_cast<double>(shape_numel(b.shape));
        lowered.push_back(std::move(copy_kernel));
        step_args.push_back({id, out_id});
    }

    // Distinct sources -> kernels.
    std::map<std::string, int> kernel_of_source;
    std::vector<std::string> sources;
    for (size_t s = 0; s < lowered.size(); ++s) {
        runtime::StepDesc step;
        if (lowered[s].async_copy || !lowered[s].extern_name.empty() || !lowered[s].control.empty()) {
            step.kernel = -1;  // assigned below, after the compiled kernels
        } else {
            auto [it, inserted] = kernel_of_source.emplace(lowered[s].source, static_cast<int>(sources.size()));
            if (inserted) sources.push_back(lowered[s].source);
            step.kernel = it->second;
        }
        step.args = step_args[s];
        step.num_inputs = lowered[s].num_inputs;
        step.flops = lowered[s].flops;
        step.node_name = lowered[s].node_name.empty() ? lowered[s].description : lowered[s].node_name;
        for (const te::Var& d : lowered[s].func.dims) {  // the kernel's dims, as Executable::dims
            step.dims.push_back(sym.index_of(d.get()));
            KILN_ICHECK(step.dims.back() >= 0) << "kernel for " << step.node_name << " takes an unknown dim";
        }
        if (opts.symbolic && s < step_inplace.size()) step.inplace = step_inplace[s];  // planned per run
        if (!lowered[s].extern_name.empty() && opts.symbolic)  // the dims of its arguments' symbolic axes
            for (int id : step.args)
                for (int d : exe->buffers[static_cast<size_t>(id)].dim_of)
                    if (d >= 0 && std::find(step.dims.begin(), step.dims.end(), d) == step.dims.end())
                        step.dims.push_back(d);
        exe->steps.push_back(std::move(step));
    }
    {  // Donated inputs (compiler/donation.h): the pairs each step may write over.
        std::vector<std::vector<std::pair<int, int>>> writes_over = step_inplace;
        writes_over.resize(lowered.size());
        for (size_t s = 0; s < lowered_units.size() && s < lowered.size(); ++s)
            for (const auto& [o, i] : lowered[s].donatable)
                writes_over[s].emplace_back(buffer_of.at(lowered_units[s]->outputs.at(static_cast<size_t>(o))),
                                            buffer_of.at(lowered_units[s]->inputs.at(static_cast<size_t>(i))));
        exe->donations = verified_donations(*exe, writes_over, opts.donate);
        result.memory.donated = static_cast<int>(exe->donations.size());
        for (const auto& [o, i] : exe->donations)
            result.memory.donated_bytes += exe->buffers[static_cast<size_t>(exe->outputs[static_cast<size_t>(o)])].nbytes();
    }
    // oneDNN steps from ops not seen above: the set-up runs while the C compiler does.
    for (const LoweredKernel& k : lowered)
        if (!dnnl_warmup.valid() && k.extern_name.rfind("dnnl_", 0) == 0) {
            dnnl_warmup = runtime::start_dnnl_warmup();
            break;
        }
    // One library per kernel (cached per source), or all kernels in one library.
    std::vector<codegen::CompiledLibrary> libs;
    std::vector<std::string> symbols(sources.size(), "kiln_kernel");
    if (opts.one_library) {
        codegen::KernelLibrary lib = codegen::compile_c_library(sources, opts.compile_jobs);
        for (size_t k = 0; k < sources.size(); ++k) libs.push_back({lib.path, lib.cached[k]});
        symbols = lib.symbols;
        result.kernel_library = lib.path;
    } else {
        const codegen::Optimization tier = first_tier(sources, opts);
        for (codegen::KernelBuild& b : codegen::compile_c_kernels(sources, opts.compile_jobs, tier)) {
            libs.push_back(b.library);
            symbols[libs.size() - 1] = b.symbol;
        }
        if (tier == codegen::Optimization::kQuick) result.stats.quick = static_cast<int>(sources.size());
    }
    exe->kernels.resize(sources.size());
    int async_copy_kernel = -1;
    for (size_t s = 0; s < lowered.size(); ++s) {
        if (!lowered[s].extern_name.empty()) {  // one kernel per extern step: it owns packed weights
            runtime::KernelDesc kd;
            kd.description = lowered[s].description;
            kd.extern_name = lowered[s].extern_name;
            kd.extern_params = lowered[s].extern_params;
            kd.takes_dims = !exe->steps[s].dims.empty();  // made per run-time shape
            exe->kernels.push_back(std::move(kd));
            exe->steps[s].kernel = static_cast<int>(exe->kernels.size()) - 1;
            KernelInfo info;
            info.description = lowered[s].description;
            info.node_name = lowered[s].node_name;
            info.extern_name = lowered[s].extern_name;
            info.c_source = "// extern kernel " + lowered[s].extern_name + ": " + lowered[s].extern_params + "\n";
            info.from_cache = true;
            result.kernels.push_back(std::move(info));
            continue;
        }
        if (!lowered[s].control.empty()) {
            runtime::KernelDesc kd;
            kd.description = kd.control = lowered[s].control;
            kd.control_params = lowered[s].control_params;
            exe->kernels.push_back(std::move(kd));
            exe->steps[s].kernel = static_cast<int>(exe->kernels.size()) - 1;
            KernelInfo info;
            info.description = lowered[s].control;
            info.node_name = lowered[s].node_name;
            info.c_source = "// control step " + lowered[s].control + ": " + lowered[s].control_params + "\n";
            info.from_cache = true;
            result.kernels.push_back(std::move(info));
            continue;
        }
        if (lowered[s].async_copy) {
            if (async_copy_kernel < 0) {
                exe->kernels.push_back({"", runtime::kAsyncCopySymbol, "Copy", /*is_async=*/true});
                async_copy_kernel = static_cast<int>(exe->kernels.size()) - 1;
            }
            exe->steps[s].kernel = async_copy_kernel;
            KernelInfo info;
            info.description = "Copy";
            info.node_name = lowered[s].node_name;
            info.c_source = "// asynchronous host copy: the runtime's built-in kiln_async_copy\n";
            info.from_cache = true;
            result.kernels.push_back(std::move(info));
            continue;
        }
        int k = exe->steps[s].kernel;
        runtime::KernelDesc& kd = exe->kernels[k];
        if (kd.library.empty()) {
            kd.library = libs[k].path;
            kd.symbol = symbols[k];
            kd.description = lowered[s].description;
            kd.takes_dims = !lowered[s].func.dims.empty();
        }
        KernelInfo info;
        info.description = lowered[s].description;
        info.node_name = lowered[s].node_name;
        info.tir = tir::func_str(lowered[s].func);
        info.c_source = lowered[s].source;
        info.from_cache = libs[k].from_cache;
        result.kernels.push_back(std::move(info));
    }
    for (const auto& l : libs)  // per distinct source (one_library: its object)
        if (!l.from_cache) ++result.stats.compiled;
    result.stats.kernels = static_cast<int>(sources.size());
    for (const LoweredKernel& k : lowered) result.stats.kernels += !k.extern_name.empty();
    // Static memory plan (issue 5): one arena for the intermediates, checked by the plan checker;
    // sets planned_for_concurrency from the plan's mode (or when nothing shares memory).
    if (opts.symbolic) {
        // Sizes depend on the dims: the runtime plans the arena per run (runtime/dims_plan.h).
        result.memory.report = "memory plan: evaluated per run at the run's dims (" + std::to_string(exe->dims.size()) +
                               " symbolic dims; runtime/dims_plan.h)\n";
    } else {
        ExecutablePlan mem = plan_executable(*exe, step_inplace, opts.plan_for_concurrency);
        result.memory.arena = mem.plan.arena_bytes;
        result.memory.naive_sum = mem.naive_sum;
        result.memory.lower_bound = mem.lower_bound;
        result.memory.inplace_steps = mem.plan.inplace_count;
        result.memory.report = mem.report;
    }
    if (!opts.donate.empty())
        result.memory.report += "donated inputs: " + std::to_string(result.memory.donated) + " of " +
                                std::to_string(opts.donate.size()) + " offered outputs written over their input (" +
                                std::to_string(result.memory.donated_bytes) + " bytes)\n";
    if (opts.symbolic) {
        exe->dims = sym.names;
        exe->dim_limits = dim_limits_of(g, sym);
    }
    exe->index_checks = index_checks(*exe, lowered_units);  // run-time indices out of range: errors
    if (opts.before_load) opts.before_load(*exe);
    exe->load();
    if (result.stats.quick > 0) result.upgrade = std::make_shared<KernelUpgrade>(exe, sources, opts.compile_jobs);
    result.executable = std::move(exe);
    result.stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return result;
}

}  // namespace kiln::compiler
