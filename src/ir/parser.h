// Parser for the text form printed by ir/printer.h. Errors are kiln::Error(kParseError) with
// line and column.
#pragma once

#include <string_view>

#include "ir/graph.h"

namespace kiln::ir {

Graph parse_graph(std::string_view text);

}  // namespace kiln::ir
