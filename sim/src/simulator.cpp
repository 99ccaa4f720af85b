#include "convtune/sim/simulator.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/core.h>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include "convtune/device_tensors.hpp"
#include "convtune/error.hpp"
#include "convtune/host_data.hpp"
#include "convtune/policy.hpp"
#include "convtune/selector.hpp"
#include "convtune/stats.hpp"
#include "convtune/sim/replay_backend.hpp"

namespace convtune::sim {

namespace {
Setting named(std::string name, std::string spec) { return {std::move(name), parse_flags(spec), std::move(spec)}; }

// The policies a recommendation names ("use the adaptive policy ...") rather than saying "turn
// benchmark on": convtune's own ways of paying for a search, which the benchmark flag alone does
// not describe. The wording is the simulator's, so the list is too.
bool recommended_by_name(Policy p) {
    static constexpr std::string_view kNamed[] = {"adaptive", "incremental"};
    return std::find(std::begin(kNamed), std::end(kNamed), to_string(p)) != std::end(kNamed);
}
}  // namespace

std::vector<Setting> standard_settings() {
    return {named("off", "benchmark=0"),
            named("on", "benchmark=1"),
            named("on+det", "benchmark=1,deterministic=1"),
            named("adaptive", "policy=adaptive,benchmark=1"),
            named("pytorch", "policy=pytorch,benchmark=1"),
            named("incremental", "policy=incremental,benchmark=1")};
}

Setting over(const Setting& s, const FlagValues& base) {
    if (s.spec.empty()) return s;
    return {s.name, parse_flags(s.spec, base), s.spec};
}

double StepTime::other(int i) const {
    if (!known) return 0;
    return i >= 0 && static_cast<std::size_t>(i) < other_ms.size() ? other_ms[static_cast<std::size_t>(i)]
                                                                   : steady_other_ms;
}

Setting parse_setting(std::string_view text) {
    for (const Setting& s : standard_settings())
        if (s.name == text) return s;
    std::string label(text), spec(text);
    if (const auto colon = text.find(':'); colon != std::string_view::npos) {
        label = std::string(text.substr(0, colon));
        spec = std::string(text.substr(colon + 1));
        if (label.empty()) throw InvalidRequest("flags", "empty label in " + quote_input(text));
    } else if (text.find('=') == std::string_view::npos) {
        std::string names;
        for (const Setting& s : standard_settings()) names += s.name + ", ";
        throw InvalidRequest("flags", "unknown setting " + quote_input(text) + " (expected " + names +
                                          "key=value,... or LABEL:key=value,...)");
    }
    try {
        return {label, parse_flags(spec), spec};
    } catch (const Error& e) {
        throw InvalidRequest("flags", e.what());
    }
}

namespace {
void accumulate(IterationStats& s, const IterationStats& i) {
    s.search_ms += i.search_ms;
    s.exec_ms += i.exec_ms;
    s.other_ms += i.other_ms;
    s.wall_ms += i.wall_ms;
    s.calls += i.calls;
    s.hits += i.hits;
    s.misses += i.misses;
    s.searches += i.searches;
    s.new_shapes += i.new_shapes;
}
}  // namespace

void ScenarioResult::add(const IterationStats& s) {
    const int idx = count_++;
    accumulate(total_, s);
    cum_ += s.total_ms();
    if (idx == 0) first_ = s.total_ms();
    max_ = std::max(max_, s.total_ms());
    // The latest record stays only until the next one when it is not on the stride.
    if (!numbers.empty() && (numbers.back() - 1) % stride_ != 0) {
        iterations.pop_back();
        numbers.pop_back();
        cumulative.pop_back();
    }
    if (idx % stride_ == 0 && iterations.size() >= kKeptIterations) {
        std::size_t kept = 0;
        for (std::size_t k = 0; k < iterations.size(); ++k)
            if ((numbers[k] - 1) % (2 * stride_) == 0) {
                iterations[kept] = iterations[k];
                numbers[kept] = numbers[k];
                cumulative[kept] = cumulative[k];
                ++kept;
            }
        iterations.resize(kept);
        numbers.resize(kept);
        cumulative.resize(kept);
        stride_ *= 2;
    }
    iterations.push_back(s);
    numbers.push_back(idx + 1);
    cumulative.push_back(cum_);
}

int ScenarioResult::count() const { return numbers.empty() ? static_cast<int>(iterations.size()) : count_; }

IterationStats ScenarioResult::sum() const {
    if (!numbers.empty()) return total_;
    IterationStats s;
    for (const IterationStats& i : iterations) accumulate(s, i);
    return s;
}

double ScenarioResult::first_ms() const {
    if (!numbers.empty()) return first_;
    return iterations.empty() ? 0 : iterations.front().total_ms();
}

double ScenarioResult::max_ms() const {
    if (!numbers.empty()) return max_;
    double m = 0;
    for (const IterationStats& i : iterations) m = std::max(m, i.total_ms());
    return m;
}

std::vector<double> ScenarioResult::cumulative_ms() const {
    if (!numbers.empty()) return cumulative;
    std::vector<double> c;
    double t = 0;
    for (const IterationStats& i : iterations) c.push_back(t += i.total_ms());
    return c;
}

int ScenarioResult::number(std::size_t k) const { return numbers.empty() ? static_cast<int>(k) + 1 : numbers[k]; }

int64_t ScenarioResult::distinct_shapes() const { return sum().new_shapes; }

namespace {

// Charges the selector's timed calls (its searches) to search and the algorithms it executes to
// execution, and tells a replay which calls are executions (ReplayBackend::set_in_sequence: the
// recording's sequence factor applies to them). An in-band policy's rotated calls (policy.hpp,
// in_band) are executions: each computes its call's output. A replay's charged support decisions
// and rankings (ReplayBackend::deciding_ms) are added to search by the runner.
struct Meter final : SelectorObserver {
    explicit Meter(const ReplayBackend* r) : replay(r) {}
    const ReplayBackend* replay;  // nullptr: a live backend
    double search_ms = 0, exec_ms = 0;
    void candidate_timed(const ConvProblem&, const Algorithm&, double ms) override { search_ms += ms; }
    void executing(const ConvProblem&, const Algorithm&) override {
        if (replay) replay->set_in_sequence(true);
    }
    void executed(const ConvProblem&, const Algorithm&, const Status&, double ms) override {
        if (replay) replay->set_in_sequence(false);
        exec_ms += ms;
    }
};

// Tensors of each problem on the backend, with reproducible data (none on a device that needs
// none); kept while they fit, so repeated shapes reuse them. On a host-memory backend they
// fit while the pool's tensors plus the problem's tensors and the largest workspace a call may
// allocate (one the memory budget allows) stay within the budget: the pool is emptied first
// otherwise, so a live simulation's peak is a single problem's, as `run`'s.
class TensorPool {
public:
    explicit TensorPool(const Backend& b)
        : b_(b), real_(b.needs_tensor_data()), host_(b.memory() == Memory::host && real_),
          budget_(host_ ? memory_budget() : std::size_t{1} << 31) {}
    ConvTensors get(const ConvProblem& p) {
        const std::string key = p.to_string();
        if (auto it = map_.find(key); it != map_.end()) return it->second->views();
        const std::size_t es = size_of(p.dtype);
        const std::size_t xb = static_cast<std::size_t>(p.x_elements()) * es,
                          wb = static_cast<std::size_t>(p.w_elements()) * es,
                          yb = static_cast<std::size_t>(p.y_elements()) * es;
        if (real_) {
            if (host_) check_memory_budget(p);  // the tensors alone fit
            const std::size_t need = xb + wb + yb + (host_ ? workspace_reserve(p, key) : 0);
            if (bytes_ + need > budget_) {
                map_.clear();
                bytes_ = 0;
            }
        }
        auto t = std::make_unique<DeviceTensors>(b_, p);
        t->require("on backend " + std::string(b_.name()));
        if (real_) bytes_ += xb + wb + yb;
        return map_.emplace(key, std::move(t)).first->second->views();
    }

private:
    // The largest workspace of an algorithm that supports p and fits in the budget with p's
    // tensors (the selector skips the others as out of memory).
    std::size_t workspace_reserve(const ConvProblem& p, const std::string& key) {
        if (auto it = reserve_.find(key); it != reserve_.end()) return it->second;
        const std::size_t tensors = peak_bytes(p);
        std::size_t ws = 0;
        for (const Algorithm* a : b_.algorithms())
            if (a->supports(p)) {
                const std::size_t need = a->workspace_size(p);
                if (need <= budget_ - tensors) ws = std::max(ws, need);
            }
        return reserve_[key] = ws;
    }
    const Backend& b_;
    const bool real_, host_;
    const std::size_t budget_;
    std::size_t bytes_ = 0;
    std::map<std::string, std::unique_ptr<DeviceTensors>> map_;
    std::map<std::string, std::size_t> reserve_;
};

// The calls of iteration i, built once per distinct variant (a trace's iterations once each), so
// that a simulation holds O(distinct problems), not O(iterations). `fresh` says whether they
// were built by this call.
class IterationSource {
public:
    explicit IterationSource(const Stream& s) : s_(s) {}
    const Iteration& get(int i, bool* fresh = nullptr) {
        if (fresh) *fresh = false;
        if (s_.spec().kind == StreamKind::trace && s_.trace_length() > 0) {
            if (trace_.empty()) trace_.resize(static_cast<std::size_t>(s_.trace_length()));
            std::optional<Iteration>& t = trace_[static_cast<std::size_t>(i % s_.trace_length())];
            if (!t) {
                t = s_.iteration(i);
                if (fresh) *fresh = true;
            }
            return *t;
        }
        const Variant v = s_.variant(i);
        const auto key = std::make_tuple(v.batch, v.scale[0], v.scale[1], v.scale[2]);
        auto it = variants_.find(key);
        if (it == variants_.end()) {
            it = variants_.emplace(key, s_.iteration(i)).first;
            if (fresh) *fresh = true;
        }
        return it->second;
    }

private:
    const Stream& s_;
    std::vector<std::optional<Iteration>> trace_;
    std::map<std::tuple<int64_t, double, double, double>, Iteration> variants_;
};

std::string seconds(double ms) {
    if (ms < 1) return fmt::format("{:.3f} ms", ms);
    if (ms < 1000) return fmt::format("{:.1f} ms", ms);
    return fmt::format("{:.2f} s", ms / 1000);
}

std::string percent(double f) { return fmt::format("{:.1f}%", 100 * f); }

// Both were run several times and their ranges of totals overlap.
bool inside_noise(const ScenarioResult& a, const ScenarioResult& b) {
    if (a.repeat_totals_ms.size() < 2 || b.repeat_totals_ms.size() < 2) return false;
    return !(a.range_hi_ms < b.range_lo_ms || b.range_hi_ms < a.range_lo_ms);
}

}  // namespace

namespace {

// The measured setting a standard setting stands for: `off` is PyTorch with benchmark=False,
// `pytorch` with benchmark=True; others are not measured.
std::string measured_setting(const Setting& s) {
    if (s.name == "off") return "bm0";
    if (s.name == "pytorch") return "bm1";
    return "";
}

// One setting replayed from PyTorch's measurements: a problem's first call costs its measured
// first call (the part above the steady time counts as search), later calls the steady time;
// iteration 1 also carries the process's first-convolution start-up. Point values are medians
// over the measured runs; the range is the lowest and highest total of the runs taken one by one.
ScenarioResult replay_measured(const Setting& s, const std::string& which, IterationSource& its,
                               const SimulationOptions& o, const StepTime& step) {
    ScenarioResult sr;
    sr.setting = s;
    sr.source = "measured";
    const std::vector<const MeasuredRun*> runs = o.measured->select(which, o.kernel_cache);
    if (runs.empty()) {
        sr.failure = "the PyTorch measurements (" + o.measured->path + ") have no " + which + " run with a " +
                     o.kernel_cache + " kernel cache";
        return sr;
    }
    // Per problem: the medians over the runs, and each run's own times (for the range).
    struct Times {
        MeasuredRun::Problem median;
        std::vector<MeasuredRun::Problem> per_run;
    };
    std::map<std::string, Times> point;
    std::vector<double> startups;
    for (const MeasuredRun* r : runs) startups.push_back(r->startup_ms);
    std::vector<double> totals(runs.size(), 0.0);
    for (int i = 0; i < o.iterations; ++i) {
        IterationStats st;
        st.other_ms = step.other(i);
        for (double& t : totals) t += st.other_ms;
        if (i == 0) {
            st.exec_ms += median(startups);
            for (std::size_t r = 0; r < runs.size(); ++r) totals[r] += runs[r]->startup_ms;
        }
        for (const Call& call : its.get(i)) {
            const std::string key = call.problem.to_string();
            auto it = point.find(key);
            const bool is_new = it == point.end();
            if (is_new) {
                Times t;
                std::vector<double> first, steady;
                for (const MeasuredRun* r : runs) {
                    const auto p = r->problems.find(key);
                    if (p == r->problems.end()) {
                        sr.failure = fmt::format("iteration {}: PyTorch's measurements ({}) lack {}", i + 1,
                                                 o.measured->path, key);
                        return sr;
                    }
                    t.per_run.push_back(p->second);
                    first.push_back(p->second.first_ms), steady.push_back(p->second.steady_ms);
                }
                t.median = {median(first), median(steady)};
                it = point.emplace(key, std::move(t)).first;
            }
            const double steady = it->second.median.steady_ms;
            if (is_new) {
                ++st.new_shapes, ++st.misses, ++st.searches;
                st.search_ms += std::max(0.0, it->second.median.first_ms - steady);
            }
            st.exec_ms += steady * call.count;
            st.calls += call.count;
            st.hits += call.count - (is_new ? 1 : 0);
            for (std::size_t r = 0; r < runs.size(); ++r) {
                const MeasuredRun::Problem& m = it->second.per_run[r];
                totals[r] += (is_new ? std::max(m.first_ms, m.steady_ms) + m.steady_ms * (call.count - 1)
                                     : m.steady_ms * call.count);
            }
        }
        st.wall_ms = st.conv_ms();
        sr.add(st);
    }
    sr.range_lo_ms = *std::min_element(totals.begin(), totals.end());
    sr.range_hi_ms = *std::max_element(totals.begin(), totals.end());
    return sr;
}

// The trace's flags, as they apply to a setting: the flags it runs the calls recorded under each
// of the trace's flag sets with.
std::vector<FlagValues> per_trace_flags(const Setting& s, const Stream& st) {
    std::vector<FlagValues> v;
    for (const FlagValues& f : st.trace_flags()) v.push_back(over(s, f).flags);
    return v;
}

// The setting as the report shows it: over the trace's (first) recorded flags.
Setting shown(const Setting& s, const Stream& st) {
    return st.trace_flags().empty() ? s : over(s, st.trace_flags().front());
}

// The run the trace's wall times were taken in: its own flags under PyTorch's policy, with the
// benchmark flag a plain timing ran with.
Setting captured_setting(const Stream& st) {
    const TraceTiming& t = st.trace_timing();
    if (t.source == TraceTiming::Source::plain && t.benchmark)
        return named("captured", *t.benchmark ? "policy=pytorch,benchmark=1" : "policy=pytorch,benchmark=0");
    return named("captured", "policy=pytorch");
}

// The measured PyTorch setting ("bm0"/"bm1") and kernel-cache state of the timed run.
std::string timed_measured_setting(const Stream& st, const FlagValues& trace_flags) {
    const TraceTiming& t = st.trace_timing();
    const bool bm = t.source == TraceTiming::Source::plain && t.benchmark ? *t.benchmark : trace_flags.benchmark;
    return bm ? "bm1" : "bm0";
}
std::string timed_kernel_cache(const Stream& st, const std::string& reported) {
    const TraceTiming& t = st.trace_timing();
    return t.source == TraceTiming::Source::plain && !t.kernel_cache.empty() ? t.kernel_cache : reported;
}

// StepTime from the trace's wall times and the per-iteration convolution time of the captured
// run, which `captured(n)` simulates over the trace's first n iterations.
StepTime step_time(const Stream& st, int iterations, const std::function<ScenarioResult(int)>& captured) {
    StepTime t;
    t.timing = st.trace_timing();
    const std::vector<std::optional<double>>& wall = st.trace_wall_ms();
    const int n = std::min({st.trace_length(), iterations, static_cast<int>(ScenarioResult::kKeptIterations)});
    for (int i = 0; i < n; ++i) t.recorded += wall[static_cast<std::size_t>(i)] ? 1 : 0;
    if (t.recorded == 0) return t;
    const ScenarioResult run = captured(n);
    if (!run.failure.empty() || run.count() != n) {
        t.recorded = 0;
        t.failure = "the captured run (the trace's own flags under PyTorch's policy) failed: " + run.failure;
        return t;
    }
    std::vector<double> after_first;
    std::optional<double> first;
    t.other_ms.assign(static_cast<std::size_t>(n), 0.0);
    for (int i = 0; i < n; ++i) {
        const std::optional<double>& w = wall[static_cast<std::size_t>(i)];
        if (!w) continue;
        double other = *w - run.iterations[static_cast<std::size_t>(i)].conv_ms();
        if (other < 0) ++t.clamped, other = 0;
        t.other_ms[static_cast<std::size_t>(i)] = other;
        if (i == 0) first = other;
        else after_first.push_back(other);
    }
    t.steady_other_ms = after_first.empty() ? *first : median(after_first);
    for (int i = 0; i < n; ++i)
        if (!wall[static_cast<std::size_t>(i)]) t.other_ms[static_cast<std::size_t>(i)] = t.steady_other_ms;
    t.known = true;
    return t;
}

// The trace's recorded flags and length, into the result.
void describe_trace(SimulationResult& res, const Stream& st) {
    res.trace_iterations = st.trace_length();
    res.trace_flag_sets = static_cast<int>(st.trace_flags().size());
    if (!st.trace_flags().empty()) res.trace_flags = st.trace_flags().front();
}

// The runs of one setting -> the run with the median total (the lower middle one for an even
// count), carrying every run's total and the range; a failed run is kept instead when one failed.
ScenarioResult median_run(std::vector<ScenarioResult> runs) {
    if (runs.size() == 1) return std::move(runs.front());
    std::vector<double> totals;
    std::vector<std::size_t> order;
    for (std::size_t k = 0; k < runs.size(); ++k) {
        if (!runs[k].failure.empty()) return std::move(runs[k]);
        totals.push_back(runs[k].sum().total_ms());
        order.push_back(k);
    }
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return totals[a] < totals[b]; });
    ScenarioResult kept = std::move(runs[order[(order.size() - 1) / 2]]);
    kept.repeat_totals_ms = totals;
    kept.range_lo_ms = *std::min_element(totals.begin(), totals.end());
    kept.range_hi_ms = *std::max_element(totals.begin(), totals.end());
    return kept;
}

}  // namespace

