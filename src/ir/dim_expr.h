// ir::Dim <-> DimPoly (support/dim_poly.h): a symbolic dim's text is a dim expression
// (`batch*seq`, `seq+1`) or a plain symbol; "?" (unknown) is none.
#pragma once

#include <optional>

#include "ir/type.h"
#include "support/dim_poly.h"

namespace kiln::ir {

/// The dim as a polynomial; nullopt for an unknown dim ("?", or a symbol that is no expression).
inline std::optional<DimPoly> dim_poly(const Dim& d) {
    if (d.is_static()) return DimPoly::constant(d.value);
    if (d.symbol.empty() || d.symbol == "?") return std::nullopt;
    return DimPoly::parse(d.symbol);
}

/// The dim a polynomial stands for: a number when constant (nullopt when negative), else the
/// canonical expression as its symbol.
inline std::optional<Dim> dim_of_poly(const DimPoly& p) {
    if (p.is_constant()) {
        if (p.constant_value() < 0) return std::nullopt;
        return Dim(p.constant_value());
    }
    return Dim::sym(p.str());
}

/// The product of dims as a polynomial (nullopt when one is unknown).
inline std::optional<DimPoly> dims_poly_product(const std::vector<Dim>& dims) {
    DimPoly p = DimPoly::constant(1);
    for (const Dim& d : dims) {
        auto q = dim_poly(d);
        if (!q) return std::nullopt;
        p = p * *q;
    }
    return p;
}

}  // namespace kiln::ir
