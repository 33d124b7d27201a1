// A tuning workload: what a kernel unit computes, independent of where it sits in a model.
// Two units with the same ops, attributes, wiring and argument types (and constness) are the
// same workload: they are tuned once and share the log's best record. The key is a short hash
// of that canonical text; the description is the readable part for tables and logs.
#pragma once

#include <string>
#include <vector>

#include "compiler/lower_group.h"
#include "tune/measure.h"

namespace kiln::compiler {

/// The canonical text of the unit (ops with attributes, internal wiring, argument types).
std::string workload_text(const KernelUnit& unit);
/// "w" + 16 hex digits of the canonical text's FNV-1a hash.
std::string workload_key(const KernelUnit& unit);
/// "Conv+Add+Relu f32[1,64,56,56] -> f32[1,64,56,56]" (ops, first input, first output).
std::string workload_description(const KernelUnit& unit);
/// The unit's kernel arguments for measuring it (tune/measure.h): inputs then outputs, with the
/// values of small constants (scalars a kernel may have folded in); weights get random data.
std::vector<tune::ArgSpec> workload_args(const KernelUnit& unit);

}  // namespace kiln::compiler