std::string StepTime::describe() const {
    if (!known) {
        if (!failure.empty()) return "totals are convolutions only: " + failure;
        return "totals are convolutions only (no step wall times recorded for the simulated iterations; traces from "
            "convtune.capture have them)";
    }
    const bool plain = timing.source == TraceTiming::Source::plain;
    const std::string how =
        plain ? fmt::format(" (a plain run, benchmark {}{})", timing.benchmark.value_or(false) ? "on" : "off",
                            timing.kernel_cache.empty() ? "" : ", " + timing.kernel_cache + " kernel cache")
        : timing.source == TraceTiming::Source::capture
            ? " (taken under the capture, which slows each step: an upper bound)"
            : "";
    std::string t = fmt::format(
        "totals include each step's time outside convolutions, from the {} wall time{} the trace records{} minus the "
        "{}'s simulated convolutions: {} per step after the first",
        recorded, recorded == 1 ? "" : "s", how, plain ? "timed run" : "captured run", seconds(steady_other_ms));
    if (!other_ms.empty()) t += fmt::format(" ({} in the first)", seconds(other_ms.front()));
    if (clamped > 0)
        t += fmt::format(
            "; in {} iteration{} the simulated convolutions took longer than the recorded step (a trace from another "
            "machine?): 0 there",
            clamped, clamped == 1 ? "" : "s");
    return t;
}

