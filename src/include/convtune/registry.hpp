// Registry: the one list of backends compiled into this build.
//
// Nothing registers itself from a static initializer (that is silently dropped from static
// libraries); registry.cpp names each backend behind its CONVTUNE_WITH_* option. Backends are
// created on first use and live for the whole process.
#pragma once

#include <span>
#include <string_view>

#include "convtune/backend.hpp"

namespace convtune {

// Every compiled-in backend (available on this machine or not), in a fixed order:
// cpu, onednn, cudnn.
std::span<Backend* const> backends();
// Throws convtune::Error listing the known names when there is no such backend.
Backend& find_backend(std::string_view name);
// Throws convtune::Error when no backend has this algorithm id.
const Algorithm& find_algorithm(std::string_view id);

}  // namespace convtune
