// Fuzz targets over the simulator's text inputs: workload files, trace files, the stream and
// setting options, and recordings.
#pragma once

#include <string>
#include <string_view>

#include "convtune/sim/recording.hpp"
#include "convtune/sim/simulator.hpp"
#include "convtune/sim/stream.hpp"
#include "convtune/sim/workload.hpp"
#include "core_targets.hpp"

namespace convtune::fuzz {

// Workload files (convtune's format or shape files): every layer sound, and instantiating the
// workload for inference and training gives calls of sound problems.
inline void workload_text(std::string_view in) {
    sim::Workload w;
    try {
        w = sim::parse_workload_text(in, "fuzz");
    } catch (const Error&) {
        return;
    }
    CONVTUNE_FUZZ_REQUIRE(!w.layers.empty(), "a workload without layers was accepted");
    for (const sim::Layer& l : w.layers) {
        require_sound(l.problem, "parse_workload_text");
        CONVTUNE_FUZZ_REQUIRE(l.repeat >= 1 && l.repeat <= kMaxRepeat && l.problem.direction == Direction::fwd,
                              "layer " + l.name);
    }
    CONVTUNE_FUZZ_REQUIRE(w.convolutions() >= static_cast<int64_t>(w.layers.size()),
                          "convolutions() below the layer count");
    for (sim::Mode m : {sim::Mode::infer, sim::Mode::train}) {
        sim::WorkloadOptions o;
        o.mode = m;
        std::vector<sim::Call> calls;
        try {
            calls = sim::instantiate(w, o);
        } catch (const Error& e) {
            throw Violation(std::string("instantiate rejected the workload it parsed: ") + e.what());
        }
        CONVTUNE_FUZZ_REQUIRE(calls.size() >= w.layers.size(), "instantiate lost layers");
        for (const sim::Call& c : calls) {
            CONVTUNE_FUZZ_REQUIRE(c.count >= 1 && c.count <= kMaxRepeat, "a call with a count outside [1, kMaxRepeat]");
            CONVTUNE_FUZZ_REQUIRE(!c.problem.check().has_value(), "instantiate made an invalid problem");
        }
        // Scaled variants either give valid problems or are rejected with Error.
        for (double s : {0.5, 1.5})
            try {
                for (const sim::Call& c : sim::instantiate(w, o, sim::Variant{3, {s, s, s}}))
                    CONVTUNE_FUZZ_REQUIRE(!c.problem.check().has_value(), "a scaled variant is invalid");
            } catch (const Error&) {
            }
    }
}

// Trace files and the small option strings of `convtune simulate` / `record`.
inline void trace_text(std::string_view in) {
    try {
        const std::vector<sim::Iteration> its = sim::parse_trace(in);
        CONVTUNE_FUZZ_REQUIRE(!its.empty(), "an empty trace was accepted");
        for (const sim::Iteration& it : its) {
            CONVTUNE_FUZZ_REQUIRE(!it.empty(), "an empty iteration");
            for (const sim::Call& c : it) {
                CONVTUNE_FUZZ_REQUIRE(c.count >= 1 && c.count <= kMaxRepeat,
                                      "a call with a count outside [1, kMaxRepeat]");
                require_sound(c.problem, "parse_trace");
            }
        }
    } catch (const Error&) {
    }
    const std::string s(in);
    try {
        (void)sim::StreamSpec::parse(in);
    } catch (const Error&) {
    }
    try {
        (void)sim::parse_int_list(s, "batches");
    } catch (const Error&) {
    }
    try {
        (void)sim::parse_double_list(s, "scales");
    } catch (const Error&) {
    }
    try {
        (void)sim::parse_setting(in);
    } catch (const Error&) {
    }
    try {
        (void)sim::parse_mode(in);
    } catch (const Error&) {
    }
}

// Recordings: rejected with Error, or accepted and stable through their own JSON form.
inline void recording_json(std::string_view in) {
    sim::Recording r;
    try {
        r = sim::Recording::from_json(in, "fuzz");
    } catch (const Error&) {
        return;
    }
    const std::string text = r.to_json();
    sim::Recording back;
    try {
        back = sim::Recording::from_json(text, "fuzz-round-trip");
    } catch (const Error& e) {
        throw Violation(std::string("a recording convtune read could not be read back from its own JSON: ") + e.what());
    }
    CONVTUNE_FUZZ_REQUIRE(back.to_json() == text, "a recording changed through its JSON form");
    for (const sim::ProblemRecord& p : r.problems) {
        require_sound(p.problem, "Recording::from_json");
        CONVTUNE_FUZZ_REQUIRE(r.find(p.problem) != nullptr, "find() misses a recorded problem");
    }
}

}  // namespace convtune::fuzz
