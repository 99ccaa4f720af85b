// GPU benchmark: the ResNet-50 v1.5 convolution layers at batch 32 on the cuDNN backend, per
// precision (fp32 with TF32 off, TF32, fp16 NHWC) and direction:
//   * convtune, benchmark=False: the first call through convtune's Selector (heuristic order,
//     the first eligible candidate that runs); first-call ms = that whole call;
//   * cuDNN's finder (cudnnFind*AlgorithmEx, legacy algorithms, PyTorch's math-type policy);
//     search time = the finder call;
//   * convtune, benchmark=True: the first call through the Selector with the convtune policy
//     and its default flags (benchmark_limit=10, samples until the median is stable; change
//     them with --policy-flags); first-call ms = search + run;
//   * an exhaustive timed search: every supporting algorithm the flags allow, each timed as the
//     median of --search-samples single runs after one warm-up (what convtune could find with
//     benchmark_limit=0; runtime-compiled engines as --runtime-compiled says);
// each pick's steady time re-measured as the median of --samples samples of --inner back-to-back
// runs (CUDA events). Every first-call and search measurement starts from forgotten graph plans
// (cudnn_forget_plans), as in a fresh process; kernels loaded earlier in the process stay
// loaded. PyTorch's numbers (benchmark=False / True) come from torch_bench.py's JSON files given
// with --torch. Flags as PyTorch applies them: engines that down-convert inputs are never used;
// fp32 without TF32 drops tensor-core algorithms.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "convtune/device_tensors.hpp"
#include "convtune/flags.hpp"
#include "convtune/numeric.hpp"
#include "convtune/selector.hpp"
#include "convtune/stats.hpp"
#include "convtune/problem.hpp"
#include "cudnn/cudnn_backend.hpp"

using namespace convtune;
using json = nlohmann::json;