SimulationResult simulate_measured(const Stream& stream, const SimulationOptions& o) {
    if (!o.measured) throw Error("measured: no PyTorch measurements given");
    if (o.iterations < 1) throw Error("iterations: must be >= 1");
    IterationSource its(stream);
    SimulationResult res;
    res.engine = "measured";
    res.backend = "pytorch";
    res.environment = o.measured->device + ", PyTorch " + o.measured->torch + ", cuDNN " +
                      std::to_string(o.measured->cudnn) + ", " + o.kernel_cache + " kernel cache";
    res.iterations = o.iterations;
    describe_trace(res, stream);
    const std::vector<Setting> settings = o.settings.empty() ? standard_settings() : o.settings;
    // The captured run is PyTorch's with the trace's benchmark flag: one of the two measured.
    res.step = step_time(stream, o.iterations, [&](int n) {
        SimulationOptions first = o;
        first.iterations = n;
        first.kernel_cache = timed_kernel_cache(stream, o.kernel_cache);
        return replay_measured(shown(captured_setting(stream), stream), timed_measured_setting(stream, res.trace_flags),
                               its, first, StepTime{});
    });
    int64_t step = 0;
    for (const Setting& s : settings) {
        const std::string which = measured_setting(s);
        if (which.empty()) continue;  // only what PyTorch itself does can be measured
        res.scenarios.push_back(replay_measured(shown(s, stream), which, its, o, res.step));
        if (o.progress) o.progress(++step, 2, s.name);
    }
    if (res.scenarios.empty()) throw Error("settings: none of them is one PyTorch measured (off, pytorch)");
    analyze(res, o.min_saving);
    return res;
}

