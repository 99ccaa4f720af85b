// The properties every fuzz target checks, shared by the libFuzzer harnesses (fuzz/fuzz_*.cpp) and
// by the regression test that replays the corpus with a normal build (tests/test_reliability.cpp).
//
// A target gets arbitrary bytes. Rejecting them with convtune::Error is the documented behaviour
// and passes; anything else a target notices is a Violation: another exception type escaping
// (std::out_of_range, std::length_error, nlohmann's, ...), a parse that accepts text but returns
// an invalid problem, or a value that does not survive its own text form (a silent wrong result).
// Crashes, leaks and undefined behaviour are the sanitizers' to report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <typeinfo>

namespace convtune::fuzz {

struct Violation : std::logic_error {
    using std::logic_error::logic_error;
};

#define CONVTUNE_FUZZ_REQUIRE(cond, what)                                                                   \
    do {                                                                                                    \
        if (!(cond)) throw ::convtune::fuzz::Violation(std::string(what) + " (failed: " #cond ")");        \
    } while (0)

using Target = void (*)(std::string_view input);

// Runs a target on one input: "" when it behaved, else what went wrong.
inline std::string check(Target target, std::string_view input) {
    try {
        target(input);
        return {};
    } catch (const Violation& v) {
        return std::string("property violated: ") + v.what();
    } catch (const std::exception& e) {
        return std::string("unexpected exception ") + typeid(e).name() + ": " + e.what();
    } catch (...) {
        return "unexpected non-standard exception";
    }
}

// libFuzzer's entry: any finding aborts with the reason, so libFuzzer saves the input.
inline int run_or_abort(Target target, const uint8_t* data, std::size_t size) {
    const std::string bad = check(target, std::string_view(reinterpret_cast<const char*>(data), size));
    if (!bad.empty()) {
        std::fprintf(stderr, "convtune fuzz finding: %s\n", bad.c_str());
        std::abort();
    }
    return 0;
}

}  // namespace convtune::fuzz
