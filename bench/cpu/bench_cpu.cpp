// convtune_bench_cpu — every algorithm of the host backends (convtune's own CPU algorithms and
// every oneDNN implementation) on the ResNet-50 v1.5 layers, against the machine's FMA peak
// measured in the same run. See docs/benchmarks.md for what the numbers mean and the last results.
//
// For each thread count, direction, layout and layer: the inputs are made once (uniform in
// [-1, 1), f32) and uploaded through each backend's memory API; every algorithm that supports
// the problem gets its workspace (workspace_size()), one untimed warm-up run (oneDNN builds and
// JIT-compiles its primitive there), then timed runs of run() on its backend's clock. The timed
// runs of one layer are interleaved round-robin, so that a slow phase of a shared machine hits all
// of them alike; each algorithm runs until it has --min-time seconds of samples (at least
// --min-samples, at most --max-samples) and reports the median.
//
// The FMA peak (peak.hpp) takes part in the same rounds: each of the first 10 rounds of every
// layer also times the register-only FMA loop once. The peak of a thread count is the median of
// all its samples, so it is measured under the same load as the convolutions it is compared
// with; the highest sample is reported as well. The process CPU time of the timed runs, divided
// by wall time x threads (the "CPU share"), says how much of the time other processes held the
// cores.
//
// Not a test: it never fails on slow results. Outputs are compared with the first algorithm's
// output of the same layer (a gross-error guard, flagged "!" in the tables); accuracy is the
// tests' job.
#include <fmt/core.h>
#include <fmt/format.h>
#include <omp.h>
#include <sys/utsname.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "convtune/backend.hpp"
#include "convtune/device_tensors.hpp"
#include "convtune/error.hpp"
#include "convtune/host_data.hpp"
#include "convtune/problem.hpp"
#include "convtune/registry.hpp"
#include "convtune/stats.hpp"
#include "peak.hpp"

using namespace convtune;
using nlohmann::json;

