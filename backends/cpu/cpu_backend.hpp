// The CPU backend: convtune's own CPU algorithms (the naive reference and the fast families).
#pragma once

#include <string>
#include <string_view>

#include "convtune/backend.hpp"

namespace convtune {

Backend& cpu_backend();
// The CPU cost model's estimate for a (supported) problem, in arbitrary units (ranking only).
double cpu_cost_estimate(const Algorithm& a, const ConvProblem& p);

// Base for algorithms whose id, notes and backend are fixed at construction.
class CpuAlgorithm : public Algorithm {
public:
    CpuAlgorithm(std::string id, Notes notes) : id_(std::move(id)), notes_(notes) {}
    std::string_view id() const override { return id_; }
    const Backend& backend() const override { return cpu_backend(); }
    Notes notes() const override { return notes_; }

private:
    std::string id_;
    Notes notes_;
};

// Every CPU algorithm, in the backend's fixed order. Defined next to each algorithm.
const Algorithm& cpu_direct();          // direct.cpp
const Algorithm& cpu_direct_blocked();  // direct_blocked.cpp
const Algorithm& cpu_im2col_gemm();     // im2col_gemm.cpp
const Algorithm& cpu_im2col_gemm_tf32();
const Algorithm& cpu_winograd_f2x3();   // winograd.cpp
const Algorithm& cpu_winograd_f4x3();
const Algorithm& cpu_fft();             // fft.cpp

}  // namespace convtune
