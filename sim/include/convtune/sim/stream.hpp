// Stream: which problems each iteration of a simulation calls — the workload at a fixed shape,
// at varying batch sizes or resolutions, a random mixture of those, or a recorded trace.
//
// Every random choice is derived from (seed, iteration index) alone, so a stream is reproducible
// and iteration i is the same whatever flag setting is being simulated.
//
// Trace files (docs/simulation.md) hold one problem per line in canonical (or benchdnn) form,
// optionally followed by `xN` (N back-to-back calls); iterations are separated by a blank line
// or a `# iteration` line; other `#` lines are comments. What python/convtune/capture.py records
// besides the problems is read too: `# flags k=v,...` (PyTorch's cuDNN flags from that line on)
// and `# iteration N wall_ms X` (the whole step's host wall time of iteration N).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/flags.hpp"
#include "convtune/sim/workload.hpp"

namespace convtune::sim {

enum class StreamKind { fixed, batch, resolution, mixed, trace };
std::string_view to_string(StreamKind k);

struct StreamSpec {
    StreamKind kind = StreamKind::fixed;
    std::string trace_path;       // kind == trace
    std::vector<int64_t> batches; // batch / mixed: the batch sizes drawn from (empty = default)
    std::vector<double> scales;   // resolution / mixed: the per-dimension scales drawn from (empty = default)
    uint64_t seed = 1;
    // "fixed", "batch", "resolution", "mixed" or "trace:FILE"; throws Error naming --stream.
    static StreamSpec parse(std::string_view text);
    std::string describe() const;
};

// The comma-separated lists of a stream's batch sizes ("1,2,4") and scales ("0.5,1,1.5").
// Errors are InvalidRequest naming `field` (batches, scales).
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& field);
std::vector<double> parse_double_list(const std::string& text, const std::string& field);
// A comma-separated list of words ("resnet50,vgg11"): no empty entry, no duplicate.
std::vector<std::string> parse_string_list(const std::string& text, const std::string& field);

// Defaults: batches = powers of two from 1 to twice the base batch; scales = 0.5 to 1.5 in
// steps of 0.125 (each spatial dim drawn independently, so aspect ratios vary too).
std::vector<int64_t> default_batches(int64_t base_batch);
std::vector<double> default_scales();

using Iteration = std::vector<Call>;

// How a trace's step wall times were taken: `# timing plain benchmark=B [kernel_cache=cold|warm]`
// (a plain run of the program: no interception, synchronised at step ends; convtune.capture's
// default) or `# timing capture` (under the capture, which slows every step: the totals then
// overstate the time outside convolutions). A trace without the line says neither.
struct TraceTiming {
    enum class Source { unknown, capture, plain };
    Source source = Source::unknown;
    std::optional<bool> benchmark;  // plain: torch.backends.cudnn.benchmark in the timed run
    std::string kernel_cache;       // plain: "cold" or "warm" where the run set the CUDA kernel cache; else empty
};

// The newest trace format this convtune reads (`# convtune-trace N`, the first line; a trace
// without it is read as version 1, a newer one is refused).
inline constexpr int kTraceVersion = 1;
// Largest step wall time a trace may record (ms): beyond it is not a step of a real run.
inline constexpr double kMaxTraceWallMs = 1e9;

// A trace file's content. Each Call's `flags` indexes `flags` (-1 before any `# flags` line).
struct TraceData {
    std::vector<Iteration> iterations;
    // The distinct flag sets the trace records (`# flags` lines: enabled, benchmark,
    // benchmark_limit, deterministic, allow_tf32 over the defaults), in first-seen order.
    std::vector<FlagValues> flags;
    // Per iteration: the step's wall time from `# iteration N wall_ms X`, when recorded.
    std::vector<std::optional<double>> wall_ms;
    TraceTiming timing;
};

// The most a trace may hold (docs/simulation.md, "Traces"): problem lines, and distinct problems
// among them. A trace past either is refused at the line that crosses it, before the simulator
// builds anything for its problems (10^6 distinct problems took 5.6 GB, 7 x 10^6 lines 3.3 GB).
inline constexpr int64_t kMaxTraceLines = 1'000'000;
inline constexpr int64_t kMaxTraceProblems = 100'000;

// Trace text -> iterations (throws ParseError naming the line).
TraceData parse_trace_data(std::string_view text);
std::vector<Iteration> parse_trace(std::string_view text);  // parse_trace_data(text).iterations
TraceData read_trace(const std::string& path);

class Stream {
public:
    // `w` is unused (may be empty) for a trace.
    Stream(StreamSpec spec, Workload w, WorkloadOptions o);

    const StreamSpec& spec() const { return spec_; }
    const Workload& workload() const { return workload_; }
    const WorkloadOptions& options() const { return options_; }
    // The variant of iteration i (fixed: the base; trace: unused).
    Variant variant(int i) const;
    // The calls of iteration i (0-based). A trace repeats from its start when i is past its end.
    Iteration iteration(int i) const;
    // Iterations in a trace (0 for the other kinds).
    int trace_length() const { return static_cast<int>(trace_.size()); }
    // What the trace recorded (empty for the other kinds): its flag sets (Call::flags indexes
    // them; the first is the baseline a setting's named flags change) and its wall times.
    const std::vector<FlagValues>& trace_flags() const { return trace_flags_; }
    const std::vector<std::optional<double>>& trace_wall_ms() const { return trace_wall_; }
    const TraceTiming& trace_timing() const { return trace_timing_; }
    // Base batch (options.batch or the first layer's).
    int64_t base_batch() const;

private:
    StreamSpec spec_;
    Workload workload_;
    WorkloadOptions options_;
    std::vector<Iteration> trace_;
    std::vector<FlagValues> trace_flags_;
    std::vector<std::optional<double>> trace_wall_;
    TraceTiming trace_timing_;
};

// The distinct problems of iterations [0, n), in first-seen order.
std::vector<ConvProblem> distinct_problems(const Stream& s, int iterations);

}  // namespace convtune::sim
