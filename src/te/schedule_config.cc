#include "te/schedule_config.h"

#include <algorithm>

#include "support/error.h"

namespace kiln::te {

int64_t ScheduleConfig::knob(const std::string& name, std::vector<int64_t> choices, int64_t default_value) {
    auto seen = taken_.find(name);
    if (seen != taken_.end()) return seen->second;
    choices.push_back(default_value);
    std::sort(choices.begin(), choices.end());
    choices.erase(std::unique(choices.begin(), choices.end()), choices.end());
    int64_t value = default_value;
    auto it = values_.find(name);
    if (it != values_.end() && std::binary_search(choices.begin(), choices.end(), it->second)) value = it->second;
    space_.push_back({name, std::move(choices), default_value});
    taken_[name] = value;
    return value;
}

KnobValues ScheduleConfig::applied() const { return taken_; }

std::string ScheduleConfig::format(const KnobValues& v) {
    std::string s;
    for (const auto& [name, value] : v) {
        if (!s.empty()) s += ',';
        s += name + "=" + std::to_string(value);
    }
    return s;
}

KnobValues ScheduleConfig::parse(const std::string& s) {
    KnobValues v;
    size_t pos = 0;
    while (pos < s.size()) {
        size_t end = s.find(',', pos);
        if (end == std::string::npos) end = s.size();
        std::string entry = s.substr(pos, end - pos);
        size_t eq = entry.find('=');
        KILN_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < entry.size(), kInvalidArgument)
            << "schedule config entry '" << entry << "' is not NAME=INTEGER";
        try {
            size_t used = 0;
            int64_t value = std::stoll(entry.substr(eq + 1), &used);
            KILN_CHECK(used == entry.size() - eq - 1, kInvalidArgument)
                << "schedule config entry '" << entry << "' is not NAME=INTEGER";
            v[entry.substr(0, eq)] = value;
        } catch (const std::logic_error&) {
            KILN_CHECK(false, kInvalidArgument) << "schedule config entry '" << entry << "' is not NAME=INTEGER";
        }
        pos = end + 1;
    }
    return v;
}

}  // namespace kiln::te
