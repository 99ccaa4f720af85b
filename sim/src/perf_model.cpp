#include "convtune/sim/perf_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "convtune/stats.hpp"

namespace convtune::sim {

std::string algorithm_family(std::string_view id) {
    std::vector<std::string_view> parts;
    for (std::size_t start = 0;;) {
        const std::size_t dot = id.find('.', start);
        parts.push_back(id.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
        if (dot == std::string_view::npos) break;
        start = dot + 1;
    }
    std::string out;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        const std::string_view t = parts[i];
        if (t == "fwd" || t == "bwd_data" || t == "bwd_filter") continue;
        if (i + 1 == parts.size() && i > 1 && (t == "default" || t == "tensor_op" || t == "fma" || t == "tf32"))
            continue;
        if (!out.empty()) out += '.';
        out += t;
    }
    return out;
}

namespace {

struct Point {
    std::string key;  // whose intercept
    double x, y;      // log MACs, log median ms
};

// One slope, one intercept per key, least squares; sigma from the residuals.
PerfModel::Fit fit(const std::vector<Point>& pts) {
    PerfModel::Fit f;
    std::map<std::string, std::pair<int, std::pair<double, double>>> acc;
    for (const Point& p : pts) {
        auto& [n, s] = acc[p.key];
        ++n, s.first += p.x, s.second += p.y;
    }
    for (auto& [k, v] : acc) v.second.first /= v.first, v.second.second /= v.first;
    double sxx = 0, sxy = 0;
    for (const Point& p : pts) {
        const auto& m = acc[p.key].second;
        sxx += (p.x - m.first) * (p.x - m.first);
        sxy += (p.x - m.first) * (p.y - m.second);
    }
    f.n = static_cast<int>(pts.size());
    f.dof = f.n - static_cast<int>(acc.size()) - 1;
    f.intercepts = std::move(acc);
    f.sxx = sxx;
    // A slope needs spread in x, a spread of the residuals needs degrees of freedom.
    if (sxx < 1e-6 || f.dof < 2) return f;
    f.beta = std::clamp(sxy / sxx, 0.0, 1.5);
    double ss = 0;
    for (const Point& p : pts) {
        const auto& m = f.intercepts[p.key].second;
        const double r = p.y - m.second - f.beta * (p.x - m.first);
        ss += r * r;
    }
    f.sigma = std::sqrt(ss / f.dof);
    f.usable = std::isfinite(f.sigma);
    return f;
}

std::string group_key(const std::string& id, const ConvProblem& p) {
    return algorithm_family(id) + "|" + std::string(to_string(p.direction)) + "|" + std::string(to_string(p.dtype));
}
std::string pooled_key(const std::string& id, const ConvProblem& p) {
    return id + "|" + std::string(to_string(p.direction)) + "|" + std::string(to_string(p.dtype));
}

bool timed(const AlgorithmRecord& a) { return a.supported && a.status == Status::Code::ok && !a.samples_ms.empty(); }

double work(const ConvProblem& p) { return static_cast<double>(std::max<int64_t>(p.macs(), 1)); }
double log_macs(const ConvProblem& p) { return std::log(work(p)); }

}  // namespace

PerfModel::PerfModel(const Recording& r, const ConvProblem* leave_out) {
    std::map<std::string, std::vector<Point>> groups;
    std::vector<Point> pooled;
    for (const ProblemRecord& pr : r.problems) {
        if (leave_out && pr.problem == *leave_out) continue;
        const double x = log_macs(pr.problem);
        for (const AlgorithmRecord& a : pr.algorithms) {
            if (!timed(a)) continue;
            const double m = median(a.samples_ms);
            const double lo = *std::min_element(a.samples_ms.begin(), a.samples_ms.end());
            if (lo > 0 && (floor_ == 0 || lo < floor_)) floor_ = lo;
            if (!(m > 0)) continue;
            groups[group_key(a.id, pr.problem)].push_back({a.id, x, std::log(m)});
            pooled.push_back({pooled_key(a.id, pr.problem), x, std::log(m)});
        }
    }
    for (const auto& [k, pts] : groups) groups_[k] = fit(pts);
    pooled_ = fit(pooled);
}

std::optional<Prediction> PerfModel::predict(const std::string& id, const ConvProblem& p,
                                             const ProblemRecord& neighbour, bool same_layer,
                                             const ProblemRecord* partner) const {
    const AlgorithmRecord* a = neighbour.find(id);
    if (!a || !timed(*a)) return std::nullopt;
    const double mn = median(a->samples_ms);
    const double x = log_macs(p), xn = log_macs(neighbour.problem);
    Prediction out;
    double y = 0;
    auto from = [&](const Fit& f, const std::string& key, const char* basis) {
        const auto it = f.intercepts.find(key);
        if (!f.usable || it == f.intercepts.end()) return false;
        const auto [n_a, means] = it->second;
        if (same_layer && mn > 0) {
            y = std::log(mn) + f.beta * (x - xn);
            // The anchor's own residual and the problem's: both ~sigma where they are independent
            // (conservative where the layer's residual carries over), plus the slope's error.
            out.sigma = f.sigma * std::sqrt(2 + (x - xn) * (x - xn) / f.sxx);
        } else {
            y = means.second + f.beta * (x - means.first);
            out.sigma = f.sigma * std::sqrt(1 + 1.0 / n_a + (x - means.first) * (x - means.first) / f.sxx);
        }
        out.basis = basis;
        return true;
    };
    if (!from(groups_.count(group_key(id, neighbour.problem)) ? groups_.at(group_key(id, neighbour.problem)) : Fit{},
              id, "family fit") &&
        !from(pooled_, pooled_key(id, neighbour.problem), "pooled fit")) {
        out.ms = mn * work(p) / work(neighbour.problem);
        out.sigma = kAssumedSigma;
        out.basis = "no fit (linear in multiply-adds, factor 2 assumed)";
    } else {
        out.ms = std::exp(y);
    }
    if (const AlgorithmRecord* b = same_layer && partner ? partner->find(id) : nullptr; b && timed(*b) && mn > 0) {
        const double m1 = work(neighbour.problem), m2 = work(partner->problem), m = work(p);
        const double t1 = mn, t2 = median(b->samples_ms);
        if (m1 != m2 && t2 > 0) {
            const double slope = (t2 - t1) / (m2 - m1), fixed = t1 - slope * m1;
            if (slope > 0 && fixed >= 0) {
                out.ms = fixed + slope * m;
                out.basis = "two sizes of the layer (fixed + linear in the work)";
            } else {
                const double beta = std::clamp(std::log(t2 / t1) / std::log(m2 / m1), 0.0, 1.5);
                out.ms = t1 * std::pow(m / m1, beta);
                out.basis = "two sizes of the layer (power law)";
            }
        }
    }
    out.floor_ms = floor_;
    if (out.ms < out.floor_ms) out.ms = out.floor_ms, out.floored = true;
    return out;
}

}  // namespace convtune::sim
