// The int8 runtime kernels against direct integer loops written here: dnnl_qconv (oneDNN's u8 x
// s8 convolution with per-channel output scales, src / dst zero points and an s32 bias) over
// padding, strides, groups, one and two images, one and two threads, NCHW and NHWC (row bands); dnnl_qmatmul (per-column
// scales, rows split); dnnl_dqmatmul (dynamic quantization: run-time zero point and scales,
// bias after the rescale); kiln_qadd (the QDQ residual
// add) with saturation. Tolerance: the reference requantizes in double (ONNX's
// rint((acc + B) * m + y_zp)); oneDNN multiplies in float and adds y_zp after rounding, so an
// element may be 1 off where the product lands next to a half: at most 1, and at least 99% equal.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "runtime/executable.h"
#include "runtime/extern_kernel.h"
#include "runtime/thread_pool.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

BufferDesc constant(const std::string& name, Tensor t) {
    BufferDesc d{name, t.dtype(), t.shape(), BufferRole::kConstant};
    d.constant = std::move(t);
    return d;
}

Tensor scalar(DType dt, double v) {
    Tensor t(dt, {});
    t.set_f64(0, v);
    return t;
}

struct ConvCase {
    int64_t n, c, h, w, m, k, stride, pad, groups;
    int threads;
    bool nhwc = false;  // x and y in NHWC (x_layout, y_layout), as between int8 kernels
    // A fused residual add (topi::match_qconv_add): none, its own buffer, or y's buffer (in place).
    enum { kNone, kResidual, kInPlace } residual = kNone;
    bool residual_s8 = false;
};

