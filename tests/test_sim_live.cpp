// The simulator's live engine on the real CPU backend with a tiny workload: the same code path
// as a replay, with real tensors and the wall clock. Seconds, not minutes.
#define BOOST_TEST_MODULE sim_live
#include <boost/test/unit_test.hpp>

#include "convtune/registry.hpp"
#include "convtune/sim/recording.hpp"
#include "convtune/sim/replay_backend.hpp"
#include "convtune/sim/simulator.hpp"

using namespace convtune;
using namespace convtune::sim;

namespace {

const char* kTiny =
    "convtune-workload 1\n"
    "name tiny\n"
    "layer a x1 n=1,c=8,k=16,in=12x12,ker=3x3,pad=1x1\n"
    "layer b x2 n=1,c=16,k=16,in=12x12,ker=3x3,pad=1x1\n";

}  // namespace

BOOST_AUTO_TEST_CASE(live_cpu_run_counts_and_times) {
    Backend& cpu = find_backend("cpu");
    WorkloadOptions wo;
    wo.mode = Mode::train;
    const Stream s(StreamSpec{}, parse_workload_text(kTiny, "tiny"), wo);
    SimulationOptions o;
    o.iterations = 3;
    o.settings = {parse_setting("off"), parse_setting("on"), parse_setting("pytorch")};
    const SimulationResult r = simulate(cpu, s, o);
    BOOST_TEST(r.engine == "live");
    // a: fwd + bwd_filter (the first layer needs no bwd_data); b: fwd + bwd_data + bwd_filter.
    for (const ScenarioResult& sc : r.scenarios) {
        BOOST_TEST(sc.failure.empty(), sc.failure);
        const IterationStats sum = sc.sum();
        BOOST_TEST(sc.distinct_shapes() == 5);
        BOOST_TEST(sum.calls == 3 * (3 + 2 + 3));  // per pass: fwd 1+2, bwd_data 0+2, bwd_filter 1+2
        BOOST_TEST(sum.misses == 5);
        BOOST_TEST(sum.hits == sum.calls - 5);
        BOOST_TEST(sum.exec_ms > 0);
        BOOST_TEST(sum.wall_ms >= sum.exec_ms);
        if (sc.setting.flags.benchmark) {
            BOOST_TEST(sum.searches == 5);
            BOOST_TEST(sc.iterations[0].search_ms > 0);
            BOOST_TEST(sc.iterations[1].search_ms == 0.0);
        } else {
            BOOST_TEST(sum.search_ms == 0.0);
            BOOST_TEST(sum.searches == 0);
        }
    }
    BOOST_TEST(!r.recommendation.text.empty());
}

BOOST_AUTO_TEST_CASE(record_then_replay_on_cpu) {
    Backend& cpu = find_backend("cpu");
    const Stream s(StreamSpec{}, parse_workload_text(kTiny, "tiny"), WorkloadOptions{});
    RecordOptions ro;
    ro.samples = 2;
    const Recording rec = record(cpu, distinct_problems(s, 1), ro);
    BOOST_TEST(rec.problems.size() == 2u);
    BOOST_TEST(rec.environment.backend == "cpu");
    for (const ProblemRecord& p : rec.problems) {
        BOOST_TEST(!p.heuristic.empty());
        for (const std::string& id : p.heuristic) {
            const AlgorithmRecord* a = p.find(id);
            BOOST_REQUIRE(a);
            BOOST_TEST(a->supported);
            if (a->status == Status::Code::ok) {
                BOOST_TEST(a->first_ms.has_value());
                BOOST_TEST(!a->samples_ms.empty());
            }
        }
    }
    ReplayBackend replay(Recording::from_json(rec.to_json(), "memory"));
    SimulationOptions o;
    o.iterations = 20;
    const SimulationResult r = simulate(replay, s, o);
    for (const ScenarioResult& sc : r.scenarios) {
        BOOST_TEST(sc.failure.empty(), sc.failure);
        BOOST_TEST(sc.sum().exec_ms > 0);
    }
}
