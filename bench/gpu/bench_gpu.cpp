// GPU benchmark: the ResNet-50 v1.5 convolution layers at batch 32 on the cuDNN backend, per
// precision (fp32 with TF32 off, TF32, fp16 NHWC) and direction:
//   * convtune's heuristic pick: the first algorithm of heuristic_order() that the flags allow
//     and that runs (what benchmark=False does); search time = heuristic_order() + that first run;
//   * cuDNN's finder (cudnnFind*AlgorithmEx, legacy algorithms, PyTorch's math-type policy);
//     search time = the finder call;
//   * convtune's own timed search: every supporting algorithm the flags allow, each timed as the
//     median of --search-samples single runs after one warm-up; search time = the whole search;
// each pick's steady time re-measured as the median of --samples samples of --inner back-to-back
// runs (CUDA events). PyTorch's numbers (benchmark=False / True) come from torch_bench.py's JSON
// files given with --torch. Flags as PyTorch applies them: engines that down-convert inputs are
// never used; fp32 without TF32 drops tensor-core algorithms.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "convtune/numeric.hpp"
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

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

bool allowed(const Algorithm& a, const ConvProblem& p, bool allow_tf32) {
    const Notes n = a.notes();
    if (n.has(Note::down_convert_inputs)) return false;
    if (p.dtype == DataType::f32 && !allow_tf32 && n.has(Note::tensor_core)) return false;
    return true;
}

struct Tensors {
    DeviceBuffer x, w, y;
    ConvTensors views;
};

// Device tensors filled with values in [-1, 1) (a 64-bit LCG: tens of millions of elements).
std::optional<Tensors> make_tensors(const Backend& b, const ConvProblem& p) {
    const std::size_t es = size_of(p.dtype);
    const std::size_t xb = static_cast<std::size_t>(p.x_elements()) * es, wb = static_cast<std::size_t>(p.w_elements()) * es,
                      yb = static_cast<std::size_t>(p.y_elements()) * es;
    Tensors t{b.allocate(xb), b.allocate(wb), b.allocate(yb), {}};
    if (!t.x || !t.w || !t.y) return std::nullopt;
    uint64_t state = 0x2545f4914f6cdd1dull;
    for (auto [buf, bytes] : {std::pair{&t.x, xb}, std::pair{&t.w, wb}, std::pair{&t.y, yb}}) {
        std::vector<std::byte> host(bytes);
        for (std::size_t i = 0; i < bytes / es; ++i) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            store_from_double(host.data(), p.dtype, i, static_cast<double>(state >> 40) * 0x1p-23 - 1.0);
        }
        b.upload(buf->data(), host.data(), bytes);
    }
    t.views = {{t.x.data(), xb}, {t.w.data(), wb}, {t.y.data(), yb}};
    return t;
}

// Median ms of `samples` samples of `inner` back-to-back runs, after one warm-up run; nullopt
// (with the status) when the algorithm does not run.
std::optional<double> time_algorithm(const Algorithm& a, const ConvProblem& p, const Tensors& t, int samples, int inner, Status* status) {
    const Backend& b = a.backend();
    const std::size_t wsb = a.workspace_size(p);
    DeviceBuffer ws = wsb ? b.allocate(wsb) : DeviceBuffer{};
    if (wsb && !ws) {
        if (status) *status = Status::out_of_memory("workspace of " + std::to_string(wsb) + " bytes");
        return std::nullopt;
    }
    const Workspace w{ws.data(), wsb};
    Status s = a.run(p, t.views, w);
    b.synchronize();
    if (status) *status = s;
    if (!s.ok()) return std::nullopt;
    std::vector<double> v;
    for (int i = 0; i < samples; ++i)
        v.push_back(b.time_ms([&] {
            for (int j = 0; j < inner; ++j) a.run(p, t.views, w);
        }) / inner);
    return median(v);
}

struct Pick {
    std::string id = "-";
    double steady_ms = 0;
    double search_ms = 0;
    int candidates = 0;
    bool ok = false;
};