#if KILN_HAVE_DNNL
void check_qconv(const ConvCase& cc) {
    std::mt19937 rng(static_cast<unsigned>(cc.c * 7 + cc.m * 13 + cc.stride + cc.groups * 5 + cc.threads));
    const int64_t cg = cc.c / cc.groups, mg = cc.m / cc.groups;
    const int64_t oh = (cc.h + 2 * cc.pad - cc.k) / cc.stride + 1, ow = (cc.w + 2 * cc.pad - cc.k) / cc.stride + 1;
    Tensor x(DType::kUInt8, {cc.n, cc.c, cc.h, cc.w}), w(DType::kInt8, {cc.m, cg, cc.k, cc.k});
    Tensor ws(DType::kFloat32, {cc.m}), wz(DType::kInt8, {cc.m}), b(DType::kInt32, {cc.m});
    for (int64_t i = 0; i < x.numel(); ++i) x.set_i64(i, rng() % 256);
    for (int64_t i = 0; i < w.numel(); ++i) w.set_i64(i, static_cast<int64_t>(rng() % 255) - 127);
    for (int64_t i = 0; i < cc.m; ++i) ws.set_f64(i, 0.001 + 0.004 * (rng() % 1000) / 1000.0);
    for (int64_t i = 0; i < cc.m; ++i) b.set_i64(i, static_cast<int64_t>(rng() % 20001) - 10000);
    const float xs = 0.02f, ys = 0.9f;
    const int64_t xz = 37, yz = 100;
    Executable exe;
    exe.buffers.push_back({"x", DType::kUInt8, x.shape(), BufferRole::kInput});
    exe.buffers.push_back(constant("xs", scalar(DType::kFloat32, xs)));
    exe.buffers.push_back(constant("xz", scalar(DType::kUInt8, xz)));
    exe.buffers.push_back(constant("w", w));
    exe.buffers.push_back(constant("ws", ws));
    exe.buffers.push_back(constant("wz", wz));
    exe.buffers.push_back(constant("ys", scalar(DType::kFloat32, ys)));
    exe.buffers.push_back(constant("yz", scalar(DType::kUInt8, yz)));
    exe.buffers.push_back(constant("b", b));
    exe.buffers.push_back({"y", DType::kUInt8, {cc.n, cc.m, oh, ow}, BufferRole::kOutput});
    // The residual add's operand r (in y's layout), its scale and zero point, the sum's.
    const bool fused = cc.residual != ConvCase::kNone;
    const DType rt = cc.residual_s8 ? DType::kInt8 : DType::kUInt8;
    const float rs = 0.7f, qs = 1.3f;
    const int64_t rz = cc.residual_s8 ? -9 : 20, qz = 10;
    Tensor r(rt, {cc.n, cc.m, oh, ow});
    for (int64_t i = 0; i < r.numel(); ++i) r.set_i64(i, static_cast<int64_t>(rng() % 256) - (cc.residual_s8 ? 128 : 0));
    exe.buffers.push_back({"r", rt, r.shape(), BufferRole::kInput});
    exe.buffers.push_back(constant("rs", scalar(DType::kFloat32, rs)));
    exe.buffers.push_back(constant("qs", scalar(DType::kFloat32, qs)));
    auto s = [](int64_t v) { return std::to_string(v); };
    KernelDesc kd;
    kd.description = "QLinearConv";
    kd.extern_name = "dnnl_qconv";
    kd.extern_params = ExternParams::format(Pairs{
        {"x", "0"}, {"xs", "1"}, {"xz", "2"}, {"w", "3"}, {"ws", "4"}, {"wz", "5"}, {"ys", "6"}, {"yz", "7"},
        {"b", "8"}, {"y", "9"}, {"src", s(cc.n) + "," + s(cc.c) + "," + s(cc.h) + "," + s(cc.w)},
        {"dst", s(cc.n) + "," + s(cc.m) + "," + s(oh) + "," + s(ow)}, {"kernel", s(cc.k) + "," + s(cc.k)},
        {"groups", s(cc.groups)}, {"strides", s(cc.stride) + "," + s(cc.stride)}, {"dilations", "1,1"},
        {"pads_begin", s(cc.pad) + "," + s(cc.pad)},
        {"pads_end", s((oh - 1) * cc.stride + cc.k - cc.h - cc.pad) + "," + s((ow - 1) * cc.stride + cc.k - cc.w - cc.pad)},
        {"x_zp", s(xz)}, {"y_zp", s(fused ? qz : yz)}, {"per_channel", "1"}, {"x_type", "u8"}, {"y_type", "u8"}});
    if (fused)
        kd.extern_params += ";c_zp=" + s(yz) + ";c_type=u8;sum=10;sum_s=11;sum_zp=" + s(rz) +
                            ";sum_type=" + (cc.residual_s8 ? "s8" : "u8") + ";qs=12";
    if (cc.nhwc) kd.extern_params += ";x_layout=nhwc;y_layout=nhwc";
    // Element offsets of x[n, c, r, q] and y[n, m, i, j] in the layout the kernel reads and writes.
    auto x_at = [&](int64_t n, int64_t c, int64_t r, int64_t q) {
        return cc.nhwc ? ((n * cc.h + r) * cc.w + q) * cc.c + c : ((n * cc.c + c) * cc.h + r) * cc.w + q;
    };
    auto y_at = [&](int64_t n, int64_t m, int64_t i, int64_t j) {
        return cc.nhwc ? ((n * oh + i) * ow + j) * cc.m + m : ((n * cc.m + m) * oh + i) * ow + j;
    };
    exe.kernels.push_back(kd);
    // Arguments: inputs, then the output; the residual's three after y (the kernel reads them
    // by index wherever they are).
    exe.steps.push_back({0, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, "qconv", 9});
    exe.load();
    Tensor y(DType::kUInt8, {cc.n, cc.m, oh, ow});
    Tensor r_in = r;  // what the reference reads (an in-place run overwrites r)
    if (cc.residual == ConvCase::kInPlace) r_in = Tensor(rt, r.shape()), std::memcpy(r_in.data(), r.data(), r.numel());
    void* out = cc.residual == ConvCase::kInPlace ? r.data() : y.data();
    void* args[13] = {x.data(), nullptr, nullptr, w.data(), ws.data(), wz.data(), nullptr, nullptr, b.data(), out,
                      fused ? r.data() : nullptr, nullptr, nullptr};
    ThreadPool pool(cc.threads);
    Status st = exe.run_kernel(0, args, pool.kernel_env());
    ASSERT_TRUE(st.ok()) << st.message();
    if (cc.residual == ConvCase::kInPlace) std::memcpy(y.data(), r.data(), y.numel());
    int64_t off = 0, total = 0;
    for (int64_t n = 0; n < cc.n; ++n)
        for (int64_t m = 0; m < cc.m; ++m)
            for (int64_t i = 0; i < oh; ++i)
                for (int64_t j = 0; j < ow; ++j) {
                    const int64_t g = m / mg;
                    int64_t acc = b.get_i64(m);
                    for (int64_t c = 0; c < cg; ++c)
                        for (int64_t u = 0; u < cc.k; ++u)
                            for (int64_t v = 0; v < cc.k; ++v) {
                                const int64_t r = i * cc.stride + u - cc.pad, q = j * cc.stride + v - cc.pad;
                                if (r < 0 || r >= cc.h || q < 0 || q >= cc.w) continue;  // pads with x_zp
                                const int64_t xv = x.get_i64(x_at(n, g * cg + c, r, q));
                                acc += (xv - xz) * w.get_i64(((m * cg + c) * cc.k + u) * cc.k + v);
                            }
                    const float mult = static_cast<float>(xs * static_cast<float>(ws.get_f64(m))) / ys;
                    double want = std::clamp(std::nearbyint(static_cast<double>(acc) * mult + yz), 0.0, 255.0);
                    if (fused) {  // ONNX Runtime's QLinearAdd of the conv's 8-bit output and r
                        const double rv = static_cast<double>(r_in.get_i64(y_at(n, m, i, j)) - rz);
                        const double sum = (want - yz) * (ys / qs) + rv * (rs / qs);
                        want = std::clamp(std::nearbyint(sum) + qz, 0.0, 255.0);
                    }
                    const int64_t got = y.get_i64(y_at(n, m, i, j));
                    ASSERT_LE(std::fabs(got - want), 1.0) << "n " << n << " m " << m << " at " << i << "," << j;
                    off += got != static_cast<int64_t>(want);
                    ++total;
                }
    EXPECT_LE(off, total / 100) << off << " of " << total << " elements 1 off";
}

