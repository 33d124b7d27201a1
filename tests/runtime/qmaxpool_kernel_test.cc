// kiln_qmaxpool (runtime/qmaxpool_kernel.h) against a direct loop over ONNX's MaxPool definition
// written here (a window's taps inside the input; pads never win), bit for bit: u8 and s8,
// strides, pads, dilations, odd channel counts, one and two images, each of x and y NCHW or
// NHWC, and one and three threads; and its checks on forged parameters.
#include <gtest/gtest.h>

#include <random>

#include "runtime/executable.h"
#include "runtime/extern_kernel.h"
#include "runtime/thread_pool.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

struct PoolCase {
    int64_t n, c, h, w, k, stride, pad, dilation;
    DType dt;
    bool x_nhwc, y_nhwc;
};

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) { return (in + 2 * p - ((k - 1) * d + 1)) / s + 1; }

/// Element (n, c, h, w) of a 4-D tensor of C channels, H x W, NCHW or NHWC.
int64_t offset(bool nhwc, int64_t n, int64_t c, int64_t h, int64_t w, int64_t C, int64_t H, int64_t W) {
    return nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
}

void pool_exe(Executable& exe, const PoolCase& pc, int64_t oh, int64_t ow) {
    exe.buffers.push_back({"x", pc.dt, {pc.n, pc.c, pc.h, pc.w}, BufferRole::kInput});
    exe.buffers.push_back({"y", pc.dt, {pc.n, pc.c, oh, ow}, BufferRole::kOutput});
    KernelDesc kd;
    kd.description = "MaxPool";
    kd.extern_name = "kiln_qmaxpool";
    auto two = [](int64_t v) { return std::to_string(v) + "," + std::to_string(v); };
    Pairs p = {{"x", "0"},
               {"y", "1"},
               {"src", std::to_string(pc.n) + "," + std::to_string(pc.c) + "," + std::to_string(pc.h) + "," + std::to_string(pc.w)},
               {"out", std::to_string(oh) + "," + std::to_string(ow)},
               {"kernel", two(pc.k)},
               {"strides", two(pc.stride)},
               {"dilations", two(pc.dilation)},
               {"pads", two(pc.pad)},
               {"type", pc.dt == DType::kInt8 ? "s8" : "u8"}};
    if (pc.x_nhwc) p.push_back({"x_layout", "nhwc"});
    if (pc.y_nhwc) p.push_back({"y_layout", "nhwc"});
    kd.extern_params = ExternParams::format(p);
    exe.kernels.push_back(kd);
    exe.steps.push_back({0, {0, 1}, "pool", 1});
}

void check_pool(const PoolCase& pc, int threads) {
    std::mt19937 rng(static_cast<unsigned>(pc.c * 31 + pc.h * 7 + pc.k + pc.stride * 3 + pc.pad + threads));
    const int64_t oh = out_size(pc.h, pc.k, pc.stride, pc.pad, pc.dilation), ow = out_size(pc.w, pc.k, pc.stride, pc.pad, pc.dilation);
    Tensor x(pc.dt, {pc.n, pc.c, pc.h, pc.w}), y(pc.dt, {pc.n, pc.c, oh, ow});
    const bool s8 = pc.dt == DType::kInt8;
    for (int64_t i = 0; i < x.numel(); ++i) x.set_i64(i, static_cast<int64_t>(rng() % 256) - (s8 ? 128 : 0));
    Executable exe;
    pool_exe(exe, pc, oh, ow);
    exe.load();
    void* args[2] = {x.data(), y.data()};
    ThreadPool pool(threads);
    Status st = exe.run_kernel(0, args, pool.kernel_env());
    ASSERT_TRUE(st.ok()) << st.message();
    for (int64_t n = 0; n < pc.n; ++n)
        for (int64_t c = 0; c < pc.c; ++c)
            for (int64_t i = 0; i < oh; ++i)
                for (int64_t j = 0; j < ow; ++j) {
                    int64_t want = -1000;
                    for (int64_t a = 0; a < pc.k; ++a)
                        for (int64_t b = 0; b < pc.k; ++b) {
                            const int64_t ih = i * pc.stride - pc.pad + a * pc.dilation, iw = j * pc.stride - pc.pad + b * pc.dilation;
                            if (ih < 0 || ih >= pc.h || iw < 0 || iw >= pc.w) continue;
                            want = std::max(want, x.get_i64(offset(pc.x_nhwc, n, c, ih, iw, pc.c, pc.h, pc.w)));
                        }
                    const int64_t got = y.get_i64(offset(pc.y_nhwc, n, c, i, j, pc.c, oh, ow));
                    ASSERT_EQ(got, want) << "image " << n << " channel " << c << " output " << i << "," << j;
                }
}

TEST(QMaxPoolKernel, EqualsTheWindowMaximum) {
    for (bool x_nhwc : {false, true})
        for (bool y_nhwc : {false, true})
            for (int threads : {1, 3}) {
                SCOPED_TRACE(std::string("x ") + (x_nhwc ? "nhwc" : "nchw") + ", y " + (y_nhwc ? "nhwc" : "nchw") +
                             ", threads " + std::to_string(threads));
                check_pool({1, 64, 23, 21, 3, 2, 1, 1, DType::kUInt8, x_nhwc, y_nhwc}, threads);  // ResNet's pool
                check_pool({2, 13, 9, 12, 2, 2, 0, 1, DType::kInt8, x_nhwc, y_nhwc}, threads);    // 2x2, odd channels
                check_pool({1, 5, 10, 10, 3, 1, 1, 2, DType::kUInt8, x_nhwc, y_nhwc}, threads);   // dilated, stride 1
                check_pool({1, 7, 8, 8, 5, 3, 2, 1, DType::kInt8, x_nhwc, y_nhwc}, threads);      // 5x5, pads of 2
            }
}

TEST(QMaxPoolKernel, RejectsForgedParameters) {
    const PoolCase pc{1, 4, 8, 8, 3, 2, 1, 1, DType::kUInt8, false, false};
    Executable wrong_out;
    pool_exe(wrong_out, pc, 4, 4);
    wrong_out.buffers[1].shape = {1, 4, 5, 4};  // the parameters say 4x4
    EXPECT_THROW(wrong_out.load(), Error);
    Executable huge_pad;
    pool_exe(huge_pad, pc, 4, 4);
    std::string& params = huge_pad.kernels[0].extern_params;
    params.replace(params.find("pads=1,1"), 8, "pads=9,1");  // the first window reads no input
    EXPECT_THROW(huge_pad.load(), Error);
    Executable fine;
    pool_exe(fine, pc, 4, 4);
    EXPECT_NO_THROW(fine.load());
}

}  // namespace
}  // namespace kiln::runtime
