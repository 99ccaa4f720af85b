// One instruction-set level's algorithms, in the backend's fixed order (cpu/level.hpp).
#include "cpu/level.hpp"

namespace convtune::cpu::CONVTUNE_ISA_NS {

const LevelAlgorithms& algorithms() {
    static const LevelAlgorithms a{
        &cpu_direct(),        &cpu_direct_blocked(), &cpu_im2col_gemm(), &cpu_im2col_gemm_tf32(),
        &cpu_winograd_f2x3(), &cpu_winograd_f4x3(),  &cpu_fft()};
    return a;
}

}  // namespace convtune::cpu::CONVTUNE_ISA_NS