/// y = requantize(A [m, k] u8 x B [k, n] s8) with per-column scales, through dnnl_qmatmul.
void check_qmatmul(int64_t m, int64_t k, int64_t n, int threads) {
    std::mt19937 rng(static_cast<unsigned>(m * 3 + n));
    Tensor a(DType::kUInt8, {m, k}), b(DType::kInt8, {k, n}), bs(DType::kFloat32, {n}), bz(DType::kInt8, {n});
    for (int64_t i = 0; i < a.numel(); ++i) a.set_i64(i, rng() % 256);
    for (int64_t i = 0; i < b.numel(); ++i) b.set_i64(i, static_cast<int64_t>(rng() % 255) - 127);
    for (int64_t i = 0; i < n; ++i) bs.set_f64(i, 0.001 + 0.004 * (rng() % 1000) / 1000.0);
    const float as = 0.05f, ys = 0.3f;
    const int64_t az = 120, yz = 128;
    Executable exe;
    exe.buffers.push_back({"a", DType::kUInt8, {m, k}, BufferRole::kInput});
    exe.buffers.push_back(constant("as", scalar(DType::kFloat32, as)));
    exe.buffers.push_back(constant("az", scalar(DType::kUInt8, az)));
    exe.buffers.push_back(constant("b", b));
    exe.buffers.push_back(constant("bs", bs));
    exe.buffers.push_back(constant("bz", bz));
    exe.buffers.push_back(constant("ys", scalar(DType::kFloat32, ys)));
    exe.buffers.push_back(constant("yz", scalar(DType::kUInt8, yz)));
    exe.buffers.push_back({"y", DType::kUInt8, {m, n}, BufferRole::kOutput});
    KernelDesc kd;
    kd.description = "QLinearMatMul";
    kd.extern_name = "dnnl_qmatmul";
    kd.extern_params = ExternParams::format(Pairs{
        {"a", "0"}, {"as", "1"}, {"az", "2"}, {"b", "3"}, {"bs", "4"}, {"bz", "5"}, {"ys", "6"}, {"yz", "7"},
        {"y", "8"}, {"m", std::to_string(m)}, {"k", std::to_string(k)}, {"n", std::to_string(n)},
        {"a_zp", std::to_string(az)}, {"y_zp", std::to_string(yz)}, {"per_column", "1"}, {"a_type", "u8"},
        {"y_type", "u8"}});
    exe.kernels.push_back(kd);
    exe.steps.push_back({0, {0, 1, 2, 3, 4, 5, 6, 7, 8}, "qmm", 8});
    exe.load();
    Tensor y(DType::kUInt8, {m, n});
    void* args[9] = {a.data(), nullptr, nullptr, b.data(), bs.data(), bz.data(), nullptr, nullptr, y.data()};
    ThreadPool pool(threads);
    Status st = exe.run_kernel(0, args, pool.kernel_env());
    ASSERT_TRUE(st.ok()) << st.message();
    int64_t off = 0;
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            int64_t acc = 0;
            for (int64_t t = 0; t < k; ++t) acc += (a.get_i64(i * k + t) - az) * b.get_i64(t * n + j);
            const float mult = static_cast<float>(as * static_cast<float>(bs.get_f64(j))) / ys;
            const double want = std::clamp(std::nearbyint(static_cast<double>(acc) * mult + yz), 0.0, 255.0);
            const int64_t got = y.get_i64(i * n + j);
            ASSERT_LE(std::fabs(got - want), 1.0) << i << "," << j;
            off += got != static_cast<int64_t>(want);
        }
    EXPECT_LE(off, m * n / 100);
}

TEST(Int8Kernels, DnnlQMatMulMatchesIntegerLoop) {
    check_qmatmul(5, 24, 40, 1);
    check_qmatmul(64, 96, 33, 2);  // rows split across two threads
}

