// The problems every algorithm is checked on: awkward shapes (odd sizes, asymmetric and
// negative end padding, dilation, groups, depthwise, 1-D/2-D/3-D, batch 1, C or K = 1) and the
// ResNet-50 v1.5 layers from the peer shape files at small batch.
#pragma once

#include <string>
#include <vector>

#include "convtune/algorithm.hpp"
#include "convtune/problem.hpp"

namespace convtune::test {

// Base shapes (fwd, f32, nchw), each with a short label.
struct Case {
    std::string label;
    ConvProblem problem;
};
std::vector<Case> awkward_shapes();

// Every base shape in every direction x layout x dtype in `dtypes`.
std::vector<Case> expand(const std::vector<Case>& base, const std::vector<DataType>& dtypes);

// The unique problems of a peer shape file (by canonical string), with batch set to `batch`.
std::vector<Case> shape_file_cases(const std::string& file, int64_t batch);

std::string peer_shapes_dir();

// Every algorithm of the available host backends (every backend but cuDNN), in registry order.
std::vector<const Algorithm*> host_algorithms();

}  // namespace convtune::test
