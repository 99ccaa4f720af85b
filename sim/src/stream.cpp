#include "convtune/sim/stream.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_set>

#include "convtune/error.hpp"
#include "convtune/hash.hpp"
#include "convtune/file_io.hpp"

namespace convtune::sim {

namespace {

// The entries of a comma-separated list. A trailing comma is an empty entry (getline would drop
// it silently); so is "" itself.
std::vector<std::string> split_commas(const std::string& text, const std::string& field) {
    if (!text.empty() && text.back() == ',')
        throw InvalidRequest(field, "empty entry (trailing comma) in " + quote_input(text));
    std::vector<std::string> out;
    std::stringstream ss(text);
    for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
    return out;
}

// A number as the user must write it: digits (a sign, a space or another leading character is
// refused here, as strtoll/strtod would skip or take it; a number may start with '.').
bool plain_number(const std::string& s) {
    return !s.empty() && (std::isdigit(static_cast<unsigned char>(s.front())) || s.front() == '.');
}

}  // namespace

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& field) {
    std::vector<int64_t> v;
    for (const std::string& s : split_commas(text, field)) {
        char* end = nullptr;
        const long long x = std::strtoll(s.c_str(), &end, 10);
        if (!plain_number(s) || *end != '\0' || x < 1 || x > (1 << 20))
            throw InvalidRequest(
                field, quote_input(s) + " is not an integer in [1, 1048576] (expected a comma-separated list)");
        v.push_back(x);
    }
    if (v.empty()) throw InvalidRequest(field, "empty list");
    return v;
}

std::vector<std::string> parse_string_list(const std::string& text, const std::string& field) {
    std::vector<std::string> v;
    for (const std::string& s : split_commas(text, field)) {
        if (s.empty()) throw InvalidRequest(field, "empty entry in " + quote_input(text));
        if (std::find(v.begin(), v.end(), s) != v.end())
            throw InvalidRequest(field, quote_input(s) + " is listed twice");
        v.push_back(s);
    }
    if (v.empty()) throw InvalidRequest(field, "empty list");
    return v;
}

std::vector<double> parse_double_list(const std::string& text, const std::string& field) {
    std::vector<double> v;
    for (const std::string& s : split_commas(text, field)) {
        char* end = nullptr;
        const double x = std::strtod(s.c_str(), &end);
        if (!plain_number(s) || *end != '\0' || !(x > 0) || x > 64)
            throw InvalidRequest(field,
                                 quote_input(s) + " is not a number in (0, 64] (expected a comma-separated list)");
        v.push_back(x);
    }
    if (v.empty()) throw InvalidRequest(field, "empty list");
    return v;
}


std::string_view to_string(StreamKind k) {
    switch (k) {
        case StreamKind::fixed: return "fixed";
        case StreamKind::batch: return "batch";
        case StreamKind::resolution: return "resolution";
        case StreamKind::mixed: return "mixed";
        case StreamKind::trace: return "trace";
    }
    return "?";
}

StreamSpec StreamSpec::parse(std::string_view text) {
    StreamSpec s;
    if (text == "fixed") s.kind = StreamKind::fixed;
    else if (text == "batch") s.kind = StreamKind::batch;
    else if (text == "resolution") s.kind = StreamKind::resolution;
    else if (text == "mixed") s.kind = StreamKind::mixed;
    else if (text.rfind("trace:", 0) == 0 && text.size() > 6) {
        s.kind = StreamKind::trace;
        s.trace_path = std::string(text.substr(6));
    } else {
        throw InvalidRequest("stream", "unknown stream " + quote_input(text) +
                                           " (expected fixed, batch, resolution, mixed or trace:FILE)");
    }
    return s;
}

std::string StreamSpec::describe() const {
    std::string d(to_string(kind));
    if (kind == StreamKind::trace) return d + " " + trace_path;
    if (kind != StreamKind::fixed) d += ", seed " + std::to_string(seed);
    return d;
}

