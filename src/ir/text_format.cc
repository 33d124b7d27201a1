// Lexical helpers of the IR text form (see text_format.h). Floats use std::to_chars, which
// produces the shortest decimal string that reads back to the same bits.
#include "ir/text_format.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace kiln::ir {
namespace {
bool is_ident_start(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == '?';
}
bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9') || c == '.'; }

template <typename T>
std::string format_float(T v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof(buf), v);
    return std::string(buf, res.ptr);
}
}  // namespace

bool is_bare_value_name(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
        if (!(is_ident_char(c) && c != '?')) return false;
    return true;
}

bool is_bare_identifier(std::string_view s) {
    if (s.empty() || !is_ident_start(s[0])) return false;
    for (char c : s)
        if (!is_ident_char(c)) return false;
    // Words with a meaning of their own in the text form.
    for (const char* kw :
         {"graph", "const", "return", "tensor", "true", "false", "inf", "nan", "_"})
        if (s == kw) return false;
    return true;
}

std::string quote_string(std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
        auto u = static_cast<unsigned char>(c);
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\r':
                out += "\\r";
                break;
            default:
                if (u < 0x20 || u == 0x7f) {
                    char buf[8];
                    std::snprintf(buf, sizeof(buf), "\\x%02x", u);
                    out += buf;
                } else {
                    out += c;
                }
        }
    }
    return out + "\"";
}

std::string value_ref(std::string_view name) {
    return is_bare_value_name(name) ? "%" + std::string(name) : "%" + quote_string(name);
}

std::string identifier_or_quoted(std::string_view s) {
    return is_bare_identifier(s) ? std::string(s) : quote_string(s);
}

std::string format_f32(float v) { return format_float(v); }
std::string format_f64(double v) { return format_float(v); }

}  // namespace kiln::ir
