#include "convtune/stats.hpp"

#include <algorithm>
#include <cmath>

namespace convtune {

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

double median_abs_deviation(const std::vector<double>& v) {
    const double m = median(v);
    std::vector<double> d;
    d.reserve(v.size());
    for (double x : v) d.push_back(std::abs(x - m));
    return median(std::move(d));
}

double relative_spread(const std::vector<double>& v) {
    if (v.empty()) return 0;
    const double m = median(v);
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return m > 0 ? (*hi - *lo) / m : 0;
}

double relative_noise(const std::vector<double>& v) {
    const double m = median(v);
    return m > 0 ? 1.4826 * median_abs_deviation(v) / m : 0;
}

bool slower_beyond_noise(const std::vector<double>& a, const std::vector<double>& b, double z, double floor) {
    if (a.empty() || b.empty()) return false;
    const double ma = median(a), mb = median(b);
    auto se = [](const std::vector<double>& v) {
        return 1.2533 * 1.4826 * median_abs_deviation(v) / std::sqrt(static_cast<double>(v.size()));
    };
    const double sa = se(a), sb = se(b);
    const double d = mb - ma;
    return d > floor * ma && d > z * std::sqrt(sa * sa + sb * sb) && *std::min_element(b.begin(), b.end()) > ma;
}

}  // namespace convtune
