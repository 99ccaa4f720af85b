// The cuDNN backend on a GPU: every legacy algorithm and graph-API engine against the f64 oracle
// within its documented bound (awkward-shape sweep in f32/f16/bf16, NCHW/NHWC, all directions;
// ResNet-50 v1.5 layers at batch 2), bitwise reruns of deterministic algorithms, listed notes
// against what cuDNN reports, TF32 results against the CPU TF32 emulation, the heuristic order,
// cuDNN's finder, memory failures as values. Not run by default: refused_engines_probe, the
// engines refused after measurement re-measured with the refusals lifted.
//
// Without a usable GPU every test case is skipped through a Boost.Test precondition after one
// line "skipped: <reason>" (ctest shows the test as Skipped).
#define BOOST_TEST_MODULE gpu_cudnn
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "convtune/error.hpp"
#include "convtune/registry.hpp"
#include "convtune/selector.hpp"
#include "cudnn/cudnn_backend.hpp"
#include "support/check.hpp"
#include "support/sweep.hpp"

using namespace convtune;
namespace utf = boost::unit_test;

namespace {

struct GpuAvailable {
    boost::test_tools::assertion_result operator()(utf::test_unit_id) const {
        const Availability a = cudnn_backend().availability();
        if (a.ok) return true;
        static bool printed = false;
        if (!printed) {
            std::cout << "skipped: " << a.reason << std::endl;
            printed = true;
        }
        boost::test_tools::assertion_result r(false);
        r.message() << a.reason;
        return r;
    }
};

std::vector<const Algorithm*> cudnn_algorithms() {
    auto s = cudnn_backend().algorithms();
    return {s.begin(), s.end()};
}

std::string shapes_dir() {
    if (const char* e = std::getenv("CONVTUNE_SHAPES_DIR"); e && *e) return e;
    return test::peer_shapes_dir();
}

// Unique problems of a shape file at `batch`, in file order.
std::vector<test::Case> resnet_layers(int64_t batch) {
    std::vector<test::Case> r;
    std::set<std::string> seen;
    for (const ShapeLine& l : read_shape_file(shapes_dir() + "/shapes_resnet_50_v1_5")) {
        ConvProblem p = l.problem;
        p.n = batch;
        if (seen.insert(p.to_string()).second) r.push_back({l.name, p});
    }
    return r;
}

struct Tally {
    std::map<std::string, int> checked, reruns;
    int pairs = 0;
    int rc_skipped = 0;  // supported (runtime-compiled engine, problem) pairs not run
};

bool runtime_compiled(const Algorithm& a, const ConvProblem& p) {
    const auto info = cudnn_plan_info(a, p);
    return info && info->runtime_compiled;
}

// One run of `a` on t (a copy of the inputs `ref` was computed from), against the oracle.
struct OracleCheck {
    Status status;
    ErrorStats stats;  // valid when status.ok()
    double bound = 0;  // a's error_bound for the problem
    bool within() const { return status.ok() && stats.finite && stats.max_scaled <= bound; }
};

OracleCheck check_run(const Algorithm& a, HostTensors& t, const OracleResult& ref) {
    OracleCheck o;
    o.status = execute(a, t).status;
    if (!o.status.ok()) return o;
    o.stats = compare(t, ref);
    o.bound = a.error_bound(t.problem);
    return o;
}

// Where the error is, for a failure message: "max abs .., rel L2 .., worst at index ..".
std::string error_detail(const ErrorStats& s) {
    std::ostringstream o;
    o << "max abs " << s.max_abs << ", rel L2 " << s.rel_l2 << ", " << (s.finite ? "worst" : "non-finite")
      << " at index " << s.worst_index;
    return o.str();
}

// Runs every supporting cuDNN algorithm on each case against the oracle; deterministic ones
// twice, bitwise. Runtime-compiled graph engines (a kernel compile of 0.03-2 s per problem) run
// only on the cases `with_rc` accepts.
void check_cases(const std::vector<test::Case>& cases, Tally& tally, bool rerun_deterministic,
                 const std::function<bool(const test::Case&)>& with_rc) {
    const auto t0 = std::chrono::steady_clock::now();
    std::size_t done = 0;
    for (const auto& c : cases) {
        if (done++ % 20 == 0)
            BOOST_TEST_MESSAGE("progress: "
                               << done - 1 << "/" << cases.size() << " problems, "
                               << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s");
        const ConvProblem& p = c.problem;
        const HostTensors in = make_host_tensors(p, 21);
        std::optional<OracleResult> ref;
        const bool rc_ok = with_rc(c);
        for (const Algorithm* a : cudnn_algorithms()) {
            if (!a->supports(p)) continue;
            if (!rc_ok && runtime_compiled(*a, p)) {
                ++tally.rc_skipped;
                continue;
            }
            if (!ref) ref = oracle(in);
            HostTensors t = in;
            const OracleCheck o = check_run(*a, t, *ref);
            BOOST_TEST(o.status.ok(), c.label << ": " << a->id() << " on " << p.to_string()
                                              << ": supports() said yes but run returned " << o.status.code_name()
                                              << " (" << o.status.message << ")");
            if (!o.status.ok()) continue;
            BOOST_TEST(o.within(), c.label << ": " << a->id() << " on " << p.to_string() << ": max scaled error "
                                           << o.stats.max_scaled << " > bound " << o.bound << " ("
                                           << error_detail(o.stats) << ")");
            ++tally.checked[std::string(a->id())];
            ++tally.pairs;
            // Deterministic on this problem (what deterministic=1 filters by), listed or not.
            if (rerun_deterministic && !a->notes_for(p).has(Note::nondeterministic)) {
                HostTensors t2 = in;
                const RunResult r2 = execute(*a, t2);
                BOOST_TEST(r2.status.ok(), a->id() << " rerun on " << p.to_string() << ": " << r2.status.message);
                BOOST_TEST((output_of(t) == output_of(t2)), a->id() << " is listed deterministic but two runs on "
                                                                    << p.to_string() << " differ bitwise");
                ++tally.reruns[std::string(a->id())];
            }
        }
    }
}

void report(const Tally& t, const char* what) {
    int never = 0;
    for (const Algorithm* a : cudnn_algorithms()) {
        auto it = t.checked.find(std::string(a->id()));
        if (it == t.checked.end()) {
            ++never;
            continue;
        }
        auto rr = t.reruns.find(std::string(a->id()));
        BOOST_TEST_MESSAGE(a->id() << " [" << a->notes().to_string() << "]: " << it->second << " " << what
                                   << " problems, " << (rr == t.reruns.end() ? 0 : rr->second) << " bitwise reruns");
    }
    BOOST_TEST_MESSAGE(what << ": " << t.pairs << " (algorithm, problem) pairs checked; " << t.checked.size()
                            << " algorithms ran at least once; " << never
                            << " supported none of these problems or were not run; " << t.rc_skipped
                            << " runtime-compiled pairs outside the runtime-compiled subset not run");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu, *utf::precondition(GpuAvailable{}))

BOOST_AUTO_TEST_CASE(ids_are_well_formed_and_unique) {
    const std::regex legacy(R"(cudnn\.(fwd|bwd_data|bwd_filter)\.[a-z0-9_]+\.(default|tensor_op|fma))");
    const std::regex graph(R"(cudnn\.graph\.(fwd|bwd_data|bwd_filter)\.eng[0-9]+(\.cfg[1-9])?)");
    std::set<std::string> ids;
    std::map<std::string, int> per_family;
    for (const Algorithm* a : cudnn_algorithms()) {
        const std::string id(a->id());
        BOOST_TEST(ids.insert(id).second, "duplicate id " << id);
        const bool is_legacy = std::regex_match(id, legacy), is_graph = std::regex_match(id, graph);
        BOOST_TEST((is_legacy || is_graph), "malformed id " << id);
        ++per_family[is_graph ? id.substr(0, id.rfind(".eng")) : "legacy"];
    }
    BOOST_TEST(per_family["legacy"] == (8 + 6 + 6) * 3);
    for (const char* d : {"cudnn.graph.fwd", "cudnn.graph.bwd_data", "cudnn.graph.bwd_filter"}) {
        BOOST_TEST(per_family[d] > 0, d << " lists no engine");
        BOOST_TEST_MESSAGE(d << ": " << per_family[d] << " engines");
    }
    const BackendIdentity id = cudnn_backend().identity();
    BOOST_TEST_MESSAGE("identity: " << id.library << " | " << id.device << " | " << id.driver);
    BOOST_TEST(!id.device.empty());
}

// eng<N>.cfg<n> ids exist because cuDNN's heuristics return several configurations of one engine
// (docs/gpu.md): each supported id of an engine must run different knob choices, and on the
// ResNet-50 layers in f32 (where the fallback list's configuration of bwd_filter eng20 is
// PyTorch's pick) some .cfg id must be supported.
BOOST_AUTO_TEST_CASE(engine_configurations_are_distinct) {
    const std::regex graph_id(R"(cudnn\.graph\.[a-z_]+\.eng([0-9]+)(\.cfg[1-9])?)");
    int cfg_supported = 0;
    for (const auto& c : resnet_layers(32))
        for (Direction d : {Direction::fwd, Direction::bwd_filter}) {
            ConvProblem p = c.problem;
            p.direction = d;
            std::map<std::string, std::map<std::string, std::string>> knobs;  // engine -> knob choices -> id
            for (const Algorithm* a : cudnn_algorithms()) {
                const std::string id(a->id());
                std::smatch m;
                if (!std::regex_match(id, m, graph_id) || !a->supports(p)) continue;
                const std::optional<CudnnPlanInfo> info = cudnn_plan_info(*a, p);
                BOOST_TEST_REQUIRE(info.has_value(), id);
                // "mode_a[3=2 17=1]": where it came from, then the knob choices ("fallback": the
                // fallback list's configuration with default knobs, distinct from mode A's).
                const std::string choices = info->knobs.substr(std::min(info->knobs.find('['), info->knobs.size()));
                if (m[2].matched) ++cfg_supported;
                const auto [it, fresh] = knobs[m[1].str()].emplace(choices, id);
                BOOST_TEST(fresh, id << " and " << it->second << " run the same knob choices " << choices << " on "
                                     << p.to_string());
            }
        }
    BOOST_TEST_MESSAGE(cfg_supported << " supported (.cfg id, ResNet-50 f32 layer) pairs");
    BOOST_TEST(cfg_supported > 0, "no eng<N>.cfg<n> id is supported on any ResNet-50 f32 layer");
}

// A listed note is a promise: cuDNN's own report for each supported problem must not contradict
// it (graph engines are held to this by supports() itself; this checks that, and the legacy
// algorithms' static notes against cudnnGet*Algorithm_v7).
BOOST_AUTO_TEST_CASE(listed_notes_cover_reported_notes) {
    int compared = 0, unreported = 0;
    auto cases = test::expand(test::awkward_shapes(), {DataType::f32, DataType::f16});
    for (const auto& c : resnet_layers(1)) {
        ConvProblem p = c.problem;
        for (Direction d : {Direction::fwd, Direction::bwd_data, Direction::bwd_filter}) {
            p.direction = d;
            cases.push_back({c.label, p});
        }
    }
    for (const auto& c : cases)
        for (const Algorithm* a : cudnn_algorithms()) {
            if (!a->supports(c.problem)) continue;
            const std::optional<Notes> rep = cudnn_reported_notes(*a, c.problem);
            if (!rep) {
                ++unreported;
                continue;
            }
            ++compared;
            const Notes listed = a->notes();
            for (Note n : {Note::nondeterministic, Note::winograd, Note::fft})
                BOOST_TEST((!rep->has(n) || listed.has(n)), a->id() << " on " << c.problem.to_string()
                                                                    << ": cuDNN reports [" << rep->to_string()
                                                                    << "], listed [" << listed.to_string() << "]");
            // TENSOR_CORE and DOWN_CONVERT_INPUTS say what happens to f32 inputs (docs/gpu.md).
            if (c.problem.dtype == DataType::f32)
                for (Note n : {Note::tensor_core, Note::down_convert_inputs})
                    BOOST_TEST((!rep->has(n) || listed.has(n)),
                               a->id() << " on " << c.problem.to_string() << ": cuDNN reports [" << rep->to_string()
                                       << "] on f32, listed [" << listed.to_string() << "]");
        }
    BOOST_TEST_MESSAGE(compared << " (algorithm, problem) reports compared; " << unreported
                                << " supported pairs without a cuDNN report");
    BOOST_TEST(compared > 0);
}

namespace {
const Algorithm* cpu_tf32() {
    try {
        return &find_algorithm("cpu.im2col_gemm.tf32");
    } catch (const Error&) {
        return nullptr;
    }
}
struct CpuTf32Ready {
    boost::test_tools::assertion_result operator()(utf::test_unit_id) const {
        const Algorithm* a = cpu_tf32();
        ConvProblem p = ConvProblem::parse("n=2,c=3,k=5,in=7x9,ker=3x3,pad=1x1");
        if (a && a->supports(p)) return true;
        const std::string why =
            a ? "cpu.im2col_gemm.tf32 does not support " + p.to_string() + " (" + a->supports(p).reason + ")"
              : "cpu.im2col_gemm.tf32 is not compiled in";
        // Not the "skipped: " line: that one means "no GPU" to ctest (SKIP_REGULAR_EXPRESSION).
        std::cout << "tf32_agrees_with_cpu_emulation not run (" << why << ")" << std::endl;
        boost::test_tools::assertion_result r(false);
        r.message() << why;
        return r;
    }
};
}  // namespace

// TF32 results (f32 algorithms that may use tensor cores) against convtune's CPU TF32 emulation:
// both are within their bounds of the exact result, so they differ by at most the sum of the
// bounds, scaled by the same sum|a*b|.
BOOST_AUTO_TEST_CASE(tf32_agrees_with_cpu_emulation, *utf::precondition(CpuTf32Ready{})) {
    const Algorithm& cpu = *cpu_tf32();
    auto cases = test::expand(test::awkward_shapes(), {DataType::f32});
    for (const auto& c : resnet_layers(1))
        if (c.problem.c * c.problem.k <= 256 * 256) cases.push_back(c);
    int compared = 0;
    for (const auto& c : cases) {
        const ConvProblem& p = c.problem;
        if (!cpu.supports(p)) continue;
        const HostTensors in = make_host_tensors(p, 5);
        HostTensors ct = in;
        BOOST_TEST_REQUIRE(execute(cpu, ct).status.ok());
        const OracleResult ref = oracle(in);
        const std::vector<std::byte>& cpu_out = output_of(ct);
        for (const Algorithm* a : cudnn_algorithms()) {
            if (!a->notes().has(Note::tensor_core) || !a->supports(p) || runtime_compiled(*a, p)) continue;
            HostTensors gt = in;
            if (!execute(*a, gt).status.ok()) continue;  // reported by the oracle tests
            const std::vector<std::byte>& gpu_out = output_of(gt);
            const auto* g = reinterpret_cast<const float*>(gpu_out.data());
            const auto* e = reinterpret_cast<const float*>(cpu_out.data());
            const double bound = a->error_bound(p) + cpu.error_bound(p);
            double worst = 0;
            for (std::size_t i = 0; i < ref.magnitude.size(); ++i)
                worst = std::max(worst, std::abs(static_cast<double>(g[i]) - e[i]) / (ref.magnitude[i] + 1e-30));
            BOOST_TEST(worst <= bound,
                       a->id() << " vs " << cpu.id() << " on " << p.to_string() << ": " << worst << " > " << bound);
            ++compared;
        }
    }
    BOOST_TEST_MESSAGE(compared << " TF32 (algorithm, problem) pairs compared with " << cpu.id());
    BOOST_TEST(compared > 0);
}

BOOST_AUTO_TEST_CASE(heuristic_order_is_complete_and_starts_with_mode_a) {
    std::vector<ConvProblem> problems;
    for (const char* s : {"dir=fwd,dtype=f16,layout=nhwc,n=8,c=64,k=64,in=56x56,ker=3x3,pad=1x1",
                          "dir=bwd_data,dtype=f32,layout=nchw,n=4,c=256,k=64,in=28x28,ker=1x1",
                          "dir=bwd_filter,dtype=bf16,layout=nhwc,n=2,c=32,k=32,g=32,in=14x14,ker=3x3,pad=1x1",
                          "dir=fwd,dtype=f32,layout=nchw,n=2,c=4,k=3,in=13x13,ker=3x3,pad=0x0,pad_end=1x1"})
        problems.push_back(ConvProblem::parse(s));
    for (const ConvProblem& p : problems) {
        const auto order = cudnn_backend().heuristic_order(p);
        std::set<const Algorithm*> in_order(order.begin(), order.end());
        BOOST_TEST(in_order.size() == order.size(), "duplicates in heuristic_order for " << p.to_string());
        std::set<const Algorithm*> supported;
        for (const Algorithm* a : cudnn_algorithms())
            if (a->supports(p)) supported.insert(a);
        BOOST_TEST((in_order == supported),
                   "heuristic_order is not the set of supporting algorithms for " << p.to_string());
        // The lazy ranking behind it: every algorithm of p's direction once, no other.
        std::vector<const Algorithm*> ranked;
        for (auto k = cudnn_backend().ranking(p); const Algorithm* a = k->next();) ranked.push_back(a);
        std::set<const Algorithm*> in_ranking(ranked.begin(), ranked.end()), of_direction;
        for (const Algorithm* a : cudnn_algorithms())
            if (!test::starts_with(a->supports(p).reason, "direction")) of_direction.insert(a);
        BOOST_TEST(in_ranking.size() == ranked.size(), "duplicates in the ranking for " << p.to_string());
        BOOST_TEST((in_ranking == of_direction),
                   "the ranking is not every algorithm of the direction for " << p.to_string());
        const Algorithm* first_a = nullptr;
        for (const Algorithm* a : cudnn_ranking(p, CudnnRanking::mode_a))
            if (a->supports(p)) {
                first_a = a;
                break;
            }
        if (first_a)
            BOOST_TEST(order.front() == first_a, p.to_string() << ": order starts with " << order.front()->id());
        BOOST_TEST_MESSAGE(p.to_string() << ": " << order.size() << " supported; first "
                                         << (order.empty() ? "-" : order.front()->id()) << "; mode A lists "
                                         << cudnn_ranking(p, CudnnRanking::mode_a).size() << ", B "
                                         << cudnn_ranking(p, CudnnRanking::mode_b).size() << ", fallback "
                                         << cudnn_ranking(p, CudnnRanking::fallback).size() << ", legacy v7 "
                                         << cudnn_ranking(p, CudnnRanking::legacy_v7).size());
        BOOST_TEST(!order.empty());
    }
}

BOOST_AUTO_TEST_CASE(finder_results_map_to_supported_algorithms) {
    for (const char* s : {"dir=fwd,dtype=f32,layout=nchw,n=8,c=64,k=64,in=28x28,ker=3x3,pad=1x1",
                          "dir=bwd_filter,dtype=f16,layout=nhwc,n=8,c=64,k=128,in=28x28,ker=1x1"}) {
        const ConvProblem p = ConvProblem::parse(s);
        for (bool tf32 : {false, true}) {
            const auto results = cudnn_find(p, {tf32, SIZE_MAX});
            BOOST_TEST_REQUIRE(!results.empty());
            BOOST_TEST_REQUIRE(results.front().algorithm != nullptr, p.to_string()
                                                                         << ": " << results.front().status.message);
            double last = 0;
            int ok = 0;
            for (const auto& r : results) {
                if (!r.status.ok()) continue;
                BOOST_TEST_REQUIRE(r.algorithm != nullptr);
                BOOST_TEST(static_cast<bool>(r.algorithm->supports(p)), r.algorithm->id()
                                                                            << " found by cuDNN but not supported");
                BOOST_TEST(r.ms >= last);
                last = r.ms;
                ++ok;
                if (!tf32 && p.dtype == DataType::f32)
                    BOOST_TEST(!r.algorithm->notes().has(Note::tensor_core), r.algorithm->id());
            }
            BOOST_TEST(ok > 0);
            BOOST_TEST_MESSAGE(p.to_string()
                               << (tf32 ? " tf32" : "") << ": finder picks " << results.front().algorithm->id()
                               << " at " << results.front().ms << " ms, " << ok << " algorithms timed");
        }
    }
}

BOOST_AUTO_TEST_CASE(memory_failures_are_values) {
    const Backend& b = cudnn_backend();
    DeviceBuffer huge = b.allocate(std::size_t(1) << 52);
    BOOST_TEST(!huge, "a 4 PiB allocation succeeded");
    DeviceBuffer small = b.allocate(1024);
    BOOST_TEST(static_cast<bool>(small), "a 1 KiB allocation failed after a failed huge one");
    // A workspace smaller than the algorithm needs is refused, not run.
    const ConvProblem p = ConvProblem::parse("dir=fwd,dtype=f32,layout=nchw,n=4,c=32,k=32,in=32x32,ker=3x3,pad=1x1");
    int refused = 0;
    for (const Algorithm* a : b.algorithms()) {
        if (!a->supports(p) || runtime_compiled(*a, p) || a->workspace_size(p) == 0) continue;
        HostTensors t = make_host_tensors(p, 3);
        DeviceBuffer x = b.allocate(t.x.size()), w = b.allocate(t.w.size()), y = b.allocate(t.y.size());
        const Status s =
            a->run(p, {{x.data(), t.x.size()}, {w.data(), t.w.size()}, {y.data(), t.y.size()}}, Workspace{nullptr, 0});
        BOOST_TEST(!s.ok(), a->id() << " ran without its " << a->workspace_size(p) << "-byte workspace");
        ++refused;
    }
    BOOST_TEST_MESSAGE(refused << " algorithms with a workspace refused to run without it");
    BOOST_TEST(refused > 0, "no algorithm with a workspace supports " << p.to_string() << ": nothing was checked");
}

// The flags through the real selector on the GPU, rule by rule as test_selector proves them on a
// scripted backend: benchmark off runs cuDNN's heuristic pick untimed; PyTorch's search times
// once per candidate until benchmark_limit succeeded and its key has no benchmark; deterministic
// drops NONDETERMINISTIC; allow_tf32=0 drops TENSOR_CORE for f32; the winner is correct.
BOOST_AUTO_TEST_CASE(flag_semantics_through_the_selector) {
    Backend& b = find_backend("cudnn");
    const ConvProblem f32 = ConvProblem::parse("dir=fwd,dtype=f32,layout=nchw,n=8,c=64,k=64,in=28x28,ker=3x3,pad=1x1");
    const ConvProblem wgrad =
        ConvProblem::parse("dir=bwd_filter,dtype=f16,layout=nhwc,n=8,c=64,k=64,in=28x28,ker=3x3,pad=1x1");
    auto timed = [](const Decision& d) {
        int n = 0;
        for (const Candidate& c : d.candidates) n += !c.samples_ms.empty();
        return n;
    };
    // The chosen candidate; its notes are the algorithm's notes on the problem (notes_for).
    auto chosen = [](const Decision& d) -> const Candidate& {
        return *std::find_if(d.candidates.begin(), d.candidates.end(),
                             [&](const Candidate& c) { return c.id == d.algorithm; });
    };
    {
        TuningCache cache;
        Selector s(b, cache);
        cudnn_forget_plans();
        const auto d = s.select(f32, parse_flags("policy=pytorch,benchmark=0"));
        BOOST_TEST((d->source == Source::heuristic));
        BOOST_TEST(timed(*d) == 0);
        BOOST_TEST(d->algorithm == std::string(b.heuristic_order(f32).front()->id()));
        // Benchmark off decides the support of the candidates up to its choice only.
        int unchecked = 0;
        for (const Candidate& c : d->candidates) unchecked += c.state == Candidate::State::not_checked;
        BOOST_TEST(unchecked > 0);
    }
    {
        TuningCache cache;
        Selector s(b, cache);
        const auto d = s.select(f32, parse_flags("policy=pytorch,benchmark=1,benchmark_limit=3"));
        BOOST_TEST((d->source == Source::search));
        BOOST_TEST(timed(*d) == 3);
        for (const Candidate& c : d->candidates)
            if (!c.samples_ms.empty()) BOOST_TEST(c.samples_ms.size() == 1u, c.id);
        // benchmark is not in PyTorch's key: benchmark=0 now gets the searched choice.
        const auto again = s.select(f32, parse_flags("policy=pytorch,benchmark=0,benchmark_limit=3"));
        BOOST_TEST(again->algorithm == d->algorithm);
        BOOST_TEST((again->source == Source::memory));
        // convtune's key has it: benchmark=0 is a new decision from the heuristic.
        BOOST_TEST((s.select(f32, parse_flags("policy=convtune,benchmark=0"))->source == Source::heuristic));
    }
    for (const ConvProblem& p : {f32, wgrad}) {
        TuningCache cache;
        Selector s(b, cache);
        // benchmark_limit=0: the search reaches every candidate (a limit stops it, and the
        // candidates after are not checked), so every NONDETERMINISTIC one must be filtered.
        const auto det = s.select(p, parse_flags("policy=pytorch,benchmark=1,deterministic=1,benchmark_limit=0"));
        int dropped = 0;
        for (const Candidate& c : det->candidates)
            if (c.notes.has(Note::nondeterministic) && c.state != Candidate::State::unsupported &&
                c.state != Candidate::State::not_checked) {
                BOOST_TEST((c.state == Candidate::State::filtered),
                           c.id << " is NONDETERMINISTIC but " << to_string(c.state));
                ++dropped;
            }
        // Its notes on this problem (what the filter reads), a subset of its listed ones.
        BOOST_TEST(!chosen(*det).notes.has(Note::nondeterministic));
        BOOST_TEST_MESSAGE(p.to_string() << ": deterministic=1 dropped " << dropped
                                         << " NONDETERMINISTIC candidates, chose " << det->algorithm);
        if (p.direction == Direction::bwd_filter)
            BOOST_TEST(dropped > 0, "cuDNN offers no nondeterministic wgrad here");
    }
    {
        TuningCache cache;
        Selector s(b, cache);
        const auto off = s.select(f32, parse_flags("policy=pytorch,benchmark=1,allow_tf32=0,benchmark_limit=0"));
        for (const Candidate& c : off->candidates)
            if (c.notes.has(Note::tensor_core))
                BOOST_TEST(c.samples_ms.empty(), c.id << " is TENSOR_CORE but was timed with allow_tf32=0");
        BOOST_TEST(!chosen(*off).notes.has(Note::tensor_core));
        const auto on = s.select(f32, parse_flags("policy=pytorch,benchmark=1,allow_tf32=1,benchmark_limit=0"));
        int tc = 0;
        for (const Candidate& c : on->candidates) tc += c.notes.has(Note::tensor_core) && !c.samples_ms.empty();
        BOOST_TEST(tc > 0, "allow_tf32=1 timed no TENSOR_CORE candidate");
        BOOST_TEST_MESSAGE("f32 fwd: allow_tf32=0 chose "
                           << off->algorithm << " (" << off->median_ms << " ms), allow_tf32=1 chose " << on->algorithm
                           << " (" << on->median_ms << " ms), " << tc << " TENSOR_CORE candidates timed");
        // Both winners compute the right answer within their bounds.
        const HostTensors in = make_host_tensors(f32, 4);
        const OracleResult ref = oracle(in);
        for (const auto& d : {off, on}) {
            const auto out = test::check_against(*b.find(d->algorithm), in, ref);
            BOOST_TEST(out.passed, out.message);
        }
    }
}

// The two long sweeps last: a time limit cuts them, not the quick checks above.

// The sweep's dtype x layout combinations: f32 in both layouts, f16 channels-last, bf16
// channels-first (each layout and each type at least once per shape and direction).
bool sweep_combo(const ConvProblem& p) {
    return p.dtype == DataType::f32 || (p.dtype == DataType::f16 && p.layout == Layout::nhwc) ||
           (p.dtype == DataType::bf16 && p.layout == Layout::nchw);
}

BOOST_AUTO_TEST_CASE(awkward_shapes_against_oracle) {
    Tally t;
    std::vector<test::Case> cases;
    for (const auto& c : test::expand(test::awkward_shapes(), {DataType::f32, DataType::f16, DataType::bf16}))
        if (sweep_combo(c.problem)) cases.push_back(c);
    // Runtime-compiled engines on a subset: shapes where they were seen wrong before, in f32
    // channels-first and f16 channels-last.
    const std::set<std::string> rc_labels{"3x3 pad1 odd sizes", "stride2 3x3", "1x1 stride2 negative end pad",
                                          "depthwise", "1-D"};
    check_cases(cases, t, true, [&](const test::Case& c) {
        return rc_labels.count(c.label) && ((c.problem.dtype == DataType::f32 && c.problem.layout == Layout::nchw) ||
                                            (c.problem.dtype == DataType::f16 && c.problem.layout == Layout::nhwc));
    });
    report(t, "sweep");
    BOOST_TEST(t.pairs > 0);
    // Every direction has graph engines and legacy algorithms that run something of the sweep.
    for (const char* prefix : {"cudnn.fwd.", "cudnn.bwd_data.", "cudnn.bwd_filter.", "cudnn.graph.fwd.",
                               "cudnn.graph.bwd_data.", "cudnn.graph.bwd_filter."}) {
        int n = 0;
        for (auto& [id, count] : t.checked)
            if (id.rfind(prefix, 0) == 0) n += count;
        BOOST_TEST(n > 0, prefix << "* ran no sweep problem");
    }
}

BOOST_AUTO_TEST_CASE(resnet50_layers_against_oracle) {
    std::vector<test::Case> cases;
    // Every direction in f16 channels-last (the tensor-core path), forward also in f32
    // channels-first.
    for (const auto& c : resnet_layers(1))
        for (Direction d : {Direction::fwd, Direction::bwd_data, Direction::bwd_filter})
            for (DataType t : {DataType::f16, DataType::f32}) {
                if (t == DataType::f32 && d != Direction::fwd) continue;
                test::Case x = c;
                x.problem.direction = d;
                x.problem.dtype = t;
                x.problem.layout = t == DataType::f16 ? Layout::nhwc : Layout::nchw;
                cases.push_back(x);
            }
    BOOST_TEST_REQUIRE(cases.size() > 0u);
    Tally t;
    check_cases(cases, t, false, [](const test::Case& c) {
        return c.label == "resnet_50_v1_5:res2a_branch2b" && c.problem.dtype == DataType::f16;
    });
    report(t, "ResNet-50");
    BOOST_TEST(t.pairs > 0);
}

namespace {
// The engines refused for f32 after measurement (measured_wrong() in cudnn/cudnn_graph.cpp).
struct RefusedEngine {
    const char* id;
    Direction direction;
};
constexpr RefusedEngine kRefusedF32[] = {{"cudnn.graph.fwd.eng72", Direction::fwd},
                                         {"cudnn.graph.bwd_filter.eng69", Direction::bwd_filter},
                                         {"cudnn.graph.bwd_filter.eng70", Direction::bwd_filter}};

// Lifts the measured-wrong refusals (process-wide) for its lifetime, also when an assertion throws.
struct RefusalsLifted {
    RefusalsLifted() { cudnn_refuse_measured_wrong(false); }
    ~RefusalsLifted() { cudnn_refuse_measured_wrong(true); }
    RefusalsLifted(const RefusalsLifted&) = delete;
    RefusalsLifted& operator=(const RefusalsLifted&) = delete;
};

std::string shortened(std::string s, std::size_t n = 90) {
    if (s.size() > n) s = s.substr(0, n - 3) + "...";
    return s;
}

struct ProbeCount {
    int run = 0, failed = 0, unsupported = 0, run_failed = 0;
    int failed_f32 = 0;       // failed where the f32 refusal is the one that applies
    int failed_accepted = 0;  // failed where no refusal applies (one narrowed too far)
};
}  // namespace

// Not run by default (--run_test=gpu/refused_engines_probe; gpu-pkg/run.sh refused): fwd eng72
// and bwd_filter eng69/eng70, refused for f32 after measurement, against the oracle with the
// refusals lifted, to find the shapes they are wrong on: the sweep in f32 (both layouts), the
// ResNet-50 layers at batch 2 and five of them at batch 32 (where PyTorch runs eng69/eng70), in
// the engines' directions. One line "probe: <id> PASS|FAIL|UNSUPPORTED(why)|RUNFAIL(status) ..."
// per (engine, problem), refused= saying which refusal applies to the pair (f32: the one measured
// here; asymmetric_padding: every backward engine's, measured on others; no: none). Each engine
// must still fail on a pair its f32 refusal covers, and on none that no refusal covers.
// Runtime-compiled: ~1.4 s of kernel compile per supported pair.
BOOST_AUTO_TEST_CASE(refused_engines_probe, *utf::disabled() * utf::precondition(GpuAvailable{})) {
    std::vector<const Algorithm*> engines;
    for (const RefusedEngine& e : kRefusedF32) {
        engines.push_back(cudnn_backend().find(e.id));
        BOOST_TEST_REQUIRE(engines.back() != nullptr, e.id << " is not listed (cuDNN renumbered its engines?)");
    }
    std::vector<test::Case> cases;
    auto add = [&](const test::Case& c) {
        for (Direction d : {Direction::fwd, Direction::bwd_filter})
            for (Layout l : {Layout::nchw, Layout::nhwc}) {
                test::Case x = c;
                x.problem.direction = d;
                x.problem.layout = l;
                x.problem.dtype = DataType::f32;
                cases.push_back(x);
            }
    };
    // The sweep first (where the engines were seen wrong), then the layers at batch 32 (the
    // question), then batch 2: a time limit cuts the least telling ones.
    for (const auto& c : test::awkward_shapes()) add(c);
    const std::set<std::string> batch32{"resnet_50_v1_5:res2a_branch2a", "resnet_50_v1_5:res3a_branch2a",
                                        "resnet_50_v1_5:res3a_branch1", "resnet_50_v1_5:res4a_branch1",
                                        "resnet_50_v1_5:res3a_branch2b"};
    std::size_t found = 0;
    for (const auto& c : resnet_layers(32))
        if (batch32.count(c.label)) {
            add(c);
            ++found;
        }
    BOOST_TEST_REQUIRE(found == batch32.size(),
                       "found " << found << " of the " << batch32.size() << " batch-32 layers in the shape file");
    for (const auto& c : resnet_layers(2)) add(c);

    // Which refusal applies to each pair, asked before they are lifted.
    std::vector<std::vector<std::string>> refused(cases.size(), std::vector<std::string>(engines.size()));
    for (std::size_t i = 0; i < cases.size(); ++i)
        for (std::size_t e = 0; e < engines.size(); ++e) {
            if (kRefusedF32[e].direction != cases[i].problem.direction) continue;
            const Support s = engines[e]->supports(cases[i].problem);
            refused[i][e] = s ? "no" : test::starts_with(s.reason, "asymmetric padding") ? "asymmetric_padding" : "f32";
        }

    const RefusalsLifted lifted;
    BOOST_TEST_MESSAGE("refused engines: " << cases.size() << " f32 problems, measured-wrong refusals lifted");
    std::vector<ProbeCount> count(engines.size());
    const auto t0 = std::chrono::steady_clock::now();
    int pairs_run = 0;
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const test::Case& c = cases[i];
        const ConvProblem& p = c.problem;
        std::optional<HostTensors> in;
        std::optional<OracleResult> ref;  // one per problem, for every engine that supports it
        for (std::size_t e = 0; e < engines.size(); ++e) {
            if (kRefusedF32[e].direction != p.direction) continue;
            const Algorithm& a = *engines[e];
            ProbeCount& n = count[e];
            std::ostringstream verdict;
            std::string detail;
            bool ran = false;
            if (const Support s = a.supports(p); !s) {
                ++n.unsupported;
                verdict << "UNSUPPORTED(" << shortened(s.reason) << ") err=- bound=-";
            } else {
                if (!ref) {
                    in = make_host_tensors(p, 21);
                    ref = oracle(*in);
                }
                HostTensors t = *in;
                const OracleCheck o = check_run(a, t, *ref);
                if (!o.status.ok()) {
                    ++n.run_failed;
                    verdict << "RUNFAIL(" << o.status.code_name() << ": " << shortened(o.status.message)
                            << ") err=- bound=-";
                } else {
                    ++n.run;
                    ++pairs_run;
                    ran = true;
                    verdict << (o.within() ? "PASS" : "FAIL") << " err=" << o.stats.max_scaled << " bound=" << o.bound;
                    if (!o.within()) {
                        ++n.failed;
                        n.failed_f32 += refused[i][e] == "f32";
                        n.failed_accepted += refused[i][e] == "no";
                        detail = " where=(" + error_detail(o.stats) + ")";
                    }
                }
            }
            const std::optional<Notes> notes = cudnn_reported_notes(a, p);
            const std::optional<CudnnPlanInfo> info = cudnn_plan_info(a, p);
            BOOST_TEST_MESSAGE("probe: " << a.id() << " " << verdict.str() << " layout=" << layout_name(p.layout, 2)
                                         << " refused=" << refused[i][e] << " notes=["
                                         << (notes ? notes->to_string() : "?")
                                         << "] knobs=" << (info && !info->knobs.empty() ? info->knobs : "-")
                                         << " build_ms=" << (info ? info->build_ms : 0) << " problem=" << p.to_string()
                                         << " case=\"" << c.label << "\"" << detail);
            if (ran && pairs_run % 10 == 0)
                BOOST_TEST_MESSAGE("progress: "
                                   << pairs_run << " pairs run, problem " << i + 1 << "/" << cases.size() << ", "
                                   << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
                                   << " s");
        }
    }
    for (std::size_t e = 0; e < engines.size(); ++e) {
        const ProbeCount& n = count[e];
        const std::string_view id = engines[e]->id();
        BOOST_TEST_MESSAGE("summary: " << id << ": " << n.run << " pairs run, " << n.failed << " failed ("
                                       << n.failed_f32 << " under the f32 refusal, "
                                       << n.failed - n.failed_f32 - n.failed_accepted
                                       << " under the asymmetric-padding one, " << n.failed_accepted << " under none), "
                                       << n.run_failed << " run failures, " << n.unsupported << " unsupported");
        BOOST_TEST(n.failed_f32 > 0,
                   "the refusal of "
                       << id
                       << " for f32 is no longer justified by any probed case: narrow or drop it in measured_wrong()");
        BOOST_TEST(n.failed_accepted == 0,
                   id << " failed on " << n.failed_accepted
                      << " probed problems no refusal covers (refused=no): measured_wrong() is too narrow");
    }
}

BOOST_AUTO_TEST_SUITE_END()
