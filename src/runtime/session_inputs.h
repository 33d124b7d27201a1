// What every kiln::Session implementation checks of the names a run is given.
#pragma once

#include <string>
#include <vector>

#include "kiln/session.h"

namespace kiln::runtime {

/// Throws kInvalidArgument when `given` (a map from input name to value) names a value that is
/// not one of `inputs`, listing the model's inputs.
template <typename Map>
void check_input_names(const std::vector<TensorInfo>& inputs, const Map& given) {
    for (const auto& entry : given) {
        const std::string& name = entry.first;
        bool known = false;
        for (const TensorInfo& i : inputs) known |= i.name == name;
        if (known) continue;
        std::string names;
        for (const TensorInfo& i : inputs) names += (names.empty() ? "'" : ", '") + i.name + "'";
        KILN_THROW(kInvalidArgument) << "'" << name << "' is not an input of the model (inputs: " << names << ")";
    }
}

}  // namespace kiln::runtime
