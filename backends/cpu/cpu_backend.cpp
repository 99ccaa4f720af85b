#include "cpu/cpu_backend.hpp"

#include <vector>

namespace convtune {

namespace {

class CpuBackend final : public HostBackend {
public:
    CpuBackend() : list_{&cpu_direct()} {}
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
