// PyTorch's own measurements replayed by the simulator (sim/include/convtune/sim/measured.hpp):
// the file's validation, and the off/pytorch rows' totals computed by hand from the file.
#define BOOST_TEST_MODULE measured
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "convtune/error.hpp"
#include "convtune/sim/measured.hpp"
#include "convtune/sim/simulator.hpp"
#include "convtune/sim/stream.hpp"

using namespace convtune;
using namespace convtune::sim;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string A = ConvProblem::parse("n=2,c=4,k=8,in=8x8,ker=3x3,pad=1x1").to_string();
const std::string B = ConvProblem::parse("dir=bwd_filter,n=2,c=4,k=8,in=8x8,ker=3x3,pad=1x1").to_string();

json run(int bm, const std::string& cache, double startup, double a_first, double a_steady, double b_first, double b_steady) {
    return {{"setting", {{"benchmark", bm}, {"allow_tf32", 1}, {"deterministic", 0}}},
            {"cache", cache},
            {"startup_ms", startup},
            {"environment", {{"device", "GPU X"}, {"torch", "2.11"}, {"cudnn", 91900}}},
            {"problems", json::array({{{"key", A}, {"first_ms", a_first}, {"steady_ms", a_steady}},
                                      {{"key", B}, {"first_ms", b_first}, {"steady_ms", b_steady}}})}};
}

std::string write(const std::string& name, const std::string& text) {
    const fs::path p = fs::temp_directory_path() / ("convtune_measured_" + std::to_string(::getpid()) + "_" + name);
    std::ofstream(p) << text;
    return p.string();
}

json grid(json runs) { return {{"format", "convtune-pytorch-measurement-grid"}, {"version", 1}, {"measurements", std::move(runs)}}; }

// Two runs of each setting, warm cache.
json standard() {
    return grid(json::array({run(0, "warm", 100, 10, 1, 20, 2), run(0, "warm", 300, 30, 1, 20, 4),
                             run(1, "warm", 100, 500, 0.5, 200, 1), run(1, "warm", 100, 700, 0.5, 400, 1)}));
}

Stream trace_stream(const std::string& text) {
    StreamSpec spec;
    spec.kind = StreamKind::trace;
    spec.trace_path = write("t.trace", text);
    return Stream(spec, Workload{}, WorkloadOptions{});
}

}  // namespace

BOOST_AUTO_TEST_CASE(replayed_totals_follow_the_measurements) {
    const PyTorchMeasurements m = PyTorchMeasurements::load(write("g.json", standard().dump()));
    BOOST_TEST(m.device == "GPU X");
    BOOST_TEST(m.select("bm0", "warm").size() == 2u);
    BOOST_TEST(m.select("bm1", "cold").empty());
    // One iteration: A three times back to back, then B; the trace repeats for iteration 2.
    const Stream s = trace_stream("# convtune-trace 1\n" + A + " x3\n" + B + "\n");
    SimulationOptions o;
    o.iterations = 2;
    o.measured = &m;
    const SimulationResult r = simulate_measured(s, o);
    BOOST_REQUIRE_EQUAL(r.scenarios.size(), 2u);
    const ScenarioResult& off = r.scenarios[0];
    const ScenarioResult& on = r.scenarios[1];
    BOOST_TEST(off.setting.name == "off");
    BOOST_TEST(on.setting.name == "pytorch");
    BOOST_TEST(off.source == "measured");
    // off, medians over the runs: startup 200, A first 20 steady 1, B first 20 steady 3.
    // Iteration 1: 200 + 20 + 2*1 + 20 = 242 (search: (20-1) + (20-3) = 36); iteration 2: 3*1 + 3 = 6.
    BOOST_TEST(off.iterations[0].total_ms() == 242.0, boost::test_tools::tolerance(1e-9));
    BOOST_TEST(off.iterations[0].search_ms == 36.0, boost::test_tools::tolerance(1e-9));
    BOOST_TEST(off.iterations[1].total_ms() == 6.0, boost::test_tools::tolerance(1e-9));
    BOOST_TEST(off.iterations[0].calls == 4);
    BOOST_TEST(off.iterations[0].hits == 2);
    BOOST_TEST(off.iterations[0].misses == 2);
    // Each run on its own: run 1 = 100 + 10 + 2 + 20 + 3*1 + 2 = 137; run 2 = 300 + 30 + 2 + 20 + 3 + 4 = 359.
    BOOST_TEST(off.range_lo_ms == 137.0, boost::test_tools::tolerance(1e-9));
    BOOST_TEST(off.range_hi_ms == 359.0, boost::test_tools::tolerance(1e-9));
    // pytorch: startup 100, A first 600 steady 0.5, B first 300 steady 1.
    BOOST_TEST(on.iterations[0].total_ms() == 100 + 600 + 1.0 + 300, boost::test_tools::tolerance(1e-9));
    BOOST_TEST(on.iterations[1].total_ms() == 2.5, boost::test_tools::tolerance(1e-9));
    BOOST_TEST(r.baseline == 0);
    BOOST_TEST(r.recommendation.setting == "off");
}

BOOST_AUTO_TEST_CASE(a_problem_not_measured_fails_the_row_and_names_it) {
    const PyTorchMeasurements m = PyTorchMeasurements::load(write("g2.json", standard().dump()));
    const std::string other = ConvProblem::parse("n=2,c=4,k=8,in=9x9,ker=3x3").to_string();
    const Stream s = trace_stream(A + "\n" + other + "\n");
    SimulationOptions o;
    o.iterations = 1;
    o.measured = &m;
    const SimulationResult r = simulate_measured(s, o);
    BOOST_TEST(r.scenarios[0].failure.find(other) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_missing_cache_state_fails_the_row) {
    const PyTorchMeasurements m = PyTorchMeasurements::load(write("g3.json", standard().dump()));
    SimulationOptions o;
    o.iterations = 1;
    o.measured = &m;
    o.kernel_cache = "cold";
    const SimulationResult r = simulate_measured(trace_stream(A + "\n"), o);
    BOOST_TEST(r.scenarios[0].failure.find("cold") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_files_are_refused_naming_the_field) {
    auto refused = [](const json& doc, const std::string& needle) {
        try {
            PyTorchMeasurements::load(write("bad.json", doc.dump()));
        } catch (const Error& e) {
            return std::string(e.what()).find(needle) != std::string::npos;
        }
        return false;
    };
    json huge = standard();
    huge["measurements"][1]["problems"][0]["first_ms"] = 1e308;
    BOOST_TEST(refused(huge, "first_ms"));
    json negative = standard();
    negative["measurements"][0]["startup_ms"] = -1;
    BOOST_TEST(refused(negative, "startup_ms"));
    json cache = standard();
    cache["measurements"][0]["cache"] = "lukewarm";
    BOOST_TEST(refused(cache, "cache"));
    json key = standard();
    key["measurements"][0]["problems"][0]["key"] = "n=0";
    BOOST_TEST(refused(key, "key"));
    json format = standard();
    format["format"] = "convtune-recording";
    BOOST_TEST(refused(format, "grid"));
    json det = standard();
    det["measurements"][2]["setting"]["deterministic"] = 1;
    BOOST_TEST(refused(det, "deterministic"));
    BOOST_CHECK_THROW(PyTorchMeasurements::load(write("nojson.json", "{")), Error);
}
