// The memory budget: how many bytes one problem may make convtune allocate in host memory.
#pragma once

#include <cstddef>
#include <string>

#include "convtune/problem.hpp"

namespace convtune {

class Backend;

// Memory budget: the most bytes one problem may make convtune allocate in host memory (its three
// tensors, plus a workspace where one is allocated), checked before anything is allocated by
// make_host_tensors, execute and the selector's search on host-memory backends. It is, in order,
// the value given to set_memory_budget (the CLI's --max-bytes), CONVTUNE_MAX_BYTES, or
// min(8 GiB, half the physical memory).
std::size_t memory_budget();
void set_memory_budget(std::size_t bytes);  // 0 = back to CONVTUNE_MAX_BYTES / the default
// The message naming each tensor's size and the budget when the x + w + y + workspace bytes of
// p exceed memory_budget(), else an empty string. check_memory_budget throws it as Error.
std::string over_memory_budget(const ConvProblem& p, std::size_t workspace = 0);
void check_memory_budget(const ConvProblem& p, std::size_t workspace = 0);
// True when b's memory is host memory (a HostBackend), where the budget applies.
bool uses_host_memory(const Backend& b);

}  // namespace convtune
