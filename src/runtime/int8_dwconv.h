// Depthwise int8 convolution (QLinearConv with groups == C == M) on AVX-512 VNNI, NHWC in and
// out: MobileNet-style 3x3 / 5x5 windows at stride 1 or 2 between int8 kernels.
//
// oneDNN 2.6's depthwise int8 kernel (`brdgmm_dw`) took ~25% longer than OpenVINO's on
// MobileNetV2's layers. Here one zmm holds 16 channels of one pixel widened to int32 (u8 in the
// low byte of each lane), the weights likewise sign-extended, so that one vpdpbusd adds x * w
// per lane exactly (the other three byte products are 0 * w's sign bytes); a strip of 8
// output pixels of a row keeps its accumulators in registers and reads each input pixel once
// per window row (stride 1: 3.75 loads per output instead of 9 for a 3x3).
//
// The arithmetic is ONNX's (ONNX Runtime's QLinearConv): acc = B_q[c] + sum (x - x_zp) * w, the
// padding x_zp (contributing 0); y = rint(clamp(f32(acc) * m[c], qmin - y_zp, qmax - y_zp)) + y_zp
// with m[c] = x_s * W_s[c] / y_s in f32 and rint to nearest even. The x_zp term is folded into
// the bias (B_q - x_zp * sum w) and padded taps read x_zp, so acc is exact int32. x is u8
// (vpdpbusd's unsigned operand; s8 activations stay on oneDNN), y u8 or s8.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::runtime {

struct Int8DwShape {
    int64_t n = 1, c = 0, h = 0, w = 0;  // x: N, H, W, C (NHWC)
    int64_t oh = 0, ow = 0;               // y: N, OH, OW, C (NHWC)
    int64_t k = 3, stride = 1;            // a square window and the same stride both ways
    int64_t pad_top = 0, pad_left = 0;    // pads at the end follow from oh, ow
};

class Int8DwConv {
public:
    /// Whether this host runs it (AVX-512 F, BW, VL with VNNI).
    static bool available();
    /// Whether it runs this window: kh == kw in {3, 5}, sh == sw in {1, 2}, no dilation, pads
    /// (begin) below the window.
    static bool handles(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw, int64_t pt,
                        int64_t pl);

    /// w: [C][k][k] s8 (ONNX's [C, 1, k, k]); bias: C int32 or null; scales: C floats
    /// (m[c] = x_s * W_s[c] / y_s). Throws kiln::Error (kInvalidModel) on a shape it cannot run.
    Int8DwConv(const Int8DwShape& shape, const int8_t* w, const int32_t* bias, const std::vector<float>& scales,
               int32_t x_zp, int32_t y_zp, bool y_signed);

    /// The units run() splits by: (output row, block of 16 channels) pairs, N * OH * ceil(C / 16),
    /// row-major (MobileNetV2's 7-row layers split over two threads by rows ran 4 rows against 3).
    int64_t tasks() const { return s_.n * s_.oh * blocks_; }

    /// Writes tasks [t0, t1) of y (NHWC) from x (NHWC).
    void run(const uint8_t* x, uint8_t* y, int64_t t0, int64_t t1) const;

private:
    Int8DwShape s_;
    int64_t blocks_ = 0;             // ceil(C / 16)
    std::vector<int32_t> weights_;   // [blocks][k * k][16], sign-extended, 0 past C
    std::vector<int32_t> bias_;      // [blocks * 16]: B_q - x_zp' * sum w
    std::vector<float> scales_;      // [blocks * 16]
    std::vector<uint8_t> pad_row_;   // W * C bytes of x_zp: the rows above and below the image
    int32_t x_zp_ = 0;
    int32_t y_zp_ = 0;
    float lo_ = 0, hi_ = 0;          // qmin - y_zp, qmax - y_zp
};

}  // namespace kiln::runtime
