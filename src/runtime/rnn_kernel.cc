// The fused recurrent kernel "kiln_rnn" (see rnn_kernel.h).
//
// oneDNN runs single-threaded inside each task (as in dnnl_kernels.cc): the tasks run on Kiln's
// intra-op pool, so `--threads N` is exact. Per-call state (the projection, the h / c ping-pong
// buffers, gate buffers, oneDNN scratchpads) lives in a workspace taken from a pool, so
// concurrent runs of one session never share one.
#if KILN_HAVE_DNNL
#include "runtime/rnn_kernel.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/dnnl_engine.h"
#include "runtime/dnnl_weight_copies.h"
#include "runtime/executable.h"
#include "runtime/rnn_gates.h"
#include "runtime/rnn_gemv.h"
#include "runtime/rnn_steps.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

using dnnl::memory;
using dt = memory::data_type;

/// A constant B of a GEMM: its plain data through `b_strides` (made by `gather` on demand,
/// where it is not the constant itself), and the key its reordered copy is shared under
/// (WeightCopies: the kernels made per run-time shape reorder it once).
struct ConstantB {
    const void* constant = nullptr;  // the weight tensor's storage
    int64_t offset = 0;
    std::string slice;               // which part of it, and how B is laid out
    std::function<std::vector<float>()> gather;  // null: B is `constant` itself
};

/// dst[M, N] = src[M, K] x B[K, N] by a oneDNN matmul. A constant B is reordered once into the
/// primitive's preferred (packed) layout; otherwise B is read per call through `b_strides`.
class Matmul {
public:
    Matmul() = default;
    Matmul(int64_t m, int64_t k, int64_t n, const ConstantB* const_b, const memory::dims& b_strides) {
        src_ = memory::desc({m, k}, dt::f32, memory::dims{k, 1});
        dst_ = memory::desc({m, n}, dt::f32, memory::dims{n, 1});
        b_plain_ = memory::desc({k, n}, dt::f32, b_strides);
        const memory::desc b = const_b ? memory::desc({k, n}, dt::f32, memory::format_tag::any) : b_plain_;
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // ours: one per workspace
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_, b, dst_), attr, cpu_engine());
        scratch_ = pd.scratchpad_desc();
        if (const_b) {
            packed_held_ = WeightCopies::global().get(
                const_b->constant, const_b->offset, const_b->slice, pd.weights_desc(), [&] {
                    std::vector<float> gathered = const_b->gather ? const_b->gather() : std::vector<float>{};
                    const void* data = const_b->gather ? gathered.data() : const_b->constant;
                    memory plain(b_plain_, cpu_engine(), const_cast<void*>(data));
                    memory packed(pd.weights_desc(), cpu_engine());
                    dnnl::stream s(cpu_engine());
                    dnnl::reorder(plain, packed).execute(s, plain, packed);
                    s.wait();
                    return packed;
                });
            packed_ = *packed_held_;
        }
        prim_ = dnnl::matmul(pd);
    }
    size_t scratch_bytes() const { return scratch_.get_size(); }
    using Bound = std::unordered_map<int, memory>;
    /// The arguments of calls on fixed buffers (a workspace's), made once: building them per call
    /// costs about a microsecond, a third of a small step's GEMM.
    Bound bind(const float* a, float* c, void* scratch) const {
        Bound args{{DNNL_ARG_SRC, memory(src_, cpu_engine(), const_cast<float*>(a))}, {DNNL_ARG_DST, memory(dst_, cpu_engine(), c)}};
        args[DNNL_ARG_WEIGHTS] = packed_ ? packed_ : memory(b_plain_, cpu_engine(), nullptr);
        if (scratch_bytes() > 0) args[DNNL_ARG_SCRATCHPAD] = memory(scratch_, cpu_engine(), scratch);
        return args;
    }
    /// Runs on bound arguments; a: a per-call src (null: the bound one); b: the per-call B
    /// (ignored when packed).
    void run(const Bound& args, const float* a, const float* b) const {
        thread_local dnnl::stream s(cpu_engine());
        if (a) args.at(DNNL_ARG_SRC).set_data_handle(const_cast<float*>(a));
        if (!packed_) args.at(DNNL_ARG_WEIGHTS).set_data_handle(const_cast<float*>(b));
        prim_.execute(s, args);
        s.wait();
    }

private:
    dnnl::matmul prim_;
    memory::desc src_, dst_, b_plain_, scratch_;
    memory packed_;
    std::shared_ptr<memory> packed_held_;  // keeps the shared copy alive
};

