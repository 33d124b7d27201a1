// A tuning workload: what a kernel unit computes, independent of where it sits in a model.
// Two units with the same ops, attributes, wiring and argument types (and constness) are the
// same workload: they are tuned once and share the log's best record. The key is a short hash
// of that canonical text; the description is the readable part for tables and logs.
#pragma once

#include <string>

#include "compiler/lower_group.h"

namespace kiln::compiler {

/// The canonical text of the unit (ops with attributes, internal wiring, argument types).
std::string workload_text(const KernelUnit& unit);
/// "w" + 16 hex digits of the canonical text's FNV-1a hash.
std::string workload_key(const KernelUnit& unit);
/// "Conv+Add+Relu f32[1,64,56,56] -> f32[1,64,56,56]" (ops, first input, first output).
std::string workload_description(const KernelUnit& unit);

}  // namespace kiln::compiler
