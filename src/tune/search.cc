#include "tune/search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "tune/cost_model.h"

namespace kiln::tune {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr size_t kEnumerateLimit = size_t{1} << 20;  // complements of spaces this small may be listed

/// A uniform double in [0, 1) from the stream (53 random bits; portable, unlike the std distributions).
double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

/// Steps `p` to the next point in lexicographic order; false after the last one.
bool next_point(std::vector<int>& p, const std::vector<te::Knob>& space) {
    for (size_t k = p.size(); k-- > 0;) {
        if (++p[k] < static_cast<int>(space[k].choices.size())) return true;
        p[k] = 0;
    }
    return false;
}

}  // namespace

Searcher::Searcher(std::vector<te::Knob> space, uint64_t seed) : space_(std::move(space)), rng_(seed) {
    for (te::Knob& knob : space_) {
        knob.choices.push_back(knob.default_value);
        std::sort(knob.choices.begin(), knob.choices.end());
        knob.choices.erase(std::unique(knob.choices.begin(), knob.choices.end()), knob.choices.end());
        const size_t c = knob.choices.size();
        space_size_ = space_size_ > std::numeric_limits<size_t>::max() / c ? std::numeric_limits<size_t>::max()
                                                                           : space_size_ * c;
    }
}

Searcher::Point Searcher::to_point(const te::KnobValues& v) const {
    Point p = default_point();
    for (size_t k = 0; k < space_.size(); ++k) {
        auto it = v.find(space_[k].name);
        if (it == v.end()) continue;
        const auto& c = space_[k].choices;
        auto at = std::lower_bound(c.begin(), c.end(), it->second);
        if (at != c.end() && *at == it->second) p[k] = static_cast<int>(at - c.begin());
    }
    return p;
}

te::KnobValues Searcher::to_values(const Point& p) const {
    te::KnobValues v;
    for (size_t k = 0; k < space_.size(); ++k) v[space_[k].name] = space_[k].choices[p[k]];
    return v;
}

Searcher::Point Searcher::default_point() const {
    Point p(space_.size());
    for (size_t k = 0; k < space_.size(); ++k) {
        const auto& c = space_[k].choices;
        p[k] = static_cast<int>(std::lower_bound(c.begin(), c.end(), space_[k].default_value) - c.begin());
    }
    return p;
}

Searcher::Point Searcher::random_point() {
    Point p(space_.size());
    for (size_t k = 0; k < space_.size(); ++k) p[k] = static_cast<int>(rng_() % space_[k].choices.size());
    return p;
}

void Searcher::add_random(size_t count, std::vector<Point>& out, std::set<Point>& taken) {
    auto fresh = [&](const Point& p) { return !visited_.count(p) && !taken.count(p); };
    size_t added = 0;
    for (size_t tries = 0; added < count && tries < 64 * count + 64; ++tries) {
        Point p = random_point();
        if (!fresh(p)) continue;
        taken.insert(p);
        out.push_back(std::move(p));
        ++added;
    }
    if (added == count || space_size_ > kEnumerateLimit) return;
    // Rejection keeps missing: the space is nearly used up. Draw from the listed complement.
    std::vector<Point> left;
    Point p(space_.size(), 0);
    do {
        if (fresh(p)) left.push_back(p);
    } while (next_point(p, space_));
    for (size_t i = 0; i < left.size() && added < count; ++i, ++added) {
        std::swap(left[i], left[i + rng_() % (left.size() - i)]);
        taken.insert(left[i]);
        out.push_back(left[i]);
    }
}

void Searcher::add_neighbours(size_t count, std::vector<Point>& out, std::set<Point>& taken) {
    std::vector<std::pair<double, Point>> measured;
    for (const auto& [p, s] : records_)
        if (s < kInf) measured.emplace_back(s, p);
    std::sort(measured.begin(), measured.end());
    size_t added = 0;
    for (const auto& [s, center] : measured) {
        std::vector<Point> near;
        for (size_t k = 0; k < space_.size(); ++k)
            for (int d : {-1, 1}) {
                Point p = center;
                p[k] += d;
                if (p[k] < 0 || p[k] >= static_cast<int>(space_[k].choices.size())) continue;
                if (!visited_.count(p) && !taken.count(p)) near.push_back(p);
            }
        for (size_t i = 0; i < near.size() && added < count; ++i, ++added) {
            std::swap(near[i], near[i + rng_() % (near.size() - i)]);
            taken.insert(near[i]);
            out.push_back(near[i]);
        }
        if (added == count) return;
    }
}