namespace {

// Runs settings on one backend, each run a fresh start (an empty tuning cache; for a replay, a
// virtual clock reset to the run's seed), charging search and execution through the meter.
class SettingRunner {
public:
    SettingRunner(Backend& b, ReplayBackend* replay, const Stream& stream, IterationSource& its)
        : b_(b), replay_(replay), stream_(stream), its_(its), meter_(replay), pool_(b) {}

    // `tick` is called after each iteration.
    ScenarioResult run(const Setting& s, int iterations, uint64_t seed, const StepTime& step,
                       const std::function<void()>& tick) {
        ScenarioResult sr;
        sr.setting = shown(s, stream_);
        const std::vector<FlagValues> per_call = per_trace_flags(s, stream_);
        if (replay_) replay_->reset(seed);
        TuningCache cache;
        Selector sel(b_, cache);
        sel.set_observer(&meter_);
        std::set<std::string> shapes;
        for (int i = 0; i < iterations && sr.failure.empty(); ++i) {
            IterationStats st;
            st.other_ms = step.other(i);
            const TuningCache::Stats c0 = cache.stats();
            for (const Call& call : its_.get(i)) {
                if (shapes.insert(call.problem.to_string()).second) ++st.new_shapes;
                const ConvTensors t = pool_.get(call.problem);
                const FlagValues& flags = call.flags >= 0 && static_cast<std::size_t>(call.flags) < per_call.size()
                                              ? per_call[static_cast<std::size_t>(call.flags)]
                                              : s.flags;
                for (int r = 0; r < call.count; ++r) {
                    const double s0 = meter_.search_ms, e0 = meter_.exec_ms, d0 = replay_ ? replay_->deciding_ms() : 0;
                    const auto w0 = std::chrono::steady_clock::now();
                    Status status;
                    try {
                        status = sel.run(call.problem, t, flags);
                    } catch (const Error& e) {
                        status = Status::failure(e.what());
                    }
                    st.wall_ms += ms_since(w0);
                    st.search_ms += meter_.search_ms - s0;
                    if (replay_)
                        st.search_ms +=
                            replay_->deciding_ms() - d0;  // support decisions and rankings (replay_backend.hpp)
                    st.exec_ms += meter_.exec_ms - e0;
                    st.searches += meter_.search_ms > s0 ? 1 : 0;
                    ++st.calls;
                    if (!status.ok()) {
                        sr.failure = fmt::format("iteration {}, layer {} ({}): {}", i + 1, call.layer,
                                                 call.problem.to_string(), status.message);
                        break;
                    }
                }
                if (!sr.failure.empty()) break;
            }
            const TuningCache::Stats c1 = cache.stats();
            st.hits = c1.hits - c0.hits;
            st.misses = c1.misses - c0.misses;
            sr.add(st);
            if (tick) tick();
        }
        if (replay_) {  // estimated problems: the total with each estimate at either end of its range
            const auto [below, above] = replay_->uncertainty_ms();
            if (below > 0 || above > 0) {
                sr.estimate_lo_ms = sr.sum().total_ms() - below;
                sr.estimate_hi_ms = sr.sum().total_ms() + above;
            }
        }
        return sr;
    }

private:
    Backend& b_;
    ReplayBackend* replay_;
    const Stream& stream_;
    IterationSource& its_;
    Meter meter_;
    TensorPool pool_;
};

// simulate() on b, live, or on `replay` (then b is the replay).
SimulationResult simulate_on(Backend& b, ReplayBackend* replay, const Stream& stream, const SimulationOptions& o) {
    if (o.iterations < 1) throw InvalidRequest("iterations", "must be >= 1");
    if (o.repeats < 0) throw InvalidRequest("repeats", "must be >= 1 (or 0: the default)");
    require_available(b);
    const std::vector<Setting> settings = o.settings.empty() ? standard_settings() : o.settings;
    const int repeats = o.repeats > 0 ? o.repeats : (replay ? 1 : 3);
    IterationSource its(stream);

    SimulationResult res;
    res.engine = replay ? "replay" : "live";
    res.backend = std::string(b.name());
    res.environment = environment_of(b).describe();
    res.iterations = o.iterations;
    res.repeats = repeats;
    describe_trace(res, stream);
    // Before anything runs: the calls the run makes (its time is proportional to them) and, for
    // a replay, whether every problem is answerable.
    int64_t calls = 0;
    std::set<std::string> seen;
    std::vector<std::string> missing;
    bool any_f32 = false, any_half = false;  // the replayed problems' data types
    for (int i = 0; i < o.iterations; ++i) {
        bool fresh = false;
        const Iteration& it = its.get(i, &fresh);
        for (const Call& c : it) {
            calls += c.count;
            if (!replay || !fresh) continue;
            any_f32 = any_f32 || c.problem.dtype == DataType::f32;
            any_half = any_half || c.problem.dtype == DataType::f16 || c.problem.dtype == DataType::bf16;
            const std::string k = c.problem.to_string();
            if (!seen.insert(k).second) continue;
            if (!replay->is_recorded(c.problem)) {
                const ReplayBackend::Estimate* e = replay->estimate(c.problem);
                if (!e || !e->record) {
                    missing.push_back(k);
                    continue;
                }
                ++res.estimated_problems;
                res.assumed_problems += e->basis != "same layer";
                res.floored_problems += e->floored;
                res.max_extrapolation = std::max(res.max_extrapolation, e->extrapolation);
            }
        }
    }
    const auto n_runs = static_cast<int64_t>(settings.size()) * repeats;
    if (calls > kMaxSimulatedCalls / n_runs)
        throw InvalidRequest(
            "iterations",
            fmt::format(
                "{} iterations of this stream make {} convolution calls per setting, {} for {} settings{}: above the "
                "limit of {} calls per simulation (about {} minutes of bookkeeping alone); simulate fewer iterations, "
                "settings or repeats",
                o.iterations, calls, calls * n_runs, settings.size(),
                repeats > 1 ? fmt::format(" x {} runs", repeats) : std::string(), kMaxSimulatedCalls,
                kMaxSimulatedCalls / kSimulatedCallsPerMinute));
    if (!missing.empty())
        throw InvalidRequest("replay",
                             "the recording has no timings for " + std::to_string(missing.size()) + " of the " +
                                 std::to_string(seen.size()) + " problems this simulation needs" +
                                 (replay->estimation() == ReplayBackend::Estimation::any
                                      ? ", and no recorded problem of their direction to estimate from"
                                  : replay->estimation() == ReplayBackend::Estimation::none
                                      ? " ({strict}: none is estimated)"
                                      : ", and no recorded problem of the same layer to scale from") +
                                 "; e.g. " + missing.front() +
                                 " (record them with `convtune record` and the same workload and stream options)");
    if (replay) res.judgeable = replay->recording().source == "measured";
    if (replay && !replay->recording().support_includes_plan_builds)
        for (const Setting& s : settings) {
            const FlagValues f = shown(s, stream).flags;
            if (f.enabled && f.benchmark && f.policy->decides_support_before_timing() &&
                (any_half || (any_f32 && f.allow_tf32)) && !(o.measured && !measured_setting(s).empty()))
                res.builds_missing.push_back(s.name);
        }

    SettingRunner runner(b, replay, stream, its);
    // The part of each step outside convolutions, from the captured run (PyTorch's own, measured,
    // when given).
    res.step = step_time(stream, o.iterations, [&](int n) {
        if (o.measured) {
            SimulationOptions first = o;
            first.iterations = n;
            first.kernel_cache = timed_kernel_cache(stream, o.kernel_cache);
            return replay_measured(shown(captured_setting(stream), stream),
                                   timed_measured_setting(stream, res.trace_flags), its, first, StepTime{});
        }
        return runner.run(captured_setting(stream), n, o.seed, StepTime{}, {});
    });

    // Run r takes the settings in order from the r-th on (off,on,...; on,...,off; ...), so no
    // setting always runs first, where a live backend's own warm-up falls.
    int64_t done = 0, total_steps = 0;
    for (const Setting& s : settings)
        total_steps += static_cast<int64_t>(o.iterations) * (o.measured && !measured_setting(s).empty() ? 1 : repeats);
    std::vector<std::vector<ScenarioResult>> runs(settings.size());
    for (int r = 0; r < repeats; ++r)
        for (std::size_t k = 0; k < settings.size(); ++k) {
            const std::size_t si = (static_cast<std::size_t>(r) + k) % settings.size();
            const Setting& s = settings[si];
            if (o.measured && !measured_setting(s).empty()) {
                if (r > 0) continue;  // PyTorch's measurements carry their own runs
                runs[si].push_back(replay_measured(shown(s, stream), measured_setting(s), its, o, res.step));
                done += o.iterations;
                if (o.progress) o.progress(done, total_steps, s.name);
                continue;
            }
            runs[si].push_back(runner.run(s, o.iterations, o.seed + static_cast<uint64_t>(r), res.step, [&] {
                if (o.progress) o.progress(++done, total_steps, s.name);
            }));
        }
    for (std::vector<ScenarioResult>& v : runs) res.scenarios.push_back(median_run(std::move(v)));
    analyze(res, o.min_saving);
    return res;
}

}  // namespace