/// Dynamic quantization's y = float((A - a_zp) @ B) * (a_s * B_s[c]) + bias[c] through
/// dnnl_dqmatmul, a_zp and a_s read per call (inputs, as DynamicQuantizeLinear writes them):
/// against the int32 sum and ONNX's two f32 products written here.
void check_dqmatmul(int64_t m, int64_t k, int64_t n, int threads, bool bias) {
    std::mt19937 rng(static_cast<unsigned>(m * 5 + n + k));
    Tensor a(DType::kUInt8, {m, k}), b(DType::kInt8, {k, n}), bs(DType::kFloat32, {n}), bb(DType::kFloat32, {n});
    for (int64_t i = 0; i < a.numel(); ++i) a.set_i64(i, rng() % 256);
    for (int64_t i = 0; i < b.numel(); ++i) b.set_i64(i, static_cast<int64_t>(rng() % 255) - 127);
    for (int64_t i = 0; i < n; ++i) bs.set_f64(i, 0.001 + 0.004 * (rng() % 1000) / 1000.0);
    for (int64_t i = 0; i < n; ++i) bb.set_f64(i, (static_cast<double>(rng() % 2001) - 1000) / 100.0);
    Tensor as = scalar(DType::kFloat32, 0.0371), az = scalar(DType::kUInt8, 131);
    Executable exe;
    exe.buffers.push_back({"a", DType::kUInt8, {m, k}, BufferRole::kInput});
    exe.buffers.push_back({"az", DType::kUInt8, {}, BufferRole::kInput});
    exe.buffers.push_back(constant("b", b));
    exe.buffers.push_back({"as", DType::kFloat32, {}, BufferRole::kInput});
    exe.buffers.push_back(constant("bs", bs));
    exe.buffers.push_back(constant("bias", bb));
    exe.buffers.push_back({"y", DType::kFloat32, {m, n}, BufferRole::kOutput});
    KernelDesc kd;
    kd.description = "MatMulInteger+Cast+Mul+Mul+Add";
    kd.extern_name = "dnnl_dqmatmul";
    Pairs p = {{"a", "0"}, {"az", "1"}, {"b", "2"}, {"s1", "3"}, {"s2", "4"}, {"y", "6"}, {"m", std::to_string(m)},
               {"k", std::to_string(k)}, {"n", std::to_string(n)}, {"a_type", "u8"}};
    if (bias) p.push_back({"bias", "5"});
    kd.extern_params = ExternParams::format(p);
    exe.kernels.push_back(kd);
    exe.steps.push_back({0, {0, 1, 2, 3, 4, 5, 6}, "dqmm", 6});
    exe.load();
    Tensor y(DType::kFloat32, {m, n});
    void* args[7] = {a.data(), az.data(), b.data(), as.data(), bs.data(), bb.data(), y.data()};
    ThreadPool pool(threads);
    Status st = exe.run_kernel(0, args, pool.kernel_env());
    ASSERT_TRUE(st.ok()) << st.message();
    int64_t off = 0;
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            int64_t acc = 0;
            for (int64_t t = 0; t < k; ++t) acc += (a.get_i64(i * k + t) - 131) * b.get_i64(t * n + j);
            const float scale = static_cast<float>(as.get_f64(0)) * static_cast<float>(bs.get_f64(j));
            float want = static_cast<float>(acc) * scale;
            if (bias) want += static_cast<float>(bb.get_f64(j));
            const double got = y.get_f64(i * n + j);
            ASSERT_LE(std::fabs(got - want), 1e-6 * std::fabs(want) + 1e-6) << i << "," << j << " acc " << acc;
            off += got != want;
        }
    EXPECT_LE(off, m * n / 100) << off << " of " << m * n << " not bit-equal";
}

TEST(Int8Kernels, DnnlDynQMatMulRejectsForgedParameters) {
    // Parameters that say N = 9 over a B of 8 columns, and a residual post-op on a too-small
    // argument: kInvalidModel at load, naming the kernel, never a read past a buffer.
    for (const std::string& bad : {std::string("n"), std::string("post")}) {
        Executable exe;
        exe.buffers.push_back({"a", DType::kUInt8, {4, 16}, BufferRole::kInput});
        exe.buffers.push_back(constant("b", Tensor(DType::kInt8, {16, 8})));
        exe.buffers.push_back({"s", DType::kFloat32, {}, BufferRole::kInput});
        exe.buffers.push_back({"r", DType::kFloat32, {8}, BufferRole::kInput});
        exe.buffers.push_back({"y", DType::kFloat32, {4, 8}, BufferRole::kOutput});
        KernelDesc kd;
        kd.description = "MatMulInteger+Cast+Mul";
        kd.extern_name = "dnnl_dqmatmul";
        Pairs p = {{"a", "0"}, {"b", "1"}, {"s1", "2"}, {"y", "4"}, {"m", "4"}, {"k", "16"},
                   {"n", bad == "n" ? "9" : "8"}, {"a_type", "u8"}};
        if (bad == "post") p.push_back({"post", "add:3"});
        kd.extern_params = ExternParams::format(p);
        exe.kernels.push_back(kd);
        exe.steps.push_back({0, {0, 1, 2, 3, 4}, "dqmm", 4});
        try {
            exe.load();
            ADD_FAILURE() << "dnnl_dqmatmul loaded with a forged '" << bad << "'";
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel) << e.what();
            EXPECT_NE(std::string(e.what()).find("dnnl_dqmatmul"), std::string::npos) << e.what();
        }
    }
}

