#include "convtune/host_data.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

#include "convtune/backend.hpp"
#include "convtune/error.hpp"
#include "convtune/numeric.hpp"

namespace convtune {

namespace {

std::atomic<std::size_t> g_budget{0};

std::string format_bytes(std::size_t b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = static_cast<double>(b);
    int u = 0;
    while (v >= 1024 && u < 6) v /= 1024, ++u;
    if (u == 0) return std::to_string(b) + " B";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
    return buf;
}

std::size_t default_budget() {
    constexpr std::size_t kCap = std::size_t{8} << 30;
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) return kCap;
    const std::size_t half = static_cast<std::size_t>(pages) / 2 * static_cast<std::size_t>(page);
    return half < kCap ? half : kCap;
}

}  // namespace

std::size_t parse_byte_size(std::string_view text, std::string_view what) {
    const std::string w(what);
    std::string_view s = text;
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc::result_out_of_range) throw ParseError(w + ": '" + std::string(text) + "' is out of range");
    if (ec != std::errc() || ptr == s.data())
        throw ParseError(w + ": '" + std::string(text) + "' is not a byte count (e.g. 4096, 512M, 8G)");
    s.remove_prefix(static_cast<std::size_t>(ptr - s.data()));
    int shift = 0;
    if (!s.empty()) {
        const char units[] = "KMGTPE";
        const char c = static_cast<char>(s.front() & ~0x20);  // upper case
        for (int i = 0; i < 6; ++i)
            if (c == units[i]) shift = 10 * (i + 1);
        if (shift) s.remove_prefix(1);
        if (s == "iB" || s == "B" || (shift && s == "b")) s = {};
    }
    if (!s.empty()) throw ParseError(w + ": '" + std::string(text) + "' has an unknown unit (use K, M, G, T, P or E, powers of 1024)");
    if (v == 0) throw ParseError(w + ": must be above 0");
    if (shift && v > (std::numeric_limits<uint64_t>::max() >> shift)) throw ParseError(w + ": '" + std::string(text) + "' is out of range");
    return static_cast<std::size_t>(v << shift);
}

std::size_t memory_budget() {
    if (const std::size_t b = g_budget.load()) return b;
    if (const char* e = std::getenv("CONVTUNE_MAX_BYTES"); e && *e) return parse_byte_size(e, "CONVTUNE_MAX_BYTES");
    return default_budget();
}

void set_memory_budget(std::size_t bytes) { g_budget.store(bytes); }

std::size_t peak_bytes(const ConvProblem& p, std::size_t workspace, std::size_t oracle) {
    p.validate();  // element counts fit in int64 from here on
    const std::size_t es = size_of(p.dtype);
    std::size_t total = 0;
    for (int64_t e : {p.x_elements(), p.w_elements(), p.y_elements()}) {
        std::size_t bytes = 0;
        if (__builtin_mul_overflow(static_cast<std::size_t>(e), es, &bytes) || __builtin_add_overflow(total, bytes, &total))
            return std::numeric_limits<std::size_t>::max();
    }
    if (__builtin_add_overflow(total, std::max(workspace, oracle), &total)) return std::numeric_limits<std::size_t>::max();
    return total;
}

std::string over_memory_budget(const ConvProblem& p, std::size_t workspace, std::size_t oracle) {
    const std::size_t peak = peak_bytes(p, workspace, oracle), budget = memory_budget();
    if (peak <= budget) return {};
    const std::size_t es = size_of(p.dtype);
    const std::size_t x = static_cast<std::size_t>(p.x_elements()) * es, w = static_cast<std::size_t>(p.w_elements()) * es,
                      y = static_cast<std::size_t>(p.y_elements()) * es;
    std::string m = "memory budget: tensor x needs " + format_bytes(x) + ", w " + format_bytes(w) + ", y " + format_bytes(y);
    if (workspace) m += ", workspace " + format_bytes(workspace);
    if (oracle) m += ", the f64 oracle " + format_bytes(oracle);
    m += " (peak " + (peak == std::numeric_limits<std::size_t>::max() ? std::string("beyond 2^64 B") : format_bytes(peak)) +
         "), above the budget of " + format_bytes(budget) + " (" + std::to_string(budget) +
         " B; raise it with CONVTUNE_MAX_BYTES or --max-bytes)";
    return m;
}

void check_memory_budget(const ConvProblem& p, std::size_t workspace, std::size_t oracle) {
    if (std::string m = over_memory_budget(p, workspace, oracle); !m.empty()) throw Error(m);
}

bool uses_host_memory(const Backend& b) { return dynamic_cast<const HostBackend*>(&b) != nullptr; }

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
    DeviceBuffer dx, dw, dy;
    if (!host) {
        dx = b.allocate(t.x.size()), dw = b.allocate(t.w.size()), dy = b.allocate(t.y.size());
        if (!dx || !dw || !dy) {
            r.status = Status::out_of_memory("cannot allocate the tensors (" + std::to_string(t.x.size() + t.w.size() + t.y.size()) + " B)");
            return r;
        }
    }
    DeviceBuffer ws = wsb ? b.allocate(wsb) : DeviceBuffer{};
    if (wsb && !ws) {
        r.status = Status::out_of_memory("cannot allocate a " + std::to_string(wsb) + "-byte workspace");
        return r;
    }
    ConvTensors dev = t.views();
    if (!host) {
        b.upload(dx.data(), t.x.data(), t.x.size());
        b.upload(dw.data(), t.w.data(), t.w.size());
        b.upload(dy.data(), t.y.data(), t.y.size());
        dev = ConvTensors{{dx.data(), t.x.size()}, {dw.data(), t.w.size()}, {dy.data(), t.y.size()}};
    }
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
    std::vector<std::byte>& out = output_of(t);
    const DeviceBuffer& dout = p.direction == Direction::fwd ? dy : p.direction == Direction::bwd_data ? dx : dw;
    b.download(out.data(), dout.data(), out.size());
    return r;
}

}  // namespace convtune