std::vector<int64_t> default_batches(int64_t base) {
    std::vector<int64_t> v;
    for (int64_t b = 1; b <= std::max<int64_t>(2, 2 * base); b *= 2) v.push_back(b);
    return v;
}

std::vector<double> default_scales() { return {0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25, 1.375, 1.5}; }

namespace {

// `# flags k=v,...`: PyTorch's cuDNN flags, as capture.py writes them, over the defaults.
FlagValues parse_trace_flags(const std::string& text, int line_no) {
    static constexpr std::string_view keys[] = {"enabled", "benchmark", "benchmark_limit", "deterministic",
                                                "allow_tf32"};
    std::stringstream ss(text);
    for (std::string item; std::getline(ss, item, ',');) {
        const std::string key = item.substr(0, item.find('='));
        if (std::find(std::begin(keys), std::end(keys), key) == std::end(keys))
            throw ParseError("trace line " + std::to_string(line_no) +
                             ": '# flags' records PyTorch's flags only (enabled, benchmark, benchmark_limit, "
                             "deterministic, allow_tf32), not '" +
                             key + "'");
    }
    try {
        return parse_flags(text);
    } catch (const Error& e) {
        throw ParseError("trace line " + std::to_string(line_no) + ": " + e.what());
    }
}

// The wall time of `# iteration [N] [wall_ms X]`, when it has one.
std::optional<double> parse_iteration_wall(const std::string& rest, int line_no) {
    std::istringstream tok(rest);
    std::string word;
    tok >> word;  // "iteration"
    std::optional<double> wall;
    while (tok >> word) {
        if (word != "wall_ms") continue;
        std::string v;
        tok >> v;
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        if (v.empty() || *end != '\0' || !std::isfinite(x) || x < 0 || x >= kMaxTraceWallMs)
            throw ParseError("trace line " + std::to_string(line_no) + ": wall_ms '" + v +
                             "' is not a number in [0, 1e9) ms");
        wall = x;
    }
    return wall;
}

// `# convtune-trace N`: N must be a version this convtune reads.
void check_trace_version(const std::string& rest, int line_no) {
    const std::string v = rest.substr(std::string_view("convtune-trace").size());
    const auto b = v.find_first_not_of(" \t");
    const std::string word = b == std::string::npos ? "" : v.substr(b);
    if (word == std::to_string(kTraceVersion)) return;
    if (!word.empty() && word.find_first_not_of("0123456789") == std::string::npos && word.size() < 10)
        throw ParseError("trace line " + std::to_string(line_no) + ": trace format version " + word +
                         " is newer than this convtune reads (" + std::to_string(kTraceVersion) + "); update convtune");
    throw ParseError("trace line " + std::to_string(line_no) +
                     ": '# convtune-trace' must be followed by the format version (" + std::to_string(kTraceVersion) +
                     ")");
}

// `# timing plain benchmark=0|1 [kernel_cache=cold|warm]` or `# timing capture`.
TraceTiming parse_trace_timing(const std::string& rest, int line_no) {
    std::istringstream tok(rest);
    std::string word;
    tok >> word;  // "timing"
    const auto bad = [&](const std::string& why) {
        return ParseError("trace line " + std::to_string(line_no) + ": '# timing': " + why);
    };
    TraceTiming t;
    if (!(tok >> word)) throw bad("expected 'plain' or 'capture'");
    if (word == "capture") t.source = TraceTiming::Source::capture;
    else if (word == "plain") t.source = TraceTiming::Source::plain;
    else throw bad("expected 'plain' or 'capture', got '" + word + "'");
    while (tok >> word) {
        if (t.source == TraceTiming::Source::plain && (word == "benchmark=0" || word == "benchmark=1"))
            t.benchmark = word.back() == '1';
        else if (t.source == TraceTiming::Source::plain && (word == "kernel_cache=cold" || word == "kernel_cache=warm"))
            t.kernel_cache = word.substr(word.find('=') + 1);
        else
            throw bad("unknown field '" + word + "' (a plain timing takes benchmark=0|1 and kernel_cache=cold|warm)");
    }
    if (t.source == TraceTiming::Source::plain && !t.benchmark) throw bad("a plain timing must say its benchmark=0|1");
    return t;
}

}  // namespace