TEST(Int8Kernels, DnnlDynQMatMulMatchesIntegerLoop) {
    check_dqmatmul(5, 24, 40, 1, false);
    check_dqmatmul(64, 96, 33, 2, true);  // rows split across two threads, bias after the rescale
    check_dqmatmul(1, 96, 333, 2, true);  // one row: columns split across two threads (192 + 141)
    check_dqmatmul(3, 64, 130, 2, false); // a few rows, columns split (64 + 66)
}

TEST(Int8Kernels, DnnlQConvMatchesIntegerLoop) {
    check_qconv({1, 16, 9, 9, 32, 3, 1, 1, 1, 1});
    check_qconv({1, 16, 9, 9, 48, 3, 2, 1, 1, 2});   // one image: output channels split
    check_qconv({2, 8, 7, 7, 16, 1, 2, 0, 1, 2});    // strided 1x1 (last row unread), images split
    check_qconv({1, 3, 11, 11, 16, 7, 2, 3, 1, 1});  // a stem: 3 channels, 7x7
    check_qconv({1, 32, 8, 8, 32, 3, 1, 1, 32, 2});  // depthwise
    check_qconv({1, 16, 6, 6, 16, 3, 1, 1, 4, 1});   // grouped
    // One image into an NHWC y: bands of output rows, each reading its input rows with the
    // window's halo in place (pads only at the image's edges).
    check_qconv({1, 16, 13, 9, 32, 3, 1, 1, 1, 2, true});
    check_qconv({1, 16, 15, 11, 48, 3, 2, 1, 1, 2, true});  // strided: a band's first input row
    check_qconv({1, 8, 9, 9, 16, 5, 1, 2, 1, 2, true});     // a 5x5 window, pads of 2
    check_qconv({1, 32, 10, 10, 32, 3, 1, 1, 32, 2, true}); // depthwise (NHWC: runtime/int8_dwconv.h on VNNI)
    check_qconv({1, 40, 9, 11, 40, 3, 2, 1, 40, 2, true});  // depthwise, stride 2, a partial channel block
    check_qconv({2, 24, 10, 10, 24, 5, 1, 2, 24, 1, true}); // depthwise 5x5, two images
}

// The residual add fused as post-ops: the conv's value rounded and saturated to its own u8, then
// added to r as ONNX Runtime's QLinearAdd does, into each kind of part (whole images, row bands
// in place in NHWC, blocks of channels through a buffer in NCHW), r in y's buffer or its own, u8 or s8.
TEST(Int8Kernels, DnnlQConvFusedResidualAdd) {
    using R = ConvCase;
    check_qconv({1, 16, 9, 9, 32, 3, 1, 1, 1, 1, false, R::kResidual});
    check_qconv({2, 8, 7, 7, 16, 1, 1, 0, 1, 2, true, R::kResidual});              // whole images, NHWC
    check_qconv({1, 16, 13, 9, 32, 3, 1, 1, 1, 2, true, R::kInPlace});             // row bands, in place
    check_qconv({1, 16, 9, 9, 48, 3, 2, 1, 1, 2, false, R::kInPlace, true});       // channel blocks, s8 r
    check_qconv({1, 16, 15, 11, 64, 1, 1, 0, 1, 2, true, R::kResidual, true});     // a 1x1, bands, s8 r
    // Seven output rows over two threads, a conv of >= 4M multiply-adds: blocks of output
    // channels into the NHWC y (bands of 4 and 3 rows would be uneven), through each part's
    // buffer, r in its own buffer and in y's.
    check_qconv({1, 256, 7, 7, 352, 1, 1, 0, 1, 2, true, R::kResidual});
    check_qconv({1, 64, 7, 7, 160, 3, 1, 1, 1, 2, true, R::kInPlace, true});
}
#endif

