// Command-line values of the form NAME=VALUE (--input x=x.npy, --dim N=4) and file names made
// from tensor names.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kiln::cli {

/// Splits "NAME=VALUE" at the first '='; kInvalidArgument naming `option` when there is no '=' or
/// either side is empty.
std::pair<std::string, std::string> split_name_value(const std::string& arg,
                                                     const std::string& option);

/// CLI11 check that an option value reads NAME=VALUE (VALUE a non-negative integer when
/// `integer_value`), so malformed values are usage errors (exit 2) reported by CLI11.
CLI::Validator name_value_check(bool integer_value);

/// Parses every "NAME=INT" of --dim into a map; kInvalidArgument on a bad or negative value or a
/// name given twice.
std::map<std::string, int64_t> parse_dims(const std::vector<std::string>& args);

/// Parses every "NAME=INT,INT,..." of --specialize into a map; kInvalidArgument on a bad or
/// negative size or a name given twice.
std::map<std::string, std::vector<int64_t>> parse_specialize(const std::vector<std::string>& args);

/// Parses every "NAME=MIN..MAX" of --dim-range into a map of inclusive ranges; kInvalidArgument
/// on a bad or negative bound, MIN > MAX, or a name given twice.
std::map<std::string, std::pair<int64_t, int64_t>> parse_dim_ranges(const std::vector<std::string>& args);

/// A file name for a tensor name: keeps [A-Za-z0-9._-], replaces everything else by '_'; never
/// empty, never "." or "..".
std::string sanitize_file_name(const std::string& name);

}  // namespace kiln::cli
