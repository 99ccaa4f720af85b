// The CPU backend: convtune's own CPU algorithms (the naive reference and the fast families).
#pragma once

#include <string>
#include <string_view>

#include "convtune/backend.hpp"

namespace convtune {

Backend& cpu_backend();

// What the cost model that ranks the CPU algorithms (cpu_backend.cpp) estimates an algorithm as.
enum class CpuFamily { reference, direct_blocked, gemm, gemm_tf32, winograd_f2x3, winograd_f4x3, fft };

// Base for algorithms whose id, notes, cost-model family and backend are fixed at construction.
class CpuAlgorithm : public Algorithm {
public:
    CpuAlgorithm(std::string id, Notes notes, CpuFamily family) : id_(std::move(id)), notes_(notes), family_(family) {}
    std::string_view id() const override { return id_; }
    const Backend& backend() const override { return cpu_backend(); }
    Notes notes() const override { return notes_; }
    CpuFamily family() const { return family_; }

private:
    std::string id_;
    Notes notes_;
    CpuFamily family_;
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
