// The workload and stream part of the simulate and record requests, as plain values, and how it
// becomes a Stream. Every error is an InvalidRequest naming the field (workload, batches...).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convtune/sim/stream.hpp"

namespace convtune::app {

struct WorkloadRequest {
    std::string workload;    // built-in name or file (not needed for a trace stream)
    std::string shapes_dir;  // empty = default_shapes_dir()
    std::string mode;        // train or infer; empty = infer
    std::string stream = "fixed";
    std::string dtype, layout;  // empty = as written
    std::string batches, scales;  // comma-separated lists, empty = defaults
    int64_t batch = 0;            // 0 = as written
    uint64_t seed = 1;

    // Refuses the options that do not apply to a trace stream (its problems carry their own).
    sim::Stream make_stream() const;
    // "resnet50, inference, batch 2, f32, stream fixed"
    std::string describe(const sim::Stream& s) const;
};

}  // namespace convtune::app
