// Statistics of timing samples: the one definition of each, used by the selector, recordings,
// the simulator's report, the CLI and the benchmarks.
#pragma once

#include <chrono>
#include <vector>

namespace convtune {

// Wall time in milliseconds since t0 (steady clock).
inline double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The median of the samples: the middle value once sorted, the mean of the two middle values for
// an even count; 0 for no samples.
double median(std::vector<double> samples);

// The median absolute deviation from the median (unscaled); 0 for no samples.
double median_abs_deviation(const std::vector<double>& samples);

// (max - min) / median: the spread a decision and a tuning database report; 0 for no samples or
// a zero median.
double relative_spread(const std::vector<double>& samples);

// The robust spread: 1.4826 x median_abs_deviation / median (the relative standard deviation for
// normal noise, unmoved by a few outliers); 0 for no samples or a zero median.
double relative_noise(const std::vector<double>& samples);

// Whether b's median is above a's beyond the noise: by more than `floor` x a's median, by more
// than z standard errors of the difference of the two medians (each median's standard error taken
// as 1.2533 x 1.4826 x MAD / sqrt(n)), and with every sample of b above a's median (no overlap: with
// three samples, two alike outliers make a tiny MAD; measured on the H200, a 70 us kernel's samples
// [0.088, 0.076, 0.089] ms against another's [0.100, 0.078, 0.078]). False when either has no samples.
bool slower_beyond_noise(const std::vector<double>& a, const std::vector<double>& b, double z, double floor);

}  // namespace convtune
