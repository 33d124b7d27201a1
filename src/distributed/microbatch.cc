// split_microbatches and join_microbatches (microbatch.h).
#include "distributed/microbatch.h"

#include <algorithm>
#include <cstring>

#include "support/error.h"

namespace kiln::distributed {

std::vector<std::map<std::string, Tensor>> split_microbatches(const std::map<std::string, Tensor>& feeds, int parts) {
    KILN_CHECK(parts >= 1, kInvalidArgument) << "--microbatches must be >= 1, got " << parts;
    std::vector<std::map<std::string, Tensor>> out(static_cast<size_t>(parts));
    for (const auto& [name, t] : feeds) {
        KILN_CHECK(!t.shape().empty() && t.shape()[0] % parts == 0, kInvalidArgument)
            << "input '" << name << "' of shape " << shape_str(t.shape()) << " cannot be cut into " << parts
            << " microbatches along its leading (batch) axis";
        Shape part_shape = t.shape();
        part_shape[0] /= parts;
        for (int m = 0; m < parts; ++m) {
            Tensor p(t.dtype(), part_shape);
            std::memcpy(p.data(), static_cast<const char*>(t.data()) + p.nbytes() * static_cast<size_t>(m), p.nbytes());
            out[static_cast<size_t>(m)].emplace(name, std::move(p));
        }
    }
    return out;
}

std::vector<Tensor> join_microbatches(const std::vector<std::vector<Tensor>>& parts,
                                      const std::vector<std::string>& names) {
    if (parts.size() == 1) return parts[0];
    std::vector<Tensor> out;
    for (size_t j = 0; j < names.size(); ++j) {
        const Tensor& first = parts.at(0).at(j);
        Shape whole = first.shape();
        KILN_CHECK(!whole.empty(), kInvalidArgument)
            << "output '" << names[j] << "' is a scalar: microbatches' outputs are joined along their leading axis";
        for (size_t m = 1; m < parts.size(); ++m) {
            const Shape& s = parts[m].at(j).shape();
            KILN_CHECK(s.size() == whole.size() && std::equal(s.begin() + 1, s.end(), whole.begin() + 1), kInvalidArgument)
                << "output '" << names[j] << "': microbatch " << m << " gives " << shape_str(s) << ", microbatch 0 "
                << shape_str(first.shape()) << " (only the leading axis may differ)";
            whole[0] += s[0];
        }
        Tensor t(first.dtype(), whole);
        size_t at = 0;
        for (const std::vector<Tensor>& p : parts) {
            std::memcpy(static_cast<char*>(t.data()) + at, p[j].data(), p[j].nbytes());
            at += p[j].nbytes();
        }
        out.push_back(std::move(t));
    }
    return out;
}

}  // namespace kiln::distributed
