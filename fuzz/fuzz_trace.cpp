// libFuzzer harness: convtune::fuzz::trace_text (see sim_targets.hpp).
#include "sim_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    return convtune::fuzz::run_or_abort(convtune::fuzz::trace_text, data, size);
}