namespace {

// ------------------------------------------------------------------------------------------
// Options and inputs

struct Options {
    std::vector<int> threads{1, 2};
    int64_t batch = 8;
    std::string dir = "fwd";
    std::vector<std::string> layers, algos, layouts{"nchw", "nhwc"};
    std::string shapes = std::string(CONVTUNE_SHAPES_DIR) + "/shapes_resnet_50_v1_5";
    double min_time = 0.5;
    int min_samples = 5, max_samples = 50;
    bool include_reference = false;
    double reference_max_gflop = 0.05;
    double peak_seconds = 0.05;
    std::string csv, json, markdown;
};

struct Layer {
    std::string name;  // without the "resnet_50_v1_5:" prefix
    int repeat = 1;
    ConvProblem problem;  // batch applied; direction/layout set per run
};

std::string short_name(const std::string& name) {
    const auto c = name.find(':');
    return c == std::string::npos ? name : name.substr(c + 1);
}

std::string kernel_text(const ConvProblem& p) {
    std::string s;
    for (int i = 0; i < p.spatial_dims; ++i)
        s += (i ? "x" : "") + std::to_string(p.kernel[static_cast<std::size_t>(i)]);
    return s;
}

bool is_3x3(const ConvProblem& p) { return p.spatial_dims == 2 && p.kernel[0] == 3 && p.kernel[1] == 3; }
bool unit_stride(const ConvProblem& p) {
    for (int i = 0; i < p.spatial_dims; ++i)
        if (p.stride[static_cast<std::size_t>(i)] != 1 || p.dilation[static_cast<std::size_t>(i)] != 1) return false;
    return true;
}

// "3x3 64->64 56x56 s1"
std::string shape_text(const ConvProblem& p) {
    std::string in, out;
    for (int i = 0; i < p.spatial_dims; ++i) {
        in += (i ? "x" : "") + std::to_string(p.in[static_cast<std::size_t>(i)]);
        out += (i ? "x" : "") + std::to_string(p.out(i));
    }
    std::string s = fmt::format("{} {}->{} {}", kernel_text(p), p.c, p.k, in);
    if (out != in) s += "->" + out;
    s += fmt::format(" s{}", p.stride[0]);
    if (p.groups > 1) s += fmt::format(" g{}", p.groups);
    return s;
}

bool layer_selected(const Layer& l, const std::vector<std::string>& sel) {
    if (sel.empty()) return true;
    for (const std::string& s : sel) {
        if (s == kernel_text(l.problem)) return true;  // "3x3", "1x1", "7x7"
        if (l.name.find(s) != std::string::npos) return true;
    }
    return false;
}

std::vector<Layer> load_layers(const Options& o) {
    std::vector<Layer> r;
    std::set<std::string> seen;
    for (const ShapeLine& s : read_shape_file(o.shapes)) {
        Layer l{short_name(s.name), s.repeat, s.problem};
        l.problem.n = o.batch;
        if (!seen.insert(l.problem.to_string()).second) continue;
        if (layer_selected(l, o.layers)) r.push_back(l);
    }
    return r;
}

// The direction an algorithm id is restricted to ("onednn.bwd_data.jit_avx2"), if any.
std::optional<Direction> id_direction(std::string_view id) {
    for (Direction d : {Direction::fwd, Direction::bwd_data, Direction::bwd_filter}) {
        const std::string mid = "." + std::string(to_string(d)) + ".";
        const auto at = id.find(mid);
        if (at != std::string_view::npos && id.find('.') == at) return d;
    }
    return std::nullopt;
}

struct Candidate {
    const Algorithm* algo;
    std::string backend;
};

std::vector<Candidate> host_algorithms(const Options& o, std::vector<std::string>* unavailable) {
    std::vector<Candidate> r;
    for (Backend* b : backends()) {
        if (b->name() != "cpu" && b->name() != "onednn") continue;
        if (const Availability av = b->availability(); !av.ok) {
            unavailable->push_back(std::string(b->name()) + ": " + av.reason);
            continue;
        }
        for (const Algorithm* a : b->algorithms()) {
            bool keep = o.algos.empty();
            for (const std::string& s : o.algos) keep = keep || a->id().find(s) != std::string_view::npos;
            if (keep) r.push_back({a, std::string(b->name())});
        }
    }
    return r;
}

// ------------------------------------------------------------------------------------------
// Results

enum class Kind { ok, not_applicable, skipped, failed };

struct Result {
    int threads = 1;
    Direction dir = Direction::fwd;
    Layout layout = Layout::nchw;
    std::string layer, shape, algo, backend;
    ConvProblem problem;
    int repeat = 1;
    Kind kind = Kind::ok;
    std::string reason;
    std::vector<double> samples;
    double ms = 0, min_ms = 0, max_ms = 0, gflops = 0;
    double cpu_s = 0, wall_s = 0;  // process CPU time and wall time of the timed runs
    double deviation = -1;  // max|out - first algorithm's out| / max|first's out|
    std::string deviation_from;
    std::size_t workspace = 0;
};

constexpr double kDeviationFlag = 1e-2;

std::string kind_name(Kind k) {
    switch (k) {
        case Kind::ok: return "ok";
        case Kind::not_applicable: return "n/a";
        case Kind::skipped: return "skipped";
        case Kind::failed: return "failed";
    }
    return "?";
}

struct Config {
    int threads;
    Direction dir;
    Layout layout;
    bool operator<(const Config& o) const {
        return std::tie(threads, dir, layout) < std::tie(o.threads, o.dir, o.layout);
    }
};

struct PeakRecord {
    long long iterations = 0;  // of one sample
    std::vector<double> samples;
    double value() const { return median(); }  // what ratios use
    double best() const { return samples.empty() ? 0 : *std::max_element(samples.begin(), samples.end()); }
    double median() const { return convtune::median(samples); }
};

// ------------------------------------------------------------------------------------------
// Machine description

std::string read_first_line_matching(const char* file, const char* prefix) {
    std::ifstream f(file);
    for (std::string line; std::getline(f, line);)
        if (line.rfind(prefix, 0) == 0) return line;
    return {};
}

std::string cpu_model() {
    std::string l = read_first_line_matching("/proc/cpuinfo", "model name");
    const auto c = l.find(':');
    return c == std::string::npos ? "unknown CPU" : l.substr(c + 2);
}

std::string cpu_simd_flags() {
    std::string l = read_first_line_matching("/proc/cpuinfo", "flags");
    std::istringstream in(l);
    std::string r;
    for (std::string f; in >> f;)
        if (f == "avx2" || f == "fma" || f.rfind("avx512", 0) == 0 || f.rfind("amx", 0) == 0)
            r += (r.empty() ? "" : " ") + f;
    return r;
}

// Aggregate CPU time counters of /proc/stat: {busy+idle total, steal}.
std::pair<double, double> cpu_ticks() {
    std::istringstream in(read_first_line_matching("/proc/stat", "cpu "));
    std::string name;
    in >> name;
    double v[10] = {0}, total = 0;
    for (int i = 0; i < 10 && (in >> v[i]); ++i) total += v[i];
    return {total - v[8] - v[9], v[7]};  // guest times are already counted in user time
}

double load_average() {
    std::ifstream f("/proc/loadavg");
    double l = -1;
    f >> l;
    return l;
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double process_cpu_s() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// One timed run on the algorithm's backend clock, with the process CPU time and wall time it took
// (CPU time / (wall time * threads) well below 1 means other processes took our cores).
Status timed_run(const Algorithm& a, const ConvProblem& p, const ConvTensors& t, Workspace ws, Result& r) {
    Status st;
    const double c0 = process_cpu_s(), w0 = now_s();
    const double ms = a.backend().time_ms([&] { st = a.run(p, t, ws); });
    r.cpu_s += process_cpu_s() - c0;
    r.wall_s += now_s() - w0;
    if (st.ok()) r.samples.push_back(ms);
    return st;
}

// ------------------------------------------------------------------------------------------
// Measuring one layer

struct Entry {
    const Candidate* cand;
    Result* result;
    DeviceTensors* tensors;  // its backend's copy of the layer's tensors
    DeviceBuffer ws;
    Workspace workspace;
    int target = 0;
    bool done = false;
};

void measure_layer(const Options& o, const Config& cfg, const Layer& layer, const std::vector<Candidate>& cands,
                   std::vector<Result>& out, PeakRecord& peak) {
    ConvProblem p = layer.problem;
    p.direction = cfg.dir;
    p.layout = cfg.layout;
    HostTensors host = make_host_tensors(p, 1);
    std::map<std::string, std::unique_ptr<DeviceTensors>> per_backend;
    const std::size_t first = out.size();
    std::vector<Entry> entries;
    std::vector<float> reference_out;
    std::string reference_id;

    for (const Candidate& c : cands) {
        if (auto d = id_direction(c.algo->id()); d && *d != cfg.dir) continue;  // another direction's id
        Result r;
        r.threads = cfg.threads;
        r.dir = cfg.dir;
        r.layout = cfg.layout;
        r.layer = layer.name;
        r.shape = shape_text(p);
        r.algo = std::string(c.algo->id());
        r.backend = c.backend;
        r.problem = p;
        r.repeat = layer.repeat;
        out.push_back(r);
    }
    // Set up, warm up and check each algorithm, in list order.
    std::size_t ri = first;
    for (const Candidate& c : cands) {
        if (auto d = id_direction(c.algo->id()); d && *d != cfg.dir) continue;
        Result& r = out[ri++];
        const Algorithm& a = *c.algo;
        if (const Support s = a.supports(p); !s) {
            r.kind = Kind::not_applicable;
            r.reason = s.reason;
            continue;
        }
        if (a.notes().has(Note::reference) && !o.include_reference && p.flops() > o.reference_max_gflop * 1e9) {
            r.kind = Kind::skipped;
            r.reason = fmt::format(
                "naive reference, {:.2f} GFLOP above --reference-max-gflop {:.2f} (use --include-reference)",
                p.flops() * 1e-9, o.reference_max_gflop);
            continue;
        }
        const Backend& b = a.backend();
        auto& tp = per_backend[std::string(b.name())];
        if (!tp) {
            tp = std::make_unique<DeviceTensors>(b, p, host.views());
            if (!tp->ok()) {
                r.kind = Kind::failed;
                r.reason = "cannot allocate the tensors";
                tp.reset();
                continue;
            }
        }
        Entry e{&c, &r, tp.get(), {}, {}, 0, false};
        r.workspace = a.workspace_size(p);  // oneDNN builds its primitive here
        if (r.workspace) {
            e.ws = b.allocate(r.workspace);
            if (!e.ws) {
                r.kind = Kind::failed;
                r.reason = fmt::format("cannot allocate a {}-byte workspace", r.workspace);
                continue;
            }
        }
        e.workspace = {e.ws.data(), r.workspace};
        // The output starts as NaN for every algorithm, so a stale result cannot pass the guard.
        const std::vector<std::byte>& out_host = output_of(host);
        void* out_dev = tp->output().data;
        b.upload(out_dev, out_host.data(), out_host.size());
        Status st = a.run(p, tp->views(), e.workspace);  // warm-up
        b.synchronize();
        if (!st.ok()) {
            r.kind = Kind::failed;
            r.reason = std::string(st.code_name()) + ": " + st.message;
            continue;
        }
        std::vector<float> got(out_host.size() / sizeof(float));
        b.download(got.data(), out_dev, out_host.size());
        if (reference_out.empty()) {
            reference_out = got;
            reference_id = r.algo;
        } else {
            double diff = 0, mag = 0;
            for (std::size_t i = 0; i < got.size(); ++i) {
                const double d = std::fabs(static_cast<double>(got[i]) - reference_out[i]);
                diff = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(diff, d);
                mag = std::max(mag, std::fabs(static_cast<double>(reference_out[i])));
            }
            r.deviation = mag > 0 ? diff / mag : diff;
            r.deviation_from = reference_id;
        }
        // First timed sample: sets how many samples min-time needs.
        st = timed_run(a, p, tp->views(), e.workspace, r);
        if (!st.ok()) {
            r.kind = Kind::failed;
            r.reason = std::string(st.code_name()) + ": " + st.message;
            continue;
        }
        const double ms = r.samples.back();
        e.target = std::clamp(static_cast<int>(std::ceil(o.min_time * 1e3 / std::max(ms, 1e-3))), o.min_samples,
                              o.max_samples);
        entries.push_back(std::move(e));
    }
    // Interleaved timed runs, with one FMA-peak sample in each of the first rounds.
    constexpr int kPeakRounds = 10;
    for (int round = 0, more = 1; more; ++round) {
        more = 0;
        if (round < kPeakRounds) peak.samples.push_back(bench::peak_gflops(cfg.threads, peak.iterations));
        for (Entry& e : entries) {
            if (e.done || static_cast<int>(e.result->samples.size()) >= e.target) continue;
            const Status st = timed_run(*e.cand->algo, p, e.tensors->views(), e.workspace, *e.result);
            if (!st.ok()) {
                e.result->kind = Kind::failed;
                e.result->reason = std::string(st.code_name()) + ": " + st.message;
                e.done = true;
                continue;
            }
            more = more || static_cast<int>(e.result->samples.size()) < e.target;
        }
    }
    for (Entry& e : entries) {
        Result& r = *e.result;
        if (r.kind != Kind::ok || r.samples.empty()) continue;
        r.ms = median(r.samples);
        r.min_ms = *std::min_element(r.samples.begin(), r.samples.end());
        r.max_ms = *std::max_element(r.samples.begin(), r.samples.end());
        r.gflops = p.flops() / (r.ms * 1e6);
    }
}

// ------------------------------------------------------------------------------------------
// Reporting

std::string layout_text(Layout l) { return l == Layout::nchw ? "nchw" : "nhwc"; }

double pct(const Result& r, const std::map<int, PeakRecord>& peaks) {
    return 100.0 * r.gflops / peaks.at(r.threads).value();
}
// Against the highest peak sample instead: a lower bound on the efficiency an unloaded machine would show.
double pct_high(const Result& r, const std::map<int, PeakRecord>& peaks) {
    return 100.0 * r.gflops / peaks.at(r.threads).best();
}

std::string cell(const Result& r, const std::map<int, PeakRecord>& peaks) {
    switch (r.kind) {
        case Kind::ok:
            return fmt::format("{:.2f} ms {:.0f}%{}", r.ms, pct(r, peaks), r.deviation > kDeviationFlag ? " !" : "");
        case Kind::not_applicable: return "n/a";
        case Kind::skipped: return "skip";
        case Kind::failed: return "FAIL";
    }
    return "?";
}

double geomean(const std::vector<double>& v) {
    if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
    double s = 0;
    for (double x : v) s += std::log(x);
    return std::exp(s / static_cast<double>(v.size()));
}

const Result* find(const std::vector<Result>& rs, const Config& c, const std::string& layer, const std::string& algo) {
    for (const Result& r : rs)
        if (r.threads == c.threads && r.dir == c.dir && r.layout == c.layout && r.layer == layer && r.algo == algo)
            return &r;
    return nullptr;
}

// One target comparison over a set of layers: per layer ratio = time(reference) / time(subject).
struct Comparison {
    std::string title, subject, reference, layers_desc;
    double target = 0;  // ratio needed
    std::vector<std::pair<std::string, double>> per_layer;
    std::string unavailable;  // why no ratio exists at all
};

json comparison_json(const Comparison& c) {
    json j{{"title", c.title},
           {"subject", c.subject},
           {"reference", c.reference},
           {"layers", c.layers_desc},
           {"target", c.target}};
    if (!c.unavailable.empty()) j["unavailable"] = c.unavailable;
    json per = json::object();
    std::vector<double> v;
    for (auto& [l, x] : c.per_layer) {
        per[l] = x;
        v.push_back(x);
    }
    j["per_layer"] = per;
    if (!v.empty()) {
        j["geomean"] = geomean(v);
        j["min"] = *std::min_element(v.begin(), v.end());
        j["layers_meeting_target"] = std::count_if(v.begin(), v.end(), [&](double x) { return x >= c.target; });
    }
    return j;
}

std::string comparison_text(const Comparison& c, bool markdown) {
    std::string s = markdown ? fmt::format("- **{}** (target >= {:.2f}x): ", c.title, c.target)
                             : fmt::format("  {} (target >= {:.2f}x): ", c.title, c.target);
    if (!c.unavailable.empty()) return s + c.unavailable + "\n";
    if (c.per_layer.empty()) return s + "no layer of this run has both measurements\n";
    std::vector<double> v;
    std::string per;
    for (auto& [l, x] : c.per_layer) {
        v.push_back(x);
        per += fmt::format("{}{} {:.2f}x", per.empty() ? "" : ", ", l, x);
    }
    const auto meet = std::count_if(v.begin(), v.end(), [&](double x) { return x >= c.target; });
    const double g = geomean(v), mn = *std::min_element(v.begin(), v.end());
    const char* verdict = meet == static_cast<long>(v.size()) ? "MET on every layer"
                          : meet == 0                         ? "MISSED on every layer"
                                                              : "MISSED on some layers";
    s += fmt::format("geomean {:.2f}x, worst {:.2f}x, {}/{} layers >= target: {} ({})\n", g, mn, meet, v.size(),
                     verdict, per);
    return s;
}

// The cpu backend's cost model (its heuristic order, what benchmark off runs) against the
// measurement: per layer, its first choice and the fastest own algorithm measured.
struct CostModelPick {
    std::string layer, pick, best;
    double pick_ms = 0, best_ms = 0;
};

struct Summary {
    Config cfg;
    std::vector<Comparison> comparisons;
    // best own algorithm per 3x3 layer: (layer, algo, % of peak, % of the highest peak sample)
    std::vector<std::tuple<std::string, std::string, double, double>> best_own;
    std::vector<CostModelPick> cost_model;  // layers where the model's pick and the best were both measured
};

std::string cost_model_text(const Summary& s, bool markdown) {
    if (s.cost_model.empty()) return "";
    int right = 0;
    double pick = 0, best = 0;
    std::vector<double> ratios;
    std::string wrong;
    for (const CostModelPick& c : s.cost_model) {
        right += c.pick == c.best;
        pick += c.pick_ms;
        best += c.best_ms;
        ratios.push_back(c.pick_ms / c.best_ms);
        if (c.pick != c.best)
            wrong += fmt::format("{}{} {} {:.2f}x", wrong.empty() ? "" : ", ", c.layer, c.pick.substr(4),
                                 c.pick_ms / c.best_ms);
    }
    return fmt::format(
        "{}cost model (benchmark off) picks the fastest own algorithm on {}/{} layers; its picks take {:.2f}x the "
        "fastest in total (worst {:.2f}x){}\n",
        markdown ? "- **" : "  ", right, s.cost_model.size(), pick / best,
        *std::max_element(ratios.begin(), ratios.end()),
        wrong.empty() ? std::string(markdown ? "**" : "") : fmt::format("{}: {}", markdown ? "**" : "", wrong));
}

std::vector<Summary> summarize(const std::vector<Result>& rs, const std::vector<Config>& cfgs,
                               const std::map<int, PeakRecord>& peaks, const std::vector<Candidate>& cands) {
    std::vector<Summary> out;
    for (const Config& cfg : cfgs) {
        Summary s{cfg, {}, {}, {}};
        const std::string d(to_string(cfg.dir));
        std::vector<std::string> layers;
        for (const Result& r : rs)
            if (r.threads == cfg.threads && r.dir == cfg.dir && r.layout == cfg.layout &&
                std::find(layers.begin(), layers.end(), r.layer) == layers.end())
                layers.push_back(r.layer);
        auto problem_of = [&](const std::string& layer) -> const ConvProblem* {
            for (const Result& r : rs)
                if (r.threads == cfg.threads && r.dir == cfg.dir && r.layout == cfg.layout && r.layer == layer)
                    return &r.problem;
            return nullptr;
        };
        auto ratio = [&](const std::string& layer, const std::string& subject,
                         const std::string& ref) -> std::optional<double> {
            const Result* a = find(rs, cfg, layer, subject);
            const Result* b = find(rs, cfg, layer, ref);
            if (!a || !b || a->kind != Kind::ok || b->kind != Kind::ok) return std::nullopt;
            return b->ms / a->ms;
        };
        // oneDNN Winograd: any listed implementation with "wino" in its id for this direction.
        std::vector<std::string> wino_ids;
        bool onednn_present = false;
        for (const Candidate& c : cands) {
            if (c.backend != "onednn") continue;
            onednn_present = true;
            const std::string id(c.algo->id());
            if (id.rfind("onednn." + d + ".", 0) == 0 && id.find("wino") != std::string::npos) wino_ids.push_back(id);
        }
        const bool wino_dir = cfg.dir != Direction::bwd_filter;
        std::vector<std::string> wino_layers;
        for (const std::string& l : layers)
            if (const ConvProblem* p = problem_of(l); p && is_3x3(*p) && unit_stride(*p)) wino_layers.push_back(l);

        if (wino_dir) {
            Comparison c{"own Winograd F(4x4,3x3) vs oneDNN Winograd",
                         "cpu.winograd_f4x3",
                         wino_ids.empty() ? "onednn Winograd" : wino_ids[0],
                         "3x3 stride-1 layers",
                         0.8,
                         {},
                         {}};
            if (!onednn_present) {
                c.unavailable = "oneDNN backend not in this run";
            } else if (wino_ids.empty()) {
                c.unavailable = "not available on this CPU: oneDNN lists no Winograd implementation for " + d +
                                " here (oneDNN 2.6 has Winograd only for AVX-512 cores)";
            } else {
                for (const std::string& l : wino_layers)
                    for (const std::string& w : wino_ids)
                        if (auto x = ratio(l, "cpu.winograd_f4x3", w)) {
                            c.per_layer.emplace_back(l, *x);
                            break;
                        }
            }
            s.comparisons.push_back(c);
            Comparison g{"own Winograd F(4x4,3x3) vs own im2col+GEMM",
                         "cpu.winograd_f4x3",
                         "cpu.im2col_gemm",
                         "3x3 stride-1 layers",
                         1.5,
                         {},
                         {}};
            for (const std::string& l : wino_layers)
                if (auto x = ratio(l, "cpu.winograd_f4x3", "cpu.im2col_gemm")) g.per_layer.emplace_back(l, *x);
            s.comparisons.push_back(g);
        }
        if (cfg.layout == Layout::nchw) {
            const std::string gemm_id = "onednn." + d + ".x64_gemm_jit";
            Comparison g{"own im2col+GEMM vs oneDNN gemm (" + gemm_id + "), plain NCHW",
                         "cpu.im2col_gemm",
                         gemm_id,
                         "all layers",
                         0.8,
                         {},
                         {}};
            bool listed = false;
            for (const Candidate& c : cands) listed = listed || c.algo->id() == gemm_id;
            if (!listed)
                g.unavailable =
                    onednn_present ? gemm_id + " is not listed on this machine" : "oneDNN backend not in this run";
            for (const std::string& l : layers)
                if (auto x = ratio(l, "cpu.im2col_gemm", gemm_id)) g.per_layer.emplace_back(l, *x);
            s.comparisons.push_back(g);
        }
        for (const std::string& l : layers) {
            const ConvProblem* p = problem_of(l);
            if (!p || !is_3x3(*p)) continue;
            const Result* best = nullptr;
            for (const Result& r : rs)
                if (r.threads == cfg.threads && r.dir == cfg.dir && r.layout == cfg.layout && r.layer == l &&
                    r.backend == "cpu" && r.kind == Kind::ok && (!best || r.ms < best->ms))
                    best = &r;
            if (best) s.best_own.emplace_back(l, best->algo, pct(*best, peaks), pct_high(*best, peaks));
        }
        // The cost model: the first algorithm of the cpu backend's heuristic order, if measured,
        // against the fastest own algorithm measured (naive reference excluded: rarely timed).
        {
            const Backend& cpu = find_backend("cpu");
            for (const std::string& l : layers) {
                const ConvProblem* p = problem_of(l);
                if (!p) continue;
                const auto order = cpu.heuristic_order(*p);
                if (order.empty()) continue;
                const Result* pick = find(rs, cfg, l, std::string(order.front()->id()));
                const Result* best = nullptr;
                for (const Result& r : rs)
                    if (r.threads == cfg.threads && r.dir == cfg.dir && r.layout == cfg.layout && r.layer == l &&
                        r.backend == "cpu" && r.algo != "cpu.direct" && r.kind == Kind::ok &&
                        (!best || r.ms < best->ms))
                        best = &r;
                if (pick && best && pick->kind == Kind::ok)
                    s.cost_model.push_back({l, pick->algo, best->algo, pick->ms, best->ms});
            }
        }
        out.push_back(s);
    }
    return out;
}

std::string best_own_text(const Summary& s, bool markdown) {
    if (s.best_own.empty()) return "";
    std::string r = markdown ? "- **best own algorithm per 3x3 layer, % of measured peak** (target >= 50%): "
                             : "  best own algorithm per 3x3 layer, % of measured peak (target >= 50%): ";
    int met = 0, met_high = 0;
    std::string per;
    for (auto& [l, a, x, xh] : s.best_own) {
        met += x >= 50;
        met_high += xh >= 50;
        per += fmt::format("{}{} {} {:.0f}% ({:.0f}%)", per.empty() ? "" : ", ", l, a, x, xh);
    }
    const int n = static_cast<int>(s.best_own.size());
    r += fmt::format(
        "{}/{} layers >= 50%: {}; against the highest peak sample {}/{} ({}; in parentheses: % of the highest peak "
        "sample)\n",
        met, n,
        met == n   ? "MET on every layer"
        : met == 0 ? "MISSED on every layer"
                   : "MISSED on some layers",
        met_high, n, per);
    return r;
}

// Process CPU time / (wall time x threads) over the timed runs of a configuration.
double cpu_share(const std::vector<Result>& rs, const Config& c) {
    double cpu = 0, wall = 0;
    for (const Result& r : rs)
        if (r.threads == c.threads && r.dir == c.dir && r.layout == c.layout) cpu += r.cpu_s, wall += r.wall_s;
    return wall > 0 ? cpu / (wall * c.threads) : 0;
}

std::string config_title(const Config& c) {
    return fmt::format("{} thread{}, {}, {}", c.threads, c.threads == 1 ? "" : "s", to_string(c.dir),
                       layout_text(c.layout));
}

// Short column names for the tables.
std::string short_algo(const std::string& id) {
    std::string s = id;
    for (const char* d : {"onednn.fwd.", "onednn.bwd_data.", "onednn.bwd_filter."})
        if (s.rfind(d, 0) == 0) return "dnnl." + s.substr(std::string(d).size());
    if (s.rfind("onednn.", 0) == 0) return "dnnl." + s.substr(7);
    if (s.rfind("cpu.", 0) == 0) return s.substr(4);
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{
        "convtune CPU benchmark: every CPU and oneDNN algorithm on the ResNet-50 v1.5 layers, against a measured FMA "
        "peak"};
    Options o;
    app.add_option("--threads", o.threads, "OpenMP thread counts to measure, e.g. 1,2")->delimiter(',');
    app.add_option("--batch", o.batch, "batch size")->check(CLI::PositiveNumber);
    app.add_option("--dir", o.dir, "direction")->check(CLI::IsMember({"fwd", "bwd_data", "bwd_filter", "all"}));
    app.add_option("--layers", o.layers,
                   "layer subset: names or parts of names (res2a_branch2b, res4), or a kernel (3x3, 1x1, 7x7)")
        ->delimiter(',');
    app.add_option("--algos", o.algos,
                   "algorithm filter: ids containing any of these substrings (cpu.winograd, onednn.auto)")
        ->delimiter(',');
    app.add_option("--layout", o.layouts, "nchw, nhwc or both (nchw,nhwc)")
        ->delimiter(',')
        ->check(CLI::IsMember({"nchw", "nhwc"}));
    app.add_option("--shapes", o.shapes, "benchdnn shape file")->capture_default_str();
    app.add_option("--min-time", o.min_time, "seconds of timed samples per algorithm and layer")->capture_default_str();
    app.add_option("--min-samples", o.min_samples, "at least this many timed runs")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    app.add_option("--max-samples", o.max_samples, "at most this many timed runs")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    app.add_flag("--include-reference", o.include_reference,
                 "also time the naive reference algorithms on big layers (very slow)");
    app.add_option("--reference-max-gflop", o.reference_max_gflop,
                   "without --include-reference, time reference algorithms only up to this size")
        ->capture_default_str();
    app.add_option("--peak-seconds", o.peak_seconds, "duration of one FMA-peak sample (one per round of timed runs)")
        ->capture_default_str();
    app.add_option("--csv", o.csv, "write one row per (threads, direction, layout, layer, algorithm) here");
    app.add_option("--json", o.json, "write everything (machine, peaks, rows, summary) here");
    app.add_option("--markdown", o.markdown, "write the tables and the summary as Markdown here");
    CLI11_PARSE(app, argc, argv);
    if (o.max_samples < o.min_samples) o.max_samples = o.min_samples;

    try {
        const std::vector<Layer> layers = load_layers(o);
        if (layers.empty()) throw Error("layers: no layer of " + o.shapes + " matches the selection");
        std::vector<std::string> unavailable;
        const std::vector<Candidate> cands = host_algorithms(o, &unavailable);
        if (cands.empty()) throw Error("algos: no algorithm matches the filter");
        std::vector<Direction> dirs;
        if (o.dir == "all") dirs = {Direction::fwd, Direction::bwd_data, Direction::bwd_filter};
        else dirs = {parse_direction(o.dir)};
        std::vector<Layout> layouts;
        for (const std::string& l : o.layouts) {
            const Layout x = l == "nchw" ? Layout::nchw : Layout::nhwc;
            if (std::find(layouts.begin(), layouts.end(), x) == layouts.end()) layouts.push_back(x);
        }
        std::vector<Config> cfgs;
        for (int t : o.threads)
            for (Direction d : dirs)
                for (Layout l : layouts) cfgs.push_back({t, d, l});

        // Machine.
        utsname un{};
        uname(&un);
        json machine{{"cpu", cpu_model()},
                     {"cpu_flags", cpu_simd_flags()},
                     {"logical_cpus", omp_get_num_procs()},
                     {"kernel", std::string(un.sysname) + " " + un.release},
                     {"compiler", std::string("GCC ") + __VERSION__},
                     {"peak_loop", bench::peak_isa()},
                     {"load_average_at_start", load_average()}};
        for (Backend* b : backends()) {
            if (b->name() != "cpu" && b->name() != "onednn") continue;
            if (b->availability().ok)
                machine["backends"][std::string(b->name())] = b->identity().library + " | " + b->identity().device;
        }
        const char* env[] = {"OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES"};
        for (const char* e : env)
            if (const char* v = std::getenv(e)) machine["env"][e] = v;
        fmt::print("convtune_bench_cpu\n");
        fmt::print("machine   {} ({} logical CPUs; {}), {}\n", machine["cpu"].get<std::string>(), omp_get_num_procs(),
                   machine["cpu_flags"].get<std::string>(), machine["kernel"].get<std::string>());
        fmt::print("compiler  {}\n", machine["compiler"].get<std::string>());
        for (auto& [k, v] : machine["backends"].items()) fmt::print("backend   {}: {}\n", k, v.get<std::string>());
        for (const std::string& u : unavailable) fmt::print("backend   {} (unavailable)\n", u);
        fmt::print("peak loop {}\n", bench::peak_isa());
        std::string counts;
        for (Direction d : dirs) {
            int n = 0;
            for (const Candidate& c : cands) n += !id_direction(c.algo->id()) || *id_direction(c.algo->id()) == d;
            counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, to_string(d));
        }
        fmt::print(
            "problems  {} layers of {} at batch {}, f32; algorithms: {}; threads {}; timing: warm-up, then >= {} runs "
            "and >= {:.2f} s "
            "per algorithm, median, runs of one layer interleaved\n",
            layers.size(), o.shapes.substr(o.shapes.find_last_of('/') + 1), o.batch, counts, fmt::join(o.threads, ","),
            o.min_samples, o.min_time);
        if (!o.include_reference)
            fmt::print(
                "reference algorithms (cpu.direct, onednn.*.ref_any) are skipped on layers above {:.2f} GFLOP "
                "(--include-reference "
                "times them)\n",
                o.reference_max_gflop);
        fmt::print("\n");
        std::fflush(stdout);

        // Run.
        std::vector<Result> results;
        std::map<int, PeakRecord> peaks;
        const auto ticks0 = cpu_ticks();
        const double t_start = now_s();
        const int total = static_cast<int>(cfgs.size() * layers.size());
        int done = 0;
        int current_threads = -1;
        for (const Config& cfg : cfgs) {
            omp_set_num_threads(cfg.threads);
            if (cfg.threads != current_threads) {
                current_threads = cfg.threads;
                PeakRecord& pk = peaks[cfg.threads];
                // Sized on one thread (each thread of a team runs the same count): a team calibrated
                // while another process held one of its cores would get needlessly short samples.
                static const long long iterations = bench::peak_iterations(1, o.peak_seconds);
                pk.iterations = iterations;
                for (int i = 0; i < 5; ++i) pk.samples.push_back(bench::peak_gflops(cfg.threads, pk.iterations));
                fmt::print(stderr, "FMA peak, {} thread(s): {:.1f} GFLOP/s (median of 5)\n", cfg.threads, pk.median());
            }
            for (const Layer& l : layers) {
                ++done;
                fmt::print(stderr, "[{}/{} {:.0f} s] {}: {} ({})\n", done, total, now_s() - t_start, config_title(cfg),
                           l.name, shape_text(l.problem));
                const std::size_t before = results.size();
                measure_layer(o, cfg, l, cands, results, peaks[cfg.threads]);
                for (std::size_t i = before; i < results.size(); ++i) {
                    const Result& r = results[i];
                    if (r.kind == Kind::ok)
                        fmt::print(stderr, "    {:<36} {:9.3f} ms {:7.1f} GFLOP/s\n", r.algo, r.ms, r.gflops);
                    else if (r.kind == Kind::failed) fmt::print(stderr, "    {:<36} FAILED: {}\n", r.algo, r.reason);
                }
            }
        }
        const auto ticks1 = cpu_ticks();
        const double steal_pct =
            ticks1.first > ticks0.first ? 100.0 * (ticks1.second - ticks0.second) / (ticks1.first - ticks0.first) : 0;
        const double elapsed = now_s() - t_start;
        machine["steal_percent_during_run"] = steal_pct;
        machine["load_average_at_end"] = load_average();
        machine["elapsed_seconds"] = elapsed;

        // Text report.
        for (auto& [t, pk] : peaks)
            fmt::print(
                "measured FMA peak, {} thread{}: {:.1f} GFLOP/s (median of {} samples interleaved with the runs; "
                "highest {:.1f})\n",
                t, t == 1 ? "" : "s", pk.value(), pk.samples.size(), pk.best());
        fmt::print(
            "run took {:.0f} s; CPU steal time during the run: {:.1f}% of CPU time; load average {:.2f} at start, "
            "{:.2f} at end\n\n",
            elapsed, steal_pct, machine["load_average_at_start"].get<double>(),
            machine["load_average_at_end"].get<double>());
        for (const Config& cfg : cfgs) {
            fmt::print("== {} (peak {:.1f} GFLOP/s; CPU share of the timed runs {:.2f}) ==\n", config_title(cfg),
                       peaks[cfg.threads].value(), cpu_share(results, cfg));
            std::string last;
            for (const Result& r : results) {
                if (r.threads != cfg.threads || r.dir != cfg.dir || r.layout != cfg.layout) continue;
                if (r.layer != last) {
                    last = r.layer;
                    fmt::print("{} x{}  {}  {:.2f} GFLOP\n", r.layer, r.repeat, r.shape, r.problem.flops() * 1e-9);
                }
                if (r.kind == Kind::ok)
                    fmt::print(
                        "  {:<36} {:9.3f} ms  {:7.1f} GFLOP/s  {:5.1f}% peak ({:5.1f}% of highest)  [{:.3f}-{:.3f}, "
                        "{} runs]{}\n",
                        r.algo, r.ms, r.gflops, pct(r, peaks), pct_high(r, peaks), r.min_ms, r.max_ms, r.samples.size(),
                        r.deviation > kDeviationFlag ? fmt::format("  ! output differs from {} by {:.2g} of its max",
                                                                   r.deviation_from, r.deviation)
                                                     : "");
                else
                    fmt::print("  {:<36} {:>9}     {}\n", r.algo, kind_name(r.kind), r.reason);
            }
            fmt::print("\n");
        }
        const std::vector<Summary> sums = summarize(results, cfgs, peaks, cands);
        fmt::print(
            "== Summary: the performance targets, as ratios within this run (time of the reference / time of the "
            "subject) ==\n");
        for (const Summary& s : sums) {
            fmt::print("{}:\n", config_title(s.cfg));
            for (const Comparison& c : s.comparisons) fmt::print("{}", comparison_text(c, false));
            fmt::print("{}", best_own_text(s, false));
            fmt::print("{}", cost_model_text(s, false));
        }

        if (!o.csv.empty()) {
            std::ofstream f(o.csv);
            f << "threads,direction,layout,layer,repeat,shape,gflop,algorithm,backend,status,median_ms,min_ms,max_ms,runs,gflops,peak_gflops,"
                 "percent_peak,percent_highest_peak,workspace_bytes,deviation,reason\n";
            for (const Result& r : results) {
                std::string reason = r.reason;
                std::replace(reason.begin(), reason.end(), '"', '\'');
                f << fmt::format("{},{},{},{},{},{},{:.4f},{},{},{},", r.threads, to_string(r.dir),
                                 layout_text(r.layout), r.layer, r.repeat, r.shape, r.problem.flops() * 1e-9, r.algo,
                                 r.backend, kind_name(r.kind));
                if (r.kind == Kind::ok)
                    f << fmt::format("{:.4f},{:.4f},{:.4f},{},{:.2f},{:.2f},{:.2f},{:.2f},{},{:.3g},", r.ms, r.min_ms,
                                     r.max_ms, r.samples.size(), r.gflops, peaks[r.threads].value(), pct(r, peaks),
                                     pct_high(r, peaks), r.workspace, r.deviation);
                else
                    f << fmt::format(",,,,,{:.2f},,,,,", peaks[r.threads].value());
                f << '"' << reason << "\"\n";
            }
        }
        if (!o.json.empty()) {
            json doc{{"machine", machine}};
            json args = json::object();
            args["threads"] = o.threads;
            args["batch"] = o.batch;
            args["dir"] = o.dir;
            args["layouts"] = o.layouts;
            args["layers"] = o.layers;
            args["algos"] = o.algos;
            args["shapes"] = o.shapes.substr(o.shapes.find_last_of('/') + 1);
            args["min_time"] = o.min_time;
            args["min_samples"] = o.min_samples;
            args["max_samples"] = o.max_samples;
            args["include_reference"] = o.include_reference;
            doc["options"] = args;
            for (auto& [t, pk] : peaks)
                doc["peak_gflops"][std::to_string(t)] = {
                    {"value", pk.value()}, {"highest", pk.best()}, {"samples", pk.samples}};
            for (const Config& cfg : cfgs) doc["cpu_share"][config_title(cfg)] = cpu_share(results, cfg);
            for (const Result& r : results) {
                json j{{"threads", r.threads},
                       {"direction", to_string(r.dir)},
                       {"layout", layout_text(r.layout)},
                       {"layer", r.layer},
                       {"repeat", r.repeat},
                       {"shape", r.shape},
                       {"problem", r.problem.to_string()},
                       {"gflop", r.problem.flops() * 1e-9},
                       {"algorithm", r.algo},
                       {"backend", r.backend},
                       {"status", kind_name(r.kind)}};
                if (r.kind == Kind::ok) {
                    j["median_ms"] = r.ms;
                    j["samples_ms"] = r.samples;
                    j["gflops"] = r.gflops;
                    j["percent_peak"] = pct(r, peaks);
                    j["percent_highest_peak"] = pct_high(r, peaks);
                    j["workspace_bytes"] = r.workspace;
                    if (r.wall_s > 0) j["cpu_share"] = r.cpu_s / (r.wall_s * r.threads);
                    if (r.deviation >= 0) j["deviation"] = {{"from", r.deviation_from}, {"max_rel", r.deviation}};
                } else {
                    j["reason"] = r.reason;
                }
                doc["results"].push_back(j);
            }
            for (const Summary& s : sums) {
                json js{{"config", config_title(s.cfg)}};
                for (const Comparison& c : s.comparisons) js["comparisons"].push_back(comparison_json(c));
                for (auto& [l, a, x, xh] : s.best_own)
                    js["best_own_3x3"].push_back(
                        {{"layer", l}, {"algorithm", a}, {"percent_peak", x}, {"percent_highest_peak", xh}});
                for (const CostModelPick& c : s.cost_model)
                    js["cost_model"].push_back({{"layer", c.layer},
                                                {"pick", c.pick},
                                                {"pick_ms", c.pick_ms},
                                                {"best", c.best},
                                                {"best_ms", c.best_ms}});
                doc["summary"].push_back(js);
            }
            std::ofstream(o.json) << doc.dump(1) << "\n";
        }
        if (!o.markdown.empty()) {
            std::ofstream f(o.markdown);
            f << fmt::format("Measured FMA peak: {}.\n\n", [&] {
                std::string s;
                for (auto& [t, pk] : peaks)
                    s += fmt::format("{}{} thread{} {:.1f} GFLOP/s (highest sample {:.1f})", s.empty() ? "" : ", ", t,
                                     t == 1 ? "" : "s", pk.value(), pk.best());
                return s;
            }());
            for (const Config& cfg : cfgs) {
                std::vector<std::string> cols, layers_in;
                std::set<std::string> never;
                for (const Result& r : results) {
                    if (r.threads != cfg.threads || r.dir != cfg.dir || r.layout != cfg.layout) continue;
                    if (std::find(cols.begin(), cols.end(), r.algo) == cols.end()) cols.push_back(r.algo);
                    if (std::find(layers_in.begin(), layers_in.end(), r.layer) == layers_in.end())
                        layers_in.push_back(r.layer);
                }
                std::vector<std::string> shown, hidden;
                for (const std::string& c : cols) {
                    bool any = false;
                    for (const std::string& l : layers_in)
                        if (const Result* r = find(results, cfg, l, c); r && r->kind != Kind::not_applicable)
                            any = true;
                    (any ? shown : hidden).push_back(c);
                }
                f << fmt::format(
                    "#### {}\n\nPeak {:.1f} GFLOP/s; CPU share of the timed runs {:.2f}. Cells: median ms, % of the "
                    "peak in "
                    "direct-equivalent GFLOP/s.\n\n",
                    config_title(cfg), peaks[cfg.threads].value(), cpu_share(results, cfg));
                f << "| layer | shape | GFLOP |";
                for (const std::string& c : shown) f << " " << short_algo(c) << " |";
                f << "\n|---|---|---|";
                for (std::size_t i = 0; i < shown.size(); ++i) f << "---|";
                f << "\n";
                for (const std::string& l : layers_in) {
                    const Result* any = find(results, cfg, l, shown.empty() ? cols.front() : shown.front());
                    f << fmt::format("| {} | {} | {:.2f} |", l, any ? any->shape : "",
                                     any ? any->problem.flops() * 1e-9 : 0.0);
                    for (const std::string& c : shown) {
                        const Result* r = find(results, cfg, l, c);
                        f << " " << (r ? cell(*r, peaks) : "") << " |";
                    }
                    f << "\n";
                }
                if (!hidden.empty())
                    f << fmt::format("\nNot applicable to any of these layers: {}.\n", fmt::join(hidden, ", "));
                f << "\n";
            }
            f << "#### Targets\n\n";
            for (const Summary& s : sums) {
                f << fmt::format("{}:\n\n", config_title(s.cfg));
                for (const Comparison& c : s.comparisons) f << comparison_text(c, true);
                f << best_own_text(s, true) << cost_model_text(s, true) << "\n";
            }
        }
    } catch (const std::exception& e) {
        fmt::print(stderr, "convtune_bench_cpu: {}\n", e.what());
        return 2;
    }
    return 0;
}