enum Arg { kX, kW, kR, kB, kLens, kH0, kC0, kP, kY, kYh, kYc, kNumArgs };
const char* const kArgNames[kNumArgs] = {"x", "w", "r", "b", "lens", "h0", "c0", "p", "y", "yh", "yc"};
enum class Cell { kRnn, kGru, kLstm };

struct Config {
    Cell cell = Cell::kRnn;
    int64_t gates = 1, dirs = 1, hidden = 0, input = 0, seq = 0, batch = 0;
    bool layout1 = false, input_forget = false, lbr = false;
    std::vector<bool> reverse;
    std::vector<std::vector<rnn::Activation>> acts;  // per direction
    float clip = 0;                                   // <= 0: none
    int arg[kNumArgs];
    const float* constant[kNumArgs] = {};
    /// GRU without linear_before_reset: the h gate's GEMM reads r * h (a second GEMM per step).
    bool two_phase() const { return cell == Cell::kGru && !lbr; }
    /// Gates of the first recurrent GEMM.
    int64_t gates1() const { return two_phase() ? 2 : gates; }
};

Config parse_config(const ExternParams& p) {
    Config c;
    const std::string& cell = p.str("cell");
    KILN_CHECK(cell == "rnn" || cell == "gru" || cell == "lstm", kInvalidModel) << "kiln_rnn: unknown cell '" << cell << "'";
    c.cell = cell == "lstm" ? Cell::kLstm : cell == "gru" ? Cell::kGru : Cell::kRnn;
    c.gates = c.cell == Cell::kLstm ? 4 : c.cell == Cell::kGru ? 3 : 1;
    c.dirs = p.integer("dirs");
    c.hidden = p.integer("hidden");
    c.input = p.integer("input");
    c.seq = p.integer("seq");
    c.batch = p.integer("batch");
    c.layout1 = p.integer("layout") == 1;
    c.input_forget = p.integer_or("input_forget", 0) != 0;
    c.lbr = p.integer_or("lbr", 0) != 0;
    if (p.has("clip")) c.clip = std::strtof(p.str("clip").c_str(), nullptr);
    KILN_CHECK((c.dirs == 1 || c.dirs == 2) && c.hidden > 0 && c.input > 0 && c.seq >= 0 && c.batch >= 0, kInvalidModel)
        << "kiln_rnn: bad dirs / hidden / input / seq / batch";
    std::vector<int64_t> rev = p.ints("reverse");
    KILN_CHECK(static_cast<int64_t>(rev.size()) == c.dirs, kInvalidModel) << "kiln_rnn: reverse needs one entry per direction";
    for (int64_t r : rev) c.reverse.push_back(r != 0);
    const std::vector<std::string> acts = p.list("acts");
    const int64_t per = c.cell == Cell::kLstm ? 3 : c.cell == Cell::kGru ? 2 : 1;
    KILN_CHECK(static_cast<int64_t>(acts.size()) == per * c.dirs, kInvalidModel)
        << "kiln_rnn: acts needs " << per * c.dirs << " entries, got " << acts.size();
    c.acts.assign(c.dirs, {});
    for (size_t i = 0; i < acts.size(); ++i) c.acts[i / per].push_back(rnn::parse_activation(acts[i]));
    for (int a = 0; a < kNumArgs; ++a) c.arg[a] = static_cast<int>(p.integer_or(kArgNames[a], -1));
    return c;
}

