// CSV source: a header row naming the columns, then one record per row of numbers. The label
// column (named, or the last) becomes the label field (i64 when every value is integral, else
// f32); the other columns become the features field, f32[F]. The file is parsed whole when it
// is opened, so a bad row is reported at once, naming file:line.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "data/array_source.h"
#include "data/sources.h"
#include "support/error.h"

namespace kiln::data {
namespace {

std::string trim(const std::string& s) {
    size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    std::string t = s.substr(b, e - b + 1);
    if (t.size() >= 2 && (t.front() == '"' || t.front() == '\'') && t.back() == t.front())
        t = t.substr(1, t.size() - 2);
    return t;
}

std::vector<std::string> split(const std::string& line) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : line) {
        if (c == ',') {
            out.push_back(trim(cur));
            cur.clear();
        } else {
            cur += c;
        }
    }
    out.push_back(trim(cur));
    return out;
}

bool parse_number(const std::string& s, double& v) {
    if (s.empty()) return false;
    errno = 0;
    char* end = nullptr;
    v = std::strtod(s.c_str(), &end);
    return end == s.c_str() + s.size() && errno != ERANGE;
}

}  // namespace

std::shared_ptr<Source> open_csv_source(const std::string& path, const SourceOptions& opts) {
    std::ifstream f(path);
    KILN_CHECK(f.good(), kIOError) << "cannot open '" << path << "' for reading";
    std::string line;
    int64_t lineno = 0;
    std::vector<std::string> header;
    while (header.empty() && std::getline(f, line)) {
        ++lineno;
        if (!trim(line).empty()) header = split(line);
    }
    KILN_CHECK(!header.empty(), kInvalidArgument) << "'" << path << "' is empty (expected a header row)";
    KILN_CHECK(header.size() >= 2, kInvalidArgument)
        << path << ":" << lineno << ": the header names " << header.size()
        << " column; expected at least 2 (features and a label)";
    size_t label_col = header.size() - 1;
    if (!opts.label_column.empty()) {
        label_col = header.size();
        for (size_t c = 0; c < header.size(); ++c)
            if (header[c] == opts.label_column) label_col = c;
        if (label_col == header.size()) {
            std::string names;
            for (const auto& h : header) names += (names.empty() ? "" : ", ") + h;
            KILN_THROW(kInvalidArgument) << path << ":" << lineno << ": no label column '"
                                         << opts.label_column << "' in the header (columns: " << names << ")";
        }
    }
    std::vector<float> features;
    std::vector<double> labels;
    bool integral = true;
    while (std::getline(f, line)) {
        ++lineno;
        if (trim(line).empty()) continue;
        std::vector<std::string> fields = split(line);
        KILN_CHECK(fields.size() == header.size(), kInvalidArgument)
            << path << ":" << lineno << ": expected " << header.size() << " fields (as in the header), got "
            << fields.size();
        for (size_t c = 0; c < fields.size(); ++c) {
            double v = 0;
            KILN_CHECK(parse_number(fields[c], v), kInvalidArgument)
                << path << ":" << lineno << ": field " << c + 1 << " ('" << header[c]
                << "') is not a number: '" << fields[c] << "'";
            if (c == label_col) {
                labels.push_back(v);
                integral &= std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.0e15;
            } else {
                features.push_back(static_cast<float>(v));
            }
        }
    }
    int64_t n = static_cast<int64_t>(labels.size());
    KILN_CHECK(n > 0, kInvalidArgument) << "'" << path << "' has a header but no data rows";
    int64_t nf = static_cast<int64_t>(header.size()) - 1;
    KILN_CHECK(opts.features_field != opts.label_field, kInvalidArgument)
        << "'" << path << "': the features and label fields are both named '" << opts.label_field << "'";
    std::map<std::string, Tensor> fields;
    Tensor x(DType::kFloat32, {n, nf});
    std::copy(features.begin(), features.end(), x.data_as<float>());
    Tensor y(integral ? DType::kInt64 : DType::kFloat32, {n});
    for (int64_t i = 0; i < n; ++i) {
        if (integral)
            y.data_as<int64_t>()[i] = static_cast<int64_t>(labels[i]);
        else
            y.data_as<float>()[i] = static_cast<float>(labels[i]);
    }
    fields[opts.features_field] = std::move(x);
    fields[opts.label_field] = std::move(y);
    return std::make_shared<ArraySource>(path, std::move(fields));
}

}  // namespace kiln::data
