// Host tensors for a problem, filled with reproducible data, and running an algorithm on them
// through its backend's memory (upload, run, download): what the CLI, the tests and the
// benchmarks share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "convtune/algorithm.hpp"

namespace convtune {

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
