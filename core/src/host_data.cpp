// The memory budget (convtune/memory_budget.hpp).
#include "convtune/memory_budget.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

#include "convtune/byte_size.hpp"
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

std::size_t memory_budget() {
    if (const std::size_t b = g_budget.load()) return b;
    if (const char* e = std::getenv("CONVTUNE_MAX_BYTES"); e && *e) return parse_byte_size(e, "CONVTUNE_MAX_BYTES");
    static const std::size_t fallback =
        default_budget();  // the machine's memory does not change (a syscall per call did)
    return fallback;
}

void set_memory_budget(std::size_t bytes) { g_budget.store(bytes); }

std::size_t peak_bytes(const ConvProblem& p, std::size_t workspace, std::size_t oracle) {
    p.validate();  // element counts fit in int64 from here on
    const std::size_t es = size_of(p.dtype);
    std::size_t total = 0;
    for (int64_t e : {p.x_elements(), p.w_elements(), p.y_elements()}) {
        std::size_t bytes = 0;
        if (__builtin_mul_overflow(static_cast<std::size_t>(e), es, &bytes) ||
            __builtin_add_overflow(total, bytes, &total))
            return std::numeric_limits<std::size_t>::max();
    }
    if (__builtin_add_overflow(total, std::max(workspace, oracle), &total))
        return std::numeric_limits<std::size_t>::max();
    return total;
}

std::string over_memory_budget(const ConvProblem& p, std::size_t workspace, std::size_t oracle) {
    const std::size_t peak = peak_bytes(p, workspace, oracle), budget = memory_budget();
    if (peak <= budget) return {};
    const std::size_t es = size_of(p.dtype);
    const std::size_t x = static_cast<std::size_t>(p.x_elements()) * es,
                      w = static_cast<std::size_t>(p.w_elements()) * es,
                      y = static_cast<std::size_t>(p.y_elements()) * es;
    std::string m =
        "memory budget: tensor x needs " + format_bytes(x) + ", w " + format_bytes(w) + ", y " + format_bytes(y);
    if (workspace) m += ", workspace " + format_bytes(workspace);
    if (oracle) m += ", the f64 oracle " + format_bytes(oracle);
    m += " (peak " +
         (peak == std::numeric_limits<std::size_t>::max() ? std::string("beyond 2^64 B") : format_bytes(peak)) +
         "), above the budget of " + format_bytes(budget) + " (" + std::to_string(budget) +
         " B; raise it with CONVTUNE_MAX_BYTES or --max-bytes)";
    return m;
}

void check_memory_budget(const ConvProblem& p, std::size_t workspace, std::size_t oracle) {
    if (std::string m = over_memory_budget(p, workspace, oracle); !m.empty()) throw Error(m);
}

}  // namespace convtune
