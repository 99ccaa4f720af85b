// What this build of convtune is: its version, the instruction-set level its code was compiled
// for, the levels its CPU algorithms were compiled for and the one running, and the backends
// compiled in. The one source of `convtune --version` and Python's
// convtune.version() / convtune.build_info().
#pragma once

#include <string>
#include <vector>

namespace convtune {

struct BuildInfo {
    std::string version;                // convtune_version(), e.g. "0.1.0"
    std::string arch;  // CONVTUNE_ARCH, the -march value ("" = the compiler's default: portable x86-64)
    std::vector<std::string>
        isa;  // the vector instruction sets the compiler could use (sse2, avx, fma, avx2, avx512f, ...)
    std::vector<std::string>
        cpu_levels;  // the levels the CPU algorithms are compiled for (baseline, x86-64-v3, x86-64-v4)
    std::string cpu_level;              // the one they run at here (the highest this CPU has, or CONVTUNE_CPU_ISA's)
    std::vector<std::string> backends;  // compiled in, available here or not (cpu, onednn, cudnn)
    std::string compiler;               // e.g. "GCC 12.2.0"
};

BuildInfo build_info();
// "convtune 0.1.0\nbuild: portable (no -march) (instruction sets: sse2), GCC 12.2.0\n
//  cpu algorithms: baseline x86-64-v3 x86-64-v4, running x86-64-v4\nbackends: cpu onednn\n"
std::string to_text(const BuildInfo& b);

}  // namespace convtune
