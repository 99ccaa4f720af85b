// The machine's FMA peak, measured: a register-only loop of independent vector FMA chains (no
// memory traffic), run on every thread of an OpenMP team. What the convolution benchmark divides
// by, measured in the same process so that clock speed and co-tenants affect both alike.
#pragma once

#include <string>

namespace convtune::bench {

// The vector ISA the loop uses, e.g. "AVX2 FMA, 8 floats per vector, 12 chains".
std::string peak_isa();
// Iterations of the loop that take `threads` threads about `seconds` of wall time (sized from
// the fastest of several trials).
long long peak_iterations(int threads, double seconds);
// f32 GFLOP/s (2 flops per FMA lane) of `threads` threads each running `iterations` iterations.
double peak_gflops(int threads, long long iterations);

}  // namespace convtune::bench
