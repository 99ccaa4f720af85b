// The registry of a build without backends: the simulator's parsers, fuzzed here, never run one,
// so the fuzz harnesses link the simulator's sources over convtune_core alone (no Eigen, no
// oneDNN, no backend code to compile with the fuzzer's instrumentation).
#include "convtune/error.hpp"
#include "convtune/registry.hpp"

namespace convtune {

std::span<Backend* const> backends() { return {}; }

Backend& find_backend(std::string_view name) {
    throw Error("backend: unknown backend '" + std::string(name) + "' (this build has no backends)");
}

const Algorithm& find_algorithm(std::string_view id) {
    throw Error("algo: unknown algorithm id '" + std::string(id) + "' (this build has no backends)");
}

}  // namespace convtune