TraceData parse_trace_data(std::string_view text) {
    TraceData out;
    Iteration cur;
    std::optional<double> wall;  // of the iteration being read
    int flags = -1;
    auto flush = [&] {
        if (!cur.empty()) {
            out.iterations.push_back(std::move(cur));
            out.wall_ms.push_back(wall);
            wall.reset();
        }
        cur.clear();
    };
    std::istringstream in{std::string(text)};
    int line_no = 0;
    int64_t problem_lines = 0;
    std::unordered_set<uint64_t> distinct;  // the problems' canonical forms, hashed
    for (std::string raw; std::getline(in, raw);) {
        ++line_no;
        const auto b = raw.find_first_not_of(" \t\r");
        if (b == std::string::npos) {
            flush();
            continue;
        }
        std::string line = raw.substr(b);
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
        if (line[0] == '#') {
            std::string rest = line.substr(1);
            rest.erase(0, rest.find_first_not_of(" \t"));
            if (rest == "convtune-trace" || rest.rfind("convtune-trace ", 0) == 0) {
                check_trace_version(rest, line_no);
            } else if (rest == "timing" || rest.rfind("timing ", 0) == 0) {
                out.timing = parse_trace_timing(rest, line_no);
            } else if (rest == "iteration" || rest.rfind("iteration ", 0) == 0) {
                flush();
                wall = parse_iteration_wall(rest, line_no);
            } else if (rest.rfind("flags ", 0) == 0) {
                const FlagValues f = parse_trace_flags(rest.substr(6), line_no);
                const auto it = std::find(out.flags.begin(), out.flags.end(), f);
                flags = static_cast<int>(it - out.flags.begin());
                if (it == out.flags.end()) out.flags.push_back(f);
            }
            continue;
        }
        std::istringstream tok(line);
        std::string problem, count;
        tok >> problem >> count;
        std::string extra;
        if (tok >> extra)
            throw ParseError("trace line " + std::to_string(line_no) + ": expected 'PROBLEM [xN]', got more");
        Call c;
        try {
            c.problem = ConvProblem::parse_any(problem);
        } catch (const Error& e) {
            throw ParseError("trace line " + std::to_string(line_no) + ": " + e.what());
        }
        if (!count.empty()) {
            if (count[0] != 'x')
                throw ParseError("trace line " + std::to_string(line_no) + ": bad count '" + count +
                                 "' (expected xN, N >= 1)");
            try {
                c.count = parse_repeat(std::string_view(count).substr(1), "bad count '" + count + "'");
            } catch (const Error& e) {
                throw ParseError("trace line " + std::to_string(line_no) + ": " + e.what());
            }
        }
        c.layer = "line" + std::to_string(line_no);
        c.flags = flags;
        // Bounds (kMaxTraceLines, kMaxTraceProblems), at the line that crosses one.
        if (++problem_lines > kMaxTraceLines)
            throw ParseError("trace line " + std::to_string(line_no) + ": more than " + std::to_string(kMaxTraceLines) +
                             " problem lines, the most a trace may hold (docs/simulation.md)");
        if (distinct.insert(fnv1a(c.problem.to_string())).second &&
            static_cast<int64_t>(distinct.size()) > kMaxTraceProblems)
            throw ParseError("trace line " + std::to_string(line_no) + ": more than " +
                             std::to_string(kMaxTraceProblems) +
                             " distinct problems, the most a trace may hold (docs/simulation.md)");
        cur.push_back(std::move(c));
    }
    flush();
    if (out.iterations.empty()) throw ParseError("trace has no problems");
    return out;
}

std::vector<Iteration> parse_trace(std::string_view text) { return parse_trace_data(text).iterations; }

