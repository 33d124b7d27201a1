// Declared ranges of symbolic dims (SessionOptions::dim_ranges, `--dim-range NAME=MIN..MAX`):
// checked when a session or an artifact compile is set up, and by every run (a session's
// binding of its inputs; an artifact's Executable::dim_limits, runtime/dims_plan.h).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/executable.h"

namespace kiln::compiler {

using DimRanges = std::map<std::string, std::pair<int64_t, int64_t>>;

/// Every name is one of `symbols` (the model's symbolic input dims) and every range has
/// 0 <= min <= max; the values `dims` binds and `specialize` lists lie in their ranges.
/// kInvalidArgument otherwise, naming the dim.
void check_dim_ranges(const DimRanges& ranges, const std::set<std::string>& symbols,
                      const std::map<std::string, int64_t>& dims,
                      const std::map<std::string, std::vector<int64_t>>& specialize = {});

/// kInvalidArgument "<where>dimension 'NAME' is V, outside its declared range MIN..MAX" when
/// `value` is outside the range of `name` (none declared: nothing to check).
void check_dim_value(const DimRanges& ranges, const std::string& name, int64_t value, const std::string& where);

/// The declared ranges of exe's dims as Executable::dim_limits (node ""), for an artifact.
void add_declared_dim_limits(runtime::Executable& exe, const DimRanges& ranges);

}  // namespace kiln::compiler