TEST(Int8Kernels, QAddMatchesFloatFormula) {
    const int64_t n = 40000;  // several chunks of the pool
    std::mt19937 rng(5);
    Tensor a(DType::kUInt8, {n}), b(DType::kInt8, {n});
    for (int64_t i = 0; i < n; ++i) a.set_i64(i, rng() % 256), b.set_i64(i, static_cast<int64_t>(rng() % 256) - 128);
    const float as = 0.05f, bs = 0.11f, ys = 0.07f;
    const int64_t az = 20, bz = -3, yz = 9;
    Executable exe;
    exe.buffers.push_back({"a", DType::kUInt8, {n}, BufferRole::kInput});
    exe.buffers.push_back(constant("as", scalar(DType::kFloat32, as)));
    exe.buffers.push_back(constant("az", scalar(DType::kUInt8, az)));
    exe.buffers.push_back({"b", DType::kInt8, {n}, BufferRole::kInput});
    exe.buffers.push_back(constant("bs", scalar(DType::kFloat32, bs)));
    exe.buffers.push_back(constant("bz", scalar(DType::kInt8, bz)));
    exe.buffers.push_back(constant("ys", scalar(DType::kFloat32, ys)));
    exe.buffers.push_back(constant("yz", scalar(DType::kUInt8, yz)));
    exe.buffers.push_back({"y", DType::kUInt8, {n}, BufferRole::kOutput});
    KernelDesc kd;
    kd.description = "DequantizeLinear+DequantizeLinear+Add+QuantizeLinear";
    kd.extern_name = "kiln_qadd";
    kd.extern_params = ExternParams::format(Pairs{{"a", "0"}, {"as", "1"}, {"az", "2"}, {"b", "3"}, {"bs", "4"}, {"bz", "5"},
                                                  {"ys", "6"}, {"yz", "7"}, {"y", "8"}, {"out", "q8"}});
    exe.kernels.push_back(kd);
    exe.steps.push_back({0, {0, 1, 2, 3, 4, 5, 6, 7, 8}, "qadd", 8});
    exe.load();
    Tensor y(DType::kUInt8, {n});
    void* args[9] = {a.data(), nullptr, nullptr, b.data(), nullptr, nullptr, nullptr, nullptr, y.data()};
    ThreadPool pool(2);
    Status st = exe.run_kernel(0, args, pool.kernel_env());
    ASSERT_TRUE(st.ok()) << st.message();
    int saturated = 0;
    for (int64_t i = 0; i < n; ++i) {
        // ONNX's DequantizeLinear / Add / QuantizeLinear in float32, rint half to even.
        const float v = (static_cast<float>(a.get_i64(i) - az) * as + static_cast<float>(b.get_i64(i) - bz) * bs) / ys;
        const double want = std::clamp(std::nearbyint(static_cast<double>(v)) + yz, 0.0, 255.0);
        saturated += want == 0.0 || want == 255.0;
        ASSERT_EQ(y.get_i64(i), static_cast<int64_t>(want)) << "element " << i;
    }
    EXPECT_GT(saturated, 0);  // the data reach both ends of u8
}

/// kiln_qadd on every (a, b) pair of u8 x s8 for the scales given, against ONNX's formula with
/// its division by y_s; y u8, s8 or dequantized f32. Returns how many quotients were exact halves.
int64_t check_qadd_all_pairs(float as, int64_t az, float bs, int64_t bz, float ys, int64_t yz, DType ydt) {
    const int64_t n = 256 * 256;
    Tensor a(DType::kUInt8, {n}), b(DType::kInt8, {n});
    for (int64_t i = 0; i < n; ++i) a.set_i64(i, i / 256), b.set_i64(i, i % 256 - 128);
    const bool f32 = ydt == DType::kFloat32, s8 = ydt == DType::kInt8;
    const DType zdt = s8 ? DType::kInt8 : DType::kUInt8;
    Executable exe;
    exe.buffers.push_back({"a", DType::kUInt8, {n}, BufferRole::kInput});
    exe.buffers.push_back(constant("as", scalar(DType::kFloat32, as)));
    exe.buffers.push_back(constant("az", scalar(DType::kUInt8, az)));
    exe.buffers.push_back({"b", DType::kInt8, {n}, BufferRole::kInput});
    exe.buffers.push_back(constant("bs", scalar(DType::kFloat32, bs)));
    exe.buffers.push_back(constant("bz", scalar(DType::kInt8, bz)));
    exe.buffers.push_back(constant("ys", scalar(DType::kFloat32, ys)));
    exe.buffers.push_back(constant("yz", scalar(zdt, yz)));
    exe.buffers.push_back({"y", ydt, {n}, BufferRole::kOutput});
    KernelDesc kd;
    kd.description = "DequantizeLinear+DequantizeLinear+Add+QuantizeLinear";
    kd.extern_name = "kiln_qadd";
    kd.extern_params = ExternParams::format(Pairs{{"a", "0"}, {"as", "1"}, {"az", "2"}, {"b", "3"}, {"bs", "4"}, {"bz", "5"},
                                                  {"ys", "6"}, {"yz", "7"}, {"y", "8"}, {"out", f32 ? "f32" : "q8"}});
    exe.kernels.push_back(kd);
    exe.steps.push_back({0, {0, 1, 2, 3, 4, 5, 6, 7, 8}, "qadd", 8});
    exe.load();
    Tensor y(ydt, {n});
    void* args[9] = {a.data(), nullptr, nullptr, b.data(), nullptr, nullptr, nullptr, nullptr, y.data()};
    ThreadPool pool(2);
    Status st = exe.run_kernel(0, args, pool.kernel_env());
    EXPECT_TRUE(st.ok()) << st.message();
    int64_t halves = 0;
    const double lo = s8 ? -128 : 0, hi = s8 ? 127 : 255;
    for (int64_t i = 0; i < n; ++i) {
        const float v = (static_cast<float>(a.get_i64(i) - az) * as + static_cast<float>(b.get_i64(i) - bz) * bs) / ys;
        halves += v - std::floor(v) == 0.5f;
        const double q = std::clamp(std::nearbyint(static_cast<double>(v)) + yz, lo, hi);
        if (f32) {
            const float want = static_cast<float>(q - yz) * ys;
            const float got = static_cast<const float*>(y.data())[i];
            if (got != want) ADD_FAILURE() << "element " << i << ": " << got << " != " << want;
        } else if (y.get_i64(i) != static_cast<int64_t>(q)) {
            ADD_FAILURE() << "element " << i << " (a " << a.get_i64(i) << ", b " << b.get_i64(i) << "): " << y.get_i64(i)
                          << " != " << q << " (quotient " << v << ")";
        }
        if (::testing::Test::HasFailure()) break;
    }
    return halves;
}

