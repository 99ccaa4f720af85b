// The selector's rules, policy by policy, proven on a scripted fake backend with exact virtual
// timings; the cache's concurrency and bounds; the flags' scoping.
#define BOOST_TEST_MODULE selector
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <thread>

#include "convtune/error.hpp"
#include "convtune/host_data.hpp"
#include "convtune/selector.hpp"
#include "support/fake_backend.hpp"

using namespace convtune;
using test::FakeBackend;
using test::FakeSpec;
using Mode = FakeSpec::Mode;

namespace {

const ConvProblem kP = ConvProblem::parse("n=2,c=4,k=4,in=6x6,ker=3x3,pad=1x1");

FlagValues flags(const std::string& s) { return parse_flags(s); }

const Candidate& cand(const Decision& d, const std::string& id) {
    for (const Candidate& c : d.candidates)
        if (c.id == id) return c;
    throw std::runtime_error("no candidate " + id);
}

// Five candidates in heuristic order h1..h5 with distinct constant times; h4 is the fastest.
std::vector<FakeSpec> five() {
    return {{"h1", {5}}, {"h2", {4}}, {"h3", {6}}, {"h4", {1}}, {"h5", {2}}};
}

struct TempDir {
    std::filesystem::path path;
    TempDir() {
        path = std::filesystem::temp_directory_path() /
               ("convtune-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
        std::filesystem::create_directories(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    std::string file(const std::string& n) const { return (path / n).string(); }
    static inline int counter = 0;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(pytorch_policy)

BOOST_AUTO_TEST_CASE(benchmark_off_takes_heuristic_first) {
    FakeBackend b("fake", five());
    TuningCache cache;
    Selector s(b, cache);
    auto d = s.select(kP, flags("policy=pytorch,benchmark=0"));
    BOOST_TEST(d->algorithm == "h1");
    BOOST_TEST((d->source == Source::heuristic));
    BOOST_TEST(b.clock_ms() == 0.0);  // nothing ran
}

BOOST_AUTO_TEST_CASE(benchmark_on_one_warmup_one_sample_until_limit) {
    FakeBackend b("fake", five());
    TuningCache cache;
    Selector s(b, cache);
    auto d = s.select(kP, flags("policy=pytorch,benchmark=1,benchmark_limit=3"));
    // h1..h3 timed (limit 3), h4 (the fastest) never reached: PyTorch picks h2.
    BOOST_TEST(d->algorithm == "h2");
    BOOST_TEST((d->source == Source::search));
    for (const char* id : {"h1", "h2", "h3"}) {
        BOOST_TEST(b.runs(id) == 2, id);  // warm-up + one timed run
        BOOST_TEST(cand(*d, id).samples_ms.size() == 1u);
    }
    BOOST_TEST(b.runs("h4") == 0);
    // The search stopped at the limit: h4 and h5 were never timed, but their support was decided
    // (on cuDNN: their plans built) before any was timed, as PyTorch builds every configuration
    // its heuristics suggest.
    for (const char* id : {"h4", "h5"}) {
        BOOST_TEST((cand(*d, id).state == Candidate::State::not_timed), id);
        BOOST_TEST(cand(*d, id).reason == "benchmark_limit=3 reached", id);
        BOOST_TEST(b.support_queries(id) == 1, id);
    }
    BOOST_TEST(b.clock_ms() == 2 * (5 + 4 + 6.0));
    // limit 0 = all: h4 wins.
    TuningCache c2;
    Selector s2(b, c2);
    BOOST_TEST(s2.select(kP, flags("policy=pytorch,benchmark=1,benchmark_limit=0"))->algorithm == "h4");
}

BOOST_AUTO_TEST_CASE(benchmark_on_times_what_the_frameworks_lists_name_once_per_listing) {
    // PyTorch v8 builds and times one plan per listing of cuDNN's mode A and fallback lists:
    // h2 (both lists name it) is timed twice and counts twice towards the limit, h3 (only mode B
    // or the v7 ranking suggests it) is never seen, not even its support decided.
    std::vector<FakeSpec> specs = five();
    specs[1].listings = 2;
    specs[2].listings = 0;
    FakeBackend b("fake", specs);
    TuningCache cache;
    Selector s(b, cache);
    auto d = s.select(kP, flags("policy=pytorch,benchmark=1,benchmark_limit=4"));
    BOOST_TEST(b.runs("h1") == 2);
    BOOST_TEST(b.runs("h2") == 4);  // two warm-up + timed pairs
    BOOST_TEST(b.runs("h3") == 0);
    BOOST_TEST(b.support_queries("h3") == 0);
    BOOST_TEST(b.runs("h4") == 2);  // 1 + 2 + 1 = the limit of 4
    BOOST_TEST(b.runs("h5") == 0);
    BOOST_TEST(d->algorithm == "h4");
    BOOST_TEST(b.clock_ms() == 2 * 5 + 4 * 4 + 2 * 1.0);
    // The other policies do not read the listings.
    FakeBackend b2("fake", specs);
    TuningCache c2;
    Selector s2(b2, c2);
    (void)s2.select(kP, flags("policy=pytorch-v7,benchmark=1,benchmark_limit=4"));
    BOOST_TEST(b2.runs("h2") == 2);
    BOOST_TEST(b2.runs("h3") == 2);
}

BOOST_AUTO_TEST_CASE(a_listing_the_ranking_learns_at_its_end_is_timed_too) {
    // cuDNN's ranking learns that the fallback list names a configuration mode A yielded only
    // once it walks past the fallback list: the search reads each candidate's listings once the
    // ranking has ended, so h2 (both lists name it) is timed twice still.
    std::vector<FakeSpec> specs = five();
    specs[1].listings = 2;
    FakeBackend b("fake", specs);
    b.listings_known_at_end = true;
    TuningCache cache;
    Selector s(b, cache);
    (void)s.select(kP, flags("policy=pytorch,benchmark=1,benchmark_limit=0"));
    for (const char* id : {"h1", "h3", "h4", "h5"}) BOOST_TEST(b.runs(id) == 2, id);
    BOOST_TEST(b.runs("h2") == 4);
}

BOOST_AUTO_TEST_CASE(benchmark_is_not_in_the_key) {
    // PyTorch issue 45372: a shape first seen with benchmark off keeps its heuristic pick.
    FakeBackend b("fake", five());
    TuningCache cache;
    Selector s(b, cache);
    BOOST_TEST(s.select(kP, flags("policy=pytorch,benchmark=0"))->algorithm == "h1");
    auto d = s.select(kP, flags("policy=pytorch,benchmark=1,benchmark_limit=0"));
    BOOST_TEST(d->algorithm == "h1");
    BOOST_TEST((d->source == Source::memory));
    BOOST_TEST(b.clock_ms() == 0.0);
    BOOST_TEST(cache_key(b, kP, flags("policy=pytorch,benchmark=0")) ==
               cache_key(b, kP, flags("policy=pytorch,benchmark=1")));
    // but deterministic and allow_tf32 are
    BOOST_TEST(cache_key(b, kP, flags("policy=pytorch,deterministic=1")) != cache_key(b, kP, flags("policy=pytorch")));
    BOOST_TEST(cache_key(b, kP, flags("policy=pytorch,allow_tf32=0")) != cache_key(b, kP, flags("policy=pytorch")));
}

BOOST_AUTO_TEST_CASE(benchmark_is_not_in_the_v7_key_either) {
    // The legacy API's cache has the same quirk: a shape first met with benchmark off keeps the
    // heuristic's pick when benchmark is turned on.
    FakeBackend b("fake", five());
    BOOST_TEST(cache_key(b, kP, flags("policy=pytorch-v7,benchmark=0")) ==
               cache_key(b, kP, flags("policy=pytorch-v7,benchmark=1")));
    TuningCache cache;
    Selector s(b, cache);
    BOOST_TEST(s.select(kP, flags("policy=pytorch-v7,benchmark=0"))->algorithm == "h1");
    auto d = s.select(kP, flags("policy=pytorch-v7,benchmark=1"));
    BOOST_TEST(d->algorithm == "h1");
    BOOST_TEST((d->source == Source::memory));
    BOOST_TEST(b.clock_ms() == 0.0);
    // convtune's own policies keep benchmark in the key.
    for (const char* pol : {"convtune", "adaptive"})
        BOOST_TEST(cache_key(b, kP, flags(std::string("benchmark=0,policy=") + pol)) !=
                       cache_key(b, kP, flags(std::string("benchmark=1,policy=") + pol)),
                   pol);
}

BOOST_AUTO_TEST_CASE(workspace_limit_is_in_every_key) {
    // A choice made without a workspace limit must not be reused under one: "big" (the fastest,
    // 1 MiB of workspace) is chosen first, then a limit of 1000 bytes must choose "plain".
    FakeBackend b("fake", {{"big", {1}, {}, 1 << 20}, {"plain", {3}}});
    for (const char* pol : {"pytorch", "pytorch-v7", "convtune", "adaptive"}) {
        const std::string base = std::string("benchmark=1,benchmark_limit=0,adaptive_after=1,policy=") + pol;
        BOOST_TEST(cache_key(b, kP, flags(base)) != cache_key(b, kP, flags(base + ",workspace_limit=1000")), pol);
        BOOST_TEST(cache_key(b, kP, flags(base + ",workspace_limit=2000")) !=
                       cache_key(b, kP, flags(base + ",workspace_limit=1000")),
                   pol);
        TuningCache cache;
        Selector s(b, cache);
        BOOST_TEST(s.select(kP, flags(base))->algorithm == "big", pol);
        auto d = s.select(kP, flags(base + ",workspace_limit=1000"));
        BOOST_TEST(d->algorithm == "plain", pol);
        BOOST_TEST((d->source == Source::search), pol);
    }
}

BOOST_AUTO_TEST_CASE(single_sample_picks_a_lucky_noisy_candidate) {
    // "noisy" is slow (10 ms) but its first timed run is lucky (1 ms); "steady" always takes 5 ms.
    FakeBackend b("fake", {{"noisy", {10, 1, 10, 10, 10, 10, 10, 10}}, {"steady", {5}}});
    TuningCache cache;
    Selector s(b, cache);
    BOOST_TEST(s.select(kP, flags("policy=pytorch,benchmark=1"))->algorithm == "noisy");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(filters)

BOOST_AUTO_TEST_CASE(notes_filters_and_workspace) {
    FakeBackend b("fake", {{"nondet", {1}, Note::nondeterministic},
                           {"tc", {1}, Note::tensor_core},
                           {"down", {1}, Note::down_convert_inputs},
                           {"big", {1}, {}, 1 << 20},
                           {"never", {1}, {}, 0, Mode::unsupported},
                           {"plain", {3}}});
    for (Policy pol : {parse_policy("pytorch"), parse_policy("pytorch-v7"), parse_policy("convtune")}) {
        FlagValues f = flags("benchmark=1,benchmark_limit=0,deterministic=1,allow_tf32=0,workspace_limit=1000");
        f.policy = pol;
        TuningCache cache;
        Selector s(b, cache);
        auto d = s.select(kP, f);
        BOOST_TEST(d->algorithm == "plain", to_string(pol));
        BOOST_TEST((cand(*d, "nondet").state == Candidate::State::filtered));
        BOOST_TEST((cand(*d, "tc").state == Candidate::State::filtered));
        BOOST_TEST((cand(*d, "down").state == Candidate::State::filtered));
        BOOST_TEST((cand(*d, "big").state == Candidate::State::over_workspace));
        BOOST_TEST((cand(*d, "never").state == Candidate::State::unsupported));
        BOOST_TEST(cand(*d, "never").reason == "scripted: never supported");
    }
    // TF32 only concerns f32: an f16 problem keeps the tensor-core candidate.
    ConvProblem half = kP;
    half.dtype = DataType::f16;
    TuningCache cache;
    Selector s(b, cache);
    auto d = s.select(half, flags("policy=pytorch,benchmark=1,benchmark_limit=0,allow_tf32=0"));
    BOOST_TEST((cand(*d, "tc").state == Candidate::State::timed));
    // Down-convert is dropped even when nothing else is asked.
    BOOST_TEST((cand(*d, "down").state == Candidate::State::filtered));
}

BOOST_AUTO_TEST_CASE(notes_known_before_support_are_filtered_without_the_support_check) {
    // PyTorch filters cuDNN's engine configurations by their notes before it builds their plans.
    // An algorithm whose notes are known before supports() (a cuDNN engine once built, a legacy
    // algorithm always) is dropped by the flags without its support check (on cuDNN: no plan is
    // built), with the state and reason it gets after one; one that also would not be supported
    // is filtered rather than unsupported: not eligible either way.
    auto early = [](FakeSpec s) {
        s.notes_early = true;
        return s;
    };
    const std::vector<FakeSpec> specs = {early({"tc", {1}, Note::tensor_core}),
                                         early({"nondet", {1}, Note::nondeterministic}),
                                         {"late_tc", {1}, Note::tensor_core},  // notes known only after supports()
                                         early({"never_tc", {1}, Note::tensor_core, 0, Mode::unsupported}),
                                         early({"never", {1}, {}, 0, Mode::unsupported}),
                                         early({"plain", {3}})};
    for (Policy pol : {parse_policy("pytorch"), parse_policy("pytorch-v7"), parse_policy("convtune")}) {
        FakeBackend b("fake", specs);
        FlagValues f = flags("benchmark=1,benchmark_limit=0,deterministic=1,allow_tf32=0");
        f.policy = pol;
        TuningCache cache;
        Selector s(b, cache);
        auto d = s.select(kP, f);
        BOOST_TEST(d->algorithm == "plain", to_string(pol));
        for (const char* id : {"tc", "nondet", "late_tc", "never_tc"})
            BOOST_TEST((cand(*d, id).state == Candidate::State::filtered), id << " " << to_string(pol));
        BOOST_TEST(cand(*d, "tc").reason == "allow_tf32=0 drops TENSOR_CORE for f32");
        BOOST_TEST(cand(*d, "late_tc").reason == "allow_tf32=0 drops TENSOR_CORE for f32");
        BOOST_TEST(cand(*d, "nondet").reason == "deterministic=1 drops NONDETERMINISTIC");
        for (const char* id : {"tc", "nondet", "never_tc"}) BOOST_TEST(b.support_queries(id) == 0, id);
        BOOST_TEST(b.support_queries("late_tc") == 1);
        // Notes the flags keep: the support check decides, as before.
        BOOST_TEST((cand(*d, "never").state == Candidate::State::unsupported));
        BOOST_TEST(b.support_queries("never") == 1);
        BOOST_TEST(b.support_queries("plain") == 1);
    }
    // TF32 concerns f32 only: on f16 the tensor-core candidates are checked and timed.
    ConvProblem half = kP;
    half.dtype = DataType::f16;
    FakeBackend b("fake", specs);
    TuningCache cache;
    Selector s(b, cache);
    auto d = s.select(half, flags("policy=pytorch,benchmark=1,benchmark_limit=0,allow_tf32=0"));
    BOOST_TEST((cand(*d, "tc").state == Candidate::State::timed));
    BOOST_TEST(b.support_queries("tc") == 1);
    BOOST_TEST((cand(*d, "never_tc").state == Candidate::State::unsupported));
}

BOOST_AUTO_TEST_CASE(workspace_asked_only_when_needed_and_one_buffer_per_search) {
    // Workspaces 100, 50, 200, 0 bytes in heuristic order.
    const std::vector<FakeSpec> specs{{"a", {4}, {}, 100}, {"b", {3}, {}, 50}, {"c", {2}, {}, 200}, {"d", {1}}};
    {
        // Benchmark off, no limit: only the chosen candidate is asked.
        FakeBackend b("fake", specs);
        TuningCache cache;
        Selector s(b, cache);
        auto d = s.select(kP, flags("benchmark=0"));
        BOOST_TEST(d->algorithm == "a");
        BOOST_TEST(cand(*d, "a").workspace.value_or(0) == 100u);
        for (const char* id : {"b", "c", "d"}) {
            BOOST_TEST(b.workspace_queries(id) == 0, id);
            BOOST_TEST(!cand(*d, id).workspace.has_value(), id);
        }
    }
    {
        // A limit needs the size of every candidate reached: a (100 B) is over a limit of 80,
        // b (50 B) is chosen, and c and d are never reached.
        FakeBackend b("fake", specs);
        TuningCache cache;
        Selector s(b, cache);
        auto d = s.select(kP, flags("benchmark=0,workspace_limit=80"));
        BOOST_TEST((cand(*d, "a").state == Candidate::State::over_workspace));
        BOOST_TEST(d->algorithm == "b");
        BOOST_TEST(cand(*d, "b").workspace.value_or(0) == 50u);
        for (const char* id : {"c", "d"}) {
            BOOST_TEST((cand(*d, id).state == Candidate::State::not_checked), id);
            BOOST_TEST(b.workspace_queries(id) == 0, id);
            BOOST_TEST(b.support_queries(id) == 0, id);
        }
        // A search with a limit on the workspace: every size, c over the limit.
        TuningCache c2;
        Selector s2(b, c2);
        auto d2 = s2.select(kP, flags("benchmark=1,benchmark_limit=0,workspace_limit=150"));
        BOOST_TEST((cand(*d2, "c").state == Candidate::State::over_workspace));
        BOOST_TEST(cand(*d2, "d").workspace.value_or(1) == 0u);
    }
    {
        // A search: three tensors, then one workspace of 100 bytes grown once to 200 (b fits in
        // a's buffer, d needs none): 5 allocations, where one per candidate would be 6.
        FakeBackend b("fake", specs);
        TuningCache cache;
        Selector s(b, cache);
        auto d = s.select(kP, flags("benchmark=1,benchmark_limit=0,min_samples=1,max_samples=1"));
        BOOST_TEST(d->algorithm == "d");
        BOOST_TEST(b.allocations() == 5);
        for (const char* id : {"a", "b", "c", "d"}) {
            BOOST_TEST(cand(*d, id).workspace.has_value(), id);
            BOOST_TEST(cand(*d, id).first_ms > 0.0, id);  // the warm-up is recorded
        }
        BOOST_TEST(cand(*d, "c").first_ms == 2.0);
    }
    {
        // run() searches on the caller's tensors: no tensor is allocated, only the workspace.
        FakeBackend b("fake", specs);
        TuningCache cache;
        Selector s(b, cache);
        HostTensors t = make_host_tensors(kP);
        BOOST_TEST(s.run(kP, t.views(), flags("benchmark=1,benchmark_limit=0,min_samples=1,max_samples=1")).ok());
        BOOST_TEST(
            (s.select(kP, flags("benchmark=1,benchmark_limit=0,min_samples=1,max_samples=1"))->algorithm == "d"));
        BOOST_TEST(b.allocations() == 2);  // the search's workspace (100, grown to 200)
    }
}

BOOST_AUTO_TEST_CASE(failing_and_oom_candidates_fall_through) {
    FakeBackend b("fake", {{"bad", {1}, {}, 0, Mode::fails},
                           {"oom", {1}, {}, 0, Mode::out_of_memory},
                           {"ws", {1}, {}, 4096},
                           {"ok", {2}}});
    b.memory_limit = 2048;  // "ws" cannot get its workspace
    TuningCache cache;
    Selector s(b, cache);
    auto d = s.select(kP, flags("policy=convtune,benchmark=1"));
    BOOST_TEST(d->algorithm == "ok");
    BOOST_TEST((cand(*d, "bad").state == Candidate::State::failed));
    BOOST_TEST((cand(*d, "oom").state == Candidate::State::out_of_memory));
    BOOST_TEST((cand(*d, "ws").state == Candidate::State::out_of_memory));
    // Benchmark off: the heuristic picks "bad"; running falls through to the first that runs
    // and caches it (PyTorch's "first that runs").
    TuningCache c2;
    Selector s2(b, c2);
    const FlagValues off = flags("policy=pytorch,benchmark=0");
    auto d2 = s2.select(kP, off);
    BOOST_TEST(d2->algorithm == "bad");
    // Benchmark off stops at its first eligible candidate: the others' support is not decided,
    // and run() decides it as it falls through to them.
    BOOST_TEST((cand(*d2, "ok").state == Candidate::State::not_checked));
    HostTensors t = make_host_tensors(kP);
    BOOST_TEST(s2.run(kP, t.views(), off).ok());
    BOOST_TEST(s2.select(kP, off)->algorithm == "ok");
}

BOOST_AUTO_TEST_CASE(nothing_eligible_is_a_clear_error) {
    FakeBackend b("fake", {{"nondet", {1}, Note::nondeterministic}});
    TuningCache cache;
    Selector s(b, cache);
    try {
        s.select(kP, flags("deterministic=1"));
        BOOST_FAIL("expected an error");
    } catch (const Error& e) {
        BOOST_TEST(
            std::string(e.what()).find("nondet: filtered: deterministic=1 drops NONDETERMINISTIC") != std::string::npos,
            e.what());
    }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(v7_and_fallback)

BOOST_AUTO_TEST_CASE(v7_fixed_default_and_time_all) {
    FakeBackend b("fake", five(), nullptr, "h3");
    TuningCache cache;
    Selector s(b, cache);
    auto d = s.select(kP, flags("policy=pytorch-v7,deterministic=1,benchmark=0"));
    BOOST_TEST(d->algorithm == "h3");
    BOOST_TEST((d->source == Source::fixed));
    // v7's benchmark times every algorithm (no benchmark_limit) and keeps the fastest.
    TuningCache c2;
    Selector s2(b, c2);
    BOOST_TEST(s2.select(kP, flags("policy=pytorch-v7,benchmark=1,benchmark_limit=1"))->algorithm == "h4");
}

BOOST_AUTO_TEST_CASE(enabled_false_runs_the_native_fallback) {
    FakeBackend b("fake", five());
    TuningCache cache;
    Selector s(b, cache);
    auto d = s.select(kP, flags("enabled=0,benchmark=1"));
    BOOST_TEST(d->algorithm == "h5");  // the fake's native fallback is its last algorithm
    BOOST_TEST((d->source == Source::fallback));
    BOOST_TEST(b.clock_ms() == 0.0);
    BOOST_TEST(cache.stats().size == 0u);  // the fallback path bypasses the cache
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(convtune_policy)

BOOST_AUTO_TEST_CASE(robust_timing_beats_a_lucky_sample) {
    FakeBackend b("fake", {{"noisy", {10, 1, 10, 10, 10, 10, 10, 10}}, {"steady", {5}}});
    TuningCache cache;
    Selector s(b, cache);
    auto d = s.select(kP, flags("policy=convtune,benchmark=1"));
    BOOST_TEST(d->algorithm == "steady");
    BOOST_TEST(cand(*d, "noisy").median_ms == 10.0);
    BOOST_TEST(cand(*d, "noisy").samples_ms.size() >= 3u);
    BOOST_TEST(cand(*d, "noisy").spread == 0.9);
}

BOOST_AUTO_TEST_CASE(benchmark_is_in_the_key) {
    FakeBackend b("fake", five());
    TuningCache cache;
    Selector s(b, cache);
    BOOST_TEST(s.select(kP, flags("benchmark=0"))->algorithm == "h1");
    auto d = s.select(kP, flags("benchmark=1"));
    BOOST_TEST(d->algorithm == "h4");
    BOOST_TEST((d->source == Source::search));
}

BOOST_AUTO_TEST_CASE(heuristic_pick_is_always_timed_and_never_beaten_by_slower) {
    FakeBackend b("fake", {{"heur", {2}}, {"a", {3}}, {"b", {4}}});
    TuningCache cache;
    Selector s(b, cache);
    auto d = s.select(kP, flags("benchmark=1,benchmark_limit=2"));
    BOOST_TEST((cand(*d, "heur").state == Candidate::State::timed));
    BOOST_TEST(d->algorithm == "heur");
    BOOST_TEST(d->median_ms <= cand(*d, "heur").median_ms);
}

BOOST_AUTO_TEST_CASE(slow_candidates_stop_early) {
    FakeBackend b("fake", {{"fast", {1}}, {"slow", {10}}});
    TuningCache cache;
    Selector s(b, cache);
    auto d = s.select(kP, flags("benchmark=1"));
    BOOST_TEST(cand(*d, "slow").samples_ms.size() == 1u);
    BOOST_TEST(cand(*d, "slow").reason.find("stopped early") != std::string::npos);
    BOOST_TEST(cand(*d, "fast").samples_ms.size() >= 3u);
}

BOOST_AUTO_TEST_CASE(reference_candidates_are_not_timed_while_others_are_eligible) {
    // A reference implementation (slow, never the winner) is skipped by convtune's search but
    // timed by PyTorch's, which times whatever the library offers; alone, it still runs.
    const Notes ref = Notes{} | Note::reference;
    FakeBackend b("fake", {{"ref", {50}, ref}, {"fast", {1}}, {"slow", {3}}});
    TuningCache cache;
    Selector s(b, cache);
    auto d = s.select(kP, flags("benchmark=1"));
    BOOST_TEST(d->algorithm == "fast");
    BOOST_TEST((cand(*d, "ref").state == Candidate::State::filtered));
    BOOST_TEST(b.runs("ref") == 0);
    auto dp = s.select(kP, flags("policy=pytorch,benchmark=1"));
    BOOST_TEST((cand(*dp, "ref").state == Candidate::State::timed));
    BOOST_TEST(b.runs("ref") == 2);  // PyTorch: one warm-up, one timed run
    FakeBackend only("only", {{"ref", {50}, ref}, {"fast", {1}, {}, 0, Mode::unsupported}});
    TuningCache c2;
    Selector s2(only, c2);
    BOOST_TEST(s2.select(kP, flags("benchmark=1"))->algorithm == "ref");
}

BOOST_AUTO_TEST_CASE(search_budget_cuts_the_sampling_short) {
    // Three candidates at a constant 10 ms, measured by the robust strategy: every warm-up first,
    // then rounds of one sample per candidate. Without a budget the medians are tied and stable
    // at the round after min_samples (3): 4 samples each, 3 x (1 + 4) x 10 ms in all. With
    // search_budget_ms=25 the warm-ups alone spend 30 ms: the first round still runs (a decision
    // needs one sample of each), then the budget stops the search.
    const std::vector<FakeSpec> specs{{"a", {10}}, {"b", {10}}, {"c", {10}}};
    {
        FakeBackend b("fake", specs);
        TuningCache cache;
        Selector s(b, cache);
        auto d = s.select(kP, flags("benchmark=1"));
        for (const char* id : {"a", "b", "c"}) BOOST_TEST(cand(*d, id).samples_ms.size() == 4u, id);
        BOOST_TEST(b.clock_ms() == 3 * 5 * 10.0);
    }
    FakeBackend b("fake", specs);
    TuningCache cache;
    Selector s(b, cache);
    auto d = s.select(kP, flags("benchmark=1,search_budget_ms=25"));
    for (const char* id : {"a", "b", "c"}) {
        BOOST_TEST(cand(*d, id).samples_ms.size() == 1u, id);
        BOOST_TEST(cand(*d, id).reason == "search budget spent", id);
        BOOST_TEST((cand(*d, id).state == Candidate::State::timed), id);
    }
    BOOST_TEST(b.clock_ms() == 3 * 2 * 10.0);
    BOOST_TEST(d->algorithm == "a");  // ties keep the heuristic order
}

BOOST_AUTO_TEST_CASE(max_samples_caps_a_median_that_never_settles) {
    // Two identical candidates alternating 10 ms and 1 ms: neither is ever slower beyond the
    // noise, and their medians swing between 10 and 5.5, so they are never tied and stable; only
    // max_samples ends the rounds. (A lone candidate needs no comparison: it stops at min_samples.)
    std::vector<double> swinging{1};
    for (int i = 0; i < 40; ++i) swinging.push_back(i % 2 ? 1 : 10);
    for (int cap : {5, 15}) {
        FakeBackend b("fake", {{"swing", swinging}, {"swing2", swinging}});
        TuningCache cache;
        Selector s(b, cache);
        auto d = s.select(kP, flags("benchmark=1,max_samples=" + std::to_string(cap)));
        for (const char* id : {"swing", "swing2"}) {
            BOOST_TEST(cand(*d, id).samples_ms.size() == static_cast<std::size_t>(cap), id << " cap " << cap);
            BOOST_TEST(b.runs(id) == cap + 1, id << " cap " << cap);  // and the warm-up
        }
    }
    // PyTorch's policies take one sample whatever max_samples says.
    FakeBackend b("fake", {{"swing", swinging}, {"swing2", swinging}});
    TuningCache cache;
    Selector s(b, cache);
    BOOST_TEST(cand(*s.select(kP, flags("policy=pytorch,benchmark=1,max_samples=5")), "swing").samples_ms.size() == 1u);
}

BOOST_AUTO_TEST_CASE(stable_rel_decides_when_the_median_has_settled) {
    // Two identical candidates; samples 100, 110, 111, 111, ... (the warm-up takes the first
    // 100): medians 100, 105, 110, 110.5, 111, 111. From round min_samples (2) on, each round's
    // median is compared with the previous round's; the search stops at the first round whose
    // move is at most stable_rel x median: 5 <= 0.05 x 110 at n=3; 0.5 <= 0.02 x 110.5 at n=4;
    // only a move of exactly 0 satisfies stable_rel=0, at n=6.
    const std::vector<double> times{100, 100, 110, 111};
    for (auto [rel, n] : {std::pair{"0.05", 3u}, std::pair{"0.02", 4u}, std::pair{"0", 6u}}) {
        FakeBackend b("fake", {{"settling", times}, {"settling2", times}});
        TuningCache cache;
        Selector s(b, cache);
        auto d = s.select(kP, flags(std::string("benchmark=1,min_samples=2,stable_rel=") + rel));
        BOOST_TEST(cand(*d, "settling").samples_ms.size() == n, "stable_rel=" << rel);
    }
    // min_samples holds even when the median has not moved: constant times stop at 4 (the round
    // after min_samples=3 confirms the medians did not move), never before.
    FakeBackend b("fake", {{"constant", {7}}, {"constant2", {7}}});
    TuningCache cache;
    Selector s(b, cache);
    BOOST_TEST(cand(*s.select(kP, flags("benchmark=1,min_samples=3")), "constant").samples_ms.size() == 4u);
}

BOOST_AUTO_TEST_CASE(adaptive_searches_on_the_nth_occurrence) {
    FakeBackend b("fake", five());
    TuningCache cache;
    Selector s(b, cache);
    const FlagValues f = flags("policy=adaptive,benchmark=1,adaptive_after=3");
    auto d1 = s.select(kP, f);
    auto d2 = s.select(kP, f);
    BOOST_TEST(d1->algorithm == "h1");
    BOOST_TEST(d1->provisional);
    BOOST_TEST(d2->algorithm == "h1");
    BOOST_TEST(b.clock_ms() == 0.0);
    auto d3 = s.select(kP, f);
    BOOST_TEST(d3->algorithm == "h4");
    BOOST_TEST((d3->source == Source::search));
    BOOST_TEST(!d3->provisional);
    const double spent = b.clock_ms();
    auto d4 = s.select(kP, f);
    BOOST_TEST((d4->source == Source::memory));
    BOOST_TEST(b.clock_ms() == spent);
}

BOOST_AUTO_TEST_CASE(adaptive_threshold_counts_what_the_search_would_time) {
    // Five eligible candidates, benchmark_limit=2: the search would time two, so the automatic
    // threshold is 2 x (1 + max_samples), and the provisional decision decides the support of
    // no more candidates than that search would reach.
    FakeBackend b("fake", five());
    TuningCache cache;
    Selector s(b, cache);
    const FlagValues f = flags("policy=adaptive,benchmark=1,benchmark_limit=2,max_samples=4");
    auto d = s.select(kP, f);
    BOOST_TEST(d->provisional);
    BOOST_TEST(adaptive_threshold(*d, f) == 2 * (1 + 4));
    for (const char* id : {"h3", "h4", "h5"}) BOOST_TEST(b.support_queries(id) == 0, id);
    const FlagValues all = flags("policy=adaptive,benchmark=1,benchmark_limit=0,max_samples=4");
    TuningCache c2;
    Selector s2(b, c2);
    BOOST_TEST(adaptive_threshold(*s2.select(kP, all), all) == 5 * (1 + 4));
}

BOOST_AUTO_TEST_SUITE_END()

namespace {
// Suggested s1..s5 (s4 the fastest of them), then unsuggested u1 (the fastest) and u2.
std::vector<FakeSpec> with_unsuggested() {
    std::vector<FakeSpec> v{{"s1", {5}}, {"s2", {4}}, {"s3", {6}}, {"s4", {3}}, {"s5", {7}}, {"u1", {1}}, {"u2", {2}}};
    v[5].suggested = v[6].suggested = false;
    return v;
}
std::vector<std::string> timed_ids(const Decision& d) {
    std::vector<std::string> r;
    for (const Candidate& c : d.candidates)
        if (c.state == Candidate::State::timed) r.push_back(c.id);
    return r;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(explore_slots)

BOOST_AUTO_TEST_CASE(some_of_the_limit_goes_to_candidates_the_heuristics_do_not_suggest) {
    FakeBackend b("fake", with_unsuggested());
    TuningCache cache;
    Selector s(b, cache);
    auto d = s.select(kP, flags("benchmark=1,benchmark_limit=4,explore_slots=2"));
    BOOST_TEST(timed_ids(*d) == (std::vector<std::string>{"s1", "s2", "u1", "u2"}), boost::test_tools::per_element());
    BOOST_TEST(d->algorithm == "u1");
    BOOST_TEST(!cand(*d, "u1").suggested);
    BOOST_TEST(cand(*d, "u1").reason.find("explored") != std::string::npos);
    // s3..s5 waited for the slots the unsuggested would leave; none was left, so their support was
    // never asked (on cuDNN: no engine or plan built for them).
    for (const char* id : {"s3", "s4", "s5"}) {
        BOOST_TEST((cand(*d, id).state == Candidate::State::not_checked), id);
        BOOST_TEST(cand(*d, id).reason.find("2 kept for candidates the heuristics do not suggest") != std::string::npos,
                   id);
        BOOST_TEST(b.support_queries(id) == 0, id);
    }
    // Without exploration the same limit times the first four in heuristic order.
    TuningCache c2;
    Selector s2(b, c2);
    auto d2 = s2.select(kP, flags("benchmark=1,benchmark_limit=4,explore_slots=0"));
    BOOST_TEST(timed_ids(*d2) == (std::vector<std::string>{"s1", "s2", "s3", "s4"}), boost::test_tools::per_element());
    BOOST_TEST(d2->algorithm == "s4");
}

BOOST_AUTO_TEST_CASE(slots_the_unsuggested_leave_go_back_to_suggested_candidates_in_order) {
    auto specs = with_unsuggested();
    specs[6].mode = Mode::unsupported;  // only u1 is left unsuggested
    FakeBackend b("fake", specs);
    TuningCache cache;
    Selector s(b, cache);
    auto d = s.select(kP, flags("benchmark=1,benchmark_limit=4,explore_slots=2"));
    BOOST_TEST(timed_ids(*d) == (std::vector<std::string>{"s1", "s2", "s3", "u1"}), boost::test_tools::per_element());
    BOOST_TEST(d->algorithm == "u1");
    // The waiting candidates are decided as they get a slot, and only then.
    BOOST_TEST(b.support_queries("s3") == 1);
    for (const char* id : {"s4", "s5"}) {
        BOOST_TEST(b.support_queries(id) == 0, id);
        BOOST_TEST((cand(*d, id).state == Candidate::State::not_checked), id);
        BOOST_TEST(cand(*d, id).reason.find("kept for candidates the heuristics do not suggest") != std::string::npos,
                   id);
    }
}

BOOST_AUTO_TEST_CASE(a_waiting_candidate_that_turns_out_unsupported_gives_its_slot_to_the_next) {
    // Only u1 is left unsuggested, so two slots go back to the waiting s3, s4, s5: s3 is not
    // supported once decided, s4 and s5 take the slots.
    auto specs = with_unsuggested();
    specs[6].mode = Mode::unsupported;
    specs[2].mode = Mode::unsupported;
    FakeBackend b("fake", specs);
    TuningCache cache;
    Selector s(b, cache);
    auto d = s.select(kP, flags("benchmark=1,benchmark_limit=5,explore_slots=3"));
    BOOST_TEST(timed_ids(*d) == (std::vector<std::string>{"s1", "s2", "s4", "s5", "u1"}),
               boost::test_tools::per_element());
    BOOST_TEST((cand(*d, "s3").state == Candidate::State::unsupported));
    BOOST_TEST(cand(*d, "s3").reason == "scripted: never supported");
    for (const char* id : {"s3", "s4", "s5", "u1", "u2"}) BOOST_TEST(b.support_queries(id) == 1, id);
}

BOOST_AUTO_TEST_CASE(the_heuristic_pick_keeps_its_slot_and_pytorch_does_not_explore) {
    FakeBackend b("fake", with_unsuggested());
    TuningCache cache;
    Selector s(b, cache);
    // benchmark_limit=1: exploration is capped at limit - 1 = 0.
    BOOST_TEST(timed_ids(*s.select(kP, flags("benchmark=1,benchmark_limit=1,explore_slots=3"))) ==
                   std::vector<std::string>{"s1"},
               boost::test_tools::per_element());
    TuningCache c2;
    Selector s2(b, c2);
    BOOST_TEST(timed_ids(*s2.select(kP, flags("policy=pytorch,benchmark=1,benchmark_limit=4,explore_slots=3"))) ==
                   (std::vector<std::string>{"s1", "s2", "s3", "s4"}),
               boost::test_tools::per_element());
    // benchmark_limit=0 times everything, suggested or not.
    TuningCache c3;
    Selector s3(b, c3);
    BOOST_TEST(timed_ids(*s3.select(kP, flags("benchmark=1,benchmark_limit=0"))).size() == 7u);
}

BOOST_AUTO_TEST_CASE(pytorch_decides_every_suggested_candidate_before_timing_any) {
    // PyTorch builds a plan for every configuration its heuristics return before timing any:
    // s1..s5's support is decided before the first timed call; u1 and u2, which the heuristics
    // do not suggest, are never decided. The search still times the first benchmark_limit.
    FakeBackend b("fake", with_unsuggested());
    const std::vector<std::string> suggested{"s1", "s2", "s3", "s4", "s5"};
    int decided_at_first_run = -1;
    b.load = [&](double) {
        if (decided_at_first_run < 0) {
            decided_at_first_run = 0;
            for (const std::string& id : suggested) decided_at_first_run += b.support_queries(id) > 0;
        }
        return 1.0;
    };
    TuningCache cache;
    Selector s(b, cache);
    auto d = s.select(kP, flags("policy=pytorch,benchmark=1,benchmark_limit=2"));
    BOOST_TEST(decided_at_first_run == 5);
    BOOST_TEST(timed_ids(*d) == (std::vector<std::string>{"s1", "s2"}), boost::test_tools::per_element());
    for (const std::string& id : suggested) BOOST_TEST(b.support_queries(id) == 1, id);
    for (const char* id : {"u1", "u2"}) {
        BOOST_TEST(b.support_queries(id) == 0, id);
        BOOST_TEST((cand(*d, id).state == Candidate::State::not_checked), id);
        BOOST_TEST(cand(*d, id).reason.find("do not suggest") != std::string::npos, id);
    }
    // benchmark_limit=0: everything PyTorch's lists name is timed; what they do not name (here
    // the unsuggested: the heuristic list holds them 0 times) is never seen, not even decided.
    b.reset_counters();
    TuningCache c2;
    Selector s2(b, c2);
    BOOST_TEST(timed_ids(*s2.select(kP, flags("policy=pytorch,benchmark=1,benchmark_limit=0"))) == suggested,
               boost::test_tools::per_element());
    for (const char* id : {"u1", "u2"}) BOOST_TEST(b.support_queries(id) == 0, id);
    // The convtune policy decides support only as its search reaches candidates.
    b.reset_counters();
    TuningCache c3;
    Selector s3(b, c3);
    s3.select(kP, flags("benchmark=1,benchmark_limit=2,explore_slots=0"));
    for (const char* id : {"s3", "s4", "s5", "u1", "u2"}) BOOST_TEST(b.support_queries(id) == 0, id);
}

BOOST_AUTO_TEST_CASE(a_ranking_without_unsuggested_candidates_is_walked_no_further) {
    // Every candidate suggested: the search times the first benchmark_limit and decides no
    // support beyond them, exploration or not.
    FakeBackend b("fake", five());
    TuningCache cache;
    Selector s(b, cache);
    auto d = s.select(kP, flags("benchmark=1,benchmark_limit=2,explore_slots=1"));
    BOOST_TEST(timed_ids(*d) == (std::vector<std::string>{"h1", "h2"}), boost::test_tools::per_element());
    for (const char* id : {"h4", "h5"}) BOOST_TEST(b.support_queries(id) == 0, id);
}

BOOST_AUTO_TEST_CASE(a_demoted_unsuggested_candidate_is_passed_over_before_its_support_is_asked) {
    // s1 wins every search; u1..u3, which the heuristics do not suggest, are 100x slower. Two
    // searches (benchmark_limit 4) time s1, s2, u1 and u2, which the convtune policy then
    // demotes: a third search of the same kind of problem asks no support of them (on cuDNN
    // each ask builds an engine and its plan) and explores u3, never timed before, instead.
    std::vector<FakeSpec> v{{"s1", {1}}, {"s2", {2}}, {"u1", {100}}, {"u2", {100}}, {"u3", {100}}};
    for (std::size_t i = 2; i < v.size(); ++i) v[i].suggested = false;
    FakeBackend b("fake", v);
    TuningCache cache;
    Selector s(b, cache);
    const FlagValues f = flags("benchmark=1,benchmark_limit=4,explore_slots=2");
    for (const char* p : {"n=1,c=4,k=4,in=6x6,ker=3x3,pad=1x1", "n=3,c=4,k=4,in=6x6,ker=3x3,pad=1x1"})
        BOOST_TEST(s.select(ConvProblem::parse(p), f)->algorithm == "s1");
    b.reset_counters();
    auto d = s.select(ConvProblem::parse("n=5,c=4,k=4,in=6x6,ker=3x3,pad=1x1"), f);
    BOOST_TEST(d->algorithm == "s1");
    BOOST_TEST(timed_ids(*d) == (std::vector<std::string>{"s1", "s2", "u3"}), boost::test_tools::per_element());
    BOOST_TEST(b.support_queries("u3") == 1);
    for (const char* id : {"u1", "u2"}) {
        BOOST_TEST(b.support_queries(id) == 0, id);
        BOOST_TEST((cand(*d, id).state == Candidate::State::not_checked), id);
        BOOST_TEST(cand(*d, id).reason.find("demoted") != std::string::npos, cand(*d, id).reason);
    }
    // Another kind of problem (f16) has no history: they are asked and timed again.
    auto h = s.select(ConvProblem::parse("n=5,c=4,k=4,in=6x6,ker=3x3,pad=1x1,dtype=f16"), f);
    for (const char* id : {"u1", "u2"}) BOOST_TEST(b.support_queries(id) == 1, id);
    BOOST_TEST(timed_ids(*h).size() == 4u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(database)

BOOST_AUTO_TEST_CASE(second_process_takes_choices_from_the_database) {
    TempDir dir;
    const std::string path = dir.file("tune.json");
    FakeBackend b("fake", five());
    {
        TuningDatabase db(path);
        TuningCache cache;
        Selector s(b, cache, &db);
        BOOST_TEST((s.select(kP, flags("benchmark=1"))->source == Source::search));
    }
    b.reset_counters();
    std::vector<std::string> warnings;
    TuningDatabase db(path, [&](const std::string& w) { warnings.push_back(w); });
    TuningCache cache;
    Selector s(b, cache, &db);
    auto d = s.select(kP, flags("benchmark=1"));
    BOOST_TEST(d->algorithm == "h4");
    BOOST_TEST((d->source == Source::database));
    BOOST_TEST(d->search_ms == 0.0);
    BOOST_TEST(b.clock_ms() == 0.0);
    BOOST_TEST(warnings.empty());
    // The pytorch policies never read the database.
    BOOST_TEST((s.select(kP, flags("policy=pytorch,benchmark=1"))->source == Source::search));
}

BOOST_AUTO_TEST_CASE(corrupt_file_warns_and_retunes_keeping_the_bytes) {
    TempDir dir;
    const std::string path = dir.file("tune.json");
    FakeBackend b("fake", five());
    {
        TuningDatabase db(path);
        TuningCache cache;
        Selector(b, cache, &db).select(kP, flags("benchmark=1"));
    }
    const auto size = std::filesystem::file_size(path);
    std::filesystem::resize_file(path, size / 2);  // truncate
    std::vector<std::string> warnings;
    TuningDatabase db(path, [&](const std::string& w) { warnings.push_back(w); });
    TuningCache cache;
    Selector s(b, cache, &db);
    auto d = s.select(kP, flags("benchmark=1"));
    BOOST_TEST((d->source == Source::search));
    BOOST_REQUIRE(warnings.size() >= 1u);
    BOOST_TEST(warnings[0].find("tuning database ignored") != std::string::npos, warnings[0]);
    BOOST_TEST(std::filesystem::exists(path + ".corrupt"));
    BOOST_TEST(std::filesystem::file_size(path + ".corrupt") == size / 2);
    BOOST_TEST(TuningDatabase::read_file(path).size() == 1u);  // a valid file again
}

BOOST_AUTO_TEST_CASE(other_environment_and_unknown_ids_are_skipped) {
    TempDir dir;
    const std::string path = dir.file("tune.json");
    FakeBackend b("fake", five());
    Environment other = environment_of(b);
    other.device = "another device";
    const std::string key = cache_key(b, kP, flags("benchmark=1"));
    TuningDatabase::write_file(
        path, {{other, {{key, {"h2", 1, 0, 1, 0, 1}}}}, {environment_of(b), {{key, {"removed.algo", 1, 0, 1, 0, 1}}}}});
    std::vector<std::string> warnings;
    TuningDatabase db(path, [&](const std::string& w) { warnings.push_back(w); });
    TuningCache cache;
    Selector s(b, cache, &db);
    auto d = s.select(kP, flags("benchmark=1"));
    BOOST_TEST((d->source == Source::search));
    BOOST_TEST(d->algorithm == "h4");
    BOOST_REQUIRE(!warnings.empty());
    BOOST_TEST(warnings[0].find("'removed.algo' is not in this build") != std::string::npos, warnings[0]);
    // The other environment's entry is still in the file after our write.
    bool kept = false;
    for (const DbSection& sec : TuningDatabase::read_file(path))
        if (sec.env == other) kept = sec.entries.count(key) == 1;
    BOOST_TEST(kept);
}

BOOST_AUTO_TEST_CASE(merge_keeps_the_union_and_the_newer_record_wins) {
    const Environment e1{"0.1.0", "fake", "fake 1.0", "dev", ""}, e2{"0.1.0", "fake", "fake 1.0", "other dev", ""};
    const std::vector<DbSection> a{
        {e1,
         {{"k1", {"old", 1, 0, 1, 0, 100}}, {"k2", {"a-newer", 2, 0, 1, 0, 300}}, {"only-a", {"x", 3, 0, 1, 0, 1}}}}};
    const std::vector<DbSection> b{
        {e1,
         {{"k1", {"new", 1, 0, 1, 0, 200}}, {"k2", {"b-older", 2, 0, 1, 0, 250}}, {"only-b", {"y", 4, 0, 1, 0, 1}}}},
        {e2, {{"k1", {"elsewhere", 5, 0, 1, 0, 1}}}}};
    for (bool b_first : {false, true}) {
        const auto m = b_first ? TuningDatabase::merge(b, a) : TuningDatabase::merge(a, b);
        BOOST_REQUIRE(m.size() == 2u);
        const DbSection& s1 = m[0].env == e1 ? m[0] : m[1];
        const DbSection& s2 = m[0].env == e1 ? m[1] : m[0];
        BOOST_TEST(s1.entries.size() == 4u);
        BOOST_TEST(s1.entries.at("k1").algorithm == "new", b_first);      // newer in b
        BOOST_TEST(s1.entries.at("k2").algorithm == "a-newer", b_first);  // newer in a
        BOOST_TEST(s1.entries.at("only-a").algorithm == "x");
        BOOST_TEST(s1.entries.at("only-b").algorithm == "y");
        BOOST_TEST((s2.env == e2));
        BOOST_TEST(s2.entries.at("k1").algorithm == "elsewhere");
    }
}

BOOST_AUTO_TEST_CASE(wrong_types_are_reported) {
    TempDir dir;
    const std::string path = dir.file("tune.json");
    std::ofstream(path)
        << R"({"format":"convtune-tuning-db","version":1,"environments":[{"convtune":"0.1.0","backend":"fake","library":"x","device":"y","driver":"","entries":{"k":{"algorithm":5}}}]})";
    BOOST_CHECK_EXCEPTION(TuningDatabase::read_file(path), ParseError, [](const ParseError& e) {
        return std::string(e.what()).find("\"algorithm\" must be a string") != std::string::npos;
    });
}

BOOST_AUTO_TEST_CASE(unwritable_location_keeps_tuning) {
    std::vector<std::string> warnings;
    TuningDatabase db("/proc/convtune-cannot-write-here/tune.json",
                      [&](const std::string& w) { warnings.push_back(w); });
    FakeBackend b("fake", five());
    TuningCache cache;
    Selector s(b, cache, &db);
    BOOST_TEST(s.select(kP, flags("benchmark=1"))->algorithm == "h4");
    BOOST_REQUIRE(!warnings.empty());
    BOOST_TEST(warnings[0].find("not saved") != std::string::npos, warnings[0]);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cache_and_flags)

BOOST_AUTO_TEST_CASE(lru_bound_and_counters) {
    TuningCache cache(2);
    cache.put("a", {});
    cache.put("b", {});
    BOOST_TEST(cache.find("a") != nullptr);  // a is now most recent
    cache.put("c", {});                      // evicts b
    BOOST_TEST(cache.find("b") == nullptr);
    BOOST_TEST(cache.find("c") != nullptr);
    const auto st = cache.stats();
    BOOST_TEST(st.size == 2u);
    BOOST_TEST(st.evictions == 1);
    BOOST_TEST(st.hits == 2);
    BOOST_TEST(st.misses == 1);
}

BOOST_AUTO_TEST_CASE(one_search_for_many_threads) {
    TuningCache cache;
    std::atomic<int> computed{0};
    std::vector<std::thread> threads;
    std::atomic<int> hits{0}, right{0};
    for (int i = 0; i < 8; ++i)
        threads.emplace_back([&] {
            bool hit = false;
            auto d = cache.get_or_compute(
                "k",
                [&] {
                    ++computed;
                    std::this_thread::sleep_for(std::chrono::milliseconds(50));
                    Decision x;
                    x.algorithm = "chosen";
                    return x;
                },
                &hit);
            if (hit) ++hits;
            // Boost.Test's assertions are not thread-safe (TSan reported a race in them): count
            // here, assert after the join.
            if (d->algorithm == "chosen") ++right;
        });
    for (auto& t : threads) t.join();
    BOOST_TEST(right.load() == 8);
    BOOST_TEST(computed.load() == 1);
    BOOST_TEST(hits.load() == 7);
}

BOOST_AUTO_TEST_CASE(flag_defaults_guards_and_threads) {
    const FlagValues d{};
    BOOST_TEST(d.enabled);
    BOOST_TEST(!d.benchmark);
    BOOST_TEST(d.benchmark_limit == 10);
    BOOST_TEST(!d.deterministic);
    BOOST_TEST(d.allow_tf32);
    BOOST_TEST(!current_flags().benchmark);
    {
        FlagsGuard g(flags("benchmark=1"));
        BOOST_TEST(current_flags().benchmark);
        {
            FlagsGuard g2(flags("deterministic=1"));
            BOOST_TEST(current_flags().deterministic);
            BOOST_TEST(!current_flags().benchmark);
        }
        BOOST_TEST(current_flags().benchmark);
        bool other_thread_sees = true;
        std::thread([&] { other_thread_sees = current_flags().benchmark; }).join();
        BOOST_TEST(!other_thread_sees);
    }
    BOOST_TEST(!current_flags().benchmark);
    FlagValues g = global_flags();
    g.allow_tf32 = false;
    set_global_flags(g);
    bool seen = true;
    std::thread([&] { seen = current_flags().allow_tf32; }).join();
    BOOST_TEST(!seen);
    set_global_flags(FlagValues{});
    BOOST_CHECK_THROW(parse_flags("benchmark=maybe"), ParseError);
    // Every numeric flag is parsed against its bound in the one table: the bound is accepted,
    // below it and NaN are refused. (The Python module checks against the same table.)
    BOOST_TEST(numeric_flags().size() == 8u);
    for (const NumericFlag& n : numeric_flags()) {
        const std::string key = n.key;
        // (max_samples stays >= min_samples; a key may appear only once.)
        BOOST_CHECK_NO_THROW(parse_flags(key + "=" + std::to_string(static_cast<long long>(n.lo)) +
                                         (key == "max_samples" ? ",min_samples=1" : ",max_samples=15")));
        BOOST_CHECK_THROW(parse_flags(key + "=-1"), ParseError);
        BOOST_TEST(find_numeric_flag(key) == &n);
    }
    BOOST_CHECK_THROW(parse_flags("stable_rel=nan"), ParseError);
    BOOST_TEST(find_numeric_flag("benchmark") == nullptr);
    BOOST_CHECK_THROW(parse_flags("benchmark_limit=-1"), ParseError);
    BOOST_CHECK_THROW(parse_flags("speed=11"), ParseError);
    BOOST_CHECK_THROW(parse_flags("policy=fastest"), ParseError);
    // Every knob the Python module accepts is a flag here too.
    BOOST_TEST(parse_flags("stable_rel=0.05").stable_rel == 0.05);
    BOOST_CHECK_THROW(parse_flags("stable_rel=-0.1"), ParseError);
    BOOST_TEST(FlagValues{}.explore_slots == 3);
    BOOST_TEST(parse_flags("explore_slots=0").explore_slots == 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(workspace_source)

// A caller that owns the device's memory (PyTorch's allocator) gives every workspace buffer of a
// run, the search's and the run's: the backend allocates none.
BOOST_AUTO_TEST_CASE(search_and_run_take_workspace_from_the_caller) {
    FakeBackend b("fake", {{"h1", {5}, {}, 64}, {"h2", {1}, {}, 256}});
    TuningCache cache;
    Selector s(b, cache);
    HostTensors t = make_host_tensors(kP);
    std::vector<std::size_t> asked;
    std::vector<std::vector<std::byte>> buffers;
    WorkspaceSource src = [&](std::size_t bytes) {
        asked.push_back(bytes);
        buffers.emplace_back(bytes);
        return DeviceBuffer(buffers.back().data(), bytes, [](void*) {});
    };
    RunInfo d;
    BOOST_TEST(s.run(kP, t.views(), flags("benchmark=1"), &src, &d).ok());
    BOOST_TEST(d.algorithm == "h2");
    BOOST_TEST((d.source == Source::search));
    BOOST_TEST(d.search_ms > 0);
    BOOST_TEST(b.allocations() == 0);
    // The search's buffer (64, then grown to 256) and the run's (256).
    BOOST_TEST(asked.size() == 3u);
    BOOST_TEST(asked.back() == 256u);
    // The next call is answered by the in-memory cache: it says so, and searches nothing.
    BOOST_TEST(s.run(kP, t.views(), flags("benchmark=1"), &src, &d).ok());
    BOOST_TEST(d.algorithm == "h2");
    BOOST_TEST((d.source == Source::memory));
    BOOST_TEST(d.search_ms == 0);
    BOOST_TEST(b.runs("h2") >= 2);
}

// A source that has no memory is out of memory: the next candidate runs.
BOOST_AUTO_TEST_CASE(an_empty_buffer_from_the_caller_is_out_of_memory) {
    FakeBackend b("fake", {{"h1", {1}, {}, 1 << 20}, {"h2", {2}, {}, 0}});
    TuningCache cache;
    Selector s(b, cache);
    HostTensors t = make_host_tensors(kP);
    WorkspaceSource none = [](std::size_t) { return DeviceBuffer{}; };
    RunInfo d;
    BOOST_TEST(s.run(kP, t.views(), flags("benchmark=0"), &none, &d).ok());
    BOOST_TEST(d.algorithm == "h1");  // the decision's choice, which could not run
    BOOST_TEST(b.runs("h1") == 0);
    BOOST_TEST(b.runs("h2") == 1);
}

BOOST_AUTO_TEST_SUITE_END()

// The database's environment keeps every part of the identity apart: a pick stored under
// another convtune version, library (cuDNN) version, device (GPU) or driver is never reused.
BOOST_AUTO_TEST_CASE(a_pick_of_another_identity_is_never_reused) {
    FakeBackend b("fake", five());
    const std::string key = cache_key(b, kP, flags("benchmark=1"));
    for (std::string Environment::*field :
         {&Environment::convtune, &Environment::library, &Environment::device, &Environment::driver}) {
        TempDir dir;
        const std::string path = dir.file("tune.json");
        Environment other = environment_of(b);
        other.*field += " (another)";
        TuningDatabase::write_file(path, {{other, {{key, {"h2", 0.5, 0, 1, 0, 1}}}}});
        TuningDatabase db(path, [](const std::string&) {});
        TuningCache cache;
        Selector s(b, cache, &db);
        auto d = s.select(kP, flags("benchmark=1"));
        BOOST_TEST((d->source == Source::search));
        BOOST_TEST(d->algorithm == "h4");
    }
}

// Catalogue::find answers from an index that follows the list algorithms() returns.
BOOST_AUTO_TEST_CASE(find_follows_the_catalogue_list) {
    test::FakeBackend b("fake", {{"a"}, {"b"}, {"c"}});
    BOOST_TEST(b.find("b") == b.algorithms()[1]);
    BOOST_TEST(b.find("c") == b.algorithms()[2]);
    BOOST_TEST(!b.find("d"));
    BOOST_TEST(!b.find(""));
    struct Growing final : Catalogue {
        std::vector<const Algorithm*> list;
        std::string_view name() const override { return "growing"; }
        std::span<const Algorithm* const> algorithms() const override { return list; }
    } g;
    BOOST_TEST(!g.find("a"));
    g.list.push_back(b.algorithms()[0]);
    BOOST_TEST(g.find("a") == b.algorithms()[0]);
    g.list.push_back(b.algorithms()[2]);
    BOOST_TEST(g.find("c") == b.algorithms()[2]);
    BOOST_TEST(!g.find("b"));
}
