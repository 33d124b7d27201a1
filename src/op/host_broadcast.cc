// Run-time numpy broadcasting for host kernels (see host_broadcast.h). The index map walks the
// output in row-major order with an odometer over its dims, adding the operand's stride for each
// dim the operand really has (stride 0 for a broadcast size-1 or missing dim).
#include "op/host_broadcast.h"

#include <algorithm>

#include "support/error.h"

namespace kiln::op {

Shape host_broadcast_shape(const ir::Node& n, const std::vector<Shape>& shapes) {
    size_t rank = 0;
    for (const Shape& s : shapes) rank = std::max(rank, s.size());
    Shape out(rank, 1);
    for (const Shape& s : shapes) {
        const size_t off = rank - s.size();
        for (size_t i = 0; i < s.size(); ++i) {
            int64_t& o = out[off + i];
            if (s[i] == o || s[i] == 1) continue;
            if (o == 1) {
                o = s[i];
                continue;
            }
            std::string all;
            for (const Shape& t : shapes) all += (all.empty() ? "" : " and ") + shape_str(t);
            KILN_THROW(kInvalidArgument) << n.describe() << ": shapes " << all << " are not broadcastable";
        }
    }
    return out;
}

std::vector<int64_t> host_broadcast_index(const Shape& in, const Shape& out) {
    KILN_ICHECK(in.size() <= out.size()) << "broadcast of " << shape_str(in) << " to " << shape_str(out);
    const size_t rank = out.size();
    const size_t off = rank - in.size();
    std::vector<int64_t> stride(rank, 0);
    int64_t s = 1;
    for (size_t i = in.size(); i-- > 0;) {
        KILN_ICHECK(in[i] == out[off + i] || in[i] == 1) << "broadcast of " << shape_str(in) << " to " << shape_str(out);
        stride[off + i] = in[i] == 1 ? 0 : s;
        s *= in[i];
    }
    const int64_t total = shape_numel(out);
    std::vector<int64_t> idx(static_cast<size_t>(std::max<int64_t>(total, 0)));
    std::vector<int64_t> pos(rank, 0);
    int64_t cur = 0;
    for (int64_t k = 0; k < total; ++k) {
        idx[static_cast<size_t>(k)] = cur;
        for (size_t d = rank; d-- > 0;) {  // odometer step
            if (++pos[d] < out[d]) {
                cur += stride[d];
                break;
            }
            cur -= stride[d] * (out[d] - 1);
            pos[d] = 0;
        }
    }
    return idx;
}

}  // namespace kiln::op