SimulationResult simulate(Backend& b, const Stream& stream, const SimulationOptions& o) {
    return simulate_on(b, nullptr, stream, o);
}

SimulationResult simulate(ReplayBackend& replay, const Stream& stream, const SimulationOptions& o) {
    return simulate_on(replay, &replay, stream, o);
}

void analyze(SimulationResult& r, double min_saving) {
    r.comparisons.assign(r.scenarios.size(), Comparison{});
    r.baseline = -1;
    for (std::size_t i = 0; i < r.scenarios.size(); ++i)
        if (r.scenarios[i].setting.name == "off" && r.scenarios[i].failure.empty()) r.baseline = static_cast<int>(i);
    if (r.baseline < 0)
        for (std::size_t i = 0; i < r.scenarios.size() && r.baseline < 0; ++i)
            if (r.scenarios[i].failure.empty()) r.baseline = static_cast<int>(i);
    r.recommendation = {};
    if (r.baseline < 0) {
        r.recommendation.text = "no setting could run the stream";
        return;
    }
    const ScenarioResult& base = r.scenarios[static_cast<std::size_t>(r.baseline)];
    const std::vector<double> cb = base.cumulative_ms();
    const double tb = cb.empty() ? 0 : cb.back();
    for (std::size_t i = 0; i < r.scenarios.size(); ++i) {
        const ScenarioResult& s = r.scenarios[i];
        Comparison& c = r.comparisons[i];
        if (static_cast<int>(i) == r.baseline || !s.failure.empty() || s.count() != base.count() || tb <= 0) continue;
        // Both keep the same records (the same iteration numbers): a run's length decides them.
        const std::vector<double> cs = s.cumulative_ms();
        c.saving = (tb - cs.back()) / tb;
        // The first iteration from which it stays at or below the baseline (at the kept records).
        std::optional<int> be;
        for (std::size_t k = cs.size(); k-- > 0;) {
            if (cs[k] <= cb[k]) be = s.number(k);
            else break;
        }
        c.break_even = be;
        // The mean gain per iteration over the second half, from the cumulative totals at the
        // last kept record at or before the middle (exactly the middle when every one is kept).
        const int n = s.count();
        int h = 0;
        double hb = 0, hs = 0;
        for (std::size_t k = 0; k < cs.size() && s.number(k) <= n / 2; ++k) h = s.number(k), hb = cb[k], hs = cs[k];
        c.steady_gain_ms = ((cb.back() - hb) - (cs.back() - hs)) / static_cast<double>(n - h);
        if (!be && c.steady_gain_ms > 0)
            c.projected_break_even = static_cast<double>(n) + (cs.back() - cb.back()) / c.steady_gain_ms;
        c.within_noise = inside_noise(base, s);
    }
    if (!r.judgeable) {
        r.recommendation.setting = "";
        r.recommendation.text =
            "no recommendation: a replay built from a tuning database knows only the winners' medians, not what "
            "benchmark off would run";
        return;
    }
    // Choose among the settings that keep the baseline's constraints (deterministic, tf32).
    const FlagValues& bf = base.setting.flags;
    int best = r.baseline, noisy = -1;  // noisy: the largest saving inside the noise
    for (std::size_t i = 0; i < r.scenarios.size(); ++i) {
        const ScenarioResult& s = r.scenarios[i];
        if (!s.failure.empty() || s.setting.flags.deterministic != bf.deterministic ||
            s.setting.flags.allow_tf32 != bf.allow_tf32)
            continue;
        if (r.comparisons[i].within_noise) {  // never the reason for a recommendation
            if (r.comparisons[i].saving >= min_saving &&
                (noisy < 0 || r.comparisons[i].saving > r.comparisons[static_cast<std::size_t>(noisy)].saving))
                noisy = static_cast<int>(i);
            continue;
        }
        if (r.comparisons[i].saving > r.comparisons[static_cast<std::size_t>(best)].saving) best = static_cast<int>(i);
    }
    const Comparison& bc = r.comparisons[static_cast<std::size_t>(best)];
    const ScenarioResult& bs = r.scenarios[static_cast<std::size_t>(best)];
    const int n = base.count();
    // The plain "benchmark on" setting, to explain what searching costs and wins back.
    int on = -1;
    for (std::size_t i = 0; i < r.scenarios.size(); ++i)
        if (static_cast<int>(i) != r.baseline && r.scenarios[i].failure.empty() &&
            r.scenarios[i].setting.flags.benchmark && r.scenarios[i].setting.flags.deterministic == bf.deterministic &&
            (on < 0 || r.scenarios[i].setting.name == "on"))
            on = static_cast<int>(i);
    auto explain_on = [&]() -> std::string {
        if (on < 0) return "";
        const ScenarioResult& so = r.scenarios[static_cast<std::size_t>(on)];
        const IterationStats sum = so.sum(), bsum = base.sum();
        const double per_search = sum.searches ? sum.search_ms / static_cast<double>(sum.searches) : 0;
        const double won = bsum.exec_ms > 0 ? (bsum.exec_ms - sum.exec_ms) / bsum.exec_ms : 0;
        const Comparison& oc = r.comparisons[static_cast<std::size_t>(on)];
        std::string t = fmt::format("every new shape costs {} of search under '{}' ({} searches, {} in all) and ",
                                    seconds(per_search), so.setting.name, sum.searches, seconds(sum.search_ms));
        t += won >= 0 ? "only " + percent(won) + " of execution time is won back"
                      : "execution even gets " + percent(-won) + " slower";
        if (oc.break_even) t += fmt::format("; it breaks even only at iteration {}", *oc.break_even);
        else if (oc.projected_break_even)
            t +=
                fmt::format("; it would break even after about {:.0f} iterations", std::ceil(*oc.projected_break_even));
        else t += "; it never breaks even";
        return t;
    };
    Recommendation& rec = r.recommendation;
    if ((best == r.baseline || bc.saving < min_saving) && noisy >= 0) {
        const ScenarioResult& ns = r.scenarios[static_cast<std::size_t>(noisy)];
        rec.setting = base.setting.name;
        rec.saving = 0;
        rec.text = fmt::format(
            "keep benchmark {}: no difference beyond the noise over {} iterations: '{}' would save {} by the median of "
            "{} runs, but its totals ({} to {}) overlap the baseline's ({} to {})",
            base.setting.flags.benchmark ? "as it is" : "off", n, ns.setting.name,
            percent(r.comparisons[static_cast<std::size_t>(noisy)].saving), ns.repeat_totals_ms.size(),
            seconds(ns.range_lo_ms), seconds(ns.range_hi_ms), seconds(base.range_lo_ms), seconds(base.range_hi_ms));
        return;
    }
    // Over repeated runs, the ranges of totals the recommendation rests on.
    const std::string spread =
        bs.repeat_totals_ms.size() >= 2 && base.repeat_totals_ms.size() >= 2
            ? fmt::format(", beyond the noise of {} runs ({} to {}; the baseline's {} to {})",
                          bs.repeat_totals_ms.size(), seconds(bs.range_lo_ms), seconds(bs.range_hi_ms),
                          seconds(base.range_lo_ms), seconds(base.range_hi_ms))
            : std::string();
    if (best == r.baseline || bc.saving < min_saving) {
        rec.setting = base.setting.name;
        rec.saving = 0;
        rec.text = fmt::format("keep benchmark {}: over {} iterations no setting saves {} or more",
                               base.setting.flags.benchmark ? "as it is" : "off", n, percent(min_saving));
        if (best != r.baseline)
            rec.text += fmt::format(" (the best, '{}', saves {})", bs.setting.name, percent(bc.saving));
        if (const std::string e = explain_on(); !e.empty()) rec.text += "; " + e;
        return;
    }
    // With estimated problems the saving must hold with every estimate at either end of its
    // range (the same end for every setting: they share the estimates).
    if (r.estimated_problems > 0) {
        auto ends = [](const ScenarioResult& s) {
            const double t = s.sum().total_ms();
            return s.estimate_hi_ms > s.estimate_lo_ms ? std::pair{s.estimate_lo_ms, s.estimate_hi_ms}
                                                       : std::pair{t, t};
        };
        const auto [bl, bh] = ends(base);
        const auto [sl, sh] = ends(bs);
        const double worst = std::min(bl > 0 ? (bl - sl) / bl : 0.0, bh > 0 ? (bh - sh) / bh : 0.0);
        if (worst < min_saving) {
            rec.setting = base.setting.name;
            rec.saving = 0;
            rec.text = fmt::format(
                "keep benchmark {}: the best, '{}', saves {} over {} iterations, but only {} with the {} estimated "
                "problems at either end of their range: the difference is inside the estimate's uncertainty",
                base.setting.flags.benchmark ? "as it is" : "off", bs.setting.name, percent(bc.saving), n,
                percent(worst), r.estimated_problems);
            return;
        }
    }
    rec.setting = bs.setting.name;
    rec.saving = bc.saving;
    const std::string when =
        bc.break_even ? fmt::format("after iteration {}", *bc.break_even) : "by the end of the run";
    const double saved = tb * bc.saving;
    if (recommended_by_name(bs.setting.flags.policy)) {
        rec.text = fmt::format("use the {} policy ('{}': {}): saves {} ({} of {}) over {} iterations, ahead {}{}",
                               to_string(bs.setting.flags.policy), bs.setting.name, bs.setting.flags.to_string(),
                               percent(bc.saving), seconds(saved), seconds(tb), n, when, spread);
        if (on >= 0 && on != best) {
            const Comparison& oc = r.comparisons[static_cast<std::size_t>(on)];
            rec.text += fmt::format("; plain benchmark on ('{}') would {} {}",
                                    r.scenarios[static_cast<std::size_t>(on)].setting.name,
                                    oc.saving >= 0 ? "save" : "cost", percent(std::abs(oc.saving)));
        }
    } else {
        rec.text = fmt::format("turn benchmark on ('{}': {}): saves {} ({} of {}) over {} iterations, ahead {}{}",
                               bs.setting.name, bs.setting.flags.to_string(), percent(bc.saving), seconds(saved),
                               seconds(tb), n, when, spread);
    }
}

}  // namespace convtune::sim
