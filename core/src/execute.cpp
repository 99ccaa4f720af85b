#include "convtune/execute.hpp"

#include <limits>
#include <random>

#include "convtune/backend.hpp"
#include "convtune/device_tensors.hpp"
#include "convtune/error.hpp"
#include "convtune/memory_budget.hpp"
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
    check_memory_budget(p);  // validates p too
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
    check_tensors(p, t.views());
    const std::size_t wsb = a.workspace_size(p);
    if (uses_host_memory(b)) {
        check_memory_budget(p);
        if (std::string m = over_memory_budget(p, wsb); !m.empty()) {
            r.status = Status::out_of_memory(m);
            return r;
        }
    }
    const DeviceTensors tensors(b, p, t.views());
    DeviceBuffer ws = wsb ? b.allocate(wsb) : DeviceBuffer{};
    if (!tensors.ok() || (wsb && !ws)) {
        r.status = Status::out_of_memory("cannot allocate tensors and a " + std::to_string(wsb) + "-byte workspace");
        return r;
    }
    const ConvTensors& dev = tensors.views();
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
    tensors.download_output(output_of(t).data());
    return r;
}

}  // namespace convtune
