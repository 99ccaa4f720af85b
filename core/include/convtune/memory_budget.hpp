// The memory budget: how many bytes one problem may make convtune allocate in host memory.
#pragma once

#include <cstddef>
#include <string>

#include "convtune/problem.hpp"

namespace convtune {

// Memory budget: the most host memory one problem may make convtune allocate at its peak. It is,
// in order, the value given to set_memory_budget (the CLI's --max-bytes), CONVTUNE_MAX_BYTES, or
// min(8 GiB, half the physical memory). What a problem needs at its peak on a host-memory backend
// (docs/reliability.md, "Memory budget"), checked before anything is allocated:
//   x + w + y + workspace            make_host_tensors, execute (it runs on the host tensors in
//                                    place), the selector's search (scratch tensors filled in
//                                    place), a live simulation (its tensor pool evicts to fit);
//   x + w + y + max(workspace, oracle)   `run --check`: the f64 oracle's two arrays, 16 B per
//                                    output element (oracle_bytes() in convtune/verify/oracle.hpp),
//                                    live after the run's workspace is freed.
// The process's own memory (code, libraries, thread stacks, BLAS buffers) comes on top: a fixed
// overhead, measured in docs/reliability.md.
std::size_t memory_budget();
void set_memory_budget(std::size_t bytes);  // 0 = back to CONVTUNE_MAX_BYTES / the default
// The peak above: x + w + y + max(workspace, oracle), saturating at SIZE_MAX.
std::size_t peak_bytes(const ConvProblem& p, std::size_t workspace = 0, std::size_t oracle = 0);
// The message naming each part's size, the peak and the budget when peak_bytes(p, workspace,
// oracle) exceeds memory_budget(), else an empty string. check_memory_budget throws it as Error.
std::string over_memory_budget(const ConvProblem& p, std::size_t workspace = 0, std::size_t oracle = 0);
void check_memory_budget(const ConvProblem& p, std::size_t workspace = 0, std::size_t oracle = 0);

}  // namespace convtune
