// libFuzzer harness: convtune::fuzz::problem_text (see core_targets.hpp).
#include "core_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    return convtune::fuzz::run_or_abort(convtune::fuzz::problem_text, data, size);
}
