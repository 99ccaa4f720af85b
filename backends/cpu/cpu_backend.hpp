// The CPU backend: convtune's own CPU algorithms (the naive reference and the fast families).
// Each algorithm is compiled once per instruction-set level (isa.hpp, cpu/level.hpp); the
// backend and the functions below hand out those of the level that runs.
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
    // Out of line (cpu_backend.cpp): the class's vtable and type_info then live there, once,
    // whatever level the algorithm deriving from it was compiled for.
    ~CpuAlgorithm() override;
    std::string_view id() const override;
    const Backend& backend() const override;
    Notes notes() const override;
    CpuFamily family() const { return family_; }

private:
    std::string id_;
    Notes notes_;
    CpuFamily family_;
};

namespace cpu {
// One level's algorithms, in the backend's fixed order (cpu/level.hpp).
struct LevelAlgorithms {
    const Algorithm* direct;
    const Algorithm* direct_blocked;
    const Algorithm* im2col_gemm;
    const Algorithm* im2col_gemm_tf32;
    const Algorithm* winograd_f2x3;
    const Algorithm* winograd_f4x3;
    const Algorithm* fft;
};
// Those of the level that runs (isa_levels().active).
const LevelAlgorithms& active_algorithms();
}  // namespace cpu

// Every CPU algorithm, of the level that runs, in the backend's fixed order.
const Algorithm& cpu_direct();
const Algorithm& cpu_direct_blocked();
const Algorithm& cpu_im2col_gemm();
const Algorithm& cpu_im2col_gemm_tf32();
const Algorithm& cpu_winograd_f2x3();
const Algorithm& cpu_winograd_f4x3();
const Algorithm& cpu_fft();

}  // namespace convtune
