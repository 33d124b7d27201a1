// DimPoly (dim_poly.h): canonical polynomials of dim symbols.
#include "support/dim_poly.h"

#include <algorithm>
#include <cctype>

#include "support/error.h"

namespace kiln {
namespace {

int64_t checked_add(int64_t a, int64_t b) {
    int64_t r = 0;
    KILN_CHECK(!__builtin_add_overflow(a, b, &r), kInvalidModel) << "dim arithmetic overflows int64";
    return r;
}

int64_t checked_mul(int64_t a, int64_t b) {
    int64_t r = 0;
    KILN_CHECK(!__builtin_mul_overflow(a, b, &r), kInvalidModel) << "dim arithmetic overflows int64";
    return r;
}

bool is_ident(const std::string& s) {
    if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
    for (char c : s)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
    return true;
}

bool is_number(const std::string& s) {
    if (s.empty() || s.size() > 18) return false;
    for (char c : s)
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    return true;
}

// One term "c*a*b" (no sign) into (monomial, coefficient); false if malformed.
bool parse_term(const std::string& t, std::vector<std::string>& syms, int64_t& coef) {
    coef = 1;
    size_t at = 0;
    while (at <= t.size()) {
        const size_t star = t.find('*', at);
        const std::string f = t.substr(at, star == std::string::npos ? std::string::npos : star - at);
        if (is_number(f))
            coef = checked_mul(coef, std::stoll(f));
        else if (is_ident(f))
            syms.push_back(f);
        else
            return false;
        if (star == std::string::npos) break;
        at = star + 1;
    }
    std::sort(syms.begin(), syms.end());
    return true;
}

}  // namespace

DimPoly DimPoly::constant(int64_t c) {
    DimPoly p;
    p.add_term({}, c);
    return p;
}

DimPoly DimPoly::symbol(const std::string& name) {
    DimPoly p;
    p.add_term({name}, 1);
    return p;
}

std::optional<DimPoly> DimPoly::parse(const std::string& s) {
    if (is_ident(s)) return symbol(s);
    DimPoly p;
    size_t at = 0;
    bool negative = false;
    if (!s.empty() && s[0] == '-') negative = true, at = 1;
    while (true) {
        const size_t next = s.find_first_of("+-", at);
        const std::string t = s.substr(at, next == std::string::npos ? std::string::npos : next - at);
        std::vector<std::string> syms;
        int64_t coef = 0;
        if (!parse_term(t, syms, coef)) return std::nullopt;
        p.add_term(syms, negative ? -coef : coef);
        if (next == std::string::npos) break;
        negative = s[next] == '-';
        at = next + 1;
    }
    return p;
}

void DimPoly::add_term(const Monomial& m, int64_t c) {
    int64_t& v = terms_[m];
    v = checked_add(v, c);
    if (v == 0) terms_.erase(m);
}

bool DimPoly::is_constant() const { return terms_.empty() || (terms_.size() == 1 && terms_.begin()->first.empty()); }

int64_t DimPoly::constant_value() const {
    auto it = terms_.find({});
    return it == terms_.end() ? 0 : it->second;
}

bool DimPoly::is_symbol() const {
    return terms_.size() == 1 && terms_.begin()->first.size() == 1 && terms_.begin()->second == 1;
}

std::vector<std::string> DimPoly::symbols() const {
    std::vector<std::string> out;
    for (const auto& [m, c] : terms_) out.insert(out.end(), m.begin(), m.end());
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

DimPoly DimPoly::operator+(const DimPoly& o) const {
    DimPoly r = *this;
    for (const auto& [m, c] : o.terms_) r.add_term(m, c);
    return r;
}

DimPoly DimPoly::operator-(const DimPoly& o) const {
    DimPoly r = *this;
    for (const auto& [m, c] : o.terms_) r.add_term(m, checked_mul(c, -1));
    return r;
}

DimPoly DimPoly::operator*(const DimPoly& o) const {
    DimPoly r;
    for (const auto& [ma, ca] : terms_)
        for (const auto& [mb, cb] : o.terms_) {
            Monomial m = ma;
            m.insert(m.end(), mb.begin(), mb.end());
            std::sort(m.begin(), m.end());
            r.add_term(m, checked_mul(ca, cb));
        }
    return r;
}

std::optional<DimPoly> DimPoly::div_exact(const DimPoly& o) const {
    if (o.terms_.size() != 1) return std::nullopt;
    const auto& [dm, dc] = *o.terms_.begin();
    DimPoly r;
    for (const auto& [m, c] : terms_) {
        if (c % dc != 0) return std::nullopt;
        Monomial rest = m;  // m minus the divisor's symbols (a multiset difference)
        for (const std::string& s : dm) {
            auto it = std::find(rest.begin(), rest.end(), s);
            if (it == rest.end()) return std::nullopt;
            rest.erase(it);
        }
        r.add_term(rest, c / dc);
    }
    return r;
}

std::optional<int64_t> DimPoly::eval(const std::map<std::string, int64_t>& values) const {
    int64_t sum = 0;
    for (const auto& [m, c] : terms_) {
        int64_t t = c;
        for (const std::string& s : m) {
            auto it = values.find(s);
            if (it == values.end() || __builtin_mul_overflow(t, it->second, &t)) return std::nullopt;
        }
        if (__builtin_add_overflow(sum, t, &sum)) return std::nullopt;
    }
    return sum;
}

std::string DimPoly::str() const {
    if (terms_.empty()) return "0";
    // Highest degree first, then by symbols; the constant (degree 0) comes last.
    std::vector<std::pair<Monomial, int64_t>> order(terms_.begin(), terms_.end());
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    std::string out;
    for (const auto& [m, c] : order) {
        const int64_t mag = c < 0 ? -c : c;
        if (!out.empty()) out += c < 0 ? "-" : "+";
        else if (c < 0) out += "-";
        std::string t = m.empty() || mag != 1 ? std::to_string(mag) : "";
        for (const std::string& s : m) t += (t.empty() ? "" : "*") + s;
        out += t;
    }
    return out;
}

}  // namespace kiln
