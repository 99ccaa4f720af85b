// The workload and stream options that `convtune simulate` and `convtune record` share, as plain
// values, and how they become a Stream. Every error is an InvalidRequest naming the field (workload, batches...).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convtune/sim/stream.hpp"

namespace convtune::sim {

struct WorkloadArgs {
    std::string workload;    // built-in name or file (not needed for a trace stream)
    std::string shapes_dir;  // empty = default_shapes_dir()
    std::string mode = "infer";
    std::string stream = "fixed";
    std::string dtype, layout;  // empty = as written
    std::string batches, scales;  // comma-separated lists, empty = defaults
    int64_t batch = 0;            // 0 = as written
    uint64_t seed = 1;

    Stream make_stream() const;
    // "resnet50, inference, batch 2, f32, stream fixed"
    std::string describe(const Stream& s) const;
};

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& field);
std::vector<double> parse_double_list(const std::string& text, const std::string& field);

}  // namespace convtune::sim
