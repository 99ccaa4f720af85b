// The simulator on the scripted fake backend, where every time is known: workloads, streams,
// exact totals, break-even points and recommendations, a replay that reproduces the live run,
// and the report formats.
#define BOOST_TEST_MODULE sim
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "convtune/error.hpp"
#include "convtune/selector.hpp"
#include "convtune/stats.hpp"
#include "convtune/app/tune.hpp"
#include "convtune/app/workload.hpp"
#include "convtune/tuning_db.hpp"
#include "support/check.hpp"
#include "convtune/sim/perf_model.hpp"
#include "convtune/sim/recording.hpp"
#include "convtune/sim/replay_backend.hpp"
#include "convtune/sim/report.hpp"
#include "convtune/sim/simulator.hpp"
#include "support/fake_backend.hpp"

using namespace convtune;
using namespace convtune::sim;
using test::FakeBackend;
using test::FakeSpec;
namespace tt = boost::test_tools;

namespace {

// Two layers with the same multiply-adds (so times are easy to reason about), the second
// repeated four times in a pass.
const char* kTiny =
    "convtune-workload 1\n"
    "# a comment\n"
    "name tiny\n"
    "layer a x1 n=2,c=8,k=16,in=8x8,ker=3x3,pad=1x1\n"
    "layer b x4 n=2,c=16,k=8,in=8x8,ker=3x3,pad=1x1   # same MACs as a\n";

Stream tiny_stream(StreamKind kind = StreamKind::fixed, Mode mode = Mode::infer, uint64_t seed = 1) {
    StreamSpec spec;
    spec.kind = kind;
    spec.seed = seed;
    spec.batches = {1, 2, 4};
    spec.scales = {0.5, 1, 2};
    WorkloadOptions o;
    o.mode = mode;
    return Stream(spec, parse_workload_text(kTiny, "tiny"), o);
}

// "slow" is the heuristic's first choice at 2 g per call, "fast" runs at 1 g. g (ms) is set so that
// the tiny stream's calls last as long as a GPU kernel's (0.15 and 0.29 ms): the robust
// measurement stops a candidate after one round only when its calls last 0.25 ms or more
// (MeasureStrategy::early_drop_min_ms), and the derivations below count on slow's doing so.
constexpr double kMsPerGflop = 1000;
std::vector<FakeSpec> slow_fast() {
    FakeSpec slow{"slow"}, fast{"fast"};
    slow.ms_per_gflop = 2 * kMsPerGflop;
    fast.ms_per_gflop = kMsPerGflop;
    return {slow, fast};
}

std::vector<Setting> settings(std::initializer_list<const char*> names) {
    std::vector<Setting> v;
    for (const char* n : names) v.push_back(parse_setting(n));
    return v;
}

const ScenarioResult& scenario(const SimulationResult& r, const std::string& name) {
    for (const ScenarioResult& s : r.scenarios)
        if (s.setting.name == name) return s;
    throw std::runtime_error("no scenario " + name);
}
const Comparison& comparison(const SimulationResult& r, const std::string& name) {
    for (std::size_t i = 0; i < r.scenarios.size(); ++i)
        if (r.scenarios[i].setting.name == name) return r.comparisons[i];
    throw std::runtime_error("no scenario " + name);
}

// g: what "fast" takes for p (ms).
double g_ms(const ConvProblem& p) { return kMsPerGflop * p.flops() / 1e9; }

}  // namespace

BOOST_AUTO_TEST_SUITE(workloads)

BOOST_AUTO_TEST_CASE(resnet50_builtin_has_23_layers_and_53_convolutions) {
    const Workload w = load_workload("resnet50", CONVTUNE_SHAPES_DIR);
    BOOST_TEST(w.layers.size() == 23u);
    BOOST_TEST(w.convolutions() == 53);
    BOOST_TEST(w.layers.front().problem.n == 2);  // benchdnn's default mb
    // Training: every forward call, then bwd_data (not for the first layer) and bwd_filter.
    WorkloadOptions o;
    o.mode = Mode::train;
    o.batch = 8;
    int fwd = 0, bd = 0, bf = 0;
    for (const Call& c : instantiate(w, o)) {
        BOOST_TEST(c.problem.n == 8);
        (c.problem.direction == Direction::fwd ? fwd : c.problem.direction == Direction::bwd_data ? bd : bf) += c.count;
    }
    BOOST_TEST(fwd == 53);
    BOOST_TEST(bd == 52);
    BOOST_TEST(bf == 53);
    const std::vector<Call> calls = instantiate(w, o);
    BOOST_TEST(calls.back().layer == w.layers.front().name);  // the backward pass runs in reverse
    BOOST_TEST((calls.back().problem.direction == Direction::bwd_filter));
}

BOOST_AUTO_TEST_CASE(unknown_names_and_bad_files_are_named) {
    BOOST_CHECK_EXCEPTION(load_workload("no_such_net", CONVTUNE_SHAPES_DIR), Error,
                          [](const Error& e) { return std::string(e.what()).find("workload: ") == 0; });
    BOOST_CHECK_EXCEPTION(parse_workload_text("convtune-workload 1\nlayer a x0 c=1,k=1,in=4,ker=1\n", "t"), ParseError,
                          [](const Error& e) { return std::string(e.what()).find("line 2") != std::string::npos; });
    BOOST_CHECK_THROW(parse_workload_text("convtune-workload 1\nfoo bar\n", "t"), ParseError);
    BOOST_CHECK_THROW(parse_workload_text("convtune-workload 2\n", "t"), ParseError);
    // Without the header it is a shape file.
    const Workload w = parse_workload_text("ic3ih8oc4kh3n\"x*3\"\n", "t");
    BOOST_TEST(w.layers.size() == 1u);
    BOOST_TEST(w.layers[0].repeat == 3);
}

