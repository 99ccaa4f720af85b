// The simulator answers for the user's run: a trace's recorded flags are the baseline each setting
// changes only the named flags of, its length is the default run, options that do not apply to
// it are refused, its steps' wall times are carried into the totals; and a live run repeats the
// settings in rotated order and never recommends on a difference inside its spread. Every time
// comes from the scripted fake backend, so each expectation is exact.
#define BOOST_TEST_MODULE sim_user_run
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "convtune/app/simulate.hpp"
#include "convtune/error.hpp"
#include "convtune/registry.hpp"
#include "convtune/sim/report.hpp"
#include "convtune/sim/simulator.hpp"
#include "support/fake_backend.hpp"

using namespace convtune;
using namespace convtune::sim;
using test::FakeBackend;
using test::FakeSpec;
namespace fs = std::filesystem;
namespace tt = boost::test_tools;

namespace {

// A trace file for the test's duration.
struct TraceFile {
    fs::path path;
    explicit TraceFile(const std::string& name, const std::string& text)
        : path(fs::temp_directory_path() / ("convtune_user_run_" + std::to_string(::getpid()) + "_" + name)) {
        std::ofstream(path) << text;
    }
    ~TraceFile() { fs::remove(path); }
    std::string stream() const { return "trace:" + path.string(); }
};

Stream trace_stream(const TraceFile& t) {
    StreamSpec spec = StreamSpec::parse(t.stream());
    return Stream(spec, Workload{}, WorkloadOptions{});
}

const ScenarioResult& scenario(const SimulationResult& r, const std::string& name) {
    for (const ScenarioResult& s : r.scenarios)
        if (s.setting.name == name) return s;
    throw std::runtime_error("no scenario " + name);
}

// "tc" (TENSOR_CORE: TF32 for f32) is the heuristic's first choice at 1 ms a call; "plain" 2 ms.
std::vector<FakeSpec> tc_plain() {
    FakeSpec tc{"tc"}, plain{"plain"};
    tc.times_ms = {1.0};
    tc.notes = Note::tensor_core;
    plain.times_ms = {2.0};
    return {tc, plain};
}

const char* kP = "dir=fwd,dtype=f32,n=1,c=8,k=8,in=8x8,ker=3x3,pad=1x1";

std::string msg_of(const std::function<void()>& f, std::string* field = nullptr) {
    try {
        f();
    } catch (const InvalidRequest& e) {
        if (field) *field = e.field();
        return e.what();
    } catch (const Error& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(trace_is_the_users_run)

BOOST_AUTO_TEST_CASE(recorded_flags_are_the_baseline_each_setting_changes_only_what_it_names) {
    // Captured with allow_tf32=False (as capture.py writes it): TF32 stays off in every row that
    // does not turn it on, so "tc" never runs there.
    const TraceFile t("tf32off.trace",
                      std::string("# flags enabled=1,benchmark=0,benchmark_limit=10,deterministic=0,allow_tf32=0\n") +
                          kP + " x3\n# iteration 2\n" + kP + " x3\n");
    const Stream s = trace_stream(t);
    BOOST_REQUIRE(s.trace_flags().size() == 1u);
    BOOST_TEST(!s.trace_flags()[0].allow_tf32);
    for (const char* name : {"off", "on", "pytorch"}) {
        FakeBackend b("fake", tc_plain());
        SimulationOptions o;
        o.iterations = 2;
        o.repeats = 1;
        o.settings = {parse_setting(name)};
        const SimulationResult r = simulate(b, s, o);
        BOOST_TEST(r.scenarios[0].failure.empty(), r.scenarios[0].failure);
        BOOST_TEST(!r.scenarios[0].setting.flags.allow_tf32, name);
        BOOST_TEST(b.runs("tc") == 0, name << ": TF32 ran although the trace recorded allow_tf32=0");
        BOOST_TEST(b.runs("plain") > 0);
        BOOST_TEST(r.trace_flag_sets == 1);
    }
    // A setting that names allow_tf32 changes it, and only it (benchmark stays as recorded: off).
    FakeBackend b("fake", tc_plain());
    SimulationOptions o;
    o.iterations = 2;
    o.repeats = 1;
    o.settings = {parse_setting("tf32:allow_tf32=1")};
    const SimulationResult r = simulate(b, s, o);
    BOOST_TEST(r.scenarios[0].setting.flags.allow_tf32);
    BOOST_TEST(!r.scenarios[0].setting.flags.benchmark);
    BOOST_TEST(r.scenarios[0].sum().search_ms == 0.0);
    BOOST_TEST(b.runs("plain") == 0);
    BOOST_TEST(b.runs("tc") == 6);
}

BOOST_AUTO_TEST_CASE(flags_that_change_inside_the_trace_apply_to_their_calls) {
    // Iteration 1 recorded TF32 off, iteration 2 on: under 'off' each call keeps its own.
    const TraceFile t("tf32mixed.trace", std::string("# flags allow_tf32=0\n") + kP +
                                             " x3\n# iteration 2\n# flags allow_tf32=1\n" + kP + " x2\n");
    const Stream s = trace_stream(t);
    BOOST_REQUIRE(s.trace_flags().size() == 2u);
    FakeBackend b("fake", tc_plain());
    SimulationOptions o;
    o.iterations = 2;
    o.repeats = 1;
    o.settings = {parse_setting("off")};
    const SimulationResult r = simulate(b, s, o);
    BOOST_TEST(b.runs("plain") == 3);
    BOOST_TEST(b.runs("tc") == 2);
    BOOST_TEST(r.trace_flag_sets == 2);
}

BOOST_AUTO_TEST_CASE(trace_flag_lines_are_checked) {
    BOOST_CHECK_EXCEPTION(
        parse_trace_data(std::string("# flags policy=adaptive\n") + kP + "\n"), ParseError, [](const Error& e) {
            return std::string(e.what()).find("line 1: '# flags' records PyTorch's flags only") != std::string::npos;
        });
    BOOST_CHECK_EXCEPTION(parse_trace_data(std::string("# flags allow_tf32=maybe\n") + kP + "\n"), ParseError,
                          [](const Error& e) { return std::string(e.what()).find("line 1") != std::string::npos; });
    BOOST_CHECK_EXCEPTION(
        parse_trace_data(std::string(kP) + "\n# iteration 2 wall_ms -4\n" + kP + "\n"), ParseError,
        [](const Error& e) { return std::string(e.what()).find("line 2: wall_ms '-4'") != std::string::npos; });
    const TraceData d =
        parse_trace_data(std::string("# iteration 1 wall_ms 12.5\n") + kP + "\n# iteration 2\n" + kP + "\n");
    BOOST_REQUIRE(d.wall_ms.size() == 2u);
    BOOST_TEST(*d.wall_ms[0] == 12.5);
    BOOST_TEST(!d.wall_ms[1].has_value());
    BOOST_TEST(d.iterations[0][0].flags == -1);
}

// A trace says how its wall times were taken; a newer format and absurd wall times are refused.
BOOST_AUTO_TEST_CASE(trace_timing_version_and_wall_bound) {
    const TraceData d =
        parse_trace_data(std::string("# convtune-trace 1\n# timing plain benchmark=1 kernel_cache=cold\n") + kP + "\n");
    BOOST_TEST((d.timing.source == TraceTiming::Source::plain));
    BOOST_TEST(d.timing.benchmark.value_or(false));
    BOOST_TEST(d.timing.kernel_cache == "cold");
    BOOST_TEST((parse_trace_data(std::string("# timing capture\n") + kP + "\n").timing.source ==
                TraceTiming::Source::capture));
    BOOST_TEST((parse_trace_data(std::string(kP) + "\n").timing.source == TraceTiming::Source::unknown));
    const auto refused = [](const std::string& text, const std::string& what) {
        try {
            parse_trace_data(text);
        } catch (const ParseError& e) {
            return std::string(e.what()).find(what) != std::string::npos;
        }
        return false;
    };
    BOOST_TEST(refused(std::string("# convtune-trace 2\n") + kP + "\n", "line 1: trace format version 2 is newer"));
    BOOST_TEST(refused(std::string("# convtune-trace x\n") + kP + "\n", "line 1: '# convtune-trace' must be followed"));
    BOOST_TEST(refused(std::string("# timing plain\n") + kP + "\n",
                       "line 1: '# timing': a plain timing must say its benchmark"));
    BOOST_TEST(refused(std::string("# timing sideways\n") + kP + "\n", "expected 'plain' or 'capture'"));
    BOOST_TEST(refused(std::string("# timing capture benchmark=1\n") + kP + "\n", "unknown field 'benchmark=1'"));
    BOOST_TEST(refused(std::string("# convtune-trace 1\n# iteration 1 wall_ms 1e308\n") + kP + "\n",
                       "line 2: wall_ms '1e308'"));
    BOOST_TEST(refused(std::string("# iteration 1 wall_ms 1e9\n") + kP + "\n", "line 1: wall_ms '1e9'"));
    BOOST_TEST(!refused(std::string("# iteration 1 wall_ms 999999999\n") + kP + "\n", "wall_ms"));
}

// The app layer with the fake backend registered under its own name.
FakeBackend& registered() {
    static FakeBackend b("fake-user-run", tc_plain());
    static const bool once = (register_backend(b), true);
    (void)once;
    return b;
}

BOOST_AUTO_TEST_CASE(iterations_default_to_the_trace_length_and_say_when_cycled_or_cut) {
    registered();
    const TraceFile t("three.trace", std::string(kP) + "\n# iteration\n" + kP + "\n# iteration\n" + kP + "\n");
    app::SimulateRequest r;
    r.workload.stream = t.stream();
    r.backend = "fake-user-run";
    r.flags = {"off"};
    const app::SimulateReport a = app::simulate(r);
    BOOST_TEST(a.result.iterations == 3);
    BOOST_TEST(a.result.scenarios[0].count() == 3);
    const nlohmann::json j = app::to_json(a);
    BOOST_TEST(j["trace_iterations"] == 3);
    for (const auto& n : j["notes"]) {
        BOOST_TEST(n.get<std::string>().find("cycled") == std::string::npos);
        BOOST_TEST(n.get<std::string>().find("cut") == std::string::npos);
    }
    r.iterations = 7;
    const std::string cycled = sim::format_table(app::simulate(r).result, {});
    BOOST_TEST(cycled.find("the trace's 3 iterations are cycled") != std::string::npos, cycled);
    r.iterations = 2;
    const std::string cut = sim::format_table(app::simulate(r).result, {});
    BOOST_TEST(cut.find("the trace is cut: only its first 2 of 3 iterations") != std::string::npos, cut);
}

BOOST_AUTO_TEST_CASE(options_that_do_not_apply_to_a_trace_are_refused_by_name) {
    registered();
    const TraceFile t("one.trace", std::string(kP) + "\n");
    struct Case {
        const char* field;
        std::function<void(app::WorkloadRequest&)> set;
    };
    const Case cases[] = {
        {"mode", [](app::WorkloadRequest& w) { w.mode = "train"; }},
        {"batch", [](app::WorkloadRequest& w) { w.batch = 4; }},
        {"dtype", [](app::WorkloadRequest& w) { w.dtype = "f16"; }},
        {"layout", [](app::WorkloadRequest& w) { w.layout = "nhwc"; }},
        {"batches", [](app::WorkloadRequest& w) { w.batches = "1,2"; }},
        {"scales", [](app::WorkloadRequest& w) { w.scales = "0.5,1"; }},
        {"shapes_dir", [](app::WorkloadRequest& w) { w.shapes_dir = "/tmp"; }},
    };
    for (const Case& c : cases) {
        app::SimulateRequest r;
        r.workload.stream = t.stream();
        r.backend = "fake-user-run";
        r.flags = {"off"};
        c.set(r.workload);
        std::string field;
        const std::string m = msg_of([&] { app::simulate(r); }, &field);
        BOOST_TEST(field == c.field, c.field << ": " << m);
        BOOST_TEST(m.find("does not apply to a trace stream") != std::string::npos, m);
    }
    // The same options stay valid on the other streams.
    app::WorkloadRequest w;
    w.workload = "resnet50";
    w.shapes_dir = CONVTUNE_SHAPES_DIR;
    w.stream = "fixed";
    w.mode = "train";
    w.batch = 4;
    w.dtype = "f16";
    w.layout = "nhwc";
    BOOST_CHECK_NO_THROW(w.make_stream());
}

BOOST_AUTO_TEST_CASE(step_time_outside_convolutions_is_carried_into_every_setting) {
    // Captured with benchmark off: PyTorch ran "tc" (1 ms) three times per iteration, 3 ms of
    // convolutions in a step of 50 ms (iteration 1) and 30 ms (iteration 2); iteration 3, the
    // capture's last, has no wall time and takes the steady value (iteration 2's).
    const std::string body = std::string(kP) + " x3\n";
    const TraceFile t("wall.trace", "# flags benchmark=0\n# iteration 1 wall_ms 50\n" + body +
                                        "# iteration 2 wall_ms 30\n" + body + "# iteration 3\n" + body);
    const Stream s = trace_stream(t);
    FakeBackend b("fake", tc_plain());
    SimulationOptions o;
    o.iterations = 5;  // cycled: iterations 4 and 5 take the steady value too
    o.repeats = 1;
    o.settings = {parse_setting("off"), parse_setting("slow:allow_tf32=0")};
    const SimulationResult r = simulate(b, s, o);
    BOOST_REQUIRE(r.step.known);
    BOOST_TEST(r.step.recorded == 2);
    BOOST_TEST(r.step.clamped == 0);
    BOOST_TEST(r.step.other(0) == 47.0, tt::tolerance(1e-9));
    BOOST_TEST(r.step.other(1) == 27.0, tt::tolerance(1e-9));
    BOOST_TEST(r.step.other(2) == 27.0, tt::tolerance(1e-9));
    BOOST_TEST(r.step.other(4) == 27.0, tt::tolerance(1e-9));
    const double other = 47 + 4 * 27;
    const ScenarioResult &off = scenario(r, "off"), &slow = scenario(r, "slow");
    BOOST_TEST(off.sum().other_ms == other, tt::tolerance(1e-9));
    BOOST_TEST(slow.sum().other_ms == other, tt::tolerance(1e-9));
    BOOST_TEST(off.sum().total_ms() == 5 * 3 * 1.0 + other, tt::tolerance(1e-9));
    BOOST_TEST(slow.sum().total_ms() == 5 * 3 * 2.0 + other, tt::tolerance(1e-9));
    BOOST_TEST(off.first_ms() == 50.0, tt::tolerance(1e-9));  // the captured step itself
    // The comparison is against the whole step: 15 ms more on 170 ms, not 100% more.
    BOOST_TEST(r.comparisons[1].saving == -15.0 / (15 + other), tt::tolerance(1e-9));
    const nlohmann::json j = to_json(r, {});
    BOOST_TEST(j["step_time"]["totals"] == "step");
    BOOST_TEST(j["step_time"]["timing"] == "unknown");
    BOOST_TEST(j["settings"][0]["other_ms"].get<double>() == other, tt::tolerance(1e-9));
    BOOST_TEST(j["settings"][0]["per_iteration"][1]["other_ms"].get<double>() == 27.0, tt::tolerance(1e-9));
    BOOST_TEST(to_csv(r).find(",other_ms\n") != std::string::npos);
    BOOST_TEST(format_table(r, {}).find("totals include each step's time outside convolutions") != std::string::npos);
    BOOST_TEST(to_svg(r, {}).find("outside convolutions") != std::string::npos);

    // Without wall times the totals are convolutions only, and the report says so.
    const TraceFile bare("bare.trace", body);
    FakeBackend b2("fake", tc_plain());
    const SimulationResult r2 = simulate(b2, trace_stream(bare), o);
    BOOST_TEST(!r2.step.known);
    BOOST_TEST(scenario(r2, "off").sum().other_ms == 0.0);
    BOOST_TEST(to_json(r2, {})["step_time"]["totals"] == "convolutions");
    BOOST_TEST(format_table(r2, {}).find("totals are convolutions only") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_step_shorter_than_the_simulated_convolutions_counts_zero_and_says_so) {
    const TraceFile t("short.trace", std::string("# iteration 1 wall_ms 1\n") + kP + " x3\n");
    FakeBackend b("fake", tc_plain());
    SimulationOptions o;
    o.iterations = 1;
    o.repeats = 1;
    o.settings = {parse_setting("off")};
    const SimulationResult r = simulate(b, trace_stream(t), o);
    BOOST_TEST(r.step.known);
    BOOST_TEST(r.step.clamped == 1);
    BOOST_TEST(r.step.other(0) == 0.0);
    BOOST_TEST(r.step.describe().find("took longer than the recorded step") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(live_runs_do_not_lie)

// One layer called 100 times an iteration: "slow" (the heuristic's pick) 1 ms a call, "fast"
// 0.95 ms; benchmark on finds "fast" and saves about 4% once its search is paid.
Stream hundred_calls() {
    const Workload w =
        parse_workload_text("convtune-workload 1\nname one\nlayer a x100 n=1,c=8,k=8,in=8x8,ker=3x3,pad=1x1\n", "one");
    return Stream(StreamSpec{}, w, WorkloadOptions{});
}
std::vector<FakeSpec> slow_fast() {
    FakeSpec slow{"slow"}, fast{"fast"};
    slow.times_ms = {1.0};
    fast.times_ms = {0.95};
    return {slow, fast};
}

// Runs off and on live, run k at load factors[k] (the machine's noise, chosen by the test).
SimulationResult run_with_loads(const std::vector<double>& factors, int repeats,
                                std::vector<std::string>* order = nullptr) {
    FakeBackend b("fake", slow_fast());
    double factor = factors.at(0);
    b.load = [&](double) { return factor; };
    SimulationOptions o;
    o.iterations = 10;
    o.repeats = repeats;
    o.settings = {parse_setting("off"), parse_setting("on")};
    o.progress = [&](int64_t done, int64_t, const std::string& what) {
        if (order && (order->empty() || done % o.iterations == 1)) order->push_back(what);
        if (done % o.iterations == 0 && static_cast<std::size_t>(done / o.iterations) < factors.size())
            factor = factors[static_cast<std::size_t>(done / o.iterations)];
    };
    return simulate(b, hundred_calls(), o);
}

BOOST_AUTO_TEST_CASE(settings_repeat_in_rotated_order_each_a_fresh_start) {
    FakeBackend b("fake", slow_fast());
    std::vector<std::string> order;
    SimulationOptions o;
    o.iterations = 2;
    o.settings = {parse_setting("off"), parse_setting("on"), parse_setting("adaptive")};
    o.progress = [&](int64_t done, int64_t total, const std::string& what) {
        BOOST_TEST(total == 3 * 3 * 2);
        if (done % 2 == 1) order.push_back(what);
    };
    const SimulationResult r = simulate(b, hundred_calls(), o);  // live: 3 runs by default
    BOOST_TEST(r.repeats == 3);
    const std::vector<std::string> expected{"off", "on", "adaptive", "on", "adaptive", "off", "adaptive", "off", "on"};
    BOOST_TEST(order == expected, tt::per_element());
    for (const ScenarioResult& s : r.scenarios) BOOST_TEST(s.repeat_totals_ms.size() == 3u);
    // Each run a fresh start (an empty cache): the kept 'on' run searched its shape.
    BOOST_TEST(scenario(r, "on").sum().searches == 1);
}

BOOST_AUTO_TEST_CASE(a_difference_inside_the_spread_is_no_difference) {
    // One run each (as before): 'off' ran while the machine was 20% slower, so benchmark on
    // looks like a saving it is not.
    const SimulationResult once = run_with_loads({1.2, 1.0}, 1);
    BOOST_TEST(once.recommendation.setting == "on");
    // Three runs each, rotated: off at 1.2, 1.0, 1.1 and on at 1.0, 1.2, 1.1. The medians still
    // differ by about 4%, but inside the runs' spread: no recommendation rests on it.
    const SimulationResult r = run_with_loads({1.2, 1.0, 1.2, 1.0, 1.1, 1.1}, 3);
    const ScenarioResult &off = scenario(r, "off"), &on = scenario(r, "on");
    BOOST_TEST(off.repeat_totals_ms.size() == 3u);
    BOOST_TEST(off.range_lo_ms == 1000.0, tt::tolerance(1e-6));
    BOOST_TEST(off.range_hi_ms == 1200.0, tt::tolerance(1e-6));
    BOOST_TEST(off.sum().total_ms() == 1100.0, tt::tolerance(1e-6));  // the median run
    BOOST_TEST(on.repeat_totals_ms.size() == 3u);
    BOOST_TEST(on.range_lo_ms < off.range_hi_ms);  // the ranges overlap
    BOOST_TEST(r.comparisons[1].saving > 0.02);
    BOOST_TEST(r.comparisons[1].within_noise);
    BOOST_TEST(r.recommendation.setting == "off");
    BOOST_TEST(r.recommendation.text.find("no difference beyond the noise") != std::string::npos,
               r.recommendation.text);
    const nlohmann::json j = to_json(r, {});
    BOOST_TEST(j["settings"][1]["within_noise"] == true);
    BOOST_TEST(j["settings"][0]["repeat_totals_ms"].size() == 3u);
    BOOST_TEST(j["settings"][0]["range_ms"][1].get<double>() == 1200.0, tt::tolerance(1e-6));
    BOOST_TEST(format_table(r, {}).find("3 runs: ") != std::string::npos, format_table(r, {}));
    BOOST_TEST(format_table(r, {}).find("inside the baseline's noise") != std::string::npos);
    // A steady machine: the same 4% is beyond the (zero) spread, and the recommendation says so.
    const SimulationResult steady = run_with_loads({1, 1, 1, 1, 1, 1}, 3);
    BOOST_TEST(!steady.comparisons[1].within_noise);
    BOOST_TEST(steady.recommendation.setting == "on");
    BOOST_TEST(steady.recommendation.text.find("beyond the noise of 3 runs") != std::string::npos,
               steady.recommendation.text);
}

BOOST_AUTO_TEST_SUITE_END()
