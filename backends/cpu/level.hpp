// For the sources compiled once per instruction-set level (backends/cpu/CMakeLists.txt): each
// copy defines its algorithms in namespace convtune::cpu::CONVTUNE_ISA_NS (isa_baseline,
// isa_x86_64_v3, ...), with the vector width and instructions of its level.
#pragma once

#ifndef CONVTUNE_ISA_NS
#error "compiled once per instruction-set level: backends/cpu/CMakeLists.txt defines CONVTUNE_ISA_NS"
#endif

#include "cpu/cpu_backend.hpp"

namespace convtune::cpu::CONVTUNE_ISA_NS {

const Algorithm& cpu_direct();          // direct.cpp
const Algorithm& cpu_direct_blocked();  // direct_blocked.cpp
const Algorithm& cpu_im2col_gemm();     // im2col_gemm.cpp
const Algorithm& cpu_im2col_gemm_tf32();
const Algorithm& cpu_winograd_f2x3();   // winograd.cpp
const Algorithm& cpu_winograd_f4x3();
const Algorithm& cpu_fft();             // fft.cpp
// All of them (level.cpp): what the backend reads for the level that runs.
const LevelAlgorithms& algorithms();

}  // namespace convtune::cpu::CONVTUNE_ISA_NS
