// Placeholder: replaced by the real implementation (the algorithm supports nothing yet).
#include "cpu/cpu_backend.hpp"

namespace convtune {

namespace {
class NotYet final : public CpuAlgorithm {
public:
    using CpuAlgorithm::CpuAlgorithm;
    Support supports(const ConvProblem&) const override { return Support::no("not implemented yet"); }
    std::size_t workspace_size(const ConvProblem&) const override { return 0; }
    Status run(const ConvProblem&, const ConvTensors&, Workspace) const override { return Status::unsupported("not implemented yet"); }
};
}  // namespace

const Algorithm& cpu_im2col_gemm() {
    static const NotYet a("cpu.im2col_gemm", Notes{});
    return a;
}

const Algorithm& cpu_im2col_gemm_tf32() {
    static const NotYet a("cpu.im2col_gemm.tf32", Notes{});
    return a;
}

}  // namespace convtune
