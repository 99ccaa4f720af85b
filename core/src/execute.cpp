#include "convtune/execute.hpp"

#include <limits>
#include <optional>
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

void fill_host_tensors(const ConvProblem& p, const ConvTensors& t, uint64_t seed) {
    check_tensors(p, t);
    const std::size_t counts[3] = {static_cast<std::size_t>(p.x_elements()), static_cast<std::size_t>(p.w_elements()),
                                   static_cast<std::size_t>(p.y_elements())};
    void* const bufs[3] = {t.x.data, t.w.data, t.y.data};
    const int out = p.direction == Direction::fwd ? 2 : p.direction == Direction::bwd_data ? 0 : 1;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    for (int b = 0; b < 3; ++b) {
        if (b == out) {
            for (std::size_t i = 0; i < counts[b]; ++i) store_from_double(bufs[b], p.dtype, i, std::numeric_limits<double>::quiet_NaN());
        } else {
            for (std::size_t i = 0; i < counts[b]; ++i) store_from_double(bufs[b], p.dtype, i, dist(rng));
        }
    }
}

HostTensors make_host_tensors(const ConvProblem& p, uint64_t seed) {
    check_memory_budget(p);  // validates p too
    HostTensors t;
    t.problem = p;
    const std::size_t es = size_of(p.dtype);
    t.x.resize(static_cast<std::size_t>(p.x_elements()) * es);
    t.w.resize(static_cast<std::size_t>(p.w_elements()) * es);
    t.y.resize(static_cast<std::size_t>(p.y_elements()) * es);
    fill_host_tensors(p, t.views(), seed);
    return t;
}

RunResult execute(const Algorithm& a, HostTensors& t, bool timed) {
    const Backend& b = a.backend();
    const ConvProblem& p = t.problem;
    RunResult r;
    check_tensors(p, t.views());
    const std::size_t wsb = a.workspace_size(p);
    const bool host = uses_host_memory(b);
    if (host) {
        check_memory_budget(p);
        if (std::string m = over_memory_budget(p, wsb); !m.empty()) {
            r.status = Status::out_of_memory(m);
            return r;
        }
    }
    // Host memory: the algorithm runs on t's buffers, which are already the backend's memory.
    std::optional<DeviceTensors> device;
    if (!host) {
        device.emplace(b, p, t.views());
        if (!device->ok()) {
            r.status = Status::out_of_memory("cannot allocate the tensors (" + std::to_string(t.x.size() + t.w.size() + t.y.size()) + " B)");
            return r;
        }
    }
    DeviceBuffer ws = wsb ? b.allocate(wsb) : DeviceBuffer{};
    if (wsb && !ws) {
        r.status = Status::out_of_memory("cannot allocate a " + std::to_string(wsb) + "-byte workspace");
        return r;
    }
    const ConvTensors dev = host ? t.views() : device->views();
    const Workspace w{ws.data(), wsb};
    if (timed) {
        r.status = a.run(p, dev, w);
        if (!r.status.ok()) return r;
        r.ms = b.time_ms([&] { r.status = a.run(p, dev, w); });
    } else {
        r.status = a.run(p, dev, w);
        b.synchronize();
    }
    if (!r.status.ok() || host) return r;
    device->download_output(output_of(t).data());
    return r;
}

}  // namespace convtune
