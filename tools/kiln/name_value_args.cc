#include "name_value_args.h"

#include <cerrno>
#include <cstdlib>

#include "support/error.h"

namespace kiln::cli {

std::pair<std::string, std::string> split_name_value(const std::string& arg,
                                                     const std::string& option) {
    size_t eq = arg.find('=');
    KILN_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < arg.size(), kInvalidArgument)
        << option << " expects NAME=VALUE, got '" << arg << "'";
    return {arg.substr(0, eq), arg.substr(eq + 1)};
}

CLI::Validator name_value_check(bool integer_value) {
    return CLI::Validator(
        [integer_value](std::string& value) -> std::string {
            size_t eq = value.find('=');
            if (eq == std::string::npos || eq == 0 || eq + 1 == value.size())
                return "expected NAME=VALUE, got '" + value + "'";
            if (integer_value && value.find_first_not_of("0123456789", eq + 1) != std::string::npos)
                return "expected NAME=<non-negative integer>, got '" + value + "'";
            return "";
        },
        integer_value ? "NAME=INT" : "NAME=VALUE");
}

namespace {

int64_t parse_size(const std::string& text, const std::string& option, const std::string& name) {
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(text.c_str(), &end, 10);
    KILN_CHECK(!text.empty() && errno == 0 && end != nullptr && *end == '\0' && v >= 0, kInvalidArgument)
        << option << " " << name << ": expected a non-negative integer, got '" << text << "'";
    return v;
}

}  // namespace

std::map<std::string, int64_t> parse_dims(const std::vector<std::string>& args) {
    std::map<std::string, int64_t> dims;
    for (const std::string& arg : args) {
        auto [name, text] = split_name_value(arg, "--dim");
        int64_t v = parse_size(text, "--dim", name);
        KILN_CHECK(dims.count(name) == 0, kInvalidArgument) << "--dim " << name << " given twice";
        dims[name] = v;
    }
    return dims;
}

std::map<std::string, std::vector<int64_t>> parse_specialize(const std::vector<std::string>& args) {
    std::map<std::string, std::vector<int64_t>> sizes;
    for (const std::string& arg : args) {
        auto [name, text] = split_name_value(arg, "--specialize");
        KILN_CHECK(sizes.count(name) == 0, kInvalidArgument) << "--specialize " << name << " given twice";
        std::vector<int64_t>& list = sizes[name];
        size_t at = 0;
        for (;;) {
            size_t comma = text.find(',', at);
            list.push_back(parse_size(text.substr(at, comma - at), "--specialize", name));
            if (comma == std::string::npos) break;
            at = comma + 1;
        }
    }
    return sizes;
}

std::map<std::string, std::pair<int64_t, int64_t>> parse_dim_ranges(const std::vector<std::string>& args) {
    std::map<std::string, std::pair<int64_t, int64_t>> ranges;
    for (const std::string& arg : args) {
        auto [name, text] = split_name_value(arg, "--dim-range");
        const size_t dots = text.find("..");
        KILN_CHECK(dots != std::string::npos, kInvalidArgument)
            << "--dim-range " << name << ": expected MIN..MAX, got '" << text << "'";
        const int64_t lo = parse_size(text.substr(0, dots), "--dim-range", name);
        const int64_t hi = parse_size(text.substr(dots + 2), "--dim-range", name);
        KILN_CHECK(lo <= hi, kInvalidArgument) << "--dim-range " << name << ": MIN " << lo << " is above MAX " << hi;
        KILN_CHECK(ranges.count(name) == 0, kInvalidArgument) << "--dim-range " << name << " given twice";
        ranges[name] = {lo, hi};
    }
    return ranges;
}

std::string sanitize_file_name(const std::string& name) {
    std::string out;
    out.reserve(name.size());
    for (char c : name) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        out += ok ? c : '_';
    }
    if (out.empty() || out == "." || out == "..") out = "_" + out;
    return out;
}

}  // namespace kiln::cli
