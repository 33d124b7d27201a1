#include "op/view_ops.h"

#include <set>

namespace kiln::op {

bool is_view_op(const std::string& op) {
    static const std::set<std::string> ops = {"Reshape",  "Flatten",     "Squeeze",       "Unsqueeze",
                                              "Identity", "KilnReshape", "KilnDeviceCopy"};
    return ops.count(op) != 0;
}

bool is_data_movement_op(const std::string& op) { return op == "Transpose" || is_view_op(op); }

}  // namespace kiln::op
