// Dim arithmetic (issue 23, docs/dynamic_shapes.md): a symbolic dim that is a small polynomial
// of the model's symbols with integer coefficients (`batch*seq`, `seq+1`, `2*seq`, `batch*seq-1`),
// whose atoms may also be floor divisions of such polynomials by a positive integer
// (`floor((H+1)/2)`: a stride-2 convolution's output rows).
//
// Kept in a canonical text form so that it rides in ir::Dim::symbol (equal dims are equal
// strings) and in Executable::dims (the runtime evaluates it from the input-bound dims): terms
// are printed highest degree first, then by their symbols, each as `c*a*b` (c omitted when 1,
// `-` joining a negative term), the constant last. A symbol that is not an identifier
// ([A-Za-z_][A-Za-z0-9_.]*) stays one atomic symbol: only names made of identifiers, integers and
// `+ - *` parse as expressions. A floor atom is canonical too (floor_div): its constant reduced
// below the divisor, common factors cancelled, nested floors merged, so that two routes to the
// same rows (a 3x3 stride-2 conv, then a 3x3 stride-2 pool; or a 1x1 stride-4 conv) give one
// text: `floor((H+3)/4)`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

class DimPoly {
public:
    DimPoly() = default;
    static DimPoly constant(int64_t c);
    static DimPoly symbol(const std::string& name);
    /// The expression `s` (a plain symbol, an integer or a canonical expression); nullopt when
    /// it is none of them.
    static std::optional<DimPoly> parse(const std::string& s);

    bool is_constant() const;
    /// The constant value (0 for the zero polynomial); only meaningful if is_constant().
    int64_t constant_value() const;
    /// A single symbol with coefficient 1 and no constant.
    bool is_symbol() const;
    /// Every symbol the expression uses (inside floor atoms too), sorted, unique.
    std::vector<std::string> symbols() const;

    DimPoly operator+(const DimPoly& o) const;
    DimPoly operator-(const DimPoly& o) const;
    DimPoly operator*(const DimPoly& o) const;
    /// floor(p / c) for c > 0, canonical (see the file comment); exact division when c divides
    /// every coefficient.
    static DimPoly floor_div(const DimPoly& p, int64_t c);
    /// ceil(p / c) for c > 0: floor((p + c - 1) / c).
    static DimPoly ceil_div(const DimPoly& p, int64_t c);

    /// This with every occurrence of the symbol or floor atom `atom` (as a factor of a term)
    /// replaced by `by`.
    DimPoly substitute(const std::string& atom, const DimPoly& by) const;

    /// this / o when o is a single term (c * symbols) dividing every term exactly; else nullopt.
    std::optional<DimPoly> div_exact(const DimPoly& o) const;
    bool operator==(const DimPoly& o) const { return terms_ == o.terms_; }

    /// The value with every symbol bound in `values` (a floor atom rounds toward -infinity);
    /// nullopt for an unbound symbol or an int64 overflow.
    std::optional<int64_t> eval(const std::map<std::string, int64_t>& values) const;
    /// The canonical text ("0" for zero).
    std::string str() const;

private:
    using Monomial = std::vector<std::string>;  // sorted symbols, repeats for powers
    std::map<Monomial, int64_t> terms_;          // nonzero coefficients only
    void add_term(const Monomial& m, int64_t c);
};

}  // namespace kiln
