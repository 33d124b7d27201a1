// NonMaxSuppression (10/11): a host kernel (op/host.h) — the number of selected boxes depends on
// the data.
//
// For each batch b and class c, independently: the candidate boxes are those whose score is
// > score_threshold (every box when that input is absent), visited by descending score (ties:
// the smaller box index first; NaN scores last). A candidate is selected unless its IoU with an
// already selected box of the same (b, c) is > iou_threshold; selection stops after
// max_output_boxes_per_class boxes (absent or empty input: 0, so nothing is selected). The output
// is int64 [K, 3] rows (b, c, box), ordered by batch, then class, then selection order.
// Boxes are [y1, x1, y2, x2] corners in either order (center_point_box=0: "flipped" corners give
// the same box) or [x_center, y_center, width, height] (center_point_box=1). IoU is computed in
// float like ONNX Runtime and the ONNX reference; boxes with no intersection or a non-positive
// area never suppress.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

struct Corners {
    float y_min, x_min, y_max, x_max;
};

Corners box_corners(const float* b, bool center_point) {
    if (center_point) {
        const float hw = b[2] / 2, hh = b[3] / 2;
        return {b[1] - hh, b[0] - hw, b[1] + hh, b[0] + hw};
    }
    return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

bool suppresses(const Corners& a, const Corners& b, float iou_threshold) {
    const float ix_min = std::max(a.x_min, b.x_min), ix_max = std::min(a.x_max, b.x_max);
    if (!(ix_max > ix_min)) return false;
    const float iy_min = std::max(a.y_min, b.y_min), iy_max = std::min(a.y_max, b.y_max);
    if (!(iy_max > iy_min)) return false;
    const float inter = (ix_max - ix_min) * (iy_max - iy_min);
    const float area_a = (a.x_max - a.x_min) * (a.y_max - a.y_min);
    const float area_b = (b.x_max - b.x_min) * (b.y_max - b.y_min);
    const float uni = area_a + area_b - inter;
    if (!(inter > 0) || !(area_a > 0) || !(area_b > 0) || !(uni > 0)) return false;
    return inter / uni > iou_threshold;
}

// The scalar value of an optional 1-element input; `dflt` when omitted or empty.
double optional_scalar(const HostArgs& a, size_t i, const char* what, DType want, double dflt) {
    if (!a.has_input(i)) return dflt;
    const Tensor& t = a.tensor(i);
    KILN_CHECK(t.dtype() == want, kInvalidArgument)
        << a.node.describe() << ": " << what << " must be " << dtype_name(want) << ", got "
        << dtype_name(t.dtype());
    if (t.numel() == 0) return dflt;
    KILN_CHECK(t.numel() == 1, kInvalidArgument)
        << a.node.describe() << ": " << what << " must hold one value, got shape "
        << shape_str(t.shape());
    return want == DType::kInt64 ? static_cast<double>(t.get_i64(0)) : t.get_f64(0);
}

std::vector<Datum> nms_host(const HostArgs& a) {
    const ir::Node& n = a.node;
    const Tensor& boxes = a.tensor(0);
    const Tensor& scores = a.tensor(1);
    KILN_CHECK(boxes.dtype() == DType::kFloat32 && scores.dtype() == DType::kFloat32,
               kInvalidArgument)
        << n.describe() << ": boxes and scores must be f32, got " << dtype_name(boxes.dtype())
        << " and " << dtype_name(scores.dtype());
    KILN_CHECK(boxes.shape().size() == 3 && boxes.shape()[2] == 4, kInvalidArgument)
        << n.describe() << ": boxes must have shape [num_batches, num_boxes, 4], got "
        << shape_str(boxes.shape());
    KILN_CHECK(scores.shape().size() == 3, kInvalidArgument)
        << n.describe() << ": scores must have shape [num_batches, num_classes, num_boxes], got "
        << shape_str(scores.shape());
    const int64_t num_batches = boxes.shape()[0], num_boxes = boxes.shape()[1],
                  num_classes = scores.shape()[1];
    KILN_CHECK(scores.shape()[0] == num_batches && scores.shape()[2] == num_boxes, kInvalidArgument)
        << n.describe() << ": scores shape " << shape_str(scores.shape())
        << " does not match boxes shape " << shape_str(boxes.shape()) << " (expected ["
        << num_batches << ",C," << num_boxes << "])";
    const int64_t center = n.attr_int("center_point_box", 0);
    KILN_CHECK(center == 0 || center == 1, kInvalidArgument)
        << n.describe() << ": attribute center_point_box must be 0 or 1, got " << center;

    const double max_boxes_d =
        optional_scalar(a, 2, "max_output_boxes_per_class", DType::kInt64, 0);
    const int64_t max_boxes = std::max<int64_t>(0, static_cast<int64_t>(max_boxes_d));
    const auto iou_threshold =
        static_cast<float>(optional_scalar(a, 3, "iou_threshold", DType::kFloat32, 0));
    KILN_CHECK(iou_threshold >= 0 && iou_threshold <= 1, kInvalidArgument)
        << n.describe() << ": iou_threshold must be in [0, 1], got " << iou_threshold;
    const bool has_score_threshold = a.has_input(4) && a.tensor(4).numel() != 0;
    const auto score_threshold =
        static_cast<float>(optional_scalar(a, 4, "score_threshold", DType::kFloat32, 0));

    const float* box_data = boxes.data_as<float>();
    const float* score_data = scores.data_as<float>();
    std::vector<int64_t> selected;  // (b, c, box) triples
    std::vector<int64_t> candidates;
    std::vector<Corners> kept;
    for (int64_t b = 0; b < num_batches && max_boxes > 0; ++b) {
        const float* bb = box_data + b * num_boxes * 4;
        for (int64_t c = 0; c < num_classes; ++c) {
            const float* sc = score_data + (b * num_classes + c) * num_boxes;
            candidates.clear();
            for (int64_t i = 0; i < num_boxes; ++i)
                if (!has_score_threshold || sc[i] > score_threshold) candidates.push_back(i);
            std::stable_sort(candidates.begin(), candidates.end(), [&](int64_t p, int64_t q) {
                const bool np = std::isnan(sc[p]), nq = std::isnan(sc[q]);
                if (np || nq) return nq && !np;
                return sc[p] > sc[q];
            });
            kept.clear();
            for (int64_t i : candidates) {
                if (static_cast<int64_t>(kept.size()) >= max_boxes) break;
                const Corners box = box_corners(bb + i * 4, center == 1);
                bool keep = true;
                for (const Corners& k : kept)
                    if (suppresses(box, k, iou_threshold)) {
                        keep = false;
                        break;
                    }
                if (!keep) continue;
                kept.push_back(box);
                selected.insert(selected.end(), {b, c, i});
            }
        }
    }
    Tensor out(DType::kInt64, {static_cast<int64_t>(selected.size() / 3), 3});
    std::copy(selected.begin(), selected.end(), out.data_as<int64_t>());
    return {std::move(out)};
}

OpDef nms_op() {
    OpDef d;
    d.name = "NonMaxSuppression";
    d.onnx_versions = {10, 11};
    d.min_inputs = 2;
    d.max_inputs = 5;
    d.attrs = {{"center_point_box", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        check_dtype(n, "boxes", input_type(n, 0, "boxes").dtype, {DType::kFloat32});
        check_dtype(n, "scores", input_type(n, 1, "scores").dtype, {DType::kFloat32});
        return std::vector<ir::TensorType>{{DType::kInt64, {ir::Dim::sym("?"), int64_t{3}}}};
    };
    d.host = nms_host;
    return d;
}

}  // namespace

void register_non_max_suppression_ops(OpRegistry& r) { r.add(nms_op()); }

}  // namespace kiln::op