BOOST_AUTO_TEST_CASE(scaling_keeps_kernel_stride_and_padding) {
    const ConvProblem p = ConvProblem::parse("n=1,c=4,k=4,in=56x56,ker=3x3,stride=2x2,pad=1x1,pad_end=0x0");
    const ConvProblem q = scale_problem(p, {0.5, 1.25, 1});
    BOOST_TEST(q.in[0] == 28);
    BOOST_TEST(q.in[1] == 70);
    BOOST_TEST(q.kernel == p.kernel);
    BOOST_TEST(q.stride == p.stride);
    BOOST_TEST(q.pad_begin == p.pad_begin);
    BOOST_TEST(q.out(0) == 14);
    BOOST_TEST(q.out(1) == 35);
    // Never below what one output needs.
    const ConvProblem r = scale_problem(ConvProblem::parse("c=1,k=1,in=7x7,ker=7x7"), {0.1, 0.1, 1});
    BOOST_TEST(r.in[0] == 7);
    BOOST_TEST(r.out(0) == 1);
    // Framework padding is re-derived for the new size: ResNet-50's res5a_branch1 (1x1 stride 2
    // on 14x14, the last row left out: pad_end -1) at half the size has 7 rows and 4 outputs,
    // as PyTorch computes it (keeping pad_end -1 would give 3 outputs and a shape cuDNN refuses).
    const ConvProblem b1 =
        scale_problem(ConvProblem::parse("c=8,k=8,in=14x14,ker=1x1,stride=2x2,pad_end=-1x-1"), {0.5, 1, 1});
    BOOST_TEST(b1.in[0] == 7);
    BOOST_TEST(b1.pad_end[0] == 0);
    BOOST_TEST(b1.out(0) == 4);
    BOOST_TEST(b1.pad_end[1] == -1);  // not scaled
    // Truly asymmetric padding is kept as written.
    const ConvProblem a = scale_problem(ConvProblem::parse("c=1,k=1,in=10,ker=3,pad=0,pad_end=2"), {1.5, 1, 1});
    BOOST_TEST(a.in[0] == 15);
    BOOST_TEST(a.pad_end[0] == 2);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(streams)

BOOST_AUTO_TEST_CASE(streams_are_reproducible_from_their_seed) {
    for (StreamKind k : {StreamKind::batch, StreamKind::resolution, StreamKind::mixed}) {
        const Stream a = tiny_stream(k, Mode::infer, 7), b = tiny_stream(k, Mode::infer, 7),
                     c = tiny_stream(k, Mode::infer, 8);
        bool differs = false;
        std::set<std::string> shapes;
        for (int i = 0; i < 40; ++i) {
            BOOST_TEST((a.variant(i) == b.variant(i)));
            const Iteration ia = a.iteration(i), ib = b.iteration(i);
            BOOST_REQUIRE(ia.size() == ib.size());
            for (std::size_t j = 0; j < ia.size(); ++j) BOOST_TEST((ia[j].problem == ib[j].problem));
            differs = differs || !(a.variant(i) == c.variant(i));
            shapes.insert(ia[0].problem.to_string());
        }
        BOOST_TEST(differs, "seed 8 gives the same 40 choices as seed 7 for " << to_string(k));
        BOOST_TEST(shapes.size() > 1u);  // it does vary
    }
    // fixed: every iteration is the base instantiation
    const Stream f = tiny_stream();
    BOOST_TEST((f.iteration(0)[1].problem == f.iteration(13)[1].problem));
    BOOST_TEST(f.iteration(0).size() == 2u);
    BOOST_TEST(f.iteration(0)[1].count == 4);
}

BOOST_AUTO_TEST_CASE(batch_and_resolution_draw_from_their_lists) {
    const Stream s = tiny_stream(StreamKind::batch);
    std::set<int64_t> batches;
    for (int i = 0; i < 60; ++i) batches.insert(s.iteration(i)[0].problem.n);
    BOOST_TEST((batches == std::set<int64_t>{1, 2, 4}));
    const Stream r = tiny_stream(StreamKind::resolution);
    std::set<int64_t> hs, ws;
    for (int i = 0; i < 60; ++i) {
        const ConvProblem p = r.iteration(i)[0].problem;
        hs.insert(p.in[0]);
        ws.insert(p.in[1]);
        BOOST_TEST(p.out(0) == p.in[0]);  // 3x3, pad 1, stride 1: outputs follow the inputs
        BOOST_TEST(p.n == 2);
    }
    BOOST_TEST((hs == std::set<int64_t>{4, 8, 16}));
    BOOST_TEST((ws == std::set<int64_t>{4, 8, 16}));
    BOOST_TEST(default_batches(8) == (std::vector<int64_t>{1, 2, 4, 8, 16}));
}

BOOST_AUTO_TEST_CASE(trace_format) {
    const auto its = parse_trace(
        "# convtune-trace 1\n"
        "c=1,k=1,in=4x4,ker=1x1\n"
        "ic3ih8oc4kh3 x2\n"
        "\n\n"
        "c=1,k=1,in=4x4,ker=1x1\n"
        "# iteration\n"
        "dir=bwd_data,c=2,k=2,in=4x4,ker=3x3,pad=1x1 x3\n");
    BOOST_REQUIRE(its.size() == 3u);
    BOOST_TEST(its[0].size() == 2u);
    BOOST_TEST(its[0][1].count == 2);
    BOOST_TEST(its[1].size() == 1u);
    BOOST_TEST((its[2][0].problem.direction == Direction::bwd_data));
    BOOST_TEST(its[2][0].count == 3);
    BOOST_CHECK_EXCEPTION(parse_trace("c=1,k=1,in=4,ker=1\nc=1,k=1,in=4,ker=9\n"), ParseError,
                          [](const Error& e) { return std::string(e.what()).find("line 2") != std::string::npos; });
    BOOST_CHECK_THROW(parse_trace("c=1,k=1,in=4,ker=1 x0\n"), ParseError);
    BOOST_CHECK_THROW(parse_trace("# nothing\n"), ParseError);
}

BOOST_AUTO_TEST_CASE(bad_stream_options_name_the_option) {
    auto msg = [](auto f) {
        try {
            f();
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    BOOST_TEST(msg([] { StreamSpec::parse("sometimes"); }).find("stream: ") == 0u);
    app::WorkloadRequest a;
    a.workload = "resnet50";
    a.shapes_dir = CONVTUNE_SHAPES_DIR;
    a.batches = "1,x";
    a.stream = "batch";
    BOOST_TEST(msg([&] { a.make_stream(); }).find("batches: ") == 0u);
    a.batches = "";
    a.scales = "0.5,-1";
    BOOST_TEST(msg([&] { a.make_stream(); }).find("scales: ") == 0u);
    a.scales = "";
    a.mode = "sleep";
    BOOST_TEST(msg([&] { a.make_stream(); }).find("mode: ") == 0u);
    a.mode = "train";
    a.dtype = "f8";
    BOOST_TEST(msg([&] { a.make_stream(); }).find("dtype: ") == 0u);
    BOOST_TEST(msg([] { parse_setting("sometimes"); }).find("flags: ") == 0u);
    BOOST_TEST(msg([] { parse_setting("x:benchmark=maybe"); }).find("flags: ") == 0u);
    BOOST_TEST(parse_setting("lim2:benchmark=1,benchmark_limit=2").flags.benchmark_limit == 2);
    // They name the request's field, not a command-line option; the CLI renders its option.
    try {
        a.dtype = "";
        a.shapes_dir = "/nonexistent";
        a.make_stream();
        BOOST_FAIL("no error");
    } catch (const InvalidRequest& e) {
        BOOST_TEST(e.field() == "workload");
        BOOST_TEST(std::string(e.what()).find("(set shapes_dir or CONVTUNE_SHAPES_DIR)") != std::string::npos);
        BOOST_TEST(e.message([](std::string_view f) { return "--" + std::string(f); }).find("(set --shapes_dir or") !=
                   std::string::npos);
    }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(exact_arithmetic)

BOOST_AUTO_TEST_CASE(known_timings_give_known_totals_and_break_even) {
    FakeBackend b("fake", slow_fast());
    const Stream s = tiny_stream();
    const Iteration it = s.iteration(0);
    const double g = g_ms(it[0].problem);
    BOOST_REQUIRE(g_ms(it[1].problem) == g);
    SimulationOptions o;
    o.iterations = 10;
    o.settings = settings({"off", "on", "pytorch"});
    const SimulationResult r = simulate(b, s, o);
    BOOST_TEST(r.engine == "live");
    // off: the heuristic's "slow" for all 5 calls of every iteration, nothing timed.
    const ScenarioResult& off = scenario(r, "off");
    for (const IterationStats& x : off.iterations) {
        BOOST_TEST(x.search_ms == 0.0);
        BOOST_TEST(x.exec_ms == 5 * 2 * g, tt::tolerance(1e-12));
        BOOST_TEST(x.calls == 5);
    }
    BOOST_TEST(off.sum().misses == 2);
    BOOST_TEST(off.sum().hits == 48);
    BOOST_TEST(off.distinct_shapes() == 2);
    // on (convtune's robust timing): per shape, a warm-up and a sample of each candidate, after
    // which "slow" (every call 2x fast's) stops; fast, alone, takes its 3 samples.
    const ScenarioResult& on = scenario(r, "on");
    BOOST_TEST(on.iterations[0].search_ms == 2 * (2 * 2 * g + 4 * g), tt::tolerance(1e-12));
    BOOST_TEST(on.iterations[0].searches == 2);
    for (const IterationStats& x : on.iterations) BOOST_TEST(x.exec_ms == 5 * g, tt::tolerance(1e-12));
    for (std::size_t i = 1; i < on.iterations.size(); ++i) BOOST_TEST(on.iterations[i].search_ms == 0.0);
    // Cumulative: on = 16g + 5g i, off = 10g i -> on is ahead from i >= 3.2, i.e. iteration 4.
    BOOST_TEST(*comparison(r, "on").break_even == 4);
    BOOST_TEST(comparison(r, "on").saving == (100.0 - 66.0) / 100.0, tt::tolerance(1e-12));
    // pytorch: one warm-up + one sample per candidate: 12g of search; ahead from 2.4 -> iteration 3.
    const ScenarioResult& pt = scenario(r, "pytorch");
    BOOST_TEST(pt.sum().search_ms == 2 * (2 * 2 * g + 2 * g), tt::tolerance(1e-12));
    BOOST_TEST(*comparison(r, "pytorch").break_even == 3);
    // The recommendation is the biggest saving, with its break-even.
    BOOST_TEST(r.recommendation.setting == "pytorch");
    BOOST_TEST(r.recommendation.text.find("turn benchmark on") == 0u, r.recommendation.text);
    BOOST_TEST(r.recommendation.text.find("iteration 3") != std::string::npos, r.recommendation.text);
    BOOST_TEST(r.recommendation.saving == (100.0 - 62.0) / 100.0, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(short_runs_keep_benchmark_off_with_a_projection) {
    FakeBackend b("fake", slow_fast());
    SimulationOptions o;
    o.iterations = 3;
    o.settings = settings({"off", "on"});
    const SimulationResult r = simulate(b, tiny_stream(), o);
    // on: 16g + 15g = 31g vs off 30g; steady gain 5g per iteration -> 3 + 1/5 = 3.2.
    const Comparison& c = comparison(r, "on");
    BOOST_TEST(!c.break_even);
    BOOST_REQUIRE(c.projected_break_even.has_value());
    BOOST_TEST(*c.projected_break_even == 3.2, tt::tolerance(1e-9));
    BOOST_TEST(r.recommendation.setting == "off");
    BOOST_TEST(r.recommendation.text.find("keep benchmark off") == 0u, r.recommendation.text);
    BOOST_TEST(r.recommendation.text.find("about 4 iterations") != std::string::npos, r.recommendation.text);
    BOOST_TEST(r.recommendation.text.find("only 50.0%") != std::string::npos, r.recommendation.text);
}

BOOST_AUTO_TEST_CASE(benchmark_that_never_wins_is_never) {
    // The heuristic already picks the fastest: searching only costs.
    FakeSpec fast{"fast"}, slow{"slow"};
    fast.ms_per_gflop = 1;
    slow.ms_per_gflop = 2;
    FakeBackend b("fake", {fast, slow});
    SimulationOptions o;
    o.iterations = 20;
    o.settings = settings({"off", "on", "adaptive"});
    const SimulationResult r = simulate(b, tiny_stream(StreamKind::resolution), o);
    BOOST_TEST(!comparison(r, "on").break_even);
    BOOST_TEST(!comparison(r, "on").projected_break_even);
    BOOST_TEST(comparison(r, "on").saving < 0);
    BOOST_TEST(r.recommendation.setting == "off");
    BOOST_TEST(r.recommendation.text.find("never breaks even") != std::string::npos, r.recommendation.text);
    // Every shape's first call misses; the rest hit.
    const ScenarioResult& off = scenario(r, "off");
    BOOST_TEST(off.sum().misses == off.distinct_shapes());
    BOOST_TEST(off.sum().hits + off.sum().misses == off.sum().calls);
}

namespace {
// A result with the baseline "off" and one setting `other` (a standard one), each iteration's total given.
SimulationResult two_curves(const std::vector<double>& off, const std::vector<double>& on, const char* other = "on") {
    SimulationResult r;
    for (auto [name, totals] : {std::pair{"off", &off}, std::pair{other, &on}}) {
        ScenarioResult sc;
        sc.setting = parse_setting(name);
        for (double t : *totals) {
            IterationStats it;
            it.exec_ms = t;
            sc.iterations.push_back(it);
        }
        r.scenarios.push_back(sc);
    }
    r.iterations = static_cast<int>(off.size());
    analyze(r, 0.02);
    return r;
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_recommendation_names_the_adaptive_and_incremental_policies_only) {
    // The wording is the simulator's: convtune's own ways of paying for a search are named, any
    // other setting that saves is "turn benchmark on".
    for (const auto& [name, text] : {std::pair{"adaptive", "use the adaptive policy ('adaptive': "},
                                     {"incremental", "use the incremental policy ('incremental': "},
                                     {"on", "turn benchmark on ('on': "},
                                     {"pytorch", "turn benchmark on ('pytorch': "}}) {
        const SimulationResult r = two_curves({10, 10, 10}, {5, 5, 5}, name);
        BOOST_TEST(r.recommendation.setting == name);
        BOOST_TEST(r.recommendation.text.find(text) == 0u, r.recommendation.text);
    }
}

BOOST_AUTO_TEST_CASE(break_even_counts_touching_as_at_or_below) {
    // Cumulative off 10, 20, 30, 40, 50; on 25, 30, 35, 40, 50: equal from iteration 4 on.
    const SimulationResult r = two_curves({10, 10, 10, 10, 10}, {25, 5, 5, 5, 10});
    BOOST_REQUIRE(r.baseline == 0);
    BOOST_REQUIRE(comparison(r, "on").break_even.has_value());
    BOOST_TEST(*comparison(r, "on").break_even == 4);
    BOOST_TEST(comparison(r, "on").saving == 0.0);
}

BOOST_AUTO_TEST_CASE(break_even_is_where_it_stays_below_not_the_first_crossing) {
    // Cumulative off 10, 20, 30, 40, 50, 60; on 5, 35, 40, 45, 49, 54: below at iteration 1,
    // above at 2-4, below from 5 on. Break-even is 5.
    const SimulationResult r = two_curves({10, 10, 10, 10, 10, 10}, {5, 30, 5, 5, 4, 5});
    BOOST_REQUIRE(comparison(r, "on").break_even.has_value());
    BOOST_TEST(*comparison(r, "on").break_even == 5);
    // Ending above, after having been below, is no break-even at all.
    const SimulationResult r2 = two_curves({10, 10, 10}, {5, 5, 30});
    BOOST_TEST(!comparison(r2, "on").break_even.has_value());
}

BOOST_AUTO_TEST_CASE(adaptive_searches_recurring_shapes_only) {
    FakeBackend b("fake", slow_fast());
    SimulationOptions o;
    o.iterations = 4;
    o.settings = settings({"off", "adaptive:policy=adaptive,benchmark=1,adaptive_after=3"});
    const SimulationResult r = simulate(b, tiny_stream(), o);
    const ScenarioResult& a = scenario(r, "adaptive");
    // Layer b recurs 4 times per pass: searched on its third call, in iteration 1. Layer a
    // occurs once per pass: searched in iteration 3.
    BOOST_TEST(a.iterations[0].searches == 1);
    BOOST_TEST(a.iterations[1].searches == 0);
    BOOST_TEST(a.iterations[2].searches == 1);
    BOOST_TEST(a.iterations[3].searches == 0);
    const double g = g_ms(tiny_stream().iteration(0)[0].problem);
    // iteration 1: a slow (2g), b: 2 slow calls, search 8g (as under "on"), 2 fast calls
    BOOST_TEST(a.iterations[0].total_ms() == 2 * g + 2 * 2 * g + 8 * g + 2 * g, tt::tolerance(1e-12));
    BOOST_TEST(a.iterations[2].total_ms() == 8 * g + g + 4 * g, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(adaptive_auto_waits_as_many_calls_as_a_search_costs) {
    // adaptive_after=0 (the default): 2 eligible candidates x (1 warm-up + max_samples 15) = a
    // search on a shape's 32nd call. Layer b (4 calls a pass): iteration 8; layer a (1): 32.
    FakeBackend b("fake", slow_fast());
    SimulationOptions o;
    o.iterations = 40;
    o.settings = settings({"adaptive"});
    const SimulationResult r = simulate(b, tiny_stream(), o);
    const ScenarioResult& a = scenario(r, "adaptive");
    for (int i = 0; i < 40; ++i)
        BOOST_TEST(a.iterations[static_cast<std::size_t>(i)].searches == (i == 7 || i == 31 ? 1 : 0),
                   "iteration " << i + 1);
}

BOOST_AUTO_TEST_CASE(incremental_calls_are_execution_not_search) {
    // In-band tuning: each shape's calls run slow (the heuristic's pick, 2g) twice (its first call,
    // then a sample of what it takes before anything explores), fast's first call, then round 1
    // of slow and fast, after which "slow" (every call over 1.5x fast's) stops; fast, alone,
    // takes rounds 2 and 3 and is pinned: 7 calls, 3 slow and 4 fast. Exploring never costs more
    // than slow would (fast is faster), so the exploration budget never holds a call back. Layer b
    // (4 calls a pass) is pinned at its third call of iteration 2, layer a (1 call a pass) at the
    // end of iteration 7. Every call is execution.
    FakeBackend b("fake", slow_fast());
    SimulationOptions o;
    o.iterations = 10;
    o.settings = settings({"off", "on", "pytorch", "incremental"});
    const SimulationResult r = simulate(b, tiny_stream(), o);
    const double g = g_ms(tiny_stream().iteration(0)[0].problem);
    const ScenarioResult& in = scenario(r, "incremental");
    for (const IterationStats& x : in.iterations) {
        BOOST_TEST(x.search_ms == 0.0);
        BOOST_TEST(x.searches == 0);
    }
    // iteration 1: a slow; b slow, slow, fast, slow. Its first call is off's.
    BOOST_TEST(in.iterations[0].exec_ms == 2 * g + 7 * g, tt::tolerance(1e-12));
    BOOST_TEST(in.iterations[2].exec_ms == g + 4 * g, tt::tolerance(1e-12));  // a fast (its 3rd call); b fast, pinned
    BOOST_TEST(in.iterations[9].exec_ms == g + 4 * g, tt::tolerance(1e-12));
    // Total: a 3 x 2g + 4 x g + 3 x g, b 7g + 4g + 8 x 4g = 56g, against off's 100g, on's 66g and
    // pytorch's 62g: the incremental policy is recommended by name.
    BOOST_TEST(in.sum().exec_ms == 56 * g, tt::tolerance(1e-12));
    BOOST_TEST(comparison(r, "incremental").saving == 0.44, tt::tolerance(1e-12));
    BOOST_TEST(r.recommendation.setting == "incremental");
    BOOST_TEST(r.recommendation.text.find("use the incremental policy") == 0u, r.recommendation.text);
}

// The in-band policy's first-iteration target, on the replay docs/simulation.md reports:
// ResNet-50 fp32 training at batch 32 from the H200 recording. Pacing keeps exploration within a
// fifth of the convolution time so far, so the first iteration stays within 1.2x of benchmark
// off's (unpaced it was 2.0x: recurring shapes ran other candidates' cold first calls in it),
// and the first 100 iterations within 1.2x of off's too (plus one call's misestimate).
BOOST_AUTO_TEST_CASE(incremental_first_iteration_within_1_2x_of_off_on_the_h200_replay) {
    const Recording rec = Recording::load(std::string(CONVTUNE_TEST_DATA) + "/resnet50_h200_f32_train.json");
    StreamSpec spec;
    spec.kind = StreamKind::fixed;
    spec.seed = 1;
    WorkloadOptions wo;
    wo.mode = Mode::train;
    wo.batch = 32;
    const Stream stream(spec, load_workload("resnet50", CONVTUNE_SHAPES_DIR), wo);
    ReplayBackend b(rec, 1);
    SimulationOptions o;
    o.iterations = 100;
    o.settings = settings({"off", "incremental"});
    const SimulationResult r = simulate(b, stream, o);
    BOOST_TEST(r.estimated_problems == 0);
    const ScenarioResult &off = scenario(r, "off"), &in = scenario(r, "incremental");
    const double first_off = off.iterations[0].search_ms + off.iterations[0].exec_ms;
    const double first_in = in.iterations[0].search_ms + in.iterations[0].exec_ms;
    BOOST_TEST_MESSAGE("first iteration: off " << first_off << " ms, incremental " << first_in << " ms");
    BOOST_TEST(first_in <= 1.2 * first_off);
    BOOST_TEST(in.sum().exec_ms + in.sum().search_ms <= 1.2 * (off.sum().exec_ms + off.sum().search_ms));
}

BOOST_AUTO_TEST_CASE(a_setting_that_cannot_run_is_reported_not_fatal) {
    FakeSpec nd{"atomic"};
    nd.notes = Note::nondeterministic;
    nd.ms_per_gflop = 1;
    FakeBackend b("fake", {nd});
    SimulationOptions o;
    o.iterations = 2;
    o.settings = settings({"off", "on+det"});
    const SimulationResult r = simulate(b, tiny_stream(), o);
    BOOST_TEST(scenario(r, "off").failure.empty());
    BOOST_TEST(scenario(r, "on+det").failure.find("NONDETERMINISTIC") != std::string::npos,
               scenario(r, "on+det").failure);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(replay)

std::vector<FakeSpec> three() {
    FakeSpec slow{"slow"}, fast{"fast"}, atomic{"atomic"};
    slow.ms_per_gflop = 2;
    fast.ms_per_gflop = 1;
    fast.workspace = 4096;
    atomic.ms_per_gflop = 0.5;
    atomic.notes = Note::nondeterministic;
    FakeSpec never{"never"};
    never.mode = FakeSpec::Mode::unsupported;
    return {slow, fast, atomic, never};
}

BOOST_AUTO_TEST_CASE(replay_of_a_fake_recording_reproduces_the_live_run_exactly) {
    for (StreamKind k : {StreamKind::fixed, StreamKind::batch, StreamKind::mixed}) {
        FakeBackend live("fake", three());
        const Stream s = tiny_stream(k, Mode::train, 3);
        SimulationOptions o;
        o.iterations = 12;
        o.repeats = 1;  // one live run against one replay (a live run repeats by default)
        const SimulationResult a = simulate(live, s, o);

        FakeBackend rec_b("fake", three());
        RecordOptions ro;
        ro.samples = 3;
        Recording rec = record(rec_b, distinct_problems(s, o.iterations), ro);
        // The fake's support decisions and rankings take no time on its virtual clock, which the
        // live run is metered on; record() measures them on the wall clock: drop them.
        for (ProblemRecord& pr : rec.problems) {
            BOOST_TEST(pr.ranking_ms.has_value());
            pr.ranking_ms.reset();
            for (AlgorithmRecord& ar : pr.algorithms) ar.support_ms.reset();
        }
        // Through the file format and back.
        const Recording loaded = Recording::from_json(rec.to_json(), "memory");
        BOOST_TEST(loaded.to_json() == rec.to_json());
        BOOST_TEST(loaded.algorithms[2].notes.has(Note::nondeterministic));
        BOOST_TEST(loaded.problems[0].find("never")->supported == false);
        BOOST_TEST(loaded.problems[0].find("fast")->workspace == 4096u);
        ReplayBackend replay(loaded, 5);
        const SimulationResult b = simulate(replay, s, o);
        BOOST_TEST(b.engine == "replay");
        BOOST_TEST(b.estimated_problems == 0);
        BOOST_REQUIRE(a.scenarios.size() == b.scenarios.size());
        for (std::size_t i = 0; i < a.scenarios.size(); ++i) {
            const ScenarioResult &x = a.scenarios[i], &y = b.scenarios[i];
            BOOST_TEST(x.failure == y.failure);
            BOOST_REQUIRE(x.iterations.size() == y.iterations.size());
            for (std::size_t j = 0; j < x.iterations.size(); ++j) {
                // The fake backend's clock is a running sum, so its readings carry rounding.
                BOOST_TEST(x.iterations[j].search_ms == y.iterations[j].search_ms, tt::tolerance(1e-9));
                BOOST_TEST(x.iterations[j].exec_ms == y.iterations[j].exec_ms, tt::tolerance(1e-9));
                BOOST_TEST(x.iterations[j].hits == y.iterations[j].hits);
                BOOST_TEST(x.iterations[j].misses == y.iterations[j].misses);
                BOOST_TEST(x.iterations[j].searches == y.iterations[j].searches);
            }
        }
        BOOST_TEST(a.recommendation.text == b.recommendation.text);
        // Deterministic mode cannot use "atomic", so it is slower than plain benchmark on.
        BOOST_TEST(scenario(a, "on+det").sum().exec_ms > scenario(a, "on").sum().exec_ms);
    }
}

Recording hand_recording(std::vector<double> samples, std::optional<double> first = std::nullopt) {
    Recording r;
    r.environment = {"0.1.0", "handmade", "lib 1", "dev", ""};
    r.algorithms = {{"x", Notes{}}, {"y", Notes{}}};
    ProblemRecord p;
    p.problem = ConvProblem::parse("n=1,c=4,k=4,in=8x8,ker=3x3,pad=1x1");
    p.heuristic = {"x", "y"};
    AlgorithmRecord x, y;
    x.id = "x";
    y.id = "y";
    x.samples_ms = samples;
    x.first_ms = first;
    y.samples_ms = {100};
    p.algorithms = {x, y};
    r.problems.push_back(p);
    return r;
}

BOOST_AUTO_TEST_CASE(draws_reproduce_the_spread_and_are_seeded) {
    const ConvProblem p = ConvProblem::parse("n=1,c=4,k=4,in=8x8,ker=3x3,pad=1x1");
    ReplayBackend b(hand_recording({1, 2, 3, 4}, 50.0), 1);
    const Algorithm* x = b.find("x");
    auto draws = [&](uint64_t seed) {
        b.reset(seed);
        std::vector<double> v;
        for (int i = 0; i < 400; ++i) v.push_back(b.time_ms([&] { (void)x->run(p, {}, {}); }));
        return v;
    };
    const std::vector<double> a = draws(1), a2 = draws(1), c = draws(2);
    BOOST_TEST(a == a2);
    BOOST_TEST(a != c);
    BOOST_TEST(a[0] == 50.0);  // the first (cold) call
    std::set<double> seen(a.begin() + 1, a.end());
    BOOST_TEST((seen == std::set<double>{1, 2, 3, 4}));
    BOOST_TEST(!b.needs_tensor_data());
    BOOST_TEST(b.allocate(std::size_t{1} << 40).bytes() == std::size_t{1} << 40);  // virtual memory
}

BOOST_AUTO_TEST_CASE(sequence_factor_divides_by_the_median_of_an_even_sample_count) {
    // The one median (stats.hpp) of the pick's two samples {1, 3} is 2, not the upper value 3.
    // Runs of the only algorithm: start-up (6), the cold first call (1), the recorded cold call
    // and its 2 samples, then 6 passes of the sequence (1 warm-up + 5 timed) at 2 ms each.
    FakeBackend b("fake", {{"a", {1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 2}}});
    RecordOptions ro;
    ro.samples = 2;
    const Recording r = record(b, {ConvProblem::parse("n=1,c=4,k=4,in=8x8,ker=3x3,pad=1x1")}, ro);
    BOOST_TEST(r.problems[0].algorithms[0].samples_ms == (std::vector<double>{1, 3}), tt::per_element());
    BOOST_REQUIRE(r.sequence_factor.has_value());
    BOOST_TEST(*r.sequence_factor == 1.0);
}

BOOST_AUTO_TEST_CASE(a_recordings_support_decision_includes_the_deferred_plan_build) {
    // "slow_build" builds its plan (a kernel compile on cuDNN) when its workspace is first asked:
    // its support decision carries that time, its first call does not (the plan is built before
    // it), so a replay that decides support for it is charged the build whether it times it or
    // not, as PyTorch builds every listed configuration and times only benchmark_limit of them.
    FakeSpec slow{"slow_build", {1}};
    slow.plan_build_ms = 30;
    FakeBackend b("fake", {{"quick", {1}}, slow});
    RecordOptions ro;
    ro.samples = 1;
    const Recording r = record(b, {ConvProblem::parse("n=1,c=4,k=4,in=8x8,ker=3x3,pad=1x1")}, ro);
    const AlgorithmRecord* s = r.problems.at(0).find("slow_build");
    const AlgorithmRecord* q = r.problems.at(0).find("quick");
    BOOST_REQUIRE(s && q && s->support_ms && q->support_ms);
    BOOST_TEST(*s->support_ms >= 30.0);
    BOOST_TEST(*q->support_ms < 30.0);
}

BOOST_AUTO_TEST_CASE(a_pytorch_replay_without_plan_builds_in_tf32_is_flagged) {
    // A recording made now says its support decisions include plan builds, and keeps saying so
    // through the file; one without the mark (made before) replays PyTorch's TF32 or fp16
    // search charged too little, and the report says which settings.
    FakeBackend b("fake", slow_fast());
    const Stream s = tiny_stream();
    RecordOptions ro;
    ro.samples = 1;
    Recording rec = Recording::from_json(record(b, distinct_problems(s, 1), ro).to_json(), "memory");
    BOOST_TEST(rec.support_includes_plan_builds);
    SimulationOptions o;
    o.iterations = 2;
    o.settings = settings({"off", "pt:policy=pytorch,benchmark=1,allow_tf32=1",
                           "pt32:policy=pytorch,benchmark=1,allow_tf32=0", "on:benchmark=1,allow_tf32=1"});
    {
        ReplayBackend replay(rec);
        BOOST_TEST(simulate(replay, s, o).builds_missing.empty());
    }
    rec.support_includes_plan_builds = false;
    BOOST_TEST(!Recording::from_json(rec.to_json(), "memory").support_includes_plan_builds);
    ReplayBackend replay(rec);
    const SimulationResult r = simulate(replay, s, o);
    // Only PyTorch's policy builds every listed plan, and only TF32 (these problems are f32) needs it.
    BOOST_TEST(r.builds_missing == std::vector<std::string>{"pt"}, boost::test_tools::per_element());
    const std::string t = format_table(r, ReportContext{"tiny", "fake"});
    BOOST_TEST(t.find("warning: 'pt' emulates PyTorch's search in TF32 or fp16") != std::string::npos, t);
}

BOOST_AUTO_TEST_CASE(a_recording_keeps_each_support_decision_and_the_ranking_time) {
    // Every algorithm of the problem, supported or not, gets the wall time of its first support
    // decision (on cuDNN, its plan build); the problem gets its ranking's time; both survive the
    // file, and a recording without them (made before they were measured) still loads.
    FakeBackend b("fake", {{"a", {1}}, {"b", {1}, {}, 0, FakeSpec::Mode::unsupported}});
    RecordOptions ro;
    ro.samples = 1;
    const Recording r = Recording::from_json(
        record(b, {ConvProblem::parse("n=1,c=4,k=4,in=8x8,ker=3x3,pad=1x1")}, ro).to_json(), "memory");
    const ProblemRecord& pr = r.problems.at(0);
    BOOST_REQUIRE(pr.ranking_ms.has_value());
    BOOST_TEST(*pr.ranking_ms >= 0.0);
    BOOST_REQUIRE(pr.algorithms.size() == 2u);
    for (const AlgorithmRecord& a : pr.algorithms) {
        BOOST_TEST_CONTEXT(a.id) {
            BOOST_REQUIRE(a.support_ms.has_value());
            BOOST_TEST(*a.support_ms >= 0.0);
        }
    }
    BOOST_TEST(!pr.algorithms[1].supported);
    nlohmann::json old = nlohmann::json::parse(r.to_json());
    for (auto& jp : old["problems"]) {
        jp.erase("ranking_ms");
        for (auto& [id, ja] : jp["algorithms"].items()) ja.erase("support_ms");
    }
    const Recording before = Recording::from_json(old.dump(), "old");
    BOOST_TEST(!before.problems[0].ranking_ms.has_value());
    BOOST_TEST(!before.problems[0].algorithms[0].support_ms.has_value());
}

BOOST_AUTO_TEST_CASE(a_search_pass_times_each_problems_candidates_first_in_the_searchs_order) {
    // c's first call in the process takes 9 ms and later ones 1 ms (a kernel loaded at its first
    // launch). With TF32 off, a search leaves c out on the f32 problem and first runs it on the
    // f16 one; the sweep alone would run c on the f32 problem first and charge its load there.
    const std::vector<FakeSpec> specs{{"a", {1}}, {"c", {9, 1}, Notes{Note::tensor_core}}};
    const std::vector<ConvProblem> problems{ConvProblem::parse("dtype=f32,n=1,c=4,k=4,in=8x8,ker=3x3,pad=1x1"),
                                            ConvProblem::parse("dtype=f16,n=1,c=4,k=4,in=8x8,ker=3x3,pad=1x1")};
    auto first_of_c = [](const Recording& r, std::size_t i) { return *r.problems.at(i).find("c")->first_ms; };
    RecordOptions ro;
    ro.samples = 1;
    FakeBackend sweep_only("fake", specs);
    const Recording before = record(sweep_only, problems, ro);
    BOOST_TEST(first_of_c(before, 0) == 9.0);
    BOOST_TEST(first_of_c(before, 1) == 1.0);
    BOOST_TEST(before.search_flags.empty());
    ro.search_flags = parse_flags("benchmark=1,allow_tf32=0");
    FakeBackend searched("fake", specs);
    const Recording r = Recording::from_json(record(searched, problems, ro).to_json(), "memory");
    BOOST_TEST(first_of_c(r, 0) == 1.0);
    BOOST_TEST(first_of_c(r, 1) == 9.0);
    BOOST_TEST(r.search_flags == ro.search_flags->to_string());
    nlohmann::json bad = nlohmann::json::parse(r.to_json());
    bad["search_flags"] = "benchmark=maybe";
    BOOST_CHECK_THROW(Recording::from_json(bad.dump(), "bad"), ParseError);
}

BOOST_AUTO_TEST_CASE(a_recording_keeps_the_frameworks_listings_and_its_replay_ranks_with_them) {
    // Where the heuristic and fallback lists' listings (Ranking::in_lists) differ from the
    // default (1 when suggested), the recording keeps them and a replay's ranking answers them,
    // so the pytorch policy replays PyTorch's duplicate and unseen plans as live.
    std::vector<FakeSpec> specs{{"a", {1}}, {"b", {2}}, {"c", {3}}};
    specs[1].listings = 2;
    specs[2].listings = 0;
    FakeBackend b("fake", specs);
    RecordOptions ro;
    ro.samples = 1;
    const ConvProblem p = ConvProblem::parse("n=1,c=4,k=4,in=8x8,ker=3x3,pad=1x1");
    const Recording r = Recording::from_json(record(b, {p}, ro).to_json(), "memory");
    BOOST_TEST((r.problems.at(0).listings == std::map<std::string, int>{{"b", 2}, {"c", 0}}));
    ReplayBackend replay(r, 1);
    const auto ranking = replay.ranking(p);
    std::map<std::string, int> seen;
    while (const Algorithm* a = ranking->next()) seen[std::string(a->id())] = ranking->in_lists(*a, kRecordedLists);
    BOOST_TEST((seen == std::map<std::string, int>{{"a", 1}, {"b", 2}, {"c", 0}}));
    nlohmann::json bad = nlohmann::json::parse(r.to_json());
    bad["problems"][0]["listings"] = {{"zzz", 1}};
    BOOST_CHECK_THROW(Recording::from_json(bad.dump(), "bad"), ParseError);
    bad["problems"][0]["listings"] = {{"b", -1}};
    BOOST_CHECK_THROW(Recording::from_json(bad.dump(), "bad"), ParseError);
}

BOOST_AUTO_TEST_CASE(a_recording_saved_as_json_gz_is_compressed_and_loads_the_same) {
    // ".json.gz": written gzip-compressed, read back equal; a damaged or truncated file is
    // refused with its path, and a library folder takes .json.gz files as it takes .json ones.
    FakeBackend b("fake", {{"a", {1}}, {"b", {2}}});
    RecordOptions ro;
    ro.samples = 2;
    const Recording r = record(b, {ConvProblem::parse("n=1,c=4,k=4,in=8x8,ker=3x3,pad=1x1")}, ro);
    const auto dir = std::filesystem::temp_directory_path() / ("convtune-gz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir / "lib" / "fake");
    const std::string gz = (dir / "lib" / "fake" / "r.json.gz").string();
    r.save(gz);
    std::ifstream in(gz, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    BOOST_REQUIRE(bytes.size() > 2);
    BOOST_TEST(
        (static_cast<unsigned char>(bytes[0]) == 0x1f && static_cast<unsigned char>(bytes[1]) == 0x8b));  // gzip magic
    BOOST_TEST(bytes.size() < r.to_json().size());
    BOOST_TEST(Recording::load(gz).to_json() == r.to_json());
    BOOST_TEST(load_replay("fake", (dir / "lib").string()).to_json() == r.to_json());
    const std::string bad = (dir / "bad.json.gz").string();
    std::ofstream(bad, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    BOOST_CHECK_EXCEPTION(Recording::load(bad), ParseError, [&](const ParseError& e) {
        return std::string(e.what()).find("bad.json.gz") != std::string::npos;
    });
    std::ofstream(bad, std::ios::binary) << "not gzip at all";
    BOOST_CHECK_THROW(Recording::load(bad), ParseError);
    std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(startup_and_sequence_factor_are_charged_where_they_belong) {
    // The scenario's first call pays the process start-up once; executions are scaled by the
    // sequence factor, the selector's timed samples (search) are not.
    const ConvProblem p = ConvProblem::parse("n=1,c=4,k=4,in=8x8,ker=3x3,pad=1x1");
    Recording r = hand_recording({3}, 50.0);
    r.startup_ms = 7;
    r.sequence_factor = 2;
    const Recording loaded = Recording::from_json(r.to_json(), "memory");
    BOOST_TEST(*loaded.startup_ms == 7.0);
    BOOST_TEST(*loaded.sequence_factor == 2.0);
    ReplayBackend b(loaded, 1);
    const Algorithm* x = b.find("x");
    for (int scenario = 0; scenario < 2; ++scenario) {
        b.reset(1);
        BOOST_TEST(b.time_ms([&] { (void)x->run(p, {}, {}); }) == 57.0);  // cold call + start-up
        BOOST_TEST(b.time_ms([&] { (void)x->run(p, {}, {}); }) == 3.0);   // a timed sample: isolated
        // An execution: in sequence.
        b.set_in_sequence(true);
        BOOST_TEST(b.time_ms([&] { (void)x->run(p, {}, {}); }) == 6.0);
        b.set_in_sequence(false);
    }
    std::string bad = loaded.to_json();
    bad.replace(bad.find("\"sequence_factor\":2.0"), 21, "\"sequence_factor\":0.0");
    BOOST_CHECK_THROW(Recording::from_json(bad, "f"), ParseError);
}

BOOST_AUTO_TEST_CASE(a_simulation_charges_a_replays_executions_in_sequence_and_its_searches_isolated) {
    // The simulator's meter tells the replay which calls are executions (SelectorObserver::
    // executing): with a sequence factor of 2 every execution costs twice what it costs without,
    // every search's timed call the same. No call is cold (no first_ms), so each is a draw.
    const Stream s = tiny_stream(StreamKind::batch, Mode::train, 3);
    SimulationOptions o;
    o.iterations = 6;
    o.settings = settings({"off", "on", "pytorch"});
    FakeBackend fake("fake", three());
    RecordOptions ro;
    ro.samples = 3;
    Recording rec = record(fake, distinct_problems(s, o.iterations), ro);
    for (ProblemRecord& pr : rec.problems) {
        pr.ranking_ms.reset();
        for (AlgorithmRecord& ar : pr.algorithms) ar.support_ms.reset(), ar.first_ms.reset();
    }
    rec.startup_ms.reset();
    rec.sequence_factor = 1;
    ReplayBackend isolated(rec, 5);
    rec.sequence_factor = 2;
    ReplayBackend in_sequence(rec, 5);
    const SimulationResult a = simulate(isolated, s, o), b = simulate(in_sequence, s, o);
    BOOST_REQUIRE(a.scenarios.size() == b.scenarios.size());
    for (std::size_t i = 0; i < a.scenarios.size(); ++i) {
        const IterationStats x = a.scenarios[i].sum(), y = b.scenarios[i].sum();
        BOOST_TEST(x.exec_ms > 0);
        BOOST_TEST(y.exec_ms == 2 * x.exec_ms, tt::tolerance(1e-12));
        BOOST_TEST(y.search_ms == x.search_ms, tt::tolerance(1e-12));
    }
    BOOST_TEST(scenario(a, "on").sum().search_ms > 0);
}

// s0..s11 suggested (s3 the fastest), then u0 and u1 (faster still, the heuristics do not
// suggest them), and z, which does not support the problem. With `deciding`, each support
// decision was measured (s<i>: 10 + i ms, u: 1000 ms, z: 100 ms) and the ranking took 5 ms;
// without, the recording is one made before they were measured.
Recording deciding_recording(bool deciding) {
    Recording r;
    r.environment = {"0.1.0", "handmade", "lib 1", "dev", ""};
    ProblemRecord pr;
    pr.problem = ConvProblem::parse("n=1,c=4,k=4,in=8x8,ker=3x3,pad=1x1");
    auto add = [&](const std::string& id, double sample, double support) {
        r.algorithms.push_back({id, Notes{}});
        AlgorithmRecord a;
        a.id = id;
        a.samples_ms = {sample};
        if (deciding) a.support_ms = support;
        pr.heuristic.push_back(id);
        pr.algorithms.push_back(a);
    };
    for (int i = 0; i < 12; ++i) {
        std::string id = std::to_string(i);
        id.insert(id.begin(), 's');
        add(id, i == 3 ? 1.0 : 2.0, 10.0 + i);
    }
    for (const char* u : {"u0", "u1"}) {
        add(u, 0.5, 1000);
        pr.unsuggested.push_back(u);
    }
    r.algorithms.push_back({"z", Notes{}});
    AlgorithmRecord z;
    z.id = "z";
    z.supported = false;
    z.reason = "not this problem";
    if (deciding) z.support_ms = 100;
    pr.algorithms.push_back(z);
    if (deciding) pr.ranking_ms = 5;
    r.problems.push_back(pr);
    return Recording::from_json(r.to_json(), "memory");  // what a saved recording gives back
}

BOOST_AUTO_TEST_CASE(a_replay_charges_recorded_support_decisions_and_rankings_once_per_scenario) {
    const ConvProblem p = ConvProblem::parse("n=1,c=4,k=4,in=8x8,ker=3x3,pad=1x1");
    const Stream s(StreamSpec{}, parse_workload_text(p.to_string() + "\n", "w"), WorkloadOptions{});
    SimulationOptions o;
    o.iterations = 2;
    o.settings = settings({"off", "pytorch"});
    // The timed calls alone: pytorch times s0..s9 (one warm-up and one timed call each: 9 x 2 x
    // 2 ms + 2 x 1 ms for s3) and runs s3 (1 ms); off runs s0 (2 ms) and times nothing.
    const double timed = 38, pick = 1, off_pick = 2;

    // A recording made before support decisions were measured replays as it did: timed calls only.
    ReplayBackend old_b(deciding_recording(false), 1);
    const SimulationResult old_r = simulate(old_b, s, o);
    BOOST_TEST(scenario(old_r, "pytorch").iterations[0].search_ms == timed);
    BOOST_TEST(scenario(old_r, "pytorch").iterations[0].exec_ms == pick);
    BOOST_TEST(scenario(old_r, "off").iterations[0].search_ms == 0.0);
    BOOST_TEST(scenario(old_r, "off").iterations[0].exec_ms == off_pick);

    // With them: pytorch's first call pays the ranking, the plan build of every suggested
    // configuration (s0..s11: 10 + ... + 21 = 186 ms, s10 and s11 never timed) before timing any,
    // and z's, decided when the ranking was walked to its end; never u0's or u1's, which the
    // heuristics do not suggest and the search did not reach.
    ReplayBackend b(deciding_recording(true), 1);
    const SimulationResult r = simulate(b, s, o);
    const ScenarioResult& pt = scenario(r, "pytorch");
    BOOST_TEST(pt.iterations[0].search_ms == 5 + 186 + 100 + timed);
    BOOST_TEST(pt.iterations[0].exec_ms == pick);
    BOOST_TEST(pt.iterations[0].searches == 1);
    // Benchmark off pays the ranking and the one plan it reaches (s0) on its first call.
    const ScenarioResult& off = scenario(r, "off");
    BOOST_TEST(off.iterations[0].search_ms == 5 + 10.0);
    BOOST_TEST(off.iterations[0].exec_ms == off_pick);
    BOOST_TEST(off.iterations[0].searches == 0);
    // Once per scenario: the second iteration decides nothing again.
    for (const char* name : {"off", "pytorch"}) {
        BOOST_TEST(scenario(r, name).iterations[1].search_ms == 0.0, name);
        BOOST_TEST(scenario(r, name).iterations[1].exec_ms == scenario(old_r, name).iterations[1].exec_ms, name);
    }

    // The convtune policy pays only the support decisions its search reaches.
    b.reset(1);
    TuningCache cache;
    Selector sel(b, cache);
    const auto d = sel.select(p, parse_flags("benchmark=1,explore_slots=0"));
    double reached = 5;
    int undecided = 0;
    for (const Candidate& c : d->candidates) {
        if (c.state == Candidate::State::not_checked) ++undecided;
        else reached += *deciding_recording(true).problems[0].find(c.id)->support_ms;
    }
    BOOST_TEST(undecided == 5);  // s10, s11, u0, u1 and z: the ranking was not walked to its end
    BOOST_TEST(b.deciding_ms() == reached);
    BOOST_TEST(b.deciding_ms() == 5 + 145.0);  // s0..s9
    BOOST_TEST(b.clock_ms() > b.deciding_ms());  // the timed calls come on top
}

BOOST_AUTO_TEST_CASE(bad_support_and_ranking_times_are_refused_naming_the_field) {
    const std::string good = deciding_recording(true).to_json();
    for (const auto& [from, to, field] : {std::tuple{"\"support_ms\":100.0", "\"support_ms\":-1.0", "support_ms"},
                                          std::tuple{"\"ranking_ms\":5.0", "\"ranking_ms\":1e12", "ranking_ms"}}) {
        const std::string f(from), t(to);
        BOOST_REQUIRE(good.find(f) != std::string::npos);
        std::string bad = good;
        bad.replace(bad.find(f), f.size(), t);
        BOOST_CHECK_EXCEPTION(Recording::from_json(bad, "f"), ParseError, [&](const ParseError& e) {
            return std::string(e.what()).find(std::string("\"") + field + "\" has a") != std::string::npos;
        });
    }
}

BOOST_AUTO_TEST_CASE(missing_problems_are_estimated_or_refused_when_strict) {
    ReplayBackend b(hand_recording({2}), 1, ReplayBackend::Estimation::any);
    // Twice the batch, twice the input height: 4x the multiply-adds. One recorded problem fits
    // nothing: linear in multiply-adds from the same layer, a factor 2 assumed.
    const ConvProblem bigger = ConvProblem::parse("n=2,c=4,k=4,in=16x8,ker=3x3,pad=1x1");
    b.reset(1);
    BOOST_TEST(b.time_ms([&] { (void)b.find("x")->run(bigger, {}, {}); }) == 8.0);
    BOOST_TEST(b.heuristic_order(bigger).size() == 2u);
    BOOST_TEST(b.estimate(bigger)->basis == "same layer");
    BOOST_TEST(b.estimate(bigger)->sigma.at("x") == PerfModel::kAssumedSigma);
    BOOST_TEST(b.estimate(bigger)->extrapolation == 4.0, tt::tolerance(1e-12));
    // Another layer: support assumed from the nearest recorded problem of the same kind.
    const ConvProblem other = ConvProblem::parse("n=1,c=4,k=8,in=8x8,ker=3x3,pad=1x1");
    BOOST_TEST(static_cast<bool>(b.find("x")->supports(other)));
    BOOST_TEST(b.estimate(other)->basis == "same direction, type, layout and kind");
    BOOST_TEST(b.estimate(ConvProblem::parse("n=1,c=4,k=4,in=8x8,ker=1x1"))->basis ==
               "same direction, type and layout (another kind)");
    BOOST_TEST(b.estimate(ConvProblem::parse("dtype=f16,n=1,c=4,k=4,in=8x8,ker=1x1"))->basis ==
               "same direction (another type or layout)");
    BOOST_TEST(!b.estimate(ConvProblem::parse("dir=bwd_data,n=1,c=4,k=8,in=8x8,ker=3x3,pad=1x1"))
                    ->record);  // a direction never recorded
    ReplayBackend strict(hand_recording({2}), 1, ReplayBackend::Estimation::none);
    BOOST_TEST(!strict.find("x")->supports(bigger));
    // tune --replay's default: the same layer only, so that no database decision rests on assumed support.
    ReplayBackend same(hand_recording({2}), 1);
    BOOST_TEST(static_cast<bool>(same.find("x")->supports(bigger)));
    BOOST_TEST(!same.find("x")->supports(other));
    BOOST_TEST(!strict.estimate(bigger));

    // A stream with an unknown layer runs, its estimate counted and flagged, the totals with a range.
    StreamSpec spec;
    WorkloadOptions wo;
    const Stream s(
        spec, parse_workload_text("n=1,c=4,k=8,in=8x8,ker=3x3,pad=1x1\nn=1,c=4,k=4,in=8x8,ker=3x3,pad=1x1\n", "w"), wo);
    SimulationOptions o;
    o.iterations = 2;
    const SimulationResult r = simulate(b, s, o);
    BOOST_TEST(r.estimated_problems == 1);
    BOOST_TEST(r.assumed_problems == 1);
    BOOST_TEST(r.max_extrapolation == 2.0, tt::tolerance(1e-12));
    for (const ScenarioResult& sc : r.scenarios) {
        BOOST_TEST(sc.failure.empty());
        BOOST_TEST(sc.estimate_lo_ms < sc.sum().total_ms());
        BOOST_TEST(sc.estimate_hi_ms > sc.sum().total_ms());
    }
    const std::string table = format_table(r, {});
    BOOST_TEST(table.find("estimated: 1 problems were not in the recording") != std::string::npos);
    BOOST_TEST(table.find("assumed: for 1 of them") != std::string::npos);
    const nlohmann::json j = to_json(r, {});
    BOOST_TEST(j["estimates"]["problems"] == 1);
    BOOST_TEST(j["settings"][0]["estimate_range_ms"].size() == 2u);
    // --strict refuses before running, naming the option; so does a direction never recorded.
    BOOST_CHECK_EXCEPTION(simulate(strict, s, o), InvalidRequest, [](const InvalidRequest& e) {
        return e.field() == "replay" && e.rule().find("({strict}: none is estimated)") != std::string::npos;
    });
    const Stream bwd(spec, parse_workload_text("n=1,c=4,k=8,in=8x8,ker=3x3,pad=1x1\n", "w"), [] {
        WorkloadOptions w;
        w.mode = Mode::train;
        return w;
    }());
    BOOST_CHECK_EXCEPTION(simulate(b, bwd, o), InvalidRequest, [](const InvalidRequest& e) {
        return e.rule().find("no recorded problem of their direction") != std::string::npos;
    });
}

// A recording keeps which algorithms the heuristics do not suggest and the notes an algorithm
// reports for a problem, so a replayed search explores and filters as the live one does.
BOOST_AUTO_TEST_CASE(replay_keeps_suggestions_and_per_problem_notes) {
    std::vector<FakeSpec> specs{{"s1", {5}}, {"s2", {4}}, {"s3", {6}}, {"s4", {3}}, {"u1", {1}}, {"u2", {2}}};
    specs[4].suggested = specs[5].suggested = false;
    const ConvProblem p = ConvProblem::parse("n=1,c=4,k=4,in=8x8,ker=3x3,pad=1x1");
    const FlagValues f = parse_flags("benchmark=1,benchmark_limit=3,explore_slots=1");
    auto timed = [&](const Backend& b) {
        TuningCache cache;
        Selector s(b, cache);
        std::vector<std::string> ids;
        for (const Candidate& c : s.select(p, f)->candidates)
            if (c.state == Candidate::State::timed) ids.push_back(c.id);
        return ids;
    };
    FakeBackend live("fake", specs);
    const std::vector<std::string> want{"s1", "s2", "u1"};
    BOOST_TEST(timed(live) == want, tt::per_element());
    FakeBackend rec_b("fake", specs);
    RecordOptions ro;
    ro.samples = 2;
    const Recording rec = Recording::from_json(record(rec_b, {p}, ro).to_json(), "memory");
    BOOST_TEST(rec.problems[0].unsuggested == (std::vector<std::string>{"u1", "u2"}), tt::per_element());
    ReplayBackend replay(rec, 1);
    BOOST_TEST(timed(replay) == want, tt::per_element());

    // Listed TENSOR_CORE, none reported on this problem: allow_tf32=0 keeps it, live and replayed.
    Recording r = hand_recording({1});
    r.algorithms[0].notes = Notes{} | Note::tensor_core;
    r.problems[0].algorithms[0].notes = Notes{};
    const Recording back = Recording::from_json(r.to_json(), "memory");
    BOOST_TEST(back.problems[0].find("x")->notes.has_value());
    ReplayBackend rb(back, 1);
    TuningCache cache;
    Selector s(rb, cache);
    BOOST_TEST(s.select(r.problems[0].problem, parse_flags("benchmark=0,allow_tf32=0"))->algorithm == "x");
    // Unknown ids in "unsuggested" are refused.
    std::string bad = r.to_json();
    bad.replace(bad.find("\"heuristic\""), 11, "\"unsuggested\":[\"zz\"],\"heuristic\"");
    BOOST_CHECK_EXCEPTION(Recording::from_json(bad, "f"), ParseError, [](const ParseError& e) {
        return std::string(e.what()).find("unsuggested lists 'zz'") != std::string::npos;
    });
}

BOOST_AUTO_TEST_CASE(bad_recordings_are_reported) {
    BOOST_CHECK_THROW(Recording::from_json("{}", "f"), ParseError);
    BOOST_CHECK_THROW(Recording::from_json("not json", "f"), ParseError);
    std::string good = hand_recording({1}).to_json();
    BOOST_CHECK_NO_THROW(Recording::from_json(good, "f"));
    std::string bad = good;
    bad.replace(bad.find("\"samples_ms\":[1.0]"), 18, "\"samples_ms\":[-1.0]");
    BOOST_CHECK_EXCEPTION(Recording::from_json(bad, "f"), ParseError, [](const ParseError& e) {
        return std::string(e.what()).find("negative") != std::string::npos;
    });
    // Integers out of range or written as floats are refused, not cast (a float too large for
    // int was undefined behaviour: found by fuzz_recording).
    const std::string version = "\"version\":1";
    BOOST_REQUIRE(good.find(version) != std::string::npos);
    for (const char* v : {"\"version\":1.18e20", "\"version\":18446744073709551615", "\"version\":-9223372036854775808",
                          "\"version\":1.0"}) {
        std::string b = good;
        b.replace(b.find(version), version.size(), v);
        BOOST_CHECK_EXCEPTION(Recording::from_json(b, "f"), ParseError, [](const ParseError& e) {
            return std::string(e.what()).find("must be an integer") != std::string::npos;
        });
    }
}

BOOST_AUTO_TEST_CASE(recording_from_a_tuning_database_cannot_judge) {
    DbSection sec;
    sec.env = {"0.1.0", "fake", "fake 1.0", "virtual device", ""};
    const ConvProblem p = tiny_stream().iteration(0)[0].problem, q = tiny_stream().iteration(0)[1].problem;
    sec.entries["fake|" + p.to_string() + "|det=0|tf32=1|bench=1|policy=convtune"] = {"fast", 0.25, 0.01, 5, 3.0, 1};
    sec.entries["fake|" + q.to_string() + "|det=0|tf32=1|bench=1|policy=convtune"] = {"fast", 0.5, 0.01, 5, 3.0, 1};
    BOOST_CHECK_THROW(recording_from_db({sec}, "other"), Error);
    const Recording r = recording_from_db({sec}, "fake");
    BOOST_TEST(r.source == "tuning-db");
    BOOST_TEST(r.problems.size() == 2u);
    ReplayBackend b(Recording::from_json(r.to_json(), "m"));
    SimulationOptions o;
    o.iterations = 3;
    o.settings = settings({"off", "on"});
    const SimulationResult res = simulate(b, tiny_stream(), o);
    BOOST_TEST(!res.judgeable);
    BOOST_TEST(res.recommendation.text.find("no recommendation") == 0u);
    // Totals are still the winners' medians: 0.25 + 4 x 0.5 per pass.
    BOOST_TEST(scenario(res, "off").sum().exec_ms == 3 * (0.25 + 4 * 0.5), tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_SUITE_END()

// The performance model for problems a recording lacks, and the recording library.
BOOST_AUTO_TEST_SUITE(estimates)

const std::string kLibrary = CONVTUNE_RECORDINGS_DIR;

BOOST_AUTO_TEST_CASE(algorithm_families_drop_direction_and_math_mode) {
    BOOST_TEST(algorithm_family("cudnn.fwd.implicit_gemm.tensor_op") == "cudnn.implicit_gemm");
    BOOST_TEST(algorithm_family("cudnn.bwd_filter.algo_1.fma") == "cudnn.algo_1");
    BOOST_TEST(algorithm_family("cudnn.graph.bwd_data.eng27") == "cudnn.graph.eng27");
    BOOST_TEST(algorithm_family("cpu.im2col_gemm.tf32") == "cpu.im2col_gemm");
    BOOST_TEST(algorithm_family("onednn.fwd.jit_1x1_avx2") == "onednn.jit_1x1_avx2");
    BOOST_TEST(algorithm_family("onednn.auto") == "onednn.auto");
}

// Leave-one-out against the measured data: each recorded problem is dropped from the recording,
// estimated by a replay of the rest (support from its nearest neighbour, times from the model
// fitted without it) and compared with what was measured. At least 90% of the (problem,
// algorithm) medians must lie inside the estimate's stated range (+-2 sigma; docs/simulation.md
// gives the figures this prints).
BOOST_AUTO_TEST_CASE(leave_one_out_reproduces_measured_problems_within_the_stated_range) {
    for (const char* file : {"/h200/resnet50_f16_nhwc_infer.json", "/h200/resnet50_f32_nchw_train.json"}) {
        const Recording full = Recording::load(kLibrary + file);
        std::vector<double> err;
        int inside = 0, compared = 0, unpredicted = 0, pick_inside = 0, picks = 0;
        for (std::size_t i = 0; i < full.problems.size(); ++i) {
            Recording rest = full;
            rest.problems.erase(rest.problems.begin() + static_cast<std::ptrdiff_t>(i));
            const ProblemRecord& truth = full.problems[i];
            if (std::none_of(rest.problems.begin(), rest.problems.end(),
                             [&](const ProblemRecord& q) { return q.problem.direction == truth.problem.direction; }))
                continue;
            ReplayBackend b(rest, 1, ReplayBackend::Estimation::any);
            const ReplayBackend::Estimate* e = b.estimate(truth.problem);
            BOOST_REQUIRE(e);
            BOOST_REQUIRE(e->record);
            for (const AlgorithmRecord& a : truth.algorithms) {
                if (!a.supported || a.status != Status::Code::ok || a.samples_ms.empty()) continue;
                const AlgorithmRecord* est = e->record->find(a.id);
                if (!est || !est->supported || !e->sigma.count(a.id)) {
                    ++unpredicted;
                    continue;
                }
                const double d = std::abs(std::log(median(est->samples_ms) / median(a.samples_ms)));
                const bool in = d <= PerfModel::kSigmas * e->sigma.at(a.id) + 1e-9;
                err.push_back(d);
                ++compared;
                inside += in;
                if (a.id == truth.heuristic.front()) ++picks, pick_inside += in;
            }
        }
        BOOST_REQUIRE(compared > 100);
        const double coverage = static_cast<double>(inside) / compared;
        BOOST_TEST_MESSAGE(file << ": " << compared << " medians compared (" << unpredicted
                                << " supported but not by the neighbour), median error "
                                << 100 * (std::exp(median(err)) - 1) << "%, inside the stated range " << 100 * coverage
                                << "%, heuristic picks inside " << pick_inside << " of " << picks);
        BOOST_TEST(coverage >= 0.9);
    }
}

// The estimates of `b` for the problems of `truth` (those `keep` accepts), each from the same
// layer at another batch size, against the medians measured for them: per algorithm the absolute
// log error, how many lie inside the stated range, and the errors of the heuristic's picks.
struct EstimateErrors {
    std::vector<double> err, pick;
    int inside = 0;
    double coverage() const { return static_cast<double>(inside) / static_cast<double>(err.size()); }
    std::string text() const {
        std::ostringstream s;
        s << err.size() << " medians, median error " << 100 * (std::exp(median(err)) - 1)
          << "%, inside the stated range " << 100 * coverage() << "%";
        if (!pick.empty())
            s << "; the heuristic's picks (" << pick.size() << "): median error " << 100 * (std::exp(median(pick)) - 1)
              << "%";
        return s.str();
    }
};

EstimateErrors estimate_errors(ReplayBackend& b, const Recording& truth,
                               const std::function<bool(const ConvProblem&)>& keep) {
    EstimateErrors out;
    for (const ProblemRecord& t : truth.problems) {
        if (!keep(t.problem)) continue;
        const ReplayBackend::Estimate* e = b.estimate(t.problem);
        BOOST_REQUIRE(e);
        BOOST_REQUIRE(e->record);
        BOOST_TEST(e->basis == "same layer");
        for (const AlgorithmRecord& a : t.algorithms) {
            if (!a.supported || a.status != Status::Code::ok || a.samples_ms.empty() || !e->sigma.count(a.id)) continue;
            const AlgorithmRecord* est = e->record->find(a.id);
            if (!est || est->samples_ms.empty()) continue;
            const double d = std::abs(std::log(median(est->samples_ms) / median(a.samples_ms)));
            out.err.push_back(d);
            out.inside += d <= PerfModel::kSigmas * e->sigma.at(a.id) + 1e-9;
            if (!t.heuristic.empty() && a.id == t.heuristic.front()) out.pick.push_back(d);
        }
    }
    return out;
}

// Across batch sizes, on the recordings that have two (CPU and oneDNN, batch 1 and 2): the batch-1
// problems estimated from the batch-2 ones alone (the same layer at half the work). At least 85%
// of the medians must lie inside the stated range (measured: 95% and 87%; docs/simulation.md says
// why oneDNN's batch scaling escapes a fit across layers).
BOOST_AUTO_TEST_CASE(batch_1_from_batch_2_lies_within_the_stated_range) {
    for (const char* file : {"/resnet50_cpu_infer.json", "/resnet50_onednn_infer.json"}) {
        const Recording full = Recording::load(std::string(CONVTUNE_TEST_DATA) + file);
        Recording b2 = full;
        std::erase_if(b2.problems, [](const ProblemRecord& q) { return q.problem.n != 2; });
        BOOST_REQUIRE(!b2.problems.empty());
        ReplayBackend b(b2, 1, ReplayBackend::Estimation::any);
        const EstimateErrors e = estimate_errors(b, full, [](const ConvProblem& p) { return p.n == 1; });
        BOOST_REQUIRE(e.err.size() > 50u);
        BOOST_TEST_MESSAGE(file << ": batch 1, " << e.text());
        BOOST_TEST(e.coverage() >= 0.85);
    }
}

// Across batch sizes on the GPU: ResNet-50 f16 NHWC inference on the H200, the batch-1 and
// batch-128 problems of the library estimated from its batch-32 recording alone (the same layers
// at 1/32 and 4x the work), against the medians measured for them in their own recordings (made
// in another process, on another machine of the same kind, a day later). The bounds are the
// measured coverage less a margin: they hold the model to what it does today, and fail if it gets
// worse (docs/simulation.md, "Measured error").
BOOST_AUTO_TEST_CASE(h200_batch_1_and_128_from_batch_32_against_their_recordings) {
    const Recording b32 = Recording::load(std::string(kLibrary) + "/h200/resnet50_f16_nhwc_infer.json");
    ReplayBackend b(b32, 1, ReplayBackend::Estimation::any);
    // (file, least coverage): measured 73% at batch 1 and 92% at batch 128; the +-2 sigma range is
    // too narrow for a 32x step down (docs/simulation.md says why)
    for (const auto& [file, least] : {std::pair{"/h200/resnet50_f16_nhwc_infer_b1.json.gz", 0.65},
                                      std::pair{"/h200/resnet50_f16_nhwc_infer_b128.json.gz", 0.85}}) {
        const EstimateErrors e =
            estimate_errors(b, Recording::load(std::string(kLibrary) + file), [](const ConvProblem&) { return true; });
        BOOST_REQUIRE(e.err.size() > 100u);
        BOOST_TEST_MESSAGE(file << ": " << e.text());
        BOOST_TEST(e.coverage() >= least);
    }
}

// The same layers at three batch sizes in the H200 library (ResNet-50 f16 NHWC inference at 1, 32
// and 128): each batch size estimated from the other two, where every layer has a partner and the
// model follows the layer's own scaling (fixed + linear in the work, PerfModel::predict), against
// the medians measured for it. Measured when it was written: median error 28% at batch 1, 7% at
// 32, 11% at 128 (against 76% and 42% for batch 1 and 128 from batch 32 alone, above), inside
// the stated range 89%, 100% and 99.7%; the bounds hold it there with a margin. (At batch 1 most
// of the heuristic's picks are raised to the launch floor of the other two files, 16.7 us, where
// batch 1 measured 14-15 us.)
BOOST_AUTO_TEST_CASE(h200_each_batch_size_from_the_other_two) {
    const std::string dir = std::string(kLibrary) + "/h200/";
    const std::map<int, std::string> files{{1, "resnet50_f16_nhwc_infer_b1.json.gz"},
                                           {32, "resnet50_f16_nhwc_infer.json"},
                                           {128, "resnet50_f16_nhwc_infer_b128.json.gz"}};
    // (held-out batch, largest median error, least coverage)
    for (const auto& [held, worst, least] :
         {std::tuple{1, 0.40, 0.85}, std::tuple{32, 0.15, 0.95}, std::tuple{128, 0.20, 0.9}}) {
        std::vector<Recording> parts;
        for (const auto& [batch, file] : files)
            if (batch != held) parts.push_back(Recording::load(dir + file));
        ReplayBackend b(merge_recordings(std::move(parts), "test"), 1, ReplayBackend::Estimation::any);
        const Recording truth = Recording::load(dir + files.at(held));
        for (const ProblemRecord& t : truth.problems) {
            const ReplayBackend::Estimate* e = b.estimate(t.problem);
            BOOST_REQUIRE(e);
            BOOST_TEST(!e->partner.empty(), t.problem.to_string() << ": no second size of its layer");
        }
        const EstimateErrors e = estimate_errors(b, truth, [](const ConvProblem&) { return true; });
        BOOST_REQUIRE(e.err.size() > 100u);
        BOOST_TEST_MESSAGE("batch " << held << " from the other two: " << e.text());
        BOOST_TEST(std::exp(median(e.err)) - 1 <= worst);
        BOOST_TEST(e.coverage() >= least);
    }
}

BOOST_AUTO_TEST_CASE(the_model_never_returns_below_the_launch_floor) {
    const Recording lib = load_replay("h200", kLibrary);
    ReplayBackend b(lib, 1, ReplayBackend::Estimation::any);
    const double floor = b.model().floor_ms();
    BOOST_TEST(floor > 0.0);
    // 1/100 000 of the work of a recorded layer: far below anything measured.
    for (const char* spec : {"dtype=f16,layout=nhwc,n=1,c=8,k=8,in=4x4,ker=3x3,pad=1x1", "n=1,c=4,k=4,in=2x2,ker=1x1",
                             "dir=bwd_filter,n=1,c=3,k=4,in=7x7,ker=7x7,pad=3x3",
                             "dtype=f16,layout=nhwc,n=1,c=16,k=16,g=16,in=8x8,ker=3x3,pad=1x1"}) {
        const ConvProblem p = ConvProblem::parse(spec);
        const ReplayBackend::Estimate* e = b.estimate(p);
        BOOST_REQUIRE(e);
        BOOST_REQUIRE(e->record);
        BOOST_TEST(e->floored);
        for (const AlgorithmRecord& a : e->record->algorithms) {
            if (!a.supported || a.samples_ms.empty()) continue;
            for (double t : a.samples_ms) BOOST_TEST(t >= floor);
            if (a.first_ms) BOOST_TEST(*a.first_ms >= floor);
        }
    }
}

// Scaling a recorded layer down 64x in multiply-adds lands below the fastest time measured on
// the device (the launch floor): the time is raised to it, and the report warns.
BOOST_AUTO_TEST_CASE(scaling_a_layer_far_down_floors_and_warns) {
    Recording r = replay::hand_recording({10});
    ProblemRecord fast = r.problems[0];
    fast.problem = ConvProblem::parse("n=1,c=4,k=4,in=4x4,ker=1x1");  // another layer, the fastest measured: 0.5 ms
    fast.algorithms[0].samples_ms = {0.5};
    r.problems.push_back(fast);
    ReplayBackend b(r, 1);
    BOOST_TEST(b.model().floor_ms() == 0.5);
    const ConvProblem p =
        ConvProblem::parse("n=1,c=4,k=4,in=1x1,ker=3x3,pad=1x1");  // the recorded layer, 1/64 of the work
    const ReplayBackend::Estimate* e = b.estimate(p);
    BOOST_REQUIRE(e);
    BOOST_TEST(e->basis == "same layer");
    BOOST_TEST(e->floored);
    b.reset(1);
    BOOST_TEST(b.time_ms([&] { (void)b.find("x")->run(p, {}, {}); }) == 0.5);  // not 10 / 64 = 0.156
    StreamSpec spec;
    const Stream s(spec, parse_workload_text("n=1,c=4,k=4,in=1x1,ker=3x3,pad=1x1\n", "w"), WorkloadOptions{});
    SimulationOptions o;
    o.iterations = 2;
    const SimulationResult res = simulate(b, s, o);
    BOOST_TEST(res.floored_problems == 1);
    BOOST_TEST(format_table(res, {}).find("warning: for 1 of them an algorithm's estimate fell below") !=
               std::string::npos);
}

// No recommendation rests on a difference inside the estimates' uncertainty: the saving must
// hold with every estimate at the low end and at the high end of its range.
BOOST_AUTO_TEST_CASE(no_recommendation_inside_the_estimates_uncertainty) {
    auto result = [](double on_lo, double on_hi) {
        SimulationResult r;
        r.estimated_problems = 3;
        for (const Setting& st : standard_settings()) {
            if (st.name != "off" && st.name != "on") continue;
            ScenarioResult sc;
            sc.setting = st;
            IterationStats it;
            it.exec_ms = st.name == "off" ? 100 : 90;
            sc.add(it);
            sc.estimate_lo_ms = st.name == "off" ? 80 : on_lo;
            sc.estimate_hi_ms = st.name == "off" ? 130 : on_hi;
            r.scenarios.push_back(sc);
        }
        analyze(r, 0.02);
        return r.recommendation;
    };
    // 'on' saves 10%, but with every estimate low it is 6% slower than 'off'.
    const Recommendation inside = result(85, 110);
    BOOST_TEST(inside.setting == "off");
    BOOST_TEST(inside.text.find("inside the estimate's uncertainty") != std::string::npos);
    // At both ends it saves more than 2%: recommended.
    BOOST_TEST(result(70, 115).setting == "on");
}

BOOST_AUTO_TEST_CASE(replay_auto_finds_the_library_of_the_gpu_by_a_word_of_its_name) {
    // The names cuDNN and PyTorch give the two GPUs: the library folder is a word of the name.
    BOOST_TEST(library_for_device("NVIDIA H100 80GB HBM3", kLibrary)->name == "h100");
    BOOST_TEST(library_for_device("NVIDIA H200 sm_90", kLibrary)->name == "h200");
    BOOST_TEST(library_for_device("nvidia h200", kLibrary)->name == "h200");
    // A part of a word is not a word; a GPU of no entry has none; an empty library has none.
    BOOST_TEST(!library_for_device("NVIDIA H1000", kLibrary));
    BOOST_TEST(!library_for_device("NVIDIA A100-SXM4-80GB", kLibrary));
    BOOST_TEST(!library_for_device("", kLibrary));
    BOOST_TEST(!library_for_device("NVIDIA H100", kLibrary + "/no-such-folder"));
    // Two entries that both fit: neither is chosen.
    BOOST_TEST(!library_for_device("NVIDIA H100 H200", kLibrary));
}

BOOST_AUTO_TEST_CASE(a_library_name_resolves_to_its_recordings_merged) {
    auto lib = recording_library(kLibrary);
    BOOST_REQUIRE_EQUAL(lib.size(), 2u);
    // h100: one recording (ResNet-50 f16 inference) and PyTorch's measurements; h200 recordings and
    // measurements.
    BOOST_TEST(lib.front().name == "h100");
    BOOST_REQUIRE_EQUAL(lib.front().files.size(), 1u);
    BOOST_TEST(lib.front().pytorch_dir == kLibrary + "/h100/pytorch");
    const Recording h100 = load_replay("h100", kLibrary);
    BOOST_TEST(h100.environment.device.find("NVIDIA H100") == 0);
    BOOST_TEST((coverage(h100) == std::vector<std::string>{"fwd f16 nhwc, batch 32: 23 problems"}), tt::per_element());
    lib.erase(lib.begin());
    BOOST_TEST(lib.front().name == "h200");
    BOOST_TEST(lib.front().pytorch_dir == kLibrary + "/h200/pytorch");
    BOOST_TEST(lib.front().files.size() == 10u);  // .json and .json.gz files alike
    const Recording h200 = load_replay("h200", kLibrary);
    const Recording f16 = Recording::load(kLibrary + "/h200/resnet50_f16_nhwc_infer.json");
    const Recording f32 = Recording::load(kLibrary + "/h200/resnet50_f32_nchw_train.json");
    std::size_t problems = 0;
    for (const std::string& f : lib.front().files) problems += Recording::load(f).problems.size();
    BOOST_TEST(h200.problems.size() == problems);
    BOOST_TEST(h200.environment.device == "NVIDIA H200 sm_90");
    // ResNet-50 f32 training and f16 (inference forward, training backward), MobileNet (full, 1x1 and
    // depthwise layers) f32 and f16 training, GoogLeNet v3 and VGG-19 f16 training: all batch 32;
    // ResNet-50 f16 inference also at batch 1 and 128.
    BOOST_TEST((coverage(h200) ==
                std::vector<std::string>{
                    "bwd_data f16 nhwc, batch 32: 91 problems", "bwd_data f32 nchw, batch 32: 33 problems",
                    "bwd_filter f16 nhwc, batch 32: 95 problems", "bwd_filter f32 nchw, batch 32: 34 problems",
                    "fwd f16 nhwc, batch 1,32,128: 141 problems", "fwd f32 nchw, batch 32: 34 problems"}),
               tt::per_element());
    // Each problem keeps the start-up and sequence factor of the recording it came from.
    ReplayBackend b(h200, 1);
    for (const Recording* part : {&f16, &f32}) {
        const ProblemRecord& pr = part->problems.front();
        const AlgorithmRecord& a = *pr.find(pr.heuristic.front());
        b.reset(1);
        BOOST_TEST(b.time_ms([&] { (void)b.find(a.id)->run(pr.problem, {}, {}); }) == *a.first_ms + *part->startup_ms);
        b.set_in_sequence(true);
        const double warm = b.time_ms([&] { (void)b.find(a.id)->run(pr.problem, {}, {}); });
        b.set_in_sequence(false);
        BOOST_TEST(warm / part->sequence_factor.value_or(1.0) <=
                   *std::max_element(a.samples_ms.begin(), a.samples_ms.end()) + 1e-12);
        BOOST_TEST(warm / part->sequence_factor.value_or(1.0) >=
                   *std::min_element(a.samples_ms.begin(), a.samples_ms.end()) - 1e-12);
    }
    // A merged recording written out and read back is the same recording.
    BOOST_TEST(Recording::from_json(h200.to_json(), "m").to_json() == h200.to_json());
}

BOOST_AUTO_TEST_CASE(unknown_names_and_unmergeable_recordings_are_refused) {
    BOOST_CHECK_EXCEPTION(load_replay("a100", kLibrary), InvalidRequest, [](const InvalidRequest& e) {
        return e.field() == "replay" &&
               e.rule().find(
                   "'a100' is neither a recording file nor a name in the recording library (names: h100, h200;") == 0;
    });
    // A library name with PyTorch's measurements only has no recording to replay (simulate takes
    // its off and pytorch settings from them instead: test_sim_cli).
    const auto only = std::filesystem::temp_directory_path() / ("convtune-lib-" + std::to_string(::getpid()));
    std::filesystem::create_directories(only / "m100" / "pytorch");
    for (const auto& f : std::filesystem::directory_iterator(kLibrary + "/h100/pytorch"))
        std::filesystem::copy_file(f.path(), only / "m100" / "pytorch" / f.path().filename());
    BOOST_CHECK_EXCEPTION(load_replay("m100", only.string()), InvalidRequest, [](const InvalidRequest& e) {
        return e.field() == "replay" && e.rule().find("'m100' holds PyTorch's measurements only") == 0;
    });
    std::filesystem::remove_all(only);
    BOOST_CHECK_EXCEPTION(load_replay("no/such.json", kLibrary), InvalidRequest,
                          [](const InvalidRequest& e) { return e.rule().find("cannot open") != std::string::npos; });
    BOOST_CHECK_EXCEPTION(load_replay("h200", "/nonexistent"), InvalidRequest, [](const InvalidRequest& e) {
        return e.rule().find("which is empty or missing: /nonexistent") != std::string::npos;
    });
    Recording a = replay::hand_recording({1}), other = replay::hand_recording({2});
    BOOST_CHECK_EXCEPTION(merge_recordings({a, other}, "lib"), ParseError, [](const ParseError& e) {
        return std::string(e.what()).find("is recorded twice") != std::string::npos;
    });
    other.problems[0].problem.n = 2;
    other.environment.device = "another";
    BOOST_CHECK_EXCEPTION(merge_recordings({a, other}, "lib"), ParseError, [](const ParseError& e) {
        return std::string(e.what()).find("different backends or devices") != std::string::npos;
    });
    // The environment variable chooses the library's folder.
    ::setenv("CONVTUNE_RECORDINGS_DIR", "/somewhere/else", 1);
    BOOST_TEST(recordings_dir() == "/somewhere/else");
    ::unsetenv("CONVTUNE_RECORDINGS_DIR");
    BOOST_TEST(recordings_dir() == kLibrary);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(reports)

BOOST_AUTO_TEST_CASE(table_json_csv_and_svg) {
    FakeBackend b("fake", slow_fast());
    SimulationOptions o;
    o.iterations = 10;
    o.settings = settings({"off", "on", "pytorch"});
    const SimulationResult r = simulate(b, tiny_stream(), o);
    const ReportContext c{"tiny <test> & co", "fake backend"};
    const std::string t = format_table(r, c);
    BOOST_TEST(t.find("recommendation: turn benchmark on") != std::string::npos, t);
    BOOST_TEST(t.find("it. 4") != std::string::npos, t);  // on's break-even (exact_arithmetic)
    const nlohmann::json j = nlohmann::json::parse(to_json(r, c).dump());
    BOOST_TEST(j["settings"].size() == 3u);
    BOOST_TEST(j["settings"][1]["break_even"].get<int>() == 4);
    BOOST_TEST(j["settings"][1]["per_iteration"].size() == 10u);
    BOOST_TEST(j["recommendation"]["setting"].get<std::string>() == "pytorch");
    const std::string csv = to_csv(r);
    BOOST_TEST(std::count(csv.begin(), csv.end(), '\n') == 31);
    const std::string svg = to_svg(r, c);
    BOOST_TEST(svg.find("<svg") != std::string::npos);
    BOOST_TEST(svg.find("tiny &lt;test&gt; &amp; co") != std::string::npos);
    BOOST_TEST(std::count(svg.begin(), svg.end(), '\n') > 20);
    BOOST_TEST(svg.find("breaks even: it. 4") != std::string::npos);
    BOOST_TEST(svg.find("pytorch breaks even at iteration 3") != std::string::npos);
    // Balanced tags: every opened element is closed (the CLI test parses it with an XML parser).
    const auto count = [&](const std::string& s) {
        std::size_t n = 0;
        for (std::size_t pos = svg.find(s); pos != std::string::npos; pos = svg.find(s, pos + 1)) ++n;
        return n;
    };
    BOOST_TEST(count("<polyline") == count("</polyline>"));
    BOOST_TEST(count("<circle") == count("</circle>"));
}

BOOST_AUTO_TEST_SUITE_END()

// tune --db writes its database in batches (issue 32, D2): one read-merge-write per --db-flush
// seconds and one at the end, where each problem's search used to rename the file and fsync twice.
BOOST_AUTO_TEST_SUITE(tune_database)

namespace {

std::vector<std::string> recorded_problems(const std::string& file, std::size_t n) {
    std::vector<std::string> out;
    for (const auto& p : Recording::load(file).problems) {
        if (out.size() == n) break;
        out.push_back(p.problem.to_string());
    }
    return out;
}

std::size_t entries_in(const std::string& db) {
    std::size_t n = 0;
    for (const DbSection& s : TuningDatabase::read_file(db)) n += s.entries.size();
    return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_tune_writes_its_database_once_per_flush_interval_and_at_the_end) {
    const std::string rec = std::string(CONVTUNE_TEST_DATA) + "/resnet50_cpu_infer.json";
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("convtune-tune-db-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::vector<std::size_t> entries;
    for (double flush_s : {3600.0, 0.0}) {
        const std::string db = (dir / ("t" + std::to_string(static_cast<int>(flush_s)) + ".json")).string();
        std::filesystem::remove(db);
        app::TuneRequest r;
        r.problems = recorded_problems(rec, 8);
        r.replay = rec;
        r.db = db;
        r.db_flush_s = flush_s;
        std::vector<bool> written;  // whether the file exists as each problem after the first starts
        r.progress = [&](int64_t done, int64_t total, const std::string&) {
            if (done > 0 && done < total) written.push_back(std::filesystem::exists(db));
        };
        const app::TuneReport rep = app::tune(r, nullptr, true);
        std::set<std::string> searched;  // the keys a search decided: what the database gets
        for (const app::TunedProblem& t : rep.problems)
            if (t.decision->source == Source::search) searched.insert(t.decision->key);
        BOOST_TEST(searched.size() >= 6u);
        BOOST_TEST(rep.count == 8);
        BOOST_TEST(rep.not_tuned.empty());
        BOOST_TEST_REQUIRE(written.size() == 7u);
        if (flush_s > 0) {
            // Nothing written while the run goes on (the interval never passed), everything at the end.
            BOOST_TEST(std::count(written.begin(), written.end(), true) == 0,
                       "the database was written during the run");
        } else {
            BOOST_TEST(std::count(written.begin(), written.end(), false) == 0,
                       "db_flush_s=0: each search is written at once");
        }
        entries.push_back(entries_in(db));  // (a search the policy does not persist has none)
        BOOST_TEST(entries.back() >= 6u);
    }
    BOOST_TEST(entries[0] == entries[1], "the batched run stored as many records as the one that wrote each at once");
    // The database object alone: records wait for the interval, flush() and the destructor write them.
    {
        const std::string db = (dir / "direct.json").string();
        const Environment env{"0.1.0", "cpu", "l", "d", ""};
        {
            TuningDatabase d(db);
            d.set_flush_interval(3600);
            for (int i = 0; i < 5; ++i)
                BOOST_TEST(d.store(env, "k" + std::to_string(i), {"cpu.direct", 1, 0, 1, 0, 1}));
            BOOST_TEST(!std::filesystem::exists(db));
            BOOST_TEST(d.flush());
            BOOST_TEST(entries_in(db) == 5u);
            BOOST_TEST(d.store(env, "k5", {"cpu.direct", 1, 0, 1, 0, 1}));
            BOOST_TEST(entries_in(db) == 5u);
        }
        BOOST_TEST(entries_in(db) == 6u);  // the destructor wrote the last one
    }
    // An interval outside [0, 3600] is refused by name.
    app::TuneRequest bad;
    bad.problems = {"n=1,c=1,k=1,in=8,ker=3"};
    bad.db = "";
    bad.db_flush_s = -1;
    BOOST_TEST(test::error_of([&] { app::tune(bad); }).rfind("db_flush: ", 0) == 0u);
    std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
