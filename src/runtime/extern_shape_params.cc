// extern_shape_pairs (extern_shape_params.h): the dnnl_conv window, kiln_rnn's lengths and
// kiln_softmax's rows at run-time shapes.
#include "runtime/extern_shape_params.h"

#include <algorithm>

#include "support/error.h"

namespace kiln::runtime {
namespace {

std::string join(const std::vector<int64_t>& v) {
    std::string s;
    for (int64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
}

/// The logical dims (N, C, spatial...) of a conv activation held in Kiln's buffer shape `s`:
/// plain [N, C, spatial...] or blocked [N, C/c, H, W, c]; the channels are `channels`.
std::vector<int64_t> logical_dims(const Shape& s, int64_t channels, size_t spatial, int64_t block,
                                  const char* what) {
    // A 1x1 map is laid out alike blocked and plain: the buffer may be either (a view of the
    // other: pass/transform_layout.cc makes such conversions Reshapes).
    if (spatial == 2 && (s.size() == 4 || s.size() == 5) && s[2] == 1 && s[3] == 1) return {s[0], channels, 1, 1};
    const size_t rank = block > 0 ? 5 : spatial + 2;
    KILN_CHECK(s.size() == rank && (block == 0 || spatial == 2), kInvalidArgument)
        << "dnnl_conv: the " << what << " has shape " << shape_str(s) << ", expected rank " << rank;
    std::vector<int64_t> d = {s[0], channels};
    d.insert(d.end(), s.begin() + 2, s.begin() + 2 + static_cast<long>(spatial));
    return d;
}

ParamPairs conv_pairs(const ExternParams& p, const std::vector<Shape>& shapes, bool* empty) {
    const bool deconv = p.has("kind") && p.str("kind") == "deconv";
    const std::vector<int64_t> src_t = p.ints("src"), dst_t = p.ints("dst"), k = p.ints("kernel");
    const std::vector<int64_t> s = p.ints("strides"), d = p.ints("dilations");
    const std::vector<int64_t> pb = p.ints("pads_begin"), pe = p.ints("pads_end");
    const size_t sp = k.size();
    KILN_CHECK(sp >= 1 && src_t.size() == sp + 2 && dst_t.size() == sp + 2 && s.size() == sp && d.size() == sp &&
                   pb.size() == sp && pe.size() == sp,
               kInvalidModel)
        << "dnnl_conv: every window parameter needs one entry per spatial dim";
    const int64_t x = p.integer("x"), y = p.integer("y");
    KILN_CHECK(x >= 0 && y >= 0 && x < static_cast<int64_t>(shapes.size()) && y < static_cast<int64_t>(shapes.size()),
               kInvalidModel)
        << "dnnl_conv: argument index out of range of the step's " << shapes.size();
    const std::vector<int64_t> src = logical_dims(shapes[x], src_t[1], sp, p.integer_or("src_block", 0), "input");
    const std::vector<int64_t> got = logical_dims(shapes[y], dst_t[1], sp, p.integer_or("dst_block", 0), "output");
    std::vector<int64_t> dst = {src[0], dst_t[1]};
    for (size_t i = 0; i < sp; ++i) {
        const int64_t ext = (k[i] - 1) * d[i] + 1, in = src[2 + i];
        int64_t out;
        if (deconv) {
            out = (in - 1) * s[i] + ext - pb[i] - pe[i];
        } else {
            KILN_CHECK(in + pb[i] + pe[i] >= ext, kInvalidArgument)
                << "dnnl_conv: input spatial dim " << i << " is " << in << ", smaller than the window's " << ext
                << " less the pads " << pb[i] + pe[i];
            out = (in + pb[i] + pe[i] - ext) / s[i] + 1;
        }
        dst.push_back(std::max<int64_t>(out, 0));
    }
    KILN_CHECK(got == dst, kInvalidArgument)
        << "dnnl_conv: the output has dims " << join(got) << ", but input " << join(src) << " and the window give "
        << join(dst);
    *empty = false;
    for (int64_t v : dst) *empty = *empty || v == 0;
    for (int64_t v : src) *empty = *empty || v == 0;
    return {{"src", join(src)},
            {"dst", join(dst)},
            {"taps_begin", join(std::vector<int64_t>(sp, 0))},
            {"taps", join(k)}};
}

/// kiln_rnn (runtime/rnn_kernel.h): the sequence length and batch of this run, from X's shape.
/// X's buffer may be a view's ([T, 1, B, I] under a Squeeze between two LSTMs); then from sizes:
/// a static dim from the template (its `seq` / `batch` are 0 where symbolic), the batch from a
/// state argument (h0, c0, Y_h, Y_c: D*B*H; sequence_lens: B) when both are symbolic, the
/// other from X's size; then Y's size is checked.
ParamPairs rnn_pairs(const ExternParams& p, const std::vector<Shape>& shapes, bool* empty) {
    const int64_t n = static_cast<int64_t>(shapes.size());
    auto size_of = [&](const char* arg) -> int64_t {
        const int64_t a = p.integer_or(arg, -1);
        KILN_CHECK(a < n, kInvalidModel) << "kiln_rnn: argument " << arg << "=" << a << " out of range of " << n;
        return a < 0 ? -1 : shape_numel(shapes[static_cast<size_t>(a)]);
    };
    const int64_t input = p.integer("input"), dirs = p.integer("dirs"), hidden = p.integer("hidden");
    const int64_t x = size_of("x");
    KILN_CHECK(x >= 0 && input > 0 && dirs > 0 && hidden > 0, kInvalidModel) << "kiln_rnn: bad x / input / dirs / hidden";
    int64_t seq = p.integer("seq"), batch = p.integer("batch");
    const Shape& xs = shapes[static_cast<size_t>(p.integer("x"))];
    if (xs.size() == 3 && xs[2] == input) {  // X's own buffer
        const bool layout1 = p.integer("layout") == 1;
        seq = layout1 ? xs[1] : xs[0];
        batch = layout1 ? xs[0] : xs[1];
    }
    if (batch == 0) {
        for (const char* state : {"h0", "c0", "yh", "yc"})
            if (batch == 0 && size_of(state) >= 0) batch = size_of(state) / (dirs * hidden);
        if (batch == 0 && size_of("lens") >= 0) batch = size_of("lens");
    }
    if (batch == 0 && seq > 0) batch = x / (seq * input);
    KILN_CHECK(batch > 0 || x == 0, kUnsupported)
        << "kiln_rnn: the batch is symbolic and no argument gives it (X holds " << x << " elements)";
    if (seq == 0 && batch > 0) seq = x / (batch * input);
    KILN_CHECK(x == seq * batch * input, kInvalidArgument)
        << "kiln_rnn: X holds " << x << " elements, expected sequence " << seq << " x batch " << batch << " x " << input;
    const int64_t y = size_of("y");
    KILN_CHECK(y < 0 || y == seq * dirs * batch * hidden, kInvalidArgument)
        << "kiln_rnn: Y holds " << y << " elements, but X gives sequence " << seq << " x batch " << batch;
    *empty = batch == 0;
    return {{"seq", std::to_string(seq)}, {"batch", std::to_string(batch)}};
}

/// kiln_softmax (runtime/softmax_kernel.h): the rows and their length from X's shape, Y's the same.
ParamPairs softmax_pairs(const ExternParams& p, const std::vector<Shape>& shapes, bool* empty) {
    const int64_t n = static_cast<int64_t>(shapes.size()), x = p.integer("x"), y = p.integer("y");
    KILN_CHECK(x >= 0 && x < n && y >= 0 && y < n, kInvalidModel) << "kiln_softmax: argument index out of range of " << n;
    // The rows from Y's shape, the Softmax's own: X's buffer may be a view's source of another
    // shape (an opset-11 Softmax coerced to 2-D).
    const Shape& ys = shapes[static_cast<size_t>(y)];
    KILN_CHECK(!ys.empty(), kInvalidModel) << "kiln_softmax: Y must have rank 1 or more";
    KILN_CHECK(shape_numel(shapes[static_cast<size_t>(x)]) == shape_numel(ys), kInvalidArgument)
        << "kiln_softmax: the output has shape " << shape_str(ys) << ", X " << shape_str(shapes[static_cast<size_t>(x)])
        << ": not as many elements";
    const int64_t len = ys.back(), numel = shape_numel(ys);
    *empty = numel == 0;
    return {{"rows", std::to_string(len > 0 ? numel / len : 0)}, {"len", std::to_string(len)}};
}

}  // namespace

bool extern_takes_shapes(const std::string& name) {
    return name == "dnnl_conv" || name == "kiln_rnn" || name == "kiln_softmax";
}

std::optional<ParamPairs> extern_shape_pairs(const std::string& name, const ExternParams& p,
                                             const std::vector<Shape>& shapes) {
    KILN_CHECK(extern_takes_shapes(name), kUnsupported)
        << "extern kernel '" << name << "' cannot run on symbolic shapes (only dnnl_conv, kiln_rnn and kiln_softmax can)";
    bool empty = false;
    ParamPairs pairs = name == "kiln_rnn"       ? rnn_pairs(p, shapes, &empty)
                       : name == "kiln_softmax" ? softmax_pairs(p, shapes, &empty)
                                                : conv_pairs(p, shapes, &empty);
    if (empty) return std::nullopt;
    return pairs;
}

}  // namespace kiln::runtime
