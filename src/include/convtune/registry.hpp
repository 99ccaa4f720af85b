// Registry: the one list of backends, those compiled into this build and those a program adds.
//
// Nothing registers itself from a static initializer (that is silently dropped from static
// libraries); registry.cpp names each compiled-in backend behind its CONVTUNE_WITH_* option, and
// a backend defined elsewhere (tests/example_backend) is added with one call to register_backend.
// Backends are created on first use and live for the whole process.
#pragma once

#include <span>
#include <string_view>

#include "convtune/backend.hpp"

namespace convtune {

// Every backend (available on this machine or not), in a fixed order: the compiled-in ones
// (cpu, onednn, cudnn), then the registered ones in the order they were registered.
std::span<Backend* const> backends();
// Adds b after the backends already there, so that find_backend, find_algorithm, convolution()
// and the application find it. Call it at start-up, before any thread uses the registry (it does
// not lock); b must live as long as it is used. Throws Error when a backend of b's name is there.
void register_backend(Backend& b);
// Throws convtune::Error listing the known names when there is no such backend.
Backend& find_backend(std::string_view name);
// Throws convtune::Error when no backend has this algorithm id.
const Algorithm& find_algorithm(std::string_view id);

}  // namespace convtune
