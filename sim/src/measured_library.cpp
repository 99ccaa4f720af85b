// PyTorchLibrary: PyTorch's measured per-problem costs shipped with convtune, and the model that
// stands in for the problems none of its files measured (measured.hpp).
#include <fmt/core.h>

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <limits>
#include <map>

#include "convtune/error.hpp"
#include "convtune/sim/measured.hpp"
#include "convtune/sim/recording.hpp"

namespace convtune::sim {

namespace {

// A measured quantity: "bm0|cold|first", "bm1|warm|steady", ...
std::string quantity(const std::string& setting, const std::string& cache, bool first) {
    return setting + "|" + cache + (first ? "|first" : "|steady");
}

// The library's key of a problem: f32 problems carry the allow_tf32 they were measured with.
std::string library_key(const ConvProblem& p, bool allow_tf32) {
    return p.to_string() + (p.dtype == DataType::f32 ? (allow_tf32 ? "#tf32" : "#notf32") : "");
}

bool half(const ConvProblem& p) { return p.dtype == DataType::f16 || p.dtype == DataType::bf16; }
bool depthwise(const ConvProblem& p) { return p.groups > 1 && p.groups == p.c; }

// The features of the steady-time fit (measured.hpp): intercept, GMACs per data class, GB moved,
// GMACs of grouped problems, GMACs of backward-filter problems.
constexpr int kSteadyFeatures = 7;
std::array<double, kSteadyFeatures> steady_features(const ConvProblem& p, bool allow_tf32) {
    const double g = static_cast<double>(p.macs()) * 1e-9;
    const double gb = static_cast<double>(p.x_elements() + p.w_elements() + p.y_elements()) *
                      static_cast<double>(size_of(p.dtype)) * 1e-9;
    const bool f32 = p.dtype == DataType::f32;
    return {1.0,
            f32 && !allow_tf32 ? g : 0.0,
            f32 && allow_tf32 ? g : 0.0,
            half(p) ? g : 0.0,
            gb,
            p.groups > 1 ? g : 0.0,
            p.direction == Direction::bwd_filter ? g : 0.0};
}

// The features of the first-call fit: intercept, half, depthwise, depthwise half, grouped (not
// depthwise), backward, 3-D, 1-D, the steady time.
constexpr int kFirstFeatures = 9;
std::array<double, kFirstFeatures> first_features(const ConvProblem& p, double steady_ms) {
    auto b = [](bool v) { return v ? 1.0 : 0.0; };
    return {1.0,
            b(half(p)),
            b(depthwise(p)),
            b(depthwise(p) && half(p)),
            b(p.groups > 1 && !depthwise(p)),
            b(p.direction != Direction::fwd),
            b(p.spatial_dims == 3),
            b(p.spatial_dims == 1),
            steady_ms};
}

template <std::size_t N>
Eigen::VectorXd least_squares(const std::vector<std::array<double, N>>& rows, const std::vector<double>& y) {
    Eigen::MatrixXd x(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(N));
    Eigen::VectorXd v(static_cast<Eigen::Index>(y.size()));
    for (std::size_t i = 0; i < rows.size(); ++i) {
        for (std::size_t j = 0; j < N; ++j) x(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = rows[i][j];
        v(static_cast<Eigen::Index>(i)) = y[i];
    }
    // Complete orthogonal decomposition: the minimum-norm solution where a feature never varies
    // (no 3-D problem in the library, say), so that it contributes nothing.
    return x.completeOrthogonalDecomposition().solve(v);
}

template <std::size_t N>
double evaluate(const Eigen::VectorXd& coef, const std::array<double, N>& f) {
    double s = 0;
    for (std::size_t j = 0; j < N; ++j) s += coef(static_cast<Eigen::Index>(j)) * f[j];
    return s;
}

double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Merged {
    // quantity -> library key -> every measurement of it
    std::map<std::string, std::map<std::string, std::vector<double>>> times;
    std::map<std::string, ConvProblem> problems;  // library key -> problem
    std::map<std::string, bool> tf32_of;          // library key -> allow_tf32 it stands for
    std::map<std::string, std::vector<double>> startups;  // "bm0|cold" -> start-ups
    std::map<std::string, std::size_t> runs;              // "bm0|cold" -> most runs in one file
};

Merged merge(const PyTorchLibrary& lib) {
    Merged m;
    for (const PyTorchMeasurements& f : lib.files) {
        std::map<std::string, std::size_t> runs;
        for (const MeasuredRun& r : f.runs) {
            const std::string sc = r.setting + "|" + r.cache;
            m.startups[sc].push_back(r.startup_ms);
            ++runs[sc];
            for (const auto& [text, t] : r.problems) {
                const ConvProblem p = ConvProblem::parse(text);
                const std::string key = library_key(p, f.allow_tf32 != 0);
                m.problems.emplace(key, p);
                m.tf32_of.emplace(key, f.allow_tf32 != 0);
                m.times[quantity(r.setting, r.cache, true)][key].push_back(t.first_ms);
                m.times[quantity(r.setting, r.cache, false)][key].push_back(t.steady_ms);
            }
        }
        for (const auto& [sc, n] : runs) m.runs[sc] = std::max(m.runs[sc], n);
    }
    return m;
}

}  // namespace

PyTorchLibrary PyTorchLibrary::load_dir(const std::string& dir, const std::string& name) {
    PyTorchLibrary lib;
    lib.name = name;
    const std::vector<std::string> paths = json_files(dir);
    for (const std::string& p : paths) {
        lib.files.push_back(PyTorchMeasurements::load(p));
        const PyTorchMeasurements& f = lib.files.back();
        if (f.device != lib.files.front().device)
            throw Error(p + ": measured on " + quote_input(f.device) + ", the library's other files on " +
                        quote_input(lib.files.front().device) + ": one library holds one GPU model");
    }
    return lib;
}

std::string PyTorchLibrary::describe() const {
    if (files.empty()) return "empty";
    const Merged m = merge(*this);
    std::map<std::string, int> per_type;
    for (const auto& [key, p] : m.problems) {
        std::string t(to_string(p.dtype));
        if (p.dtype == DataType::f32) t = m.tf32_of.at(key) ? "tf32" : "f32";
        ++per_type[t];
    }
    std::string types;
    for (const auto& [t, n] : per_type) types += fmt::format("{}{} {}", types.empty() ? "" : ", ", t, n);
    const PyTorchMeasurements& f = files.front();
    return fmt::format("{} workloads, {} problems ({}), {}, PyTorch {}, cuDNN {}", files.size(), m.problems.size(),
                       types, f.device, f.torch, f.cudnn);
}

PyTorchMeasurements PyTorchLibrary::for_problems(const std::vector<ConvProblem>& problems, bool allow_tf32) const {
    if (files.empty()) throw Error("PyTorch's measured library '" + name + "' is empty");
    const Merged m = merge(*this);
    PyTorchMeasurements out;
    out.path = "PyTorch's measured library '" + name + "'";
    out.library = name;
    out.device = files.front().device;
    out.torch = files.front().torch;
    out.cudnn = files.front().cudnn;
    out.allow_tf32 = allow_tf32 ? 1 : 0;
    for (const PyTorchMeasurements& f : files) out.unverified_cold += f.unverified_cold;

    // Fits are made once per quantity, on the median of each library problem, and only when a
    // problem needs them.
    std::map<std::string, Eigen::VectorXd> fits;
    std::map<std::string, double> floors;
    auto fit = [&](const std::string& q) -> const Eigen::VectorXd& {
        if (auto it = fits.find(q); it != fits.end()) return it->second;
        const bool first = q.ends_with("|first");
        const std::string steady_q = first ? q.substr(0, q.size() - 6) + "|steady" : q;
        double floor = std::numeric_limits<double>::infinity();
        std::vector<double> y;
        std::vector<std::array<double, kSteadyFeatures>> xs;
        std::vector<std::array<double, kFirstFeatures>> xf;
        for (const auto& [key, ts] : m.times.at(q)) {
            const ConvProblem& p = m.problems.at(key);
            const double v = median_of(ts);
            y.push_back(v);
            floor = std::min(floor, v);
            if (first)
                xf.push_back(first_features(p, median_of(m.times.at(steady_q).at(key))));
            else
                xs.push_back(steady_features(p, m.tf32_of.at(key)));
        }
        floors[q] = floor;
        return fits[q] = first ? least_squares(xf, y) : least_squares(xs, y);
    };
    // The smallest time the library measured for a quantity (its fit made first).
    auto floors_of = [&](const std::string& q) {
        fit(q);
        return floors.at(q);
    };

    // Each problem's canonical text and library key, once.
    std::vector<std::pair<std::string, std::string>> named;  // (text, key)
    for (const ConvProblem& p : problems) {
        named.emplace_back(p.to_string(), library_key(p, allow_tf32));
        if (!m.problems.count(named.back().second)) out.estimated.push_back(named.back().first);
    }
    for (const auto& [sc, n_runs] : m.runs) {
        const std::string setting = sc.substr(0, sc.find('|')), cache = sc.substr(sc.find('|') + 1);
        const std::string qf = quantity(setting, cache, true), qs = quantity(setting, cache, false);
        const auto first_it = m.times.find(qf);
        if (first_it == m.times.end()) continue;  // runs that measured no problem: nothing to replay
        const auto& first = first_it->second;
        const auto& steady = m.times.at(qs);
        // The model's times of the problems no file measured: the same for every run.
        std::vector<MeasuredRun::Problem> predicted(problems.size());
        for (std::size_t i = 0; i < problems.size(); ++i) {
            if (first.count(named[i].second)) continue;
            const double s = std::max(floors_of(qs), evaluate(fit(qs), steady_features(problems[i], allow_tf32)));
            predicted[i] = {std::max({s, floors_of(qf), evaluate(fit(qf), first_features(problems[i], s))}), s};
        }
        const std::vector<double>& startups = m.startups.at(sc);
        for (std::size_t r = 0; r < n_runs; ++r) {
            MeasuredRun run;
            run.setting = setting;
            run.cache = cache;
            run.startup_ms = startups[r % startups.size()];
            for (std::size_t i = 0; i < problems.size(); ++i) {
                const auto& [text, key] = named[i];
                if (const auto it = first.find(key); it != first.end()) {
                    const std::vector<double>& st = steady.at(key);
                    run.problems[text] = {it->second[r % it->second.size()], st[r % st.size()]};
                } else {
                    run.problems[text] = predicted[i];
                }
            }
            out.runs.push_back(std::move(run));
        }
    }
    return out;
}

}  // namespace convtune::sim
