// Statistics of timing samples: the one definition of each, used by the selector, recordings,
// the simulator's report, the CLI and the benchmarks.
#pragma once

#include <vector>

namespace convtune {

// The median of the samples: the middle value once sorted, the mean of the two middle values for
// an even count; 0 for no samples.
double median(std::vector<double> samples);

// The median absolute deviation from the median (unscaled); 0 for no samples.
double median_abs_deviation(const std::vector<double>& samples);

// (max - min) / median: the spread a decision and a tuning database report; 0 for no samples or
// a zero median.
double relative_spread(const std::vector<double>& samples);

}  // namespace convtune