namespace {

struct Precision {
    std::string name;
    DataType dtype;
    Layout layout;
    bool allow_tf32;
};
const Precision kPrecisions[] = {
    {"fp32", DataType::f32, Layout::nchw, false},
    {"tf32", DataType::f32, Layout::nchw, true},
    {"fp16", DataType::f16, Layout::nhwc, true},
};

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The Selector's flag filters, on the notes the algorithm has on p (precondition: it supports p).
bool allowed(const Algorithm& a, const ConvProblem& p, bool allow_tf32) {
    FlagValues f;
    f.allow_tf32 = allow_tf32;
    return flag_filter_reason(a.notes_for(p), p, f).empty();
}

// Median ms of `samples` samples of `inner` back-to-back runs, after one warm-up run; nullopt
// (with the status) when the algorithm does not run.
std::optional<double> time_algorithm(const Algorithm& a, const ConvProblem& p, const DeviceTensors& t, int samples,
                                     int inner, Status* status) {
    const Backend& b = a.backend();
    const std::size_t wsb = a.workspace_size(p);
    DeviceBuffer ws = wsb ? b.allocate(wsb) : DeviceBuffer{};
    if (wsb && !ws) {
        if (status) *status = Status::out_of_memory("workspace of " + std::to_string(wsb) + " bytes");
        return std::nullopt;
    }
    const Workspace w{ws.data(), wsb};
    Status s = a.run(p, t.views(), w);
    b.synchronize();
    if (status) *status = s;
    if (!s.ok()) return std::nullopt;
    std::vector<double> v;
    for (int i = 0; i < samples; ++i)
        v.push_back(b.time_ms([&] {
            for (int j = 0; j < inner; ++j) a.run(p, t.views(), w);
        }) / inner);
    return median(v);
}

struct Pick {
    std::string id = "-";
    double steady_ms = 0;
    double search_ms = 0;
    int candidates = 0;
    bool ok = false;
    // Selector searches: candidates timed, and the sums of their warm-up and sample times.
    int timed = 0;
    double first_sum_ms = 0, samples_sum_ms = 0;
    // Selector decisions: algorithms whose support was decided (the rest are "not checked").
    int checked = 0;
};

// The first call of p through a fresh Selector under `f`, from forgotten plans.
Pick selector_first_call(Backend& b, const ConvProblem& p, const ConvTensors& t, const FlagValues& f) {
    Pick pk;
    cudnn_forget_plans();
    TuningCache cache;
    Selector sel(b, cache);
    const double t0 = now_ms();
    Status s;
    try {
        s = sel.run(p, t, f);
    } catch (const std::exception& e) {
        s = Status::failure(e.what());
    }
    b.synchronize();
    pk.search_ms = now_ms() - t0;
    if (!s.ok()) {
        fmt::print("  selector ({}): {}\n", f.to_string(), s.message);
        return pk;
    }
    const auto d = sel.select(p, f);
    pk.id = d->algorithm;
    pk.ok = true;
    for (const Candidate& c : d->candidates) {
        pk.checked += c.state != Candidate::State::not_checked;
        if (c.state == Candidate::State::not_timed || c.state == Candidate::State::chosen_untimed ||
            c.state == Candidate::State::timed)
            ++pk.candidates;
        if (c.state != Candidate::State::timed) continue;
        ++pk.timed;
        pk.first_sum_ms += c.first_ms;
        for (double v : c.samples_ms) pk.samples_sum_ms += v;
    }
    return pk;
}

struct Row {
    std::string layer;
    int repeat = 1;
    ConvProblem problem;
    Pick heuristic, finder, policy, search;
    std::vector<double> heuristics_ms;  // mode A, fallback, mode B queries, then heuristic_order's support decisions
    std::optional<double> torch_off, torch_on, torch_on_first, torch_off_first;
    // The exhaustive search's candidates: position in heuristic_order, id, time (null: failed),
    // and position in each heuristics list (-1: not listed). Lets a ranking rule be replayed
    // offline against the measured times.
    json exhaustive_times = json::array();
};

std::string fmt_ms(double v, bool ok = true) { return ok ? fmt::format("{:.4f}", v) : "-"; }
std::string fmt_opt(const std::optional<double>& v, int prec = 4) { return v ? fmt::format("{:.{}f}", *v, prec) : "-"; }

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"convtune GPU benchmark: ResNet-50 layers on cuDNN vs PyTorch"};
    std::string shapes, out_md, out_json;
    std::vector<std::string> torch_files, precisions{"fp32", "tf32", "fp16"}, dirs{"fwd"};
    int batch = 32, samples = 15, inner = 3, search_samples = 3, limit = 0;
    app.add_option("--shapes", shapes, "benchdnn shape file (shapes_resnet_50_v1_5)")->required();
    app.add_option("--batch", batch, "batch size");
    app.add_option("--precisions", precisions, "fp32 tf32 fp16")->delimiter(',');
    app.add_option("--dirs", dirs, "fwd bwd_data bwd_filter")->delimiter(',');
    app.add_option("--samples", samples, "samples of a steady-time median");
    app.add_option("--inner", inner, "back-to-back runs per steady sample");
    app.add_option("--search-samples", search_samples, "single-run samples per candidate in the timed search");
    app.add_option("--limit", limit, "only the first N layers (0 = all)");
    app.add_option("--torch", torch_files, "torch_bench.py JSON results to merge");
    app.add_option("--markdown", out_md, "write the tables here");
    app.add_option("--json", out_json, "write all numbers here");
    std::string rc_policy = "listed";
    app.add_option(
           "--runtime-compiled", rc_policy,
           "runtime-compiled engines in the timed search: listed (only when cuDNN's heuristics list them), all, none")
        ->check(CLI::IsMember({"listed", "all", "none"}));
    std::string policy_flags;
    app.add_option("--policy-flags", policy_flags,
                   "flags for the benchmark=True selector run (e.g. benchmark_limit=0)");
    bool probe = false;
    app.add_flag("--probe", probe,
                 "print every graph engine's plan (support, knobs, notes, build time) on a few layers, then exit");
    CLI11_PARSE(app, argc, argv);

    Backend& b = cudnn_backend();
    const Availability av = b.availability();
    if (!av.ok) {
        fmt::print("cuDNN backend unavailable: {}\n", av.reason);
        return 2;
    }
    const BackendIdentity ident = b.identity();
    fmt::print("{} | {} | {}\n", ident.library, ident.device, ident.driver);

    // The first cuDNN call of a process loads libraries and kernels (~0.5-0.9 s): not a search.
    {
        const double t0 = now_ms();
        ConvProblem w = ConvProblem::parse("n=2,c=16,k=16,in=16x16,ker=3x3,pad=1x1");
        for (const Precision& pr : kPrecisions)
            for (const char* d : {"fwd", "bwd_data", "bwd_filter"}) {
                w.dtype = pr.dtype;
                w.layout = pr.layout;
                w.direction = parse_direction(d);
                if (const DeviceTensors t(b, w); t.ok()) {
                    const auto order = b.heuristic_order(w);
                    if (!order.empty()) time_algorithm(*order.front(), w, t, 1, 1, nullptr);
                    cudnn_find(w, t.views(), {}, {});
                }
            }
        fmt::print("warm-up (library loading, not counted): {:.0f} ms\n", now_ms() - t0);
    }

    if (probe) {
        const std::vector<ShapeLine> lines = read_shape_file(shapes);
        std::vector<ConvProblem> probes;
        for (const char* name :
             {"resnet_50_v1_5:res2a_branch2b", "resnet_50_v1_5:conv1", "resnet_50_v1_5:res4a_branch2b"})
            for (const ShapeLine& l : lines)
                if (l.name == name)
                    for (const Precision& pr : kPrecisions) {
                        if (pr.name == "tf32") continue;
                        for (const char* d : {"fwd", "bwd_data", "bwd_filter"}) {
                            ConvProblem p = l.problem;
                            p.n = batch;
                            p.dtype = pr.dtype;
                            p.layout = pr.layout;
                            p.direction = parse_direction(d);
                            probes.push_back(p);
                        }
                    }
        for (const ConvProblem& p : probes) {
            const double t0 = now_ms();
            int supported = 0;
            double build = 0;
            for (const Algorithm* a : b.algorithms()) {
                const auto info = cudnn_plan_info(*a, p);
                if (!info) continue;
                build += info->build_ms;
                if (info->support) ++supported;
                fmt::print("  {:<28} {:<4} knobs={:<8} rc={} rpr={} notes=[{}] listed=[{}] ws={} build={:.2f}ms {}\n",
                           a->id(), info->support ? "yes" : "no", info->knobs, info->runtime_compiled,
                           info->reduced_precision_reduction, info->reported.to_string(), a->notes().to_string(),
                           info->workspace, info->build_ms, info->support ? "" : info->support.reason.substr(0, 120));
            }
            auto names = [](const std::vector<const Algorithm*>& v) {
                std::string s;
                for (const Algorithm* a : v) s += std::string(a->id()) + " ";
                return s;
            };
            fmt::print(
                "{}\n  supported graph engines {} (plans built in {:.0f} ms, {:.0f} ms wall)\n  mode A: {}\n  mode B: "
                "{}\n  fallback: {}\n  "
                "legacy v7: {}\n",
                p.to_string(), supported, build, now_ms() - t0, names(cudnn_ranking(p, CudnnRanking::mode_a)),
                names(cudnn_ranking(p, CudnnRanking::mode_b)), names(cudnn_ranking(p, CudnnRanking::fallback)),
                names(cudnn_ranking(p, CudnnRanking::legacy_v7)));
            std::fflush(stdout);
        }
        return 0;
    }

    // PyTorch results: [precision][dir][benchmark] -> layer -> (first_ms, steady_ms)
    std::map<std::string, std::map<std::string, std::pair<double, double>>> torch;
    json torch_meta = json::array();
    for (const std::string& f : torch_files) {
        std::ifstream in(f);
        if (!in) {
            fmt::print("cannot read {}\n", f);
            continue;
        }
        const json j = json::parse(in);
        torch_meta.push_back(j.value("meta", json::object()));
        for (const json& r : j["results"]) {
            const std::string key = fmt::format("{}/{}/{}", r["precision"].get<std::string>(),
                                                r["dir"].get<std::string>(), r["benchmark"].get<bool>() ? 1 : 0);
            torch[key][r["layer"].get<std::string>()] = {r["first_ms"].get<double>(), r["steady_ms"].get<double>()};
        }
    }

    const std::vector<ShapeLine> lines = read_shape_file(shapes);
    std::vector<ShapeLine> layers;
    for (const ShapeLine& l : lines) {
        if (limit && static_cast<int>(layers.size()) >= limit) break;
        layers.push_back(l);
    }

    json all = json::object();
    all["identity"] = {ident.library, ident.device, ident.driver};
    all["settings"] = {{"batch", batch}, {"samples", samples}, {"inner", inner}, {"search_samples", search_samples},
                       {"runtime_compiled", rc_policy}, {"policy_flags", policy_flags}};
    all["torch_meta"] = torch_meta;
    all["tables"] = json::array();
    std::string md;

    for (const std::string& prname : precisions) {
        const Precision* pr = nullptr;
        for (const Precision& x : kPrecisions)
            if (x.name == prname) pr = &x;
        if (!pr) {
            fmt::print("unknown precision {}\n", prname);
            return 1;
        }
        for (const std::string& dname : dirs) {
            const Direction dir = parse_direction(dname);
            std::vector<Row> rows;
            for (const ShapeLine& l : layers) {
                Row r;
                r.layer = l.name;
                r.repeat = l.repeat;
                ConvProblem p = l.problem;
                p.n = batch;
                p.dtype = pr->dtype;
                p.layout = pr->layout;
                p.direction = dir;
                r.problem = p;
                const auto t = std::make_unique<DeviceTensors>(b, p);
                if (!t->ok()) {
                    fmt::print("{}: cannot allocate tensors\n", l.name);
                    continue;
                }
                // 0. where benchmark=False's first call goes: cuDNN's heuristic queries, then the
                //    support decision for every algorithm (heuristic_order), from forgotten plans
                {
                    cudnn_forget_plans();
                    double t0 = now_ms();
                    for (CudnnRanking k : {CudnnRanking::mode_a, CudnnRanking::fallback, CudnnRanking::mode_b}) {
                        cudnn_ranking(p, k);
                        const double t1 = now_ms();
                        r.heuristics_ms.push_back(t1 - t0);
                        t0 = t1;
                    }
                    b.heuristic_order(p);
                    r.heuristics_ms.push_back(now_ms() - t0);
                }
                // 1. benchmark=False through the selector
                {
                    FlagValues f = parse_flags("benchmark=0");
                    f.allow_tf32 = pr->allow_tf32;
                    r.heuristic = selector_first_call(b, p, t->views(), f);
                }
                // 2. cuDNN's finder (legacy algorithms)
                {
                    std::size_t need = 0;
                    const std::string legacy_prefix = fmt::format("cudnn.{}.", dname);
                    for (const Algorithm* a : b.algorithms())
                        if (a->id().starts_with(legacy_prefix) && a->supports(p))
                            need = std::max(need, a->workspace_size(p));
                    DeviceBuffer ws = need ? b.allocate(need) : DeviceBuffer{};
                    if (need && !ws) need = 0;
                    const double t0 = now_ms();
                    const auto res = cudnn_find(p, t->views(), Workspace{ws.data(), need}, {pr->allow_tf32, SIZE_MAX});
                    r.finder.search_ms = now_ms() - t0;
                    for (const auto& f : res)
                        if (f.status.ok() && f.algorithm) {
                            r.finder.id = f.algorithm->id();
                            r.finder.ok = true;
                            break;
                        }
                    r.finder.candidates = static_cast<int>(res.size());
                }
                // 3. benchmark=True through the selector (convtune policy)
                {
                    FlagValues f = parse_flags(policy_flags, parse_flags("benchmark=1"));
                    f.allow_tf32 = pr->allow_tf32;
                    r.policy = selector_first_call(b, p, t->views(), f);
                }
                // 4. an exhaustive timed search over everything supported and allowed
                {
                    cudnn_forget_plans();
                    const double t0 = now_ms();
                    double best = 0;
                    std::set<const Algorithm*> listed;
                    std::map<const Algorithm*, std::array<int, 3>> where;  // position in mode A, fallback, mode B
                    int list = 0;
                    for (CudnnRanking k : {CudnnRanking::mode_a, CudnnRanking::fallback, CudnnRanking::mode_b}) {
                        int pos = 0;
                        for (const Algorithm* a : cudnn_ranking(p, k)) {
                            listed.insert(a);
                            auto [it, fresh] = where.try_emplace(a, std::array<int, 3>{-1, -1, -1});
                            if (it->second[list] < 0) it->second[list] = pos;
                            ++pos;
                        }
                        ++list;
                    }
                    int rank = -1;
                    for (const Algorithm* a : b.heuristic_order(p)) {
                        ++rank;
                        if (!allowed(*a, p, pr->allow_tf32)) continue;
                        if (rc_policy != "all") {
                            const auto info = cudnn_plan_info(*a, p);
                            if (info && info->runtime_compiled && (rc_policy == "none" || !listed.count(a))) continue;
                        }
                        ++r.search.candidates;
                        const auto ms = time_algorithm(*a, p, *t, search_samples, 1, nullptr);
                        const auto w = where.count(a) ? where[a] : std::array<int, 3>{-1, -1, -1};
                        r.exhaustive_times.push_back(json{{"rank", rank},
                                                          {"id", a->id()},
                                                          {"ms", ms ? json(*ms) : json(nullptr)},
                                                          {"mode_a", w[0]},
                                                          {"fallback", w[1]},
                                                          {"mode_b", w[2]}});
                        if (ms && (!r.search.ok || *ms < best)) {
                            best = *ms;
                            r.search.id = a->id();
                            r.search.ok = true;
                        }
                    }
                    r.search.search_ms = now_ms() - t0;
                }
                // Steady times of the picks.
                for (Pick* pk : {&r.heuristic, &r.finder, &r.policy, &r.search}) {
                    if (!pk->ok) continue;
                    const Algorithm* a = b.find(pk->id);
                    const auto ms = a ? time_algorithm(*a, p, *t, samples, inner, nullptr) : std::nullopt;
                    pk->ok = ms.has_value();
                    pk->steady_ms = ms.value_or(0);
                }
                auto tv = [&](int bm) -> std::pair<std::optional<double>, std::optional<double>> {
                    auto it = torch.find(fmt::format("{}/{}/{}", pr->name, dname, bm));
                    if (it == torch.end()) return {};
                    auto jt = it->second.find(l.name);
                    if (jt == it->second.end()) return {};
                    return {jt->second.first, jt->second.second};
                };
                std::tie(r.torch_off_first, r.torch_off) = tv(0);
                std::tie(r.torch_on_first, r.torch_on) = tv(1);
                fmt::print(
                    "{} {} {:<32} off {:<26} {:>8} ({:.0f} ms) | find {:<36} {:>8} | on {:<26} {:>8} ({:.0f} ms: {} "
                    "timed, "
                    "warm-ups {:.0f} ms, samples {:.0f} ms) | all {:<26} {:>8} ({:.0f} ms, {} cand) | torch {:>8} "
                    "{:>8}\n",
                    pr->name, dname, l.name, r.heuristic.id, fmt_ms(r.heuristic.steady_ms, r.heuristic.ok),
                    r.heuristic.search_ms, r.finder.id, fmt_ms(r.finder.steady_ms, r.finder.ok), r.policy.id,
                    fmt_ms(r.policy.steady_ms, r.policy.ok), r.policy.search_ms, r.policy.timed, r.policy.first_sum_ms,
                    r.policy.samples_sum_ms, r.search.id, fmt_ms(r.search.steady_ms, r.search.ok), r.search.search_ms,
                    r.search.candidates, fmt_opt(r.torch_off), fmt_opt(r.torch_on));
                fmt::print(
                    "    bm=off parts: mode A {:.1f} ms, fallback {:.1f} ms, mode B {:.1f} ms, support of every "
                    "algorithm {:.1f} ms; "
                    "support decided for {} algorithms (bm=off) and {} (bm=on)\n",
                    r.heuristics_ms[0], r.heuristics_ms[1], r.heuristics_ms[2], r.heuristics_ms[3], r.heuristic.checked,
                    r.policy.checked);
                std::fflush(stdout);
                rows.push_back(r);
            }

            // Table
            md += fmt::format("\n### {} {} (batch {}, {})\n\n", pr->name, dname, batch, layout_name(pr->layout, 2));
            md +=
                "| layer | x | convtune bm=off pick | ms | first call ms | cuDNN finder pick | ms | search ms | "
                "convtune bm=on pick | ms | "
                "first call ms | exhaustive search winner | ms | search ms | PyTorch bm=False ms | first call ms | "
                "PyTorch bm=True ms | "
                "first call ms |\n";
            md += "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
            struct Sum {
                double steady = 0, weighted = 0, search = 0;
                int n = 0;
            };
            Sum sh, sf, sp, ss, sto, stn;
            auto acc = [](Sum& s, double steady, double search, int rep) {
                s.steady += steady;
                s.weighted += steady * rep;
                s.search += search;
                ++s.n;
            };
            auto pick_json = [](const Pick& k) {
                return json{{"id", k.id},
                            {"ok", k.ok},
                            {"steady_ms", k.steady_ms},
                            {"search_ms", k.search_ms},
                            {"candidates", k.candidates},
                            {"checked", k.checked},
                            {"timed", k.timed},
                            {"warmups_ms", k.first_sum_ms},
                            {"samples_ms", k.samples_sum_ms}};
            };
            json jt = json::array();
            for (const Row& r : rows) {
                md += fmt::format(
                    "| {} | {} | {} | {} | {:.1f} | {} | {} | {:.1f} | {} | {} | {:.1f} | {} | {} | {:.1f} | {} | {} "
                    "| {} | {} |\n",
                    r.layer, r.repeat, r.heuristic.id, fmt_ms(r.heuristic.steady_ms, r.heuristic.ok),
                    r.heuristic.search_ms, r.finder.id, fmt_ms(r.finder.steady_ms, r.finder.ok), r.finder.search_ms,
                    r.policy.id, fmt_ms(r.policy.steady_ms, r.policy.ok), r.policy.search_ms, r.search.id,
                    fmt_ms(r.search.steady_ms, r.search.ok), r.search.search_ms, fmt_opt(r.torch_off),
                    fmt_opt(r.torch_off_first, 1), fmt_opt(r.torch_on), fmt_opt(r.torch_on_first, 1));
                if (r.heuristic.ok) acc(sh, r.heuristic.steady_ms, r.heuristic.search_ms, r.repeat);
                if (r.finder.ok) acc(sf, r.finder.steady_ms, r.finder.search_ms, r.repeat);
                if (r.policy.ok) acc(sp, r.policy.steady_ms, r.policy.search_ms, r.repeat);
                if (r.search.ok) acc(ss, r.search.steady_ms, r.search.search_ms, r.repeat);
                if (r.torch_off) acc(sto, *r.torch_off, r.torch_off_first.value_or(0), r.repeat);
                if (r.torch_on) acc(stn, *r.torch_on, r.torch_on_first.value_or(0), r.repeat);
                jt.push_back({{"layer", r.layer},
                              {"repeat", r.repeat},
                              {"problem", r.problem.to_string()},
                              {"bm_off", pick_json(r.heuristic)},
                              {"bm_off_parts_ms",
                               {{"mode_a", r.heuristics_ms.at(0)},
                                {"fallback", r.heuristics_ms.at(1)},
                                {"mode_b", r.heuristics_ms.at(2)},
                                {"support_all", r.heuristics_ms.at(3)}}},
                              {"finder", pick_json(r.finder)},
                              {"bm_on", pick_json(r.policy)},
                              {"exhaustive", pick_json(r.search)},
                              {"exhaustive_times", r.exhaustive_times},
                              {"torch_bm_false_ms", r.torch_off ? json(*r.torch_off) : json(nullptr)},
                              {"torch_bm_true_ms", r.torch_on ? json(*r.torch_on) : json(nullptr)},
                              {"torch_bm_false_first_ms", r.torch_off_first ? json(*r.torch_off_first) : json(nullptr)},
                              {"torch_bm_true_first_ms", r.torch_on_first ? json(*r.torch_on_first) : json(nullptr)}});
            }
            auto tot = [](const Sum& s, bool search = true) {
                return s.n ? fmt::format("{:.3f} ({:.3f} weighted){}", s.steady, s.weighted, search ? "" : "")
                           : std::string("-");
            };
            md += fmt::format(
                "| **total, {} layers** | | | {} | {:.0f} | | {} | {:.0f} | | {} | {:.0f} | | {} | {:.0f} | {} | "
                "{:.0f} | {} | {:.0f} |\n",
                rows.size(), tot(sh), sh.search, tot(sf), sf.search, tot(sp), sp.search, tot(ss), ss.search, tot(sto),
                sto.search, tot(stn), stn.search);
            all["tables"].push_back({{"precision", pr->name}, {"dir", dname}, {"rows", jt}});
            // Written after every table, so a run cut short keeps what it measured.
            if (!out_md.empty()) std::ofstream(out_md) << md;
            if (!out_json.empty()) std::ofstream(out_json) << all.dump(1);
        }
    }
    fmt::print("{}\n", md);
    if (!out_md.empty()) std::ofstream(out_md) << md;
    if (!out_json.empty()) std::ofstream(out_json) << all.dump(1);
    return 0;
}
