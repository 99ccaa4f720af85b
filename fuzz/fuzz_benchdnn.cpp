// libFuzzer harness: convtune::fuzz::benchdnn_text (see core_targets.hpp).
#include "core_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    return convtune::fuzz::run_or_abort(convtune::fuzz::benchdnn_text, data, size);
}
