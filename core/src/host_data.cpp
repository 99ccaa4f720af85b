#include "convtune/host_data.hpp"

#include <cmath>
#include <limits>
#include <random>

#include "convtune/backend.hpp"
#include "convtune/numeric.hpp"

namespace convtune {

ConvTensors HostTensors::views() {
    return {{x.data(), x.size()}, {w.data(), w.size()}, {y.data(), y.size()}};
}

std::vector<std::byte>& output_of(HostTensors& t) {
    switch (t.problem.direction) {
        case Direction::fwd: return t.y;
        case Direction::bwd_data: return t.x;
        case Direction::bwd_filter: return t.w;
    }
    return t.y;
}
const std::vector<std::byte>& output_of(const HostTensors& t) { return output_of(const_cast<HostTensors&>(t)); }

HostTensors make_host_tensors(const ConvProblem& p, uint64_t seed) {
    p.validate();
    HostTensors t;
    t.problem = p;
    const std::size_t es = size_of(p.dtype);
    t.x.resize(static_cast<std::size_t>(p.x_elements()) * es);
    t.w.resize(static_cast<std::size_t>(p.w_elements()) * es);
    t.y.resize(static_cast<std::size_t>(p.y_elements()) * es);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    std::vector<std::byte>* out = &output_of(t);
    for (std::vector<std::byte>* buf : {&t.x, &t.w, &t.y}) {
        const std::size_t count = buf->size() / es;
        if (buf == out) {
            for (std::size_t i = 0; i < count; ++i) store_from_double(buf->data(), p.dtype, i, std::numeric_limits<double>::quiet_NaN());
        } else {
            for (std::size_t i = 0; i < count; ++i) store_from_double(buf->data(), p.dtype, i, dist(rng));
        }
    }
    return t;
}

RunResult execute(const Algorithm& a, HostTensors& t, bool timed) {
    const Backend& b = a.backend();
    const ConvProblem& p = t.problem;
    RunResult r;
    DeviceBuffer dx = b.allocate(t.x.size()), dw = b.allocate(t.w.size()), dy = b.allocate(t.y.size());
    const std::size_t wsb = a.workspace_size(p);
    DeviceBuffer ws = wsb ? b.allocate(wsb) : DeviceBuffer{};
    if (!dx || !dw || !dy || (wsb && !ws)) {
        r.status = Status::out_of_memory("cannot allocate tensors and a " + std::to_string(wsb) + "-byte workspace");
        return r;
    }
    b.upload(dx.data(), t.x.data(), t.x.size());
    b.upload(dw.data(), t.w.data(), t.w.size());
    b.upload(dy.data(), t.y.data(), t.y.size());
    const ConvTensors dev{{dx.data(), t.x.size()}, {dw.data(), t.w.size()}, {dy.data(), t.y.size()}};
    const Workspace w{ws.data(), wsb};
    if (timed) {
        r.status = a.run(p, dev, w);
        if (!r.status.ok()) return r;
        r.ms = b.time_ms([&] { r.status = a.run(p, dev, w); });
    } else {
        r.status = a.run(p, dev, w);
        b.synchronize();
    }
    if (!r.status.ok()) return r;
    std::vector<std::byte>& out = output_of(t);
    const DeviceBuffer& dout = p.direction == Direction::fwd ? dy : p.direction == Direction::bwd_data ? dx : dw;
    b.download(out.data(), dout.data(), out.size());
    return r;
}

}  // namespace convtune
