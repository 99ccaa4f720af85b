// A problem's x, w and y in a device's memory, allocated, filled reproducibly and uploaded: what
// the selector's search, the simulator, recordings, execute(), the benchmarks and the Python
// module use instead of allocating and uploading by hand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "convtune/backend.hpp"

namespace convtune {

class DeviceTensors {
public:
    // The seed of the data when none is given (make_host_tensors' default too).
    static constexpr uint64_t default_seed = 1;

    // Allocates p's tensors on d and, when d.needs_tensor_data(), fills them as
    // make_host_tensors(p, seed) fills host tensors (the direction's inputs uniform in [-1, 1)
    // from `seed`, rounded to p's dtype; the output NaN): in place on a host-memory device (x + w
    // + y counted once against memory_budget(), checked first), else through a host copy that is
    // uploaded. A device that needs no data gets the allocations only.
    DeviceTensors(const Device& d, const ConvProblem& p, uint64_t seed = default_seed);
    // Allocates p's tensors on d and uploads these host buffers (each at least the problem's size).
    DeviceTensors(const Device& d, const ConvProblem& p, const ConvTensors& host);

    // Whether every allocation succeeded (when not, nothing was uploaded and views() is empty).
    bool ok() const { return ok_; }
    // Throws Error("cannot allocate the tensors of <p> <where>") unless ok().
    const DeviceTensors& require(std::string_view where) const;
    const ConvTensors& views() const { return views_; }
    std::size_t bytes() const { return views_.x.bytes + views_.w.bytes + views_.y.bytes; }
    // The tensor the direction writes: y for fwd, x for bwd_data, w for bwd_filter.
    const TensorView& output() const;
    // Copies output() into host_dst (output().bytes bytes).
    void download_output(void* host_dst) const;

private:
    void allocate(const Device& d, const ConvProblem& p);
    void upload(const void* x, const void* w, const void* y);  // each views() size, when ok()
    const Device& device_;
    ConvProblem problem_;
    DeviceBuffer x_, w_, y_;
    ConvTensors views_;
    bool ok_ = false;
};

}  // namespace convtune
