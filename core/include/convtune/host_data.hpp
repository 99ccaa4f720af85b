// Host tensors for a problem, filled with reproducible data, and running an algorithm on them
// through its backend's memory (upload, run, download): what the CLI, the tests and the
// benchmarks share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/algorithm.hpp"

namespace convtune {

class Backend;

// Memory budget: the most host memory one problem may make convtune allocate at its peak. It is,
// in order, the value given to set_memory_budget (the CLI's --max-bytes), CONVTUNE_MAX_BYTES, or
// min(8 GiB, half the physical memory). What a problem needs at its peak on a host-memory backend
// (docs/reliability.md, "Memory budget"), checked before anything is allocated:
//   x + w + y + workspace            make_host_tensors, execute (it runs on the host tensors in
//                                    place), the selector's search (scratch tensors filled in
//                                    place), a live simulation (its tensor pool evicts to fit);
//   x + w + y + max(workspace, oracle)   `run --check`: the f64 oracle's two arrays, 16 B per
//                                    output element (oracle_bytes() in backends/cpu/oracle.hpp),
//                                    live after the run's workspace is freed.
// The process's own memory (code, libraries, thread stacks, BLAS buffers) comes on top: a fixed
// overhead, measured in docs/reliability.md.
std::size_t memory_budget();
void set_memory_budget(std::size_t bytes);  // 0 = back to CONVTUNE_MAX_BYTES / the default
// "4096", "512K", "64M", "8G", "1T" (powers of 1024; a trailing "iB" or "B" is accepted).
// Throws ParseError naming `what` on anything else, zero, or an overflowing value.
std::size_t parse_byte_size(std::string_view text, std::string_view what = "size");
// The peak above: x + w + y + max(workspace, oracle), saturating at SIZE_MAX.
std::size_t peak_bytes(const ConvProblem& p, std::size_t workspace = 0, std::size_t oracle = 0);
// The message naming each part's size, the peak and the budget when peak_bytes(p, workspace,
// oracle) exceeds memory_budget(), else an empty string. check_memory_budget throws it as Error.
std::string over_memory_budget(const ConvProblem& p, std::size_t workspace = 0, std::size_t oracle = 0);
void check_memory_budget(const ConvProblem& p, std::size_t workspace = 0, std::size_t oracle = 0);
// True when b's memory is host memory (a HostBackend), where the budget applies.
bool uses_host_memory(const Backend& b);

struct HostTensors {
    ConvProblem problem;
    std::vector<std::byte> x, w, y;
    ConvTensors views();
};

// The direction's inputs get uniform values in [-1, 1) from `seed`, rounded to the problem's
// dtype (so every backend and the oracle see exactly the same numbers); the output tensor is
// filled with NaN so an element an algorithm forgets to write cannot pass a check.
HostTensors make_host_tensors(const ConvProblem& p, uint64_t seed = 1);
// The same data written into host-memory buffers the caller owns (sized for p, checked), so
// that a backend's own host buffers need no second copy to upload from.
void fill_host_tensors(const ConvProblem& p, const ConvTensors& t, uint64_t seed = 1);

// The tensor a direction writes: y for fwd, x for bwd_data, w for bwd_filter.
std::vector<std::byte>& output_of(HostTensors& t);
const std::vector<std::byte>& output_of(const HostTensors& t);

struct RunResult {
    Status status;
    double ms = 0;  // time of the timed run on the backend's clock (0 when not timed)
};

// Runs `a` once on `t`, leaving the result in output_of(t): on a host-memory backend on t's own
// buffers (only the workspace is allocated), on another backend through its memory (upload,
// run, download). With `timed`, runs once more untimed first (warm-up) and reports the time of
// the second run. Allocation failure, or a workspace over the memory budget, is returned as
// out_of_memory.
RunResult execute(const Algorithm& a, HostTensors& t, bool timed = false);

}  // namespace convtune