std::string shape_text(const Shape& s) {
    std::string t = "[";
    for (size_t i = 0; i < s.size(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
    return t + "]";
}

/// Checks every argument index, dtype and size against the configuration (an artifact's table is
/// data: a forged one must not make the kernel read or write out of bounds). Sizes, not shapes:
/// an argument may be a view's buffer (a Squeeze between two LSTMs), which keeps its own shape.
void check_args(const Config& c, const std::vector<ExternArg>& args) {
    const int n = static_cast<int>(args.size());
    KILN_CHECK(c.arg[kX] >= 0 && c.arg[kW] >= 0 && c.arg[kR] >= 0, kInvalidModel) << "kiln_rnn: x, w and r are required";
    for (int a = 0; a < kNumArgs; ++a)
        KILN_CHECK(c.arg[a] < n, kInvalidModel)
            << "kiln_rnn: argument " << kArgNames[a] << "=" << c.arg[a] << " out of range (" << n << " arguments)";
    const int64_t D = c.dirs, H = c.hidden, GH = c.gates * H, B = c.batch, T = c.seq;
    const Shape state = c.layout1 ? Shape{B, D, H} : Shape{D, B, H};
    const Shape want[kNumArgs] = {c.layout1 ? Shape{B, T, c.input} : Shape{T, B, c.input},
                                  {D, GH, c.input}, {D, GH, H}, {D, 2 * GH}, {B}, state, state, {D, 3 * H},
                                  c.layout1 ? Shape{B, T, D, H} : Shape{T, D, B, H}, state, state};
    for (int a = 0; a < kNumArgs; ++a) {
        if (c.arg[a] < 0) continue;
        const ExternArg& e = args[c.arg[a]];
        const DType dtype = a == kLens ? DType::kInt32 : DType::kFloat32;
        KILN_CHECK(e.dtype == dtype && shape_numel(e.shape) == shape_numel(want[a]), kInvalidModel)
            << "kiln_rnn: argument " << kArgNames[a] << " must be " << dtype_name(dtype) << shape_text(want[a]) << ", got "
            << dtype_name(e.dtype) << shape_text(e.shape);
    }
    KILN_CHECK(c.cell == Cell::kLstm || (c.arg[kC0] < 0 && c.arg[kP] < 0 && c.arg[kYc] < 0), kInvalidModel)
        << "kiln_rnn: c0, p and yc belong to LSTM";
}

/// Hidden units [j0, j0 + hp) of one direction: the weight rows of those units (every gate), the
/// GEMMs over them and where its buffers and scratchpads lie in a workspace.
struct Part {
    int64_t j0 = 0, hp = 0;
    Matmul rec, rec2;  // rec2: GRU's h gate on r * h (two-phase only)
    rnn::PackedGemv gemv, gemv2;  // batch 1 with constant R: these instead of rec / rec2
    size_t scratch = 0, scratch2 = 0;  // byte offsets
};

struct RowPart {  // rows [r0, r0 + rows) of the input projection
    int64_t r0 = 0, rows = 0;
    Matmul proj;
    size_t scratch = 0;
};

struct Plan {
    int64_t parts = 1;               // per direction
    bool gemv = false;               // the recurrent products by rnn::PackedGemv
    std::vector<RowPart> proj;
    std::vector<std::vector<Part>> rec;  // [direction][part]
    size_t scratch_bytes = 0;
};

/// Below this many multiply-adds per part and step a split costs more (the wait at each step's
/// end, rnn_steps.h) than it saves; the packed GEMV (rnn_gemv.h) has no dispatch cost to share.
constexpr int64_t kMinPartMacs = 1 << 16, kMinGemvPartMacs = 1 << 14;

/// The weight rows of gates [q0, q0 + nq) for units [j0, j0 + hp) of direction d as a [H, nq*hp]
/// matrix (B of the recurrent GEMM, columns gate-major).
std::vector<float> gather_rows(const Config& c, int64_t d, int64_t q0, int64_t nq, int64_t j0, int64_t hp) {
    const int64_t H = c.hidden, N = nq * hp;
    const float* r = c.constant[kR] + d * c.gates * H * H;
    std::vector<float> out(static_cast<size_t>(H * N));
    for (int64_t q = 0; q < nq; ++q)
        for (int64_t j = 0; j < hp; ++j) {
            const float* row = r + ((q0 + q) * H + j0 + j) * H;
            for (int64_t k = 0; k < H; ++k) out[k * N + q * hp + j] = row[k];
        }
    return out;
}

Matmul recurrent_gemm(const Config& c, int64_t d, int64_t q0, int64_t nq, int64_t j0, int64_t hp) {
    const int64_t H = c.hidden;
    if (!c.constant[kR]) return Matmul(c.batch, H, nq * H, nullptr, {1, H});  // plain R rows, read per call
    const ConstantB b{c.constant[kR], d * c.gates * H * H,
                      "rnn_r:" + std::to_string(q0) + ":" + std::to_string(nq) + ":" + std::to_string(j0) + ":" +
                          std::to_string(hp),
                      [&] { return gather_rows(c, d, q0, nq, j0, hp); }};
    return Matmul(c.batch, H, nq * hp, &b, {nq * hp, 1});
}

Plan make_plan(const Config& c, int threads) {
    Plan plan;
    const int64_t H = c.hidden, GH = c.gates * H, rows = c.seq * c.batch;
    auto take = [&](size_t bytes) {
        const size_t off = plan.scratch_bytes;
        plan.scratch_bytes += (bytes + 63) / 64 * 64;
        return off;
    };
    if (rows > 0) {  // the input projection, split by rows
        const int64_t n = rows >= 16 * threads && rows * c.dirs * GH * c.input >= kMinPartMacs * threads ? threads : 1;
        for (int64_t i = 0; i < n; ++i) {
            RowPart rp;
            rp.r0 = rows * i / n;
            rp.rows = rows * (i + 1) / n - rp.r0;
            const ConstantB w{c.constant[kW], 0, "rnn_w:" + std::to_string(c.input), nullptr};
            rp.proj = Matmul(rp.rows, c.input, c.dirs * GH, c.constant[kW] ? &w : nullptr, {1, c.input});
            rp.scratch = take(rp.proj.scratch_bytes());
            plan.proj.push_back(std::move(rp));
        }
    }
    plan.gemv = c.batch == 1 && c.constant[kR] && rnn::PackedGemv::supported();
    int64_t parts = c.constant[kR] ? std::max<int64_t>(1, threads / c.dirs) : 1;
    parts = std::min(parts, H / 16);
    while (parts > 1 && c.batch * GH * H / parts < (plan.gemv ? kMinGemvPartMacs : kMinPartMacs)) --parts;
    plan.parts = std::max<int64_t>(1, parts);
    plan.rec.resize(c.dirs);
    if (c.batch == 0) return plan;
    const int64_t units = (H + 15) / 16;
    for (int64_t d = 0; d < c.dirs; ++d)
        for (int64_t i = 0; i < plan.parts; ++i) {
            Part p;
            p.j0 = plan.parts == 1 ? 0 : 16 * (units * i / plan.parts);
            p.hp = (plan.parts == 1 || i + 1 == plan.parts ? H : 16 * (units * (i + 1) / plan.parts)) - p.j0;
            if (plan.gemv) {
                const float* r = c.constant[kR] + d * c.gates * H * H;
                p.gemv = rnn::PackedGemv(r, H, H, 0, c.gates1(), p.j0, p.hp);
                if (c.two_phase()) p.gemv2 = rnn::PackedGemv(r, H, H, 2, 1, p.j0, p.hp);
                plan.rec[d].push_back(std::move(p));
                continue;
            }
            p.rec = recurrent_gemm(c, d, 0, c.gates1(), p.j0, p.hp);
            p.scratch = take(p.rec.scratch_bytes());
            if (c.two_phase()) {
                p.rec2 = recurrent_gemm(c, d, 2, 1, p.j0, p.hp);
                p.scratch2 = take(p.rec2.scratch_bytes());
            }
            plan.rec[d].push_back(std::move(p));
        }
    return plan;
}

/// Per-call buffers (floats): the projection, biases, the h / c ping-pong states, gate buffers
/// (per direction [batch, G*H]: part p's rows at batch * G * j0), GRU's r * h and its second
/// product; plus the sequence lengths and the oneDNN scratchpads.
struct Workspace {
    std::vector<float> f;
    std::vector<int64_t> lens;
    std::vector<char> scratch;
    const Plan* bound = nullptr;  // the plan the arguments below are bound for
    std::vector<Matmul::Bound> proj, rec, rec2;  // rec: [(d * parts + part) * 2 + h slot]
};

struct Layout {
    size_t xw, bias, rbh, h, c, gates, rh, g2, total;
    explicit Layout(const Config& cfg) {
        const size_t D = cfg.dirs, B = cfg.batch, H = cfg.hidden, GH = cfg.gates * H, T = cfg.seq;
        size_t at = 0;
        auto take = [&](size_t n) {
            const size_t off = at;
            at += (n + 15) / 16 * 16;
            return off;
        };
        xw = take(T * B * D * GH);
        bias = take(D * GH);
        rbh = take(D * H);
        h = take(D * 2 * B * H);
        c = take(D * 2 * B * H);
        gates = take(D * B * GH);
        rh = take(D * B * H);
        g2 = take(D * B * H);
        total = at;
    }
};

/// One call: the arguments, a workspace and the plan; the steps of rnn_kernel.h.
struct Call {
    const Config& c;
    const Plan& plan;
    void* const* args;
    Workspace& ws;
    Layout lay;

    const float* in(Arg a) const { return c.arg[a] < 0 ? nullptr : static_cast<const float*>(args[c.arg[a]]); }
    float* out(Arg a) const { return c.arg[a] < 0 ? nullptr : static_cast<float*>(args[c.arg[a]]); }
    float* f(size_t off) { return ws.f.data() + off; }
    /// A scratchpad at byte offset `off` of the workspace's (64-byte aligned) scratch area.
    void* scratch(size_t off) {
        const auto base = reinterpret_cast<uintptr_t>(ws.scratch.data());
        return reinterpret_cast<char*>((base + 63) / 64 * 64) + off;
    }
    /// State slot (0 / 1) of direction d: [batch, H].
    float* h(int64_t d, int64_t slot) { return f(lay.h) + (d * 2 + slot) * c.batch * c.hidden; }
    float* cs(int64_t d, int64_t slot) { return f(lay.c) + (d * 2 + slot) * c.batch * c.hidden; }
    /// Offset of (d, b) in a state tensor ([D, B, H] or, layout 1, [B, D, H]).
    int64_t state_off(int64_t d, int64_t b) const { return (c.layout1 ? b * c.dirs + d : d * c.batch + b) * c.hidden; }
    int64_t xw_row(int64_t t, int64_t b) const { return c.layout1 ? b * c.seq + t : t * c.batch + b; }
    int64_t y_off(int64_t t, int64_t d, int64_t b) const {
        return (c.layout1 ? (b * c.seq + t) * c.dirs + d : (t * c.dirs + d) * c.batch + b) * c.hidden;
    }

    /// Sequence lengths, biases, initial states; Y zeroed where rows end early.
    void prepare() {
        const int64_t D = c.dirs, B = c.batch, H = c.hidden, GH = c.gates * H;
        const int32_t* lens = c.arg[kLens] < 0 ? nullptr : static_cast<const int32_t*>(args[c.arg[kLens]]);
        ws.lens.resize(static_cast<size_t>(B));
        for (int64_t b = 0; b < B; ++b) ws.lens[b] = lens ? std::clamp<int64_t>(lens[b], 0, c.seq) : c.seq;
        const float* bias = in(kB);
        float* wb = f(lay.bias);
        for (int64_t d = 0; d < D; ++d)
            for (int64_t g = 0; g < GH; ++g) {
                // GRU with linear_before_reset keeps the h gate's Rb for r * (h Rh^T + Rbh).
                const bool own = c.cell == Cell::kGru && c.lbr && g >= 2 * H;
                wb[d * GH + g] = bias ? bias[d * 2 * GH + g] + (own ? 0.0f : bias[d * 2 * GH + GH + g]) : 0.0f;
                if (own) f(lay.rbh)[d * H + g - 2 * H] = bias ? bias[d * 2 * GH + GH + g] : 0.0f;
            }
        const float *h0 = in(kH0), *c0 = in(kC0);
        for (int64_t d = 0; d < D; ++d)
            for (int64_t b = 0; b < B; ++b) {
                const size_t bytes = static_cast<size_t>(H) * sizeof(float);
                if (h0) std::memcpy(h(d, 0) + b * H, h0 + state_off(d, b), bytes);
                else std::memset(h(d, 0) + b * H, 0, bytes);
                if (c0) std::memcpy(cs(d, 0) + b * H, c0 + state_off(d, b), bytes);
                else std::memset(cs(d, 0) + b * H, 0, bytes);
            }
        if (lens && out(kY))
            std::memset(out(kY), 0, static_cast<size_t>(c.seq * D * B * H) * sizeof(float));
    }

    /// Binds the GEMMs' arguments to this workspace (once per workspace and plan).
    void bind() {
        if (ws.bound == &plan) return;
        ws.proj.clear();
        ws.rec.clear();
        ws.rec2.clear();
        const int64_t N = c.dirs * c.gates * c.hidden;
        for (const RowPart& rp : plan.proj) ws.proj.push_back(rp.proj.bind(nullptr, f(lay.xw) + rp.r0 * N, scratch(rp.scratch)));
        for (int64_t d = 0; d < c.dirs && !plan.gemv; ++d)
            for (const Part& p : plan.rec[d]) {
                for (int64_t slot = 0; slot < 2; ++slot) ws.rec.push_back(p.rec.bind(h(d, slot), gates(d, p), scratch(p.scratch)));
                if (c.two_phase()) ws.rec2.push_back(p.rec2.bind(f(lay.rh) + d * c.batch * c.hidden, g2(d, p), scratch(p.scratch2)));
            }
        ws.bound = &plan;
    }
    int64_t part_index(int64_t d, const Part& p) const { return d * plan.parts + (&p - plan.rec[d].data()); }
    /// Part p's gate buffer ([batch, gates1 * hp]) and GRU's second product ([batch, hp]).
    float* gates(int64_t d, const Part& p) { return f(lay.gates) + d * c.batch * c.gates * c.hidden + c.batch * c.gates1() * p.j0; }
    float* g2(int64_t d, const Part& p) { return f(lay.g2) + d * c.batch * c.hidden + c.batch * p.j0; }

    void project(size_t i) { plan.proj[i].proj.run(ws.proj[i], in(kX) + plan.proj[i].r0 * c.input, in(kW)); }

    /// Rows of batch entry b past its length keep the state of part p.
    void keep_state(int64_t d, const Part& p, int64_t s, int64_t b) {
        const size_t bytes = static_cast<size_t>(p.hp) * sizeof(float);
        const int64_t at = b * c.hidden + p.j0, cur = s & 1;
        std::memcpy(h(d, cur ^ 1) + at, h(d, cur) + at, bytes);
        if (c.cell == Cell::kLstm) std::memcpy(cs(d, cur ^ 1) + at, cs(d, cur) + at, bytes);
    }
    void write_y(int64_t t, int64_t d, const Part& p, int64_t s, int64_t b) {
        if (float* y = out(kY))
            std::memcpy(y + y_off(t, d, b) + p.j0, h(d, (s & 1) ^ 1) + b * c.hidden + p.j0,
                        static_cast<size_t>(p.hp) * sizeof(float));
    }
    /// The time step s of direction d reads for batch entry b, or -1 when b has ended.
    int64_t time_of(int64_t d, int64_t s, int64_t b) const {
        const int64_t len = ws.lens[b];
        if (s >= len) return -1;
        return c.reverse[d] ? len - 1 - s : s;
    }

    void lstm_row(int64_t d, const Part& p, int64_t s, int64_t b, int64_t t, float* g) {
        const int64_t H = c.hidden, hp = p.hp, cur = s & 1;
        const std::vector<rnn::Activation>& a = c.acts[d];
        const float* x = f(lay.xw) + xw_row(t, b) * c.dirs * 4 * H + d * 4 * H + p.j0;
        const float* bias = f(lay.bias) + d * 4 * H + p.j0;
        float *gi = g, *go = g + hp, *gf = g + 2 * hp, *gc = g + 3 * hp;
        for (int q = 0; q < 4; ++q) rnn::add2(g + q * hp, x + q * H, bias + q * H, hp);
        const float* cp = cs(d, cur) + b * H + p.j0;
        float* cn = cs(d, cur ^ 1) + b * H + p.j0;
        const float* peep = in(kP) ? in(kP) + d * 3 * H + p.j0 : nullptr;  // i o f
        if (peep) {
            rnn::add_mul(gi, peep, cp, hp);
            rnn::add_mul(gf, peep + 2 * H, cp, hp);
        }
        rnn::activate(a[0], c.clip, gi, hp);
        if (c.input_forget) rnn::one_minus(gf, gi, hp);
        else rnn::activate(a[0], c.clip, gf, hp);
        rnn::activate(a[1], c.clip, gc, hp);
        rnn::lstm_cell(cn, gf, cp, gi, gc, hp);
        if (peep) rnn::add_mul(go, peep + H, cn, hp);
        rnn::activate(a[0], c.clip, go, hp);
        std::memcpy(gc, cn, static_cast<size_t>(hp) * sizeof(float));
        rnn::activate(a[2], 0, gc, hp);  // h(c): the cell state unclipped, as ONNX Runtime
        rnn::mul(h(d, cur ^ 1) + b * H + p.j0, go, gc, hp);
    }

    /// RNN, GRU with linear_before_reset, and the z / r half of the other GRU.
    void simple_row(int64_t d, const Part& p, int64_t s, int64_t b, int64_t t, float* g) {
        const int64_t H = c.hidden, GH = c.gates * H, hp = p.hp, cur = s & 1;
        const std::vector<rnn::Activation>& a = c.acts[d];
        const float* x = f(lay.xw) + xw_row(t, b) * c.dirs * GH + d * GH + p.j0;
        const float* bias = f(lay.bias) + d * GH + p.j0;
        const float* hprev = h(d, cur) + b * H + p.j0;
        float* hnext = h(d, cur ^ 1) + b * H + p.j0;
        if (c.cell == Cell::kRnn) {
            rnn::add2(g, x, bias, hp);
            rnn::activate(a[0], c.clip, g, hp);
            std::memcpy(hnext, g, static_cast<size_t>(hp) * sizeof(float));
            return;
        }
        rnn::add2(g, x, bias, hp);  // z
        rnn::add2(g + hp, x + H, bias + H, hp);  // r
        rnn::activate(a[0], c.clip, g, 2 * hp);
        if (c.two_phase()) {  // r * h_prev, the second GEMM's row
            rnn::mul(f(lay.rh) + (d * c.batch + b) * H + p.j0, g + hp, hprev, hp);
            return;
        }
        const float* rbh = in(kB) ? f(lay.rbh) + d * H + p.j0 : nullptr;
        rnn::gru_lbr_pre(g + 2 * hp, x + 2 * H, bias + 2 * H, g + hp, g + 2 * hp, rbh, hp);
        rnn::activate(a[1], c.clip, g + 2 * hp, hp);
        rnn::gru_blend(hnext, g, g + 2 * hp, hprev, hp);
    }

    /// Phase 0 of step s for part p of direction d: the recurrent GEMM and the gate pass.
    void step(int64_t d, const Part& p, int64_t s) {
        const int64_t H = c.hidden, G = c.gates, cur = s & 1;
        float* g = gates(d, p);
        if (plan.gemv) p.gemv.run(h(d, cur), g, (s & 1) != 0);
        else p.rec.run(ws.rec[part_index(d, p) * 2 + cur], nullptr, in(kR) + d * G * H * H);
        for (int64_t b = 0; b < c.batch; ++b) {
            const int64_t t = time_of(d, s, b);
            float* gb = g + b * c.gates1() * p.hp;
            if (t < 0) {
                if (!c.two_phase()) keep_state(d, p, s, b);
                continue;
            }
            if (c.cell == Cell::kLstm) lstm_row(d, p, s, b, t, gb);
            else simple_row(d, p, s, b, t, gb);
            if (!c.two_phase()) write_y(t, d, p, s, b);
        }
    }

    /// Phase 1 (GRU without linear_before_reset): (r * h) Rh^T, then the h gate and the blend.
    void step2(int64_t d, const Part& p, int64_t s) {
        const int64_t H = c.hidden, cur = s & 1;
        const float* zr = gates(d, p);
        float* gh2 = g2(d, p);
        if (plan.gemv) p.gemv2.run(f(lay.rh) + d * c.batch * H, gh2, (s & 1) != 0);
        else p.rec2.run(ws.rec2[part_index(d, p)], nullptr, in(kR) + d * 3 * H * H + 2 * H * H);
        for (int64_t b = 0; b < c.batch; ++b) {
            const int64_t t = time_of(d, s, b);
            if (t < 0) {
                keep_state(d, p, s, b);
                continue;
            }
            float* gh = gh2 + b * p.hp;
            const float* x = f(lay.xw) + xw_row(t, b) * c.dirs * 3 * H + d * 3 * H + 2 * H + p.j0;
            rnn::add2(gh, x, f(lay.bias) + d * 3 * H + 2 * H + p.j0, p.hp);
            rnn::activate(c.acts[d][1], c.clip, gh, p.hp);
            rnn::gru_blend(h(d, cur ^ 1) + b * H + p.j0, zr + b * 2 * p.hp, gh, h(d, cur) + b * H + p.j0, p.hp);
            write_y(t, d, p, s, b);
        }
    }

    /// Every step of direction d, unsplit (one part).
    void direction(int64_t d) {
        for (int64_t s = 0; s < c.seq; ++s) {
            step(d, plan.rec[d][0], s);
            if (c.two_phase()) step2(d, plan.rec[d][0], s);
        }
    }

    /// Y_h / Y_c: the final state; 0 for a batch entry of length 0 (with sequence_lens).
    void finish() {
        const int64_t last = c.seq & 1, H = c.hidden;
        const bool lens = c.arg[kLens] >= 0;
        for (int64_t d = 0; d < c.dirs; ++d)
            for (int64_t b = 0; b < c.batch; ++b) {
                const bool zero = lens && ws.lens[b] == 0;
                for (auto [o, src] : {std::pair{out(kYh), h(d, last)}, std::pair{out(kYc), cs(d, last)}}) {
                    if (!o) continue;
                    if (zero) std::memset(o + state_off(d, b), 0, static_cast<size_t>(H) * sizeof(float));
                    else std::memcpy(o + state_off(d, b), src + b * H, static_cast<size_t>(H) * sizeof(float));
                }
            }
    }
};

class RnnKernel final : public ExternKernel {
public:
    RnnKernel(const ExternParams& p, const std::vector<ExternArg>& args) : c_(parse_config(p)) {
        check_args(c_, args);
        for (int a = 0; a < kNumArgs; ++a)
            if (c_.arg[a] >= 0 && a != kLens) c_.constant[a] = static_cast<const float*>(args[c_.arg[a]].constant);
    }

    Status run(void* const* args, const kiln_kernel_env& env, int threads) override {
        try {
            const Plan& plan = plan_for(std::max(1, threads));
            std::unique_ptr<Workspace> ws = take(plan);
            Call call{c_, plan, args, *ws, Layout(c_)};
            const bool done = execute(call, env, threads);
            give(std::move(ws));
            return done ? Status::ok_status() : kernel_stopped_status();
        } catch (const Error& e) {
            return Status::from(e);
        } catch (const dnnl::error& e) {
            return Status(ErrorKind::kInternal, std::string("oneDNN: ") + e.what());
        }
    }

private:
    /// Runs fn(i) for i < n on the pool (inline when n == 1); false when the call was stopped.
    /// An exception in a pool thread (a oneDNN failure) is carried back and rethrown here.
    template <typename F>
    static bool tasks(const kiln_kernel_env& env, int64_t n, F&& fn) {
        if (n == 1) {
            omp_set_num_threads(1);
            fn(int64_t{0});
            return !(env.stop && *env.stop);
        }
        struct Ctx {
            F* fn;
            std::mutex mu;
            std::exception_ptr error;
        } ctx{&fn, {}, nullptr};
        env.parallel_for(env.pool, n,
                         [](int64_t b, int64_t e, void* p) {
                             auto* x = static_cast<Ctx*>(p);
                             omp_set_num_threads(1);
                             try {
                                 for (int64_t i = b; i < e; ++i) (*x->fn)(i);
                             } catch (...) {
                                 std::lock_guard<std::mutex> lock(x->mu);
                                 if (!x->error) x->error = std::current_exception();
                             }
                         },
                         &ctx);
        if (ctx.error) std::rethrow_exception(ctx.error);
        return !(env.stop && *env.stop);
    }

    bool execute(Call& call, const kiln_kernel_env& env, int threads) {
        const Plan& plan = call.plan;
        call.bind();
        call.prepare();
        if (!tasks(env, static_cast<int64_t>(plan.proj.size()), [&](int64_t i) { call.project(static_cast<size_t>(i)); }))
            return false;
        if (c_.batch > 0 && plan.parts == 1) {  // each direction whole, side by side when threads allow
            const int64_t n = threads > 1 ? c_.dirs : 1;
            if (!tasks(env, n, [&](int64_t i) {
                    for (int64_t d = i; d < c_.dirs; d += n) call.direction(d);
                }))
                return false;
        } else if (c_.batch > 0) {  // hidden units split into parts, joined once per step (phase)
            const int64_t n = c_.dirs * plan.parts, phases = c_.two_phase() ? 2 : 1;
            rnn::StepLoop loop(c_.seq * phases, n);
            auto item = [&](int64_t v, int64_t i) {
                const Part& p = plan.rec[i / plan.parts][i % plan.parts];
                if (v % phases == 0) call.step(i / plan.parts, p, v / phases);
                else call.step2(i / plan.parts, p, v / phases);
            };
            const bool ran = tasks(env, std::min<int64_t>(n, threads), [&](int64_t) { loop.work(item, env.stop); });
            if (!ran || loop.stopped()) return false;
        }
        call.finish();
        return true;
    }

    const Plan& plan_for(int threads) {
        std::lock_guard<std::mutex> lock(mu_);
        std::unique_ptr<Plan>& p = plans_[threads];
        if (!p) p = std::make_unique<Plan>(make_plan(c_, threads));
        return *p;
    }
    std::unique_ptr<Workspace> take(const Plan& plan) {
        std::unique_ptr<Workspace> ws;
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (!free_.empty()) {
                ws = std::move(free_.back());
                free_.pop_back();
            }
        }
        if (!ws) ws = std::make_unique<Workspace>();
        ws->f.resize(Layout(c_).total);
        if (ws->scratch.size() < plan.scratch_bytes + 64) ws->scratch.resize(plan.scratch_bytes + 64);
        return ws;
    }
    void give(std::unique_ptr<Workspace> ws) {
        std::lock_guard<std::mutex> lock(mu_);
        free_.push_back(std::move(ws));
    }

    Config c_;
    std::mutex mu_;
    std::map<int, std::unique_ptr<Plan>> plans_;
    std::vector<std::unique_ptr<Workspace>> free_;
};

}  // namespace

std::unique_ptr<ExternKernel> make_rnn_kernel(const ExternParams& p, const std::vector<ExternArg>& args) {
    try {
        return std::make_unique<RnnKernel>(p, args);
    } catch (const dnnl::error& e) {
        KILN_CHECK(false, kUnsupported) << "kiln_rnn: oneDNN rejected the parameters: " << e.what();
    }
    return nullptr;
}

}  // namespace kiln::runtime
#endif  // KILN_HAVE_DNNL
