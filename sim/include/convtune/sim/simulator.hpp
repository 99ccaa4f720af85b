// Simulator: replays a stream of iterations under several flag settings through the real
// convtune::Selector, and compares them.
//
// One code path serves both engines: the selector drives the given backend — a real one (live:
// real tensors, the backend's own clock) or a ReplayBackend (replay: virtual tensors and clock;
// simulate's overload for it). A meter observes the selector (SelectorObserver): it charges the
// selector's warm-ups and timed samples to search, and every algorithm call it executes, timed
// on the same clock, to execution (an in-band policy's rotated calls included: they are the
// workload's own calls); on a replay it marks those as calls in sequence. Each setting starts as
// a fresh process: an empty tuning cache and, for a replay, a reset virtual clock.
//
// A trace stream is the user's run: the flags it records are the baseline, and each setting
// changes only the flags it names (Setting::spec). When the trace records each step's wall
// time, the part of a step that is not convolutions is carried into every setting's totals.
// A live run repeats the settings in rotated order and reports each one's spread; a difference
// inside the spread never decides the recommendation.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "convtune/backend.hpp"
#include "convtune/flags.hpp"
#include "convtune/sim/measured.hpp"
#include "convtune/sim/stream.hpp"

namespace convtune::sim {

class ReplayBackend;  // replay_backend.hpp

// A named flag setting.
struct Setting {
    std::string name;
    FlagValues flags;
    // The "key=value,..." text the setting names: on a trace that records flags, the setting is
    // those flags with these keys changed (see over()). Empty: `flags` is taken whole.
    std::string spec;
};
// off (benchmark=0), on (benchmark=1), on+det (benchmark=1,deterministic=1),
// adaptive (policy=adaptive,benchmark=1), pytorch (policy=pytorch,benchmark=1),
// incremental (policy=incremental,benchmark=1).
std::vector<Setting> standard_settings();
// A standard name, or "LABEL:key=value,..." / "key=value,..." (parse_flags over the defaults).
// Throws Error naming --flags.
Setting parse_setting(std::string_view text);
// s with its named flags (s.spec) applied over `base`; s unchanged when it names none.
Setting over(const Setting& s, const FlagValues& base);

struct IterationStats {
    double search_ms = 0;  // timing candidates (warm-ups included); a replay's recorded support decisions and rankings
    double exec_ms = 0;    // running the chosen algorithms
    double other_ms = 0;   // the step's time outside convolutions (from a trace's wall times), alike in every setting
    double wall_ms = 0;    // host wall clock of the calls (selector bookkeeping and scratch data included)
    int64_t calls = 0, hits = 0, misses = 0, searches = 0, new_shapes = 0;
    double conv_ms() const { return search_ms + exec_ms; }
    double total_ms() const { return search_ms + exec_ms + other_ms; }
};

// What a setting did, iteration by iteration. Memory does not grow with the iteration count:
// the totals are exact, and per-iteration records are kept for every iteration of a run of up to
// kKeptIterations iterations; past that, for every `stride`-th iteration (the stride doubles
// whenever the list fills) and the latest one, with the exact cumulative total
// at each one. The report's curve, CSV rows and JSON per_iteration list show the kept ones.
struct ScenarioResult {
    static constexpr std::size_t kKeptIterations = 4096;
    Setting setting;
    std::vector<IterationStats> iterations;  // the kept records
    std::vector<int> numbers;                // their 1-based iteration numbers; empty: every iteration, in order
    std::vector<double> cumulative;  // cumulative total through each kept record; empty: summed from `iterations`
    std::string failure;  // non-empty: the setting could not run the stream (why, and where)
    // "measured": replayed from PyTorch's own measurements (SimulationOptions::measured), with the
    // lowest and highest total over the measured runs; empty: simulated through the selector.
    std::string source;
    double range_lo_ms = 0, range_hi_ms = 0;
    // Repeated runs (SimulationOptions::repeats > 1): every run's total, in the order they ran;
    // this result is the run with the median total (the lower middle one for an even count), and
    // range_lo_ms / range_hi_ms are the lowest and highest total.
    std::vector<double> repeat_totals_ms;
    // A replay with estimated problems (SimulationResult::estimated_problems): the total with
    // every estimated call at the low / high end of its stated range (PerfModel); 0 otherwise.
    double estimate_lo_ms = 0, estimate_hi_ms = 0;
    void add(const IterationStats& s);       // records the next iteration
    int count() const;                       // iterations run
    IterationStats sum() const;              // over every iteration run
    double first_ms() const, max_ms() const; // per-iteration totals: the first, the largest
    std::vector<double> cumulative_ms() const;  // at each kept record
    int number(std::size_t k) const;         // 1-based iteration number of kept record k
    int64_t distinct_shapes() const;

private:
    IterationStats total_;
    int count_ = 0, stride_ = 1;
    double first_ = 0, max_ = 0, cum_ = 0;
};
// A setting against the baseline (the "off" setting when present, else the first).
struct Comparison {
    double saving = 0;                 // (T_base - T) / T_base over the simulated iterations
    std::optional<int> break_even;     // 1-based iteration from which it stays at or below the baseline
    double steady_gain_ms = 0;         // mean per-iteration gain over the second half of the run
    std::optional<double> projected_break_even;  // when not reached: where the steady gain would get it
    // Both were run several times and their ranges of totals overlap: the difference is inside
    // the measured noise, and no recommendation rests on it.
    bool within_noise = false;
};

struct Recommendation {
    std::string setting;  // the setting to use ("off" = keep benchmark off)
    std::string text;     // plain language, with the expected saving
    double saving = 0;
};

// What the totals cover. With a trace that records its steps' wall times (capture.py's
// `# iteration N wall_ms X`), each iteration's time outside convolutions is the recorded wall
// time minus the convolution time of the captured run (the trace's own flags under PyTorch's
// policy, simulated, or replayed from PyTorch's measurements when given; for a plain timing
// (`# timing plain benchmark=B`), the trace's flags with benchmark=B, in the kernel-cache state the
// timed run had where it says so), never below 0; the
// iterations without a recorded wall time (a capture's last, and repeats past the trace's end)
// take the median of those recorded after the first (the first when it is the only one).
struct StepTime {
    bool known = false;              // false: totals are convolutions only
    TraceTiming timing;              // how the trace's wall times were taken
    std::vector<double> other_ms;    // per trace iteration (known)
    double steady_other_ms = 0;      // for iterations without a recorded wall time
    int recorded = 0;                // trace iterations with a wall time
    int clamped = 0;                 // of those, where the simulated convolutions exceeded the wall time
    std::string failure;             // why not known though the trace records wall times
    double other(int i) const;       // iteration i (0-based): the non-convolution time carried
    std::string describe() const;    // one sentence for the report
};

struct SimulationResult {
    std::string engine;    // "live" or "replay"
    std::string backend;   // backend name
    std::string environment;
    int iterations = 0;
    std::vector<ScenarioResult> scenarios;
    std::vector<Comparison> comparisons;  // parallel to scenarios
    int baseline = -1;                    // index of the baseline scenario
    Recommendation recommendation;
    // Replay: problems the recording lacks, estimated (ReplayBackend::Estimate); of them, those
    // whose support was assumed from another layer and those raised to a launch floor; the
    // largest ratio of multiply-adds to the nearest recorded problem. The scenarios' estimate_lo_ms
    // and estimate_hi_ms then hold the totals with every estimate at the low / high end of its range.
    int64_t estimated_problems = 0;
    int64_t assumed_problems = 0, floored_problems = 0;
    double max_extrapolation = 1;
    bool judgeable = true;                // false for a tuning-database replay
    int repeats = 1;                      // runs of each setting (rotated order when > 1)
    // A trace's recorded flags: the baseline the settings change (the first of them when the
    // trace records several), and how many distinct sets it records (0: none; settings as given).
    FlagValues trace_flags;
    int trace_flag_sets = 0;
    int trace_iterations = 0;             // a trace's length (0: not a trace)
    StepTime step;
    // Settings whose replayed search builds a plan for every suggested configuration before
    // timing (PyTorch's: SelectionPolicy::decides_support_before_timing) on TF32 or f16/bf16
    // problems, from a recording whose support decisions do not include plan builds: their
    // search is charged too little (measured 10-15x in TF32 on the H200).
    std::vector<std::string> builds_missing;
};

// A simulation's time is proportional to its convolution calls (settings x iterations x calls
// per iteration): the selector's bookkeeping runs about kSimulatedCallsPerMinute calls a minute
// on a replay (docs/simulation.md has the measurement), and a live run adds the convolutions
// themselves. simulate() refuses more than kMaxSimulatedCalls calls up front, naming the limit.
inline constexpr int64_t kMaxSimulatedCalls = 100'000'000;
inline constexpr int64_t kSimulatedCallsPerMinute = 6'000'000;

struct SimulationOptions {
    int iterations = 100;
    std::vector<Setting> settings;       // empty = standard_settings()
    uint64_t seed = 1;                   // replay draws
    double min_saving = 0.02;            // smaller savings count as "no difference"
    // Runs of each setting, each a fresh start, the order rotated between runs (off,on,... then
    // on,...,off); 0: 3 on a live backend, 1 on a replay (a replay run r draws with seed + r).
    int repeats = 0;
    // PyTorch's own measurements (pytorch_measure.py): when set, the `off` and `pytorch` settings
    // replay what PyTorch measured in the kernel-cache state `kernel_cache` ("cold" or "warm")
    // instead of emulating it.
    const PyTorchMeasurements* measured = nullptr;
    std::string kernel_cache = "warm";
    // Called after each iteration of each setting: done, total, what.
    std::function<void(int64_t, int64_t, const std::string&)> progress;
};

// Simulates `stream` on backend `b`, live: its own tensors and clock.
SimulationResult simulate(Backend& b, const Stream& stream, const SimulationOptions& o);
// Simulates `stream` on a replay of recorded timings: virtual tensors and clock, each run a fresh
// process (ReplayBackend::reset). Throws Error before anything runs when the replay cannot answer
// problems the stream needs (naming --replay): problems it lacks when its estimation is off
// (--strict), or of a direction it never recorded. The caller names the replay: one reached
// through a plain Backend& is simulated live.
SimulationResult simulate(ReplayBackend& replay, const Stream& stream, const SimulationOptions& o);

// Only the settings PyTorch measured (`off`, `pytorch`), from o.measured, with no backend.
SimulationResult simulate_measured(const Stream& stream, const SimulationOptions& o);

// Comparisons and the recommendation, from the scenarios alone.
void analyze(SimulationResult& r, double min_saving);

}  // namespace convtune::sim
