// wide_vector_flags (see the header): a pure reading of the compiler's target report.
#include "codegen/vector_width_flags.h"

#include <sstream>

namespace kiln::codegen {

std::vector<std::string> wide_vector_flags(const std::string& target_help, bool host_avx512) {
    if (!host_avx512) return {};
    std::istringstream in(target_help);
    for (std::string line; std::getline(in, line);) {
        // "  -mprefer-vector-width=      \t\t256" (the -mprefer-avx128 alias line names "=128" in
        // its description, not as the value, and has another option first).
        const size_t at = line.find_first_not_of(" \t");
        if (at == std::string::npos || line.compare(at, 21, "-mprefer-vector-width") != 0) continue;
        std::istringstream fields(line.substr(at));
        std::string option, value;
        fields >> option >> value;
        if (option != "-mprefer-vector-width=") continue;
        if (value == "128" || value == "256") return {"-mprefer-vector-width=512"};
        return {};
    }
    return {"-mprefer-vector-width=512"};  // no report of the preference
}

}  // namespace kiln::codegen
