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

int64_t floor_of(int64_t a, int64_t c) {  // c > 0
    const int64_t q = a / c;
    return (a % c != 0 && a < 0) ? q - 1 : q;
}

int64_t gcd_of(int64_t a, int64_t b) {
    a = a < 0 ? -a : a;
    b = b < 0 ? -b : b;
    while (b) {
        const int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

constexpr const char* kFloor = "floor(";

bool is_floor_atom(const std::string& s) { return s.rfind(kFloor, 0) == 0; }

/// Recursive descent over the grammar
///   expr   := ['-'] term (('+' | '-') term)*
///   term   := factor ('*' factor)*
///   factor := integer | identifier | '(' expr ')' | 'floor(' expr '/' integer ')'
class Parser {
public:
    explicit Parser(const std::string& s) : s_(s) {}
    std::optional<DimPoly> whole() {
        auto p = expr();
        if (!p || at_ != s_.size()) return std::nullopt;
        return p;
    }
    std::optional<DimPoly> expr() {
        bool negative = eat('-');
        std::optional<DimPoly> sum;
        while (true) {
            auto t = term();
            if (!t) return std::nullopt;
            const DimPoly signed_t = negative ? DimPoly::constant(0) - *t : *t;
            sum = sum ? *sum + signed_t : signed_t;
            if (eat('+')) negative = false;
            else if (eat('-')) negative = true;
            else return sum;
        }
    }

private:
    bool eat(char c) {
        if (at_ < s_.size() && s_[at_] == c) return ++at_, true;
        return false;
    }
    std::optional<DimPoly> term() {
        auto p = factor();
        while (p && eat('*')) {
            auto f = factor();
            if (!f) return std::nullopt;
            p = *p * *f;
        }
        return p;
    }
    std::optional<int64_t> number() {
        size_t end = at_;
        while (end < s_.size() && std::isdigit(static_cast<unsigned char>(s_[end]))) ++end;
        const std::string n = s_.substr(at_, end - at_);
        if (!is_number(n)) return std::nullopt;
        at_ = end;
        return std::stoll(n);
    }
    std::optional<DimPoly> factor() {
        if (at_ >= s_.size()) return std::nullopt;
        if (std::isdigit(static_cast<unsigned char>(s_[at_]))) {
            auto n = number();
            return n ? std::optional<DimPoly>(DimPoly::constant(*n)) : std::nullopt;
        }
        if (eat('(')) {
            auto e = expr();
            if (!e || !eat(')')) return std::nullopt;
            return e;
        }
        if (s_.compare(at_, 6, kFloor) == 0) {
            at_ += 6;
            auto e = expr();
            if (!e || !eat('/')) return std::nullopt;
            auto c = number();
            if (!c || *c <= 0 || !eat(')')) return std::nullopt;
            return DimPoly::floor_div(*e, *c);
        }
        size_t end = at_;
        while (end < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '_' || s_[end] == '.'))
            ++end;
        const std::string id = s_.substr(at_, end - at_);
        if (!is_ident(id)) return std::nullopt;
        at_ = end;
        return DimPoly::symbol(id);
    }

    const std::string& s_;
    size_t at_ = 0;
};

/// A floor atom's numerator and divisor.
std::pair<DimPoly, int64_t> floor_parts(const std::string& atom) {
    const size_t slash = atom.rfind('/');
    KILN_ICHECK(is_floor_atom(atom) && slash != std::string::npos) << "not a floor atom: " << atom;
    auto num = DimPoly::parse(atom.substr(6, slash - 6));
    KILN_ICHECK(num.has_value()) << "malformed floor atom: " << atom;
    return {*num, std::stoll(atom.substr(slash + 1, atom.size() - slash - 2))};
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
    try {
        return Parser(s).whole();
    } catch (const Error&) {  // a coefficient overflowing int64
        return std::nullopt;
    }
}

DimPoly DimPoly::floor_div(const DimPoly& p, int64_t c) {
    KILN_CHECK(c > 0, kInvalidModel) << "dim arithmetic: floor division by " << c;
    // p = q + r0 (r0 its constant); divide q and c by their common factor g:
    // floor((g q' + r0) / (g c')) = floor((q' + floor(r0 / g)) / c').
    const int64_t r0 = p.constant_value();
    DimPoly q = p - constant(r0);
    int64_t g = c;
    for (const auto& [m, k] : q.terms_) g = gcd_of(g, k);
    DimPoly qg;
    for (const auto& [m, k] : q.terms_) qg.add_term(m, k / g);
    const int64_t cg = c / g, r1 = floor_of(r0, g);
    // The constant below the divisor: floor((q' + r1) / c') = floor((q' + r) / c') + k, r1 = k c' + r.
    const int64_t k = floor_of(r1, cg), r = r1 - k * cg;
    if (cg == 1) return qg + constant(r1);
    if (qg.terms_.empty()) return constant(floor_of(r1, cg));
    // A lone floor atom: floor((floor(x / a) + r) / c') = floor((x + r a) / (a c')).
    if (qg.terms_.size() == 1 && qg.terms_.begin()->second == 1 && qg.terms_.begin()->first.size() == 1 &&
        is_floor_atom(qg.terms_.begin()->first[0])) {
        auto [x, a] = floor_parts(qg.terms_.begin()->first[0]);
        return floor_div(x + constant(checked_mul(r, a)), checked_mul(a, cg)) + constant(k);
    }
    const DimPoly num = qg + constant(r);
    const std::string text = num.str();
    const bool wrap = text.find_first_of("+-") != std::string::npos;
    DimPoly atom;
    atom.add_term({std::string(kFloor) + (wrap ? "(" + text + ")" : text) + "/" + std::to_string(cg) + ")"}, 1);
    return atom + constant(k);
}

DimPoly DimPoly::ceil_div(const DimPoly& p, int64_t c) {
    KILN_CHECK(c > 0, kInvalidModel) << "dim arithmetic: ceil division by " << c;
    return floor_div(p + constant(c - 1), c);
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
    for (const auto& [m, c] : terms_)
        for (const std::string& s : m) {
            if (!is_floor_atom(s)) {
                out.push_back(s);
                continue;
            }
            const std::vector<std::string> inner = floor_parts(s).first.symbols();
            out.insert(out.end(), inner.begin(), inner.end());
        }
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

DimPoly DimPoly::substitute(const std::string& atom, const DimPoly& by) const {
    DimPoly r;
    for (const auto& [m, c] : terms_) {
        DimPoly t = constant(c);
        for (const std::string& s : m) t = t * (s == atom ? by : symbol(s));
        r = r + t;
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
            int64_t v = 0;
            if (auto it = values.find(s); it != values.end()) {
                v = it->second;
            } else if (is_floor_atom(s)) {
                const auto [num, c] = floor_parts(s);
                auto n = num.eval(values);
                if (!n) return std::nullopt;
                v = floor_of(*n, c);
            } else {
                return std::nullopt;
            }
            if (__builtin_mul_overflow(t, v, &t)) return std::nullopt;
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