// kiln_qadd rounds with nearbyint, unclamped (qadd_kernel.cc): equal to ONNX's formula on every
// input pair, for scales whose quotients fall exactly on halves (ties to even), that saturate at
// both ends, s8 and f32 results, and random ones.
TEST(Int8Kernels, QAddEqualsFloatFormulaOnAllPairs) {
    check_qadd_all_pairs(0.1f, 0, 0.1f, 0, 0.2f, 0, DType::kUInt8);
    EXPECT_GT(check_qadd_all_pairs(0.5f, 3, 0.25f, -7, 1.f, 128, DType::kUInt8), 1000);
    check_qadd_all_pairs(0.0234f, 12, 0.0517f, 5, 0.07f, 9, DType::kUInt8);
    check_qadd_all_pairs(0.3f, 0, 0.3f, 0, 0.6f, 0, DType::kInt8);
    check_qadd_all_pairs(0.05f, 20, 0.11f, -3, 0.0123f, 130, DType::kUInt8);  // saturates at both ends
    check_qadd_all_pairs(0.0517f, 7, 0.0234f, 0, 0.1f, 0, DType::kFloat32);
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> scale(0.001f, 0.2f);
    for (int t = 0; t < 6; ++t) {
        const bool s8 = t % 2;
        check_qadd_all_pairs(scale(rng), rng() % 256, scale(rng), static_cast<int64_t>(rng() % 256) - 128, scale(rng),
                             static_cast<int64_t>(rng() % 256) - (s8 ? 128 : 0), s8 ? DType::kInt8 : DType::kUInt8);
    }
}

