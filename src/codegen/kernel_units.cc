#include "codegen/kernel_units.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <numeric>
#include <set>
#include <sstream>

#include "codegen/c_prelude.h"
#include "support/error.h"

namespace kiln::codegen {
namespace {

constexpr const char* kKernelName = "kiln_kernel";
constexpr const char* kTaskPrefix = "kiln_kernel_task";

/// The k of every `kiln_kernel_task<k>` in `body` (its outlined parallel loops).
std::set<int> task_numbers(const std::string& body) {
    std::set<int> ks;
    const std::string prefix = kTaskPrefix;
    for (size_t at = body.find(prefix); at != std::string::npos; at = body.find(prefix, at + 1)) {
        size_t end = at + prefix.size();
        if (end >= body.size() || !std::isdigit(static_cast<unsigned char>(body[end]))) continue;
        int k = 0;
        while (end < body.size() && std::isdigit(static_cast<unsigned char>(body[end]))) k = k * 10 + (body[end++] - '0');
        ks.insert(k);
    }
    return ks;
}

}  // namespace

std::optional<std::string> kernel_body(const std::string& source) {
    const std::string head = std::string("/* Kiln generated kernel '") + kKernelName + "'. */\n" + c_prelude() + "\n";
    if (source.compare(0, head.size(), head) != 0) return std::nullopt;
    std::string rest = source.substr(head.size());
    const std::string dims = std::string(c_prelude_dims()) + "\n";
    if (rest.compare(0, dims.size(), dims) == 0) rest.erase(0, dims.size());
    return rest;
}

std::string kernel_unit_source(const std::vector<std::string>& sources, const std::vector<std::string>& symbols) {
    KILN_ICHECK(sources.size() == symbols.size()) << "a kernel unit needs one symbol per source";
    std::ostringstream out;
    out << "/* Kiln kernel unit: " << sources.size() << " kernels. */\n" << c_prelude() << "\n" << c_prelude_dims() << "\n";
    for (size_t i = 0; i < sources.size(); ++i) {
        std::optional<std::string> body = kernel_body(sources[i]);
        KILN_ICHECK(body.has_value()) << "kernel " << symbols[i] << " is not a C emitter kernel";
        const std::set<int> tasks = task_numbers(*body);
        out << "\n#define " << kKernelName << " " << symbols[i] << "\n";
        for (int k : tasks) {
            out << "#define " << kTaskPrefix << k << " " << symbols[i] << "_task" << k << "\n";
            out << "#define " << kTaskPrefix << k << "_ctx " << symbols[i] << "_task" << k << "_ctx\n";
        }
        out << *body;
        out << "#undef " << kKernelName << "\n";
        for (int k : tasks) out << "#undef " << kTaskPrefix << k << "\n#undef " << kTaskPrefix << k << "_ctx\n";
    }
    return out.str();
}

size_t compile_cost(const std::string& source) {
    size_t unrolled = 0;
    const std::string mark = "/* unrolled";
    for (size_t at = source.find(mark); at != std::string::npos; at = source.find(mark, at + 1)) ++unrolled;
    return source.size() * (10 + unrolled) / 10;
}

size_t unrolled_length(const std::string& text) {
    const std::string mark = "KILN_UNROLL(";
    size_t total = 0, factor = 1, depth = 0, pending = 0;
    std::vector<std::pair<size_t, size_t>> open;  // (brace depth of an unrolled body, its n)
    for (size_t i = 0; i < text.size(); ++i) {
        if (text.compare(i, mark.size(), mark) == 0) pending = std::strtoull(text.c_str() + i + mark.size(), nullptr, 10);
        if (text[i] == '{') {
            ++depth;
            if (pending > 0) {  // the unrolled loop's body
                open.emplace_back(depth, pending);
                factor *= pending;
                pending = 0;
            }
        }
        total += factor;
        if (text[i] == '}') {
            if (!open.empty() && open.back().first == depth) {
                factor /= open.back().second;
                open.pop_back();
            }
            if (depth > 0) --depth;
        }
    }
    return total;
}

size_t quick_compile_cost(const std::string& source) {
    const std::optional<std::string> body = kernel_body(source);
    const std::string& text = body ? *body : source;
    return 7000 + (text.size() * 193 + unrolled_length(text) * 67) / 100;
}

std::vector<std::vector<size_t>> balance_units(const std::vector<size_t>& costs, size_t units) {
    units = std::max<size_t>(1, std::min(units, costs.size()));
    std::vector<size_t> order(costs.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return costs[a] > costs[b]; });
    std::vector<std::vector<size_t>> groups(units);
    std::vector<size_t> load(units, 0);
    for (size_t i : order) {
        size_t g = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
        groups[g].push_back(i);
        load[g] += costs[i];
    }
    for (auto& g : groups) std::sort(g.begin(), g.end());
    groups.erase(std::remove_if(groups.begin(), groups.end(), [](const auto& g) { return g.empty(); }), groups.end());
    std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
    return groups;
}

}  // namespace kiln::codegen