struct Row {
    std::string layer;
    int repeat = 1;
    ConvProblem problem;
    Pick heuristic, finder, search;
    std::optional<double> torch_off, torch_on, torch_on_first, torch_off_first;
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
    app.add_option("--runtime-compiled", rc_policy,
                   "runtime-compiled engines in the timed search: listed (only when cuDNN's heuristics list them), all, none")
        ->check(CLI::IsMember({"listed", "all", "none"}));
    bool probe = false;
    app.add_flag("--probe", probe, "print every graph engine's plan (support, knobs, notes, build time) on a few layers, then exit");
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
                if (auto t = make_tensors(b, w)) {
                    const auto order = b.heuristic_order(w);
                    if (!order.empty()) time_algorithm(*order.front(), w, *t, 1, 1, nullptr);
                    cudnn_find(w, t->views, {}, {});
                }
            }
        fmt::print("warm-up (library loading, not counted): {:.0f} ms\n", now_ms() - t0);
    }

    if (probe) {
        const std::vector<ShapeLine> lines = read_shape_file(shapes);
        std::vector<ConvProblem> probes;
        for (const char* name : {"resnet_50_v1_5:res2a_branch2b", "resnet_50_v1_5:conv1", "resnet_50_v1_5:res4a_branch2b"})
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
                fmt::print("  {:<28} {:<4} knobs={:<8} rc={} rpr={} notes=[{}] listed=[{}] ws={} build={:.2f}ms {}\n", a->id(),
                           info->support ? "yes" : "no", info->knobs, info->runtime_compiled, info->reduced_precision_reduction,
                           info->reported.to_string(), a->notes().to_string(), info->workspace, info->build_ms,
                           info->support ? "" : info->support.reason.substr(0, 120));
            }
            auto names = [](const std::vector<const Algorithm*>& v) {
                std::string s;
                for (const Algorithm* a : v) s += std::string(a->id()) + " ";
                return s;
            };
            fmt::print("{}\n  supported graph engines {} (plans built in {:.0f} ms, {:.0f} ms wall)\n  mode A: {}\n  mode B: {}\n  fallback: {}\n  "
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
            const std::string key = fmt::format("{}/{}/{}", r["precision"].get<std::string>(), r["dir"].get<std::string>(),
                                                r["benchmark"].get<bool>() ? 1 : 0);
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
                       {"runtime_compiled", rc_policy}};
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
                auto t = make_tensors(b, p);
                if (!t) {
                    fmt::print("{}: cannot allocate tensors\n", l.name);
                    continue;
                }
                // 1. heuristic pick
                {
                    const double t0 = now_ms();
                    const auto order = b.heuristic_order(p);
                    for (const Algorithm* a : order) {
                        if (!allowed(*a, p, pr->allow_tf32)) continue;
                        const std::size_t wsb = a->workspace_size(p);
                        DeviceBuffer ws = wsb ? b.allocate(wsb) : DeviceBuffer{};
                        if (wsb && !ws) continue;
                        const Status s = a->run(p, t->views, Workspace{ws.data(), wsb});
                        b.synchronize();
                        if (!s.ok()) continue;
                        r.heuristic.id = a->id();
                        r.heuristic.ok = true;
                        break;
                    }
                    r.heuristic.search_ms = now_ms() - t0;
                    r.heuristic.candidates = static_cast<int>(order.size());
                }
                // 2. cuDNN's finder (legacy algorithms)
                {
                    std::size_t need = 0;
                    const std::string legacy_prefix = fmt::format("cudnn.{}.", dname);
                    for (const Algorithm* a : b.algorithms())
                        if (a->id().starts_with(legacy_prefix) && a->supports(p)) need = std::max(need, a->workspace_size(p));
                    DeviceBuffer ws = need ? b.allocate(need) : DeviceBuffer{};
                    if (need && !ws) need = 0;
                    const double t0 = now_ms();
                    const auto res = cudnn_find(p, t->views, Workspace{ws.data(), need}, {pr->allow_tf32, SIZE_MAX});
                    r.finder.search_ms = now_ms() - t0;
                    for (const auto& f : res)
                        if (f.status.ok() && f.algorithm) {
                            r.finder.id = f.algorithm->id();
                            r.finder.ok = true;
                            break;
                        }
                    r.finder.candidates = static_cast<int>(res.size());
                }
                // 3. convtune's timed search over everything supported and allowed
                {
                    const double t0 = now_ms();
                    double best = 0;
                    std::set<const Algorithm*> listed;
                    for (CudnnRanking k : {CudnnRanking::mode_a, CudnnRanking::mode_b, CudnnRanking::fallback})
                        for (const Algorithm* a : cudnn_ranking(p, k)) listed.insert(a);
                    for (const Algorithm* a : b.heuristic_order(p)) {
                        if (!allowed(*a, p, pr->allow_tf32)) continue;
                        if (rc_policy != "all") {
                            const auto info = cudnn_plan_info(*a, p);
                            if (info && info->runtime_compiled && (rc_policy == "none" || !listed.count(a))) continue;
                        }
                        ++r.search.candidates;
                        const auto ms = time_algorithm(*a, p, *t, search_samples, 1, nullptr);
                        if (ms && (!r.search.ok || *ms < best)) {
                            best = *ms;
                            r.search.id = a->id();
                            r.search.ok = true;
                        }
                    }
                    r.search.search_ms = now_ms() - t0;
                }
                // Steady times of the three picks.
                for (Pick* pk : {&r.heuristic, &r.finder, &r.search}) {
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
                fmt::print("{} {} {:<32} heur {:<28} {:>8} | find {:<36} {:>8} | search {:<28} {:>8} ({:.0f} ms, {} cand) | torch {:>8} {:>8}\n",
                           pr->name, dname, l.name, r.heuristic.id, fmt_ms(r.heuristic.steady_ms, r.heuristic.ok), r.finder.id,
                           fmt_ms(r.finder.steady_ms, r.finder.ok), r.search.id, fmt_ms(r.search.steady_ms, r.search.ok), r.search.search_ms,
                           r.search.candidates, fmt_opt(r.torch_off), fmt_opt(r.torch_on));
                std::fflush(stdout);
                rows.push_back(r);
            }

            // Table
            md += fmt::format("\n### {} {} (batch {}, {})\n\n", pr->name, dname, batch, layout_name(pr->layout, 2));
            md += "| layer | x | convtune heuristic pick | ms | search ms | cuDNN finder pick | ms | search ms | convtune timed-search winner | ms | "
                  "search ms | PyTorch bm=False ms | PyTorch bm=True ms | bm=True first call ms |\n";
            md += "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
            struct Sum {
                double steady = 0, weighted = 0, search = 0;
                int n = 0;
            };
            Sum sh, sf, ss, sto, stn, stn_first;
            auto acc = [](Sum& s, double steady, double search, int rep) {
                s.steady += steady;
                s.weighted += steady * rep;
                s.search += search;
                ++s.n;
            };
            json jt = json::array();
            for (const Row& r : rows) {
                md += fmt::format("| {} | {} | {} | {} | {:.1f} | {} | {} | {:.1f} | {} | {} | {:.1f} | {} | {} | {} |\n", r.layer, r.repeat,
                                  r.heuristic.id, fmt_ms(r.heuristic.steady_ms, r.heuristic.ok), r.heuristic.search_ms, r.finder.id,
                                  fmt_ms(r.finder.steady_ms, r.finder.ok), r.finder.search_ms, r.search.id,
                                  fmt_ms(r.search.steady_ms, r.search.ok), r.search.search_ms, fmt_opt(r.torch_off), fmt_opt(r.torch_on),
                                  fmt_opt(r.torch_on_first, 1));
                if (r.heuristic.ok) acc(sh, r.heuristic.steady_ms, r.heuristic.search_ms, r.repeat);
                if (r.finder.ok) acc(sf, r.finder.steady_ms, r.finder.search_ms, r.repeat);
                if (r.search.ok) acc(ss, r.search.steady_ms, r.search.search_ms, r.repeat);
                if (r.torch_off) acc(sto, *r.torch_off, r.torch_off_first.value_or(0), r.repeat);
                if (r.torch_on) acc(stn, *r.torch_on, r.torch_on_first.value_or(0), r.repeat);
                jt.push_back({{"layer", r.layer},
                              {"repeat", r.repeat},
                              {"problem", r.problem.to_string()},
                              {"heuristic", {{"id", r.heuristic.id}, {"ok", r.heuristic.ok}, {"steady_ms", r.heuristic.steady_ms},
                                             {"search_ms", r.heuristic.search_ms}, {"supported", r.heuristic.candidates}}},
                              {"finder", {{"id", r.finder.id}, {"ok", r.finder.ok}, {"steady_ms", r.finder.steady_ms},
                                          {"search_ms", r.finder.search_ms}, {"results", r.finder.candidates}}},
                              {"search", {{"id", r.search.id}, {"ok", r.search.ok}, {"steady_ms", r.search.steady_ms},
                                          {"search_ms", r.search.search_ms}, {"candidates", r.search.candidates}}},
                              {"torch_bm_false_ms", r.torch_off ? json(*r.torch_off) : json(nullptr)},
                              {"torch_bm_true_ms", r.torch_on ? json(*r.torch_on) : json(nullptr)},
                              {"torch_bm_false_first_ms", r.torch_off_first ? json(*r.torch_off_first) : json(nullptr)},
                              {"torch_bm_true_first_ms", r.torch_on_first ? json(*r.torch_on_first) : json(nullptr)}});
            }
            auto tot = [](const Sum& s, bool search = true) {
                return s.n ? fmt::format("{:.3f} ({:.3f} weighted){}", s.steady, s.weighted, search ? "" : "") : std::string("-");
            };
            md += fmt::format("| **total, {} layers** | | | {} | {:.0f} | | {} | {:.0f} | | {} | {:.0f} | {} | {} | {:.0f} |\n", rows.size(),
                              tot(sh), sh.search, tot(sf), sf.search, tot(ss), ss.search, tot(sto), tot(stn), stn.search);
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
