// The instruction-set levels convtune's CPU algorithms are compiled for, and the one that runs.
//
// A portable x86-64 build compiles every CPU algorithm three times (backends/cpu/CMakeLists.txt):
// for baseline x86-64 (SSE2), x86-64-v3 (AVX2, FMA, BMI2, F16C) and x86-64-v4 (AVX-512 F, BW, CD,
// DQ, VL). When the backend starts it runs the highest level this CPU has; the environment
// variable CONVTUNE_CPU_ISA=baseline|x86-64-v3|x86-64-v4 picks a lower one. A build with
// CONVTUNE_ARCH set (the native preset) and a non-x86 build have one level, the build's own.
#pragma once

#include <string>
#include <vector>

namespace convtune::cpu {

struct IsaLevels {
    std::vector<std::string> compiled;  // lowest first: "baseline", "x86-64-v3", "x86-64-v4" (or the one -march)
    std::vector<std::string> usable;    // those of `compiled` this CPU has, lowest first
    std::string active;                 // the level the CPU algorithms run at
    // Empty, or why `active` is not what CONVTUNE_CPU_ISA asked for (this CPU lacks the level, or
    // the build did not compile it).
    std::string note;
};

// The levels, decided on the first call (reading CONVTUNE_CPU_ISA then). Throws convtune::Error
// when CONVTUNE_CPU_ISA names no level ("baseline", "x86-64-v3", "x86-64-v4" or this build's one).
const IsaLevels& isa_levels();

// The index of isa_levels().active in isa_levels().compiled.
int active_level_index();

}  // namespace convtune::cpu
