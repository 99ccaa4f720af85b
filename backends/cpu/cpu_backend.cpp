#include "cpu/cpu_backend.hpp"

#include <vector>

namespace convtune {

namespace {

class CpuBackend final : public HostBackend {
public:
    CpuBackend() : list_{&cpu_direct(),        &cpu_direct_blocked(), &cpu_im2col_gemm(), &cpu_im2col_gemm_tf32(),
                         &cpu_winograd_f2x3(), &cpu_winograd_f4x3(),  &cpu_fft()} {}
    std::string_view name() const override { return "cpu"; }
    Availability availability() const override { return {}; }
    BackendIdentity identity() const override { return {"convtune-cpu", host_device_name(), ""}; }
    std::span<const Algorithm* const> algorithms() const override { return list_; }

private:
    std::vector<const Algorithm*> list_;
};

}  // namespace

Backend& cpu_backend() {
    static CpuBackend b;
    return b;
}

}  // namespace convtune