std::vector<Searcher::Point> Searcher::anneal(size_t count) {
    // The model: log seconds of every measurement, failures at twice the worst success.
    double worst = 0;
    for (const auto& [p, s] : records_)
        if (s < kInf) worst = std::max(worst, s);
    std::vector<std::vector<double>> x;
    std::vector<double> y;
    for (const auto& [p, s] : records_) {
        x.push_back(knob_features(space_, to_values(p)));
        y.push_back(std::log(std::max(s < kInf ? s : 2 * worst, 1e-30)));  // a 0 s timer reading stays finite
    }
    GbtOptions opts;
    opts.seed = rng_();
    opts.subsample = kSubsample;
    GradientBoostedTrees model(opts);
    model.fit(x, y);
    // Every point the chains visited: its predicted log-time, and a random tie-breaker (trees
    // predict piecewise constants, so many points tie; NOTE: ranking ties by the point itself
    // would bias every proposal towards small choice indices).
    std::map<Point, std::pair<double, uint64_t>> scored;
    auto score = [&](const Point& p) {
        auto it = scored.find(p);
        if (it == scored.end())
            it = scored.emplace(p, std::make_pair(model.predict(knob_features(space_, to_values(p))), rng_())).first;
        return it->second.first;
    };

    // Chains start from the best distinct measured points (half of them) and random points.
    std::vector<std::pair<double, Point>> measured;
    for (const auto& [p, s] : records_)
        if (s < kInf) measured.emplace_back(s, p);
    std::sort(measured.begin(), measured.end());
    std::vector<Point> starts;
    for (const auto& [s, p] : measured)
        if (starts.size() < kChains / 2 && std::find(starts.begin(), starts.end(), p) == starts.end())
            starts.push_back(p);
    while (starts.size() < kChains) starts.push_back(random_point());

    // Temperatures in predicted log-time, from a tenth of the measured spread to a thousandth.
    const auto [lo, hi] = std::minmax_element(y.begin(), y.end());
    const double spread = *hi - *lo > 1e-9 ? *hi - *lo : 1.0;
    const double t0 = 0.1 * spread, t1 = 1e-3 * spread;
    std::vector<size_t> movable;  // knobs with a choice to make
    for (size_t k = 0; k < space_.size(); ++k)
        if (space_[k].choices.size() > 1) movable.push_back(k);
    for (Point cur : starts) {
        double cur_score = score(cur);
        for (int step = 0; step < kSteps && !movable.empty(); ++step) {
            const double t = t0 * std::pow(t1 / t0, static_cast<double>(step) / (kSteps - 1));
            Point next = cur;
            const size_t k = movable[rng_() % movable.size()];
            const int c = static_cast<int>(space_[k].choices.size());
            if (uniform(rng_) < 0.75) {  // an adjacent choice, reflected at the ends
                const int d = rng_() % 2 ? 1 : -1;
                next[k] = next[k] + d >= 0 && next[k] + d < c ? next[k] + d : next[k] - d;
            } else {  // any other choice
                next[k] = (next[k] + 1 + static_cast<int>(rng_() % (c - 1))) % c;
            }
            const double next_score = score(next);
            if (next_score <= cur_score || uniform(rng_) < std::exp((cur_score - next_score) / t)) {
                cur = std::move(next);
                cur_score = next_score;
            }
        }
    }

    std::vector<std::pair<std::pair<double, uint64_t>, Point>> ranked;
    for (const auto& [p, s] : scored)
        if (!visited_.count(p)) ranked.emplace_back(s, p);
    std::sort(ranked.begin(), ranked.end());
    std::vector<Point> out;
    for (size_t i = 0; i < ranked.size() && i < count; ++i) out.push_back(ranked[i].second);
    return out;
}

std::vector<te::KnobValues> Searcher::propose(int n) {
    if (n <= 0) return {};
    const size_t want = static_cast<size_t>(n);
    std::vector<Point> out;
    std::set<Point> taken;
    const Point dflt = default_point();
    if (space_size_ != std::numeric_limits<size_t>::max() && space_size_ - visited_.size() <= want) {
        // Endgame: everything left, default first.
        if (!visited_.count(dflt)) out.push_back(dflt);
        Point p(space_.size(), 0);
        do {
            if (!visited_.count(p) && p != dflt) out.push_back(p);
        } while (next_point(p, space_));
    } else if (trials() < kModelMinTrials || best_ < 0) {
        if (!visited_.count(dflt)) {
            out.push_back(dflt);
            taken.insert(dflt);
        }
        add_random(want - out.size(), out, taken);
    } else {
        // Shares: epsilon * n random points, kLocal * n neighbours of the best (fractions rounded at
        // random), the rest from the model; neighbours or random points make up for a short list.
        const double share = kEpsilon * static_cast<double>(want);
        size_t explore = static_cast<size_t>(share);
        if (uniform(rng_) < share - static_cast<double>(explore)) ++explore;
        const size_t local = std::min(want - explore, static_cast<size_t>(kLocal * want + uniform(rng_)));
        out = anneal(want - explore - local);
        taken.insert(out.begin(), out.end());
        add_neighbours(want - explore - out.size(), out, taken);
        add_random(want - out.size(), out, taken);
    }
    std::vector<te::KnobValues> values;
    for (const Point& p : out) {
        visited_.insert(p);
        values.push_back(to_values(p));
    }
    return values;
}

void Searcher::record(const te::KnobValues& v, double seconds_or_inf) {
    Point p = to_point(v);
    visited_.insert(p);
    const double s = seconds_or_inf >= 0 ? seconds_or_inf : kInf;  // NaN and negatives fail
    records_.emplace_back(std::move(p), s);
    if (s < kInf && (best_ < 0 || s < records_[best_].second)) best_ = static_cast<int>(records_.size()) - 1;
    best_after_.push_back(best_ < 0 ? kInf : records_[best_].second);
}

std::optional<std::pair<te::KnobValues, double>> Searcher::best() const {
    if (best_ < 0) return std::nullopt;
    return std::make_pair(to_values(records_[best_].first), records_[best_].second);
}

bool Searcher::converged(int patience) const {
    const size_t w = static_cast<size_t>(std::max(0, patience));
    if (records_.size() < w || records_.empty()) return false;
    const double now = best_after_.back();
    const double before = records_.size() == w ? kInf : best_after_[records_.size() - w - 1];
    if (now == kInf) return true;      // nothing ever succeeded
    if (before == kInf) return false;  // the first success came within the window
    return !(now < 0.99 * before);
}

}  // namespace kiln::tune