// kiln_qadd with a float result and NHWC operands (ab_layout=nhwc: compiler/int8_layout.h keeps
// ResNet's last block NHWC): y is NCHW, y[n][c][p] the dequantized sum of a[n][p][c] and
// b[n][p][c], bit for bit ONNX's formula; 2 images of 37 channels and 5x7 pixels (tiles of 16
// pixels: the last one partial), 1 and 3 threads.
// C = 600: tiles of 256 channels, a partial one (the threads split pixels and channels).
void check_qadd_nhwc_into_nchw(int64_t C) {
    const int64_t N = 2, H = 5, W = 7, n = N * C * H * W;
    std::mt19937 rng(9);
    Tensor a(DType::kUInt8, {N, H, W, C}), b(DType::kUInt8, {N, H, W, C});
    for (int64_t i = 0; i < n; ++i) a.set_i64(i, rng() % 256), b.set_i64(i, rng() % 256);
    const float as = 0.031f, bs = 0.017f, ys = 0.043f;
    const int64_t az = 3, bz = 140, yz = 0;
    for (int threads : {1, 3}) {
        Executable exe;
        exe.buffers.push_back({"a", DType::kUInt8, {N, C, H, W}, BufferRole::kInput});
        exe.buffers.push_back(constant("as", scalar(DType::kFloat32, as)));
        exe.buffers.push_back(constant("az", scalar(DType::kUInt8, az)));
        exe.buffers.push_back({"b", DType::kUInt8, {N, C, H, W}, BufferRole::kInput});
        exe.buffers.push_back(constant("bs", scalar(DType::kFloat32, bs)));
        exe.buffers.push_back(constant("bz", scalar(DType::kUInt8, bz)));
        exe.buffers.push_back(constant("ys", scalar(DType::kFloat32, ys)));
        exe.buffers.push_back(constant("yz", scalar(DType::kUInt8, yz)));
        exe.buffers.push_back({"y", DType::kFloat32, {N, C, H, W}, BufferRole::kOutput});
        KernelDesc kd;
        kd.description = "DequantizeLinear+DequantizeLinear+Add+QuantizeLinear+DequantizeLinear";
        kd.extern_name = "kiln_qadd";
        kd.extern_params = ExternParams::format(Pairs{{"a", "0"}, {"as", "1"}, {"az", "2"}, {"b", "3"}, {"bs", "4"},
                                                      {"bz", "5"}, {"ys", "6"}, {"yz", "7"}, {"y", "8"}, {"out", "f32"},
                                                      {"ab_layout", "nhwc"}, {"shape", "2," + std::to_string(C) + ",5,7"}});
        exe.kernels.push_back(kd);
        exe.steps.push_back({0, {0, 1, 2, 3, 4, 5, 6, 7, 8}, "qadd", 8});
        exe.load();
        Tensor y(DType::kFloat32, {N, C, H, W});
        void* args[9] = {a.data(), nullptr, nullptr, b.data(), nullptr, nullptr, nullptr, nullptr, y.data()};
        ThreadPool pool(threads);
        Status st = exe.run_kernel(0, args, pool.kernel_env());
        ASSERT_TRUE(st.ok()) << st.message();
        for (int64_t img = 0; img < N; ++img)
            for (int64_t c = 0; c < C; ++c)
                for (int64_t p = 0; p < H * W; ++p) {
                    const int64_t src = (img * H * W + p) * C + c;
                    const float v = (static_cast<float>(a.get_i64(src) - az) * as + static_cast<float>(b.get_i64(src) - bz) * bs) / ys;
                    const float q = static_cast<float>(std::clamp(std::nearbyint(static_cast<double>(v)) + yz, 0.0, 255.0));
                    const float want = (q - static_cast<float>(yz)) * ys;
                    ASSERT_EQ(static_cast<const float*>(y.data())[(img * C + c) * H * W + p], want)
                        << "threads " << threads << " image " << img << " channel " << c << " pixel " << p;
                }
    }
}

TEST(Int8Kernels, QAddNhwcOperandsIntoNchwFloat) {
    check_qadd_nhwc_into_nchw(37);
    check_qadd_nhwc_into_nchw(600);
    const int64_t N = 2, C = 37, H = 5, W = 7;
    const float as = 0.031f, bs = 0.017f, ys = 0.043f;
    const int64_t az = 3, bz = 140, yz = 0;
    // The shape must be the tensors' (a forged one would index past them).
    Executable bad;
    bad.buffers.push_back({"a", DType::kUInt8, {N, C, H, W}, BufferRole::kInput});
    bad.buffers.push_back(constant("as", scalar(DType::kFloat32, as)));
    bad.buffers.push_back(constant("az", scalar(DType::kUInt8, az)));
    bad.buffers.push_back({"b", DType::kUInt8, {N, C, H, W}, BufferRole::kInput});
    bad.buffers.push_back(constant("bs", scalar(DType::kFloat32, bs)));
    bad.buffers.push_back(constant("bz", scalar(DType::kUInt8, bz)));
    bad.buffers.push_back(constant("ys", scalar(DType::kFloat32, ys)));
    bad.buffers.push_back(constant("yz", scalar(DType::kUInt8, yz)));
    bad.buffers.push_back({"y", DType::kFloat32, {N, C, H, W}, BufferRole::kOutput});
    KernelDesc kd;
    kd.description = "qadd";
    kd.extern_name = "kiln_qadd";
    kd.extern_params = ExternParams::format(Pairs{{"a", "0"}, {"as", "1"}, {"az", "2"}, {"b", "3"}, {"bs", "4"}, {"bz", "5"},
                                                  {"ys", "6"}, {"yz", "7"}, {"y", "8"}, {"out", "f32"},
                                                  {"ab_layout", "nhwc"}, {"shape", "2,37,5,8"}});
    bad.kernels.push_back(kd);
    bad.steps.push_back({0, {0, 1, 2, 3, 4, 5, 6, 7, 8}, "qadd", 8});
    EXPECT_THROW(bad.load(), Error);
}

}  // namespace
}  // namespace kiln::runtime
