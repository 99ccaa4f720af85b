// Placeholder until the oneDNN algorithms land: the backend is listed, reports its library
// version, and offers no algorithm yet.
#include "onednn/onednn_backend.hpp"

#include <dnnl.hpp>
#include <string>

namespace convtune {

namespace {

class OneDnnBackend final : public HostBackend {
public:
    std::string_view name() const override { return "onednn"; }
    Availability availability() const override { return {}; }
    BackendIdentity identity() const override {
        const dnnl_version_t* v = dnnl_version();
        return {"oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch),
                host_device_name(), ""};
    }
    std::span<const Algorithm* const> algorithms() const override { return {}; }
};

}  // namespace

Backend& onednn_backend() {
    static OneDnnBackend b;
    return b;
}

}  // namespace convtune