TraceData read_trace(const std::string& path) {
    std::string text;
    try {
        text = read_file_bounded(path, kMaxTraceBytes, "trace file");
    } catch (const Error& e) {
        throw InvalidRequest("stream", e.what());
    }
    try {
        return parse_trace_data(text);
    } catch (const ParseError& e) {
        throw ParseError(path + ": " + e.what());
    }
}

namespace {

constexpr auto mix = splitmix64;
uint64_t draw(uint64_t seed, int i, int slot) {
    return mix(mix(seed) ^ mix(static_cast<uint64_t>(i) * 8 + static_cast<uint64_t>(slot)));
}

}  // namespace

Stream::Stream(StreamSpec spec, Workload w, WorkloadOptions o)
    : spec_(std::move(spec)), workload_(std::move(w)), options_(o) {
    if (spec_.kind == StreamKind::trace) {
        TraceData t = read_trace(spec_.trace_path);
        trace_ = std::move(t.iterations);
        trace_flags_ = std::move(t.flags);
        trace_wall_ = std::move(t.wall_ms);
        trace_timing_ = t.timing;
        return;
    }
    if (workload_.layers.empty())
        throw InvalidRequest("workload", "a " + std::string(to_string(spec_.kind)) + " stream needs a workload");
    if (spec_.batches.empty()) spec_.batches = default_batches(base_batch());
    if (spec_.scales.empty()) spec_.scales = default_scales();
    for (int64_t b : spec_.batches)
        if (b < 1) throw InvalidRequest("batches", "batch sizes must be >= 1 (got " + std::to_string(b) + ")");
    for (double s : spec_.scales)
        if (!(s > 0) || s > 64)
            throw InvalidRequest("scales", "scales must be in (0, 64] (got " + std::to_string(s) + ")");
    // Every variant must give valid problems; instantiate the extremes now so bad input fails early.
    for (double s : {*std::min_element(spec_.scales.begin(), spec_.scales.end()),
                     *std::max_element(spec_.scales.begin(), spec_.scales.end())})
        instantiate(workload_, options_, Variant{0, {s, s, s}});
}

int64_t Stream::base_batch() const {
    if (options_.batch > 0) return options_.batch;
    return workload_.layers.empty() ? 1 : workload_.layers.front().problem.n;
}

Variant Stream::variant(int i) const {
    Variant v;
    auto batch_variant = [&](int slot) {
        v.batch = spec_.batches[draw(spec_.seed, i, slot) % spec_.batches.size()];
    };
    auto resolution_variant = [&](int slot) {
        for (int d = 0; d < 3; ++d)
            v.scale[static_cast<std::size_t>(d)] = spec_.scales[draw(spec_.seed, i, slot + d) % spec_.scales.size()];
    };
    switch (spec_.kind) {
        case StreamKind::fixed:
        case StreamKind::trace: break;
        case StreamKind::batch: batch_variant(1); break;
        case StreamKind::resolution: resolution_variant(1); break;
        case StreamKind::mixed: {
            // Half the iterations at the base shape, a quarter at another batch, a quarter at
            // another resolution: a mostly steady job with occasional odd shapes.
            const uint64_t r = draw(spec_.seed, i, 0) % 4;
            if (r == 2) batch_variant(1);
            else if (r == 3) resolution_variant(2);
            break;
        }
    }
    return v;
}

Iteration Stream::iteration(int i) const {
    if (spec_.kind == StreamKind::trace) return trace_[static_cast<std::size_t>(i) % trace_.size()];
    return instantiate(workload_, options_, variant(i));
}

std::vector<ConvProblem> distinct_problems(const Stream& s, int iterations) {
    std::vector<ConvProblem> out;
    std::map<std::string, bool> seen;
    for (int i = 0; i < iterations; ++i)
        for (const Call& c : s.iteration(i))
            if (seen.emplace(c.problem.to_string(), true).second) out.push_back(c.problem);
    return out;
}

}  // namespace convtune::sim
