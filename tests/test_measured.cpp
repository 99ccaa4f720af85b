// PyTorch's own measurements replayed by the simulator (sim/include/convtune/sim/measured.hpp):
// the file's validation, and the off/pytorch rows' totals computed by hand from the file.
#define BOOST_TEST_MODULE measured
#include <boost/test/unit_test.hpp>
#include <fmt/core.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>
#include <unistd.h>

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

json run(int bm, const std::string& cache, double startup, double a_first, double a_steady, double b_first,
         double b_steady) {
    return {{"setting", {{"benchmark", bm}, {"allow_tf32", 1}, {"deterministic", 0}}},
            {"cache", cache},
            {"kernel_cache_folder", "convtune-kernel-cache-" + std::to_string(bm)},
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

json grid(json runs) {
    return {{"format", "convtune-pytorch-measurement-grid"}, {"version", 1}, {"measurements", std::move(runs)}};
}

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
    // Each run on its own, with the cache state's one start-up (the benchmark-off probes' median,
    // 200): run 1 = 200 + 10 + 2 + 20 + 3*1 + 2 = 237; run 2 = 200 + 30 + 2 + 20 + 3 + 4 = 259.
    BOOST_TEST(off.range_lo_ms == 237.0, boost::test_tools::tolerance(1e-9));
    BOOST_TEST(off.range_hi_ms == 259.0, boost::test_tools::tolerance(1e-9));
    // pytorch: A first 600 steady 0.5, B first 300 steady 1, and benchmark off's start-up (200,
    // not its own probes' 100: a probe under benchmark=True searches its own shape).
    for (const MeasuredRun* run : m.select("bm1", "warm")) BOOST_TEST(run->startup_ms == 200.0);
    BOOST_TEST(on.iterations[0].total_ms() == 200 + 600 + 1.0 + 300, boost::test_tools::tolerance(1e-9));
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

// A cold measurement without the name of its own kernel-cache folder (grids made before each
// process got one shared the default kernel cache) is validated, then left out and counted.
BOOST_AUTO_TEST_CASE(cold_measurements_without_their_kernel_cache_folder_are_left_out) {
    json doc = grid(json::array({run(0, "cold", 100, 10, 1, 20, 2), run(1, "cold", 100, 500, 0.5, 200, 1),
                                 run(0, "warm", 100, 10, 1, 20, 2), run(1, "warm", 100, 500, 0.5, 200, 1)}));
    doc["measurements"][0].erase("kernel_cache_folder");
    doc["measurements"][1]["kernel_cache_folder"] = nullptr;
    doc["measurements"][2].erase("kernel_cache_folder");  // a warm one needs none
    const PyTorchMeasurements m = PyTorchMeasurements::load(write("g5.json", doc.dump()));
    BOOST_TEST(m.unverified_cold == 2);
    BOOST_TEST(m.select("bm0", "cold").empty());
    BOOST_TEST(m.select("bm1", "cold").empty());
    BOOST_TEST(m.select("bm0", "warm").size() == 1u);
    doc["measurements"][0]["kernel_cache_folder"] = "convtune-kernel-cache-a";
    const PyTorchMeasurements kept = PyTorchMeasurements::load(write("g6.json", doc.dump()));
    BOOST_TEST(kept.unverified_cold == 1);
    BOOST_TEST(kept.select("bm0", "cold").size() == 1u);
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

// ---- The measured library (PyTorchLibrary): a folder of grid files, merged, with a model for
// the problems none of them measured.
namespace {

// A folder of its own for each test's library.
fs::path library_dir(const std::string& name) {
    const fs::path d = fs::temp_directory_path() / ("convtune_measured_lib_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

// One run of one setting measuring `problems` (key, first, steady), at allow_tf32 `tf32`.
json lib_run(int bm, const std::string& cache, int tf32, const std::string& device,
             const std::vector<std::tuple<std::string, double, double>>& problems, double startup = 50) {
    json ps = json::array();
    for (const auto& [k, f, s] : problems) ps.push_back({{"key", k}, {"first_ms", f}, {"steady_ms", s}});
    return {{"setting", {{"benchmark", bm}, {"allow_tf32", tf32}, {"deterministic", 0}}}, {"cache", cache},
            {"kernel_cache_folder", "convtune-kernel-cache-" + std::to_string(bm)},       {"startup_ms", startup},
            {"environment", {{"device", device}, {"torch", "2.11"}, {"cudnn", 91900}}},   {"problems", ps}};
}

}  // namespace

BOOST_AUTO_TEST_CASE(library_replays_what_its_files_measured_and_tells_tf32_apart) {
    const fs::path d = library_dir("merge");
    // Network 1 (allow_tf32=0): A (f32) measured twice per setting; network 2 (allow_tf32=1): A again.
    std::ofstream(d / "net1.json") << grid(json::array({lib_run(0, "warm", 0, "GPU X", {{A, 10, 1}}, 40),
                                                        lib_run(0, "warm", 0, "GPU X", {{A, 12, 1.5}}, 60),
                                                        lib_run(1, "warm", 0, "GPU X", {{A, 100, 0.5}}),
                                                        lib_run(1, "warm", 0, "GPU X", {{A, 120, 0.7}})}))
                                          .dump();
    std::ofstream(d / "net2.json") << grid(json::array({lib_run(0, "warm", 1, "GPU X", {{A, 5, 0.2}, {B, 7, 0.3}}),
                                                        lib_run(1, "warm", 1, "GPU X", {{A, 50, 0.1}, {B, 70, 0.2}})}))
                                              .dump();
    std::ofstream(d / "notes.txt") << "not a grid";  // only .json and .json.gz files are read
    const PyTorchLibrary lib = PyTorchLibrary::load_dir(d.string(), "lib");
    BOOST_REQUIRE_EQUAL(lib.files.size(), 2u);
    BOOST_TEST(lib.describe().find("2 workloads, 3 problems (f32 1, tf32 2)") == 0, lib.describe());
    const ConvProblem a = ConvProblem::parse(A);
    // allow_tf32=0: network 1's measurements of A, run r taking its r-th; none predicted.
    const PyTorchMeasurements off = lib.for_problems({a}, false);
    BOOST_TEST(off.estimated.empty());
    BOOST_TEST(off.library == "lib");
    BOOST_REQUIRE_EQUAL(off.select("bm0", "warm").size(), 2u);
    BOOST_TEST(off.select("bm0", "warm")[0]->problems.at(A).first_ms == 10.0);
    BOOST_TEST(off.select("bm0", "warm")[1]->problems.at(A).first_ms == 12.0);
    BOOST_TEST(off.select("bm1", "warm")[1]->problems.at(A).steady_ms == 0.7);
    // allow_tf32=1: network 2's (one run, cycled through the two the library's runs have).
    const PyTorchMeasurements on = lib.for_problems({a}, true);
    BOOST_TEST(on.estimated.empty());
    BOOST_TEST(on.select("bm1", "warm")[0]->problems.at(A).first_ms == 50.0);
    BOOST_TEST(on.select("bm1", "warm")[1]->problems.at(A).first_ms == 50.0);
    // A cold kernel cache was never measured: no run of it.
    BOOST_TEST(on.select("bm0", "cold").empty());
    fs::remove_all(d);
}

BOOST_AUTO_TEST_CASE(library_model_recovers_a_law_the_measurements_follow) {
    // Problems whose times follow an exact law in the model's features: the fit must find it
    // and predict an unmeasured problem by it. steady = 0.05 + 2 GMACs (f16) + 0.5 GB;
    // first = steady + 3 (bm0) or 40 + 10 steady (bm1); all f16 fwd 2-D, groups 1.
    const fs::path d = library_dir("law");
    auto law = [](const ConvProblem& p, int bm) {
        const double g = static_cast<double>(p.macs()) * 1e-9;
        const double gb = static_cast<double>(p.x_elements() + p.w_elements() + p.y_elements()) * 2 * 1e-9;
        const double steady = 0.05 + 2 * g + 0.5 * gb;
        return std::pair{bm ? 40 + 10 * steady : steady + 3, steady};
    };
    std::vector<ConvProblem> measured;
    for (int n : {1, 2, 4, 8, 16})
        for (int c : {16, 64, 256})
            for (int k : {32, 128})
                measured.push_back(ConvProblem::parse(
                    fmt::format("dtype=f16,layout=nhwc,n={},c={},k={},in=28x28,ker=3x3,pad=1x1", n, c, k)));
    for (int bm : {0, 1}) {
        std::vector<std::tuple<std::string, double, double>> rows;
        for (const ConvProblem& p : measured) rows.emplace_back(p.to_string(), law(p, bm).first, law(p, bm).second);
        std::ofstream(d / fmt::format("bm{}.json", bm))
            << grid(json::array({lib_run(bm, "cold", 1, "GPU X", rows)})).dump();
    }
    const PyTorchLibrary lib = PyTorchLibrary::load_dir(d.string(), "law");
    const ConvProblem fresh = ConvProblem::parse("dtype=f16,layout=nhwc,n=32,c=128,k=96,in=28x28,ker=3x3,pad=1x1");
    const PyTorchMeasurements m = lib.for_problems({fresh, measured[3]}, true);
    BOOST_REQUIRE_EQUAL(m.estimated.size(), 1u);
    BOOST_TEST(m.estimated[0] == fresh.to_string());
    for (int bm : {0, 1}) {
        const auto runs = m.select(bm ? "bm1" : "bm0", "cold");
        BOOST_REQUIRE_EQUAL(runs.size(), 1u);
        const MeasuredRun::Problem& got = runs[0]->problems.at(fresh.to_string());
        BOOST_TEST(got.steady_ms == law(fresh, bm).second, boost::test_tools::tolerance(1e-6));
        BOOST_TEST(got.first_ms == law(fresh, bm).first, boost::test_tools::tolerance(1e-6));
        // The measured one is replayed as measured, not fitted.
        BOOST_TEST(runs[0]->problems.at(measured[3].to_string()).first_ms == law(measured[3], bm).first);
    }
    // An f32 problem: the library measured no f32 at all, so nothing can tell its class from the
    // intercept: it is still predicted, never below the smallest time measured, its first call
    // never below its steady time.
    const ConvProblem f32 = ConvProblem::parse("n=4,c=64,k=64,in=28x28,ker=3x3,pad=1x1");
    const PyTorchMeasurements pf = lib.for_problems({f32}, false);
    const MeasuredRun::Problem& g = pf.select("bm1", "cold")[0]->problems.at(f32.to_string());
    BOOST_TEST(g.steady_ms >= law(measured[0], 1).second - 1e-12);
    BOOST_TEST(g.first_ms >= g.steady_ms);
    fs::remove_all(d);
}

BOOST_AUTO_TEST_CASE(library_refuses_files_of_different_gpus_and_is_empty_without_a_folder) {
    const fs::path d = library_dir("gpus");
    std::ofstream(d / "a.json") << grid(json::array({lib_run(0, "warm", 1, "GPU X", {{A, 1, 1}})})).dump();
    std::ofstream(d / "b.json") << grid(json::array({lib_run(0, "warm", 1, "GPU Y", {{A, 1, 1}})})).dump();
    BOOST_CHECK_EXCEPTION(PyTorchLibrary::load_dir(d.string(), "gpus"), Error, [](const Error& e) {
        return std::string(e.what()).find("one library holds one GPU model") != std::string::npos;
    });
    const PyTorchLibrary none = PyTorchLibrary::load_dir((d / "nothing").string(), "none");
    BOOST_TEST(none.empty());
    BOOST_CHECK_THROW(none.for_problems({ConvProblem::parse(A)}, true), Error);
    fs::remove_all(d);
}
