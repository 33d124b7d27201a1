// check_dim_ranges, check_dim_value, add_declared_dim_limits (dim_ranges.h).
#include "compiler/dim_ranges.h"

#include "support/error.h"

namespace kiln::compiler {

void check_dim_ranges(const DimRanges& ranges, const std::set<std::string>& symbols,
                      const std::map<std::string, int64_t>& dims,
                      const std::map<std::string, std::vector<int64_t>>& specialize) {
    for (const auto& [name, range] : ranges) {
        std::string known;
        for (const std::string& s : symbols) known += (known.empty() ? "" : ", ") + s;
        KILN_CHECK(symbols.count(name), kInvalidArgument)
            << "dim range: no input has a symbolic dimension '" << name << "' (symbols: " << known << ")";
        KILN_CHECK(range.first >= 0 && range.first <= range.second, kInvalidArgument)
            << "dim range of '" << name << "': expected 0 <= min <= max, got " << range.first << ".." << range.second;
        if (auto it = dims.find(name); it != dims.end()) check_dim_value(ranges, name, it->second, "dims: ");
        if (auto it = specialize.find(name); it != specialize.end())
            for (int64_t v : it->second) check_dim_value(ranges, name, v, "specialize: ");
    }
}

void check_dim_value(const DimRanges& ranges, const std::string& name, int64_t value, const std::string& where) {
    auto it = ranges.find(name);
    if (it == ranges.end()) return;
    KILN_CHECK(value >= it->second.first && value <= it->second.second, kInvalidArgument)
        << where << "dimension '" << name << "' is " << value << ", outside its declared range " << it->second.first
        << ".." << it->second.second;
}

void add_declared_dim_limits(runtime::Executable& exe, const DimRanges& ranges) {
    for (size_t d = 0; d < exe.dims.size(); ++d) {
        auto it = ranges.find(exe.dims[d]);
        if (it != ranges.end()) exe.dim_limits.push_back({static_cast<int>(d), it->second.first, it->second.second, ""});
    }
}

}  // namespace kiln::compiler
