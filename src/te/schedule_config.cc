#include "te/schedule_config.h"

#include <algorithm>
#include <cstdio>

#include "support/error.h"
#include "support/hash64.h"

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

std::string space_fingerprint(const std::vector<Knob>& space) {
    std::vector<const Knob*> sorted;
    for (const Knob& k : space) sorted.push_back(&k);
    std::sort(sorted.begin(), sorted.end(), [](const Knob* a, const Knob* b) { return a->name < b->name; });
    std::string text;
    for (const Knob* k : sorted) {
        text += k->name + ":";
        for (int64_t c : k->choices) text += std::to_string(c) + ",";
        text += ";";
    }
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(hash64(text.data(), text.size())));
    return buf;
}

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
