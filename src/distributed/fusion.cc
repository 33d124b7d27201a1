// The fusion plan (fusion.h): a greedy pass in call order, one open buffer per dtype.
#include "distributed/fusion.h"

#include <map>

namespace kiln::distributed {

std::vector<FusionBuffer> plan_fusion(const std::vector<DType>& dtypes, const std::vector<size_t>& bytes, size_t limit) {
    std::vector<FusionBuffer> out;
    std::map<DType, size_t> open;  // dtype -> index in `out` of its open buffer
    for (size_t i = 0; i < dtypes.size(); ++i) {
        auto it = open.find(dtypes[i]);
        if (it != open.end() && out[it->second].bytes + bytes[i] <= limit) {
            out[it->second].members.push_back(i);
            out[it->second].bytes += bytes[i];
            continue;
        }
        out.push_back({dtypes[i], {i}, bytes[i]});
        open[dtypes[i]] = out.size() - 1;
    }
    return out;
}

}  // namespace kiln::distributed
