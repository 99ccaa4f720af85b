#include "convtune/device_tensors.hpp"

#include "convtune/error.hpp"
#include "convtune/host_data.hpp"
#include "convtune/numeric.hpp"

namespace convtune {

void DeviceTensors::allocate(const Device& d, const ConvProblem& p) {
    const std::size_t es = size_of(p.dtype);
    const std::size_t xb = static_cast<std::size_t>(p.x_elements()) * es,
                      wb = static_cast<std::size_t>(p.w_elements()) * es,
                      yb = static_cast<std::size_t>(p.y_elements()) * es;
    x_ = d.allocate(xb), w_ = d.allocate(wb), y_ = d.allocate(yb);
    ok_ = x_ && w_ && y_;
    if (!ok_) {
        x_ = DeviceBuffer{}, w_ = DeviceBuffer{}, y_ = DeviceBuffer{};
        return;
    }
    views_ = {{x_.data(), xb}, {w_.data(), wb}, {y_.data(), yb}};
}

DeviceTensors::DeviceTensors(const Device& d, const ConvProblem& p, uint64_t seed) : device_(d), problem_(p) {
    if (!d.needs_tensor_data()) {
        p.validate();
        allocate(d, p);
        return;
    }
    if (d.memory() == Memory::host) {
        // Host memory: filled in place, with no second copy to upload from.
        check_memory_budget(p);  // validates p
        allocate(d, p);
        if (ok_) fill_host_tensors(p, views_, seed);
        return;
    }
    const HostTensors host = make_host_tensors(p, seed);  // validates p and checks the memory budget
    allocate(d, p);
    upload(host.x.data(), host.w.data(), host.y.data());
}

DeviceTensors::DeviceTensors(const Device& d, const ConvProblem& p, const ConvTensors& host) : device_(d), problem_(p) {
    check_tensors(p, host);
    allocate(d, p);
    upload(host.x.data, host.w.data, host.y.data);
}

void DeviceTensors::upload(const void* x, const void* w, const void* y) {
    if (!ok_) return;
    device_.upload(x_.data(), x, views_.x.bytes);
    device_.upload(w_.data(), w, views_.w.bytes);
    device_.upload(y_.data(), y, views_.y.bytes);
}

const DeviceTensors& DeviceTensors::require(std::string_view where) const {
    if (!ok_) throw Error("cannot allocate the tensors of " + problem_.to_string() + " " + std::string(where));
    return *this;
}

const TensorView& DeviceTensors::output() const {
    return problem_.direction == Direction::fwd        ? views_.y
           : problem_.direction == Direction::bwd_data ? views_.x
                                                       : views_.w;
}

void DeviceTensors::download_output(void* host_dst) const { device_.download(host_dst, output().data, output().bytes); }

}  // namespace convtune
