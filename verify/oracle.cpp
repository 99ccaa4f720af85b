#include "convtune/verify/oracle.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "convtune/algorithm.hpp"
#include "convtune/numeric.hpp"
#include "convtune/tensor.hpp"

namespace convtune {

namespace {

// The scatter, reading the inputs through `load(buffer, index)` in their own dtype.
template <class Load>
void scatter(const HostTensors& t, Load load, OracleResult& r) {
    const ConvProblem& p = t.problem;
    const std::byte *x = t.x.data(), *w = t.w.data(), *y = t.y.data();
    const Strides xs = x_strides(p), ws = w_strides(p), ys = y_strides(p);
    const Dims od = out_dims(p);
    const int64_t cpg = p.c_per_group(), kpg = p.k_per_group();
    // Threads own disjoint outputs: batch items for fwd/bwd_data, filters for bwd_filter.
    const bool by_k = p.direction == Direction::bwd_filter;
    const int64_t owners = by_k ? p.k : p.n;
#pragma omp parallel for schedule(dynamic)
    for (int64_t owner = 0; owner < owners; ++owner) {
        const int64_t n_lo = by_k ? 0 : owner, n_hi = by_k ? p.n : owner + 1;
        const int64_t k_lo = by_k ? owner : 0, k_hi = by_k ? owner + 1 : p.k;
        for (int64_t n = n_lo; n < n_hi; ++n)
            for (int64_t k = k_lo; k < k_hi; ++k) {
                const int64_t g = k / kpg;
                for (int64_t cc = 0; cc < cpg; ++cc) {
                    const int64_t c = g * cpg + cc;
                    for (int64_t r0 = 0; r0 < p.kernel[0]; ++r0)
                        for (int64_t r1 = 0; r1 < p.kernel[1]; ++r1)
                            for (int64_t r2 = 0; r2 < p.kernel[2]; ++r2) {
                                // Output range whose input tap i = o*s - pb + r*d lies inside the input.
                                const int64_t rr[3] = {r0, r1, r2};
                                int64_t lo[3], hi[3];
                                for (int d = 0; d < 3; ++d) {
                                    const auto u = static_cast<std::size_t>(d);
                                    const int64_t off = rr[d] * p.dilation[u] - p.pad_begin[u];  // i = o*s + off
                                    lo[d] = off >= 0 ? 0 : (-off + p.stride[u] - 1) / p.stride[u];
                                    const int64_t last = p.in[u] - 1 - off;  // o*s <= last
                                    hi[d] = last < 0 ? 0 : std::min(od[u], last / p.stride[u] + 1);
                                }
                                const int64_t wi = ws.at(k, cc, r0, r1, r2);
                                for (int64_t o0 = lo[0]; o0 < hi[0]; ++o0)
                                    for (int64_t o1 = lo[1]; o1 < hi[1]; ++o1)
                                        for (int64_t o2 = lo[2]; o2 < hi[2]; ++o2) {
                                            const int64_t i0 = o0 * p.stride[0] - p.pad_begin[0] + r0 * p.dilation[0];
                                            const int64_t i1 = o1 * p.stride[1] - p.pad_begin[1] + r1 * p.dilation[1];
                                            const int64_t i2 = o2 * p.stride[2] - p.pad_begin[2] + r2 * p.dilation[2];
                                            const int64_t xi = xs.at(n, c, i0, i1, i2), yi = ys.at(n, k, o0, o1, o2);
                                            double a = 0, b = 0;
                                            int64_t dst = 0;
                                            switch (p.direction) {
                                                case Direction::fwd: a = load(x, xi), b = load(w, wi), dst = yi; break;
                                                case Direction::bwd_data:
                                                    a = load(y, yi), b = load(w, wi), dst = xi;
                                                    break;
                                                case Direction::bwd_filter:
                                                    a = load(x, xi), b = load(y, yi), dst = wi;
                                                    break;
                                            }
                                            r.value[static_cast<std::size_t>(dst)] += a * b;
                                            r.magnitude[static_cast<std::size_t>(dst)] += std::fabs(a * b);
                                        }
                            }
                }
            }
    }
}

}  // namespace

std::size_t oracle_bytes(const ConvProblem& p) {
    p.validate();
    const int64_t out = p.direction == Direction::fwd        ? p.y_elements()
                        : p.direction == Direction::bwd_data ? p.x_elements()
                                                             : p.w_elements();
    std::size_t bytes = 0;
    if (__builtin_mul_overflow(static_cast<std::size_t>(out), 2 * sizeof(double), &bytes))
        return std::numeric_limits<std::size_t>::max();
    return bytes;
}

OracleResult oracle(const HostTensors& t) {
    const ConvProblem& p = t.problem;
    OracleResult r;
    const std::size_t out_n = output_of(t).size() / size_of(p.dtype);
    r.value.assign(out_n, 0.0);
    r.magnitude.assign(out_n, 0.0);
    switch (p.dtype) {
        case DataType::f64:
            scatter(
                t, [](const std::byte* b, int64_t i) { return reinterpret_cast<const double*>(b)[i]; }, r);
            break;
        case DataType::f32:
            scatter(
                t,
                [](const std::byte* b, int64_t i) { return static_cast<double>(reinterpret_cast<const float*>(b)[i]); },
                r);
            break;
        case DataType::f16:
            scatter(
                t,
                [](const std::byte* b, int64_t i) {
                    return static_cast<double>(f16_to_float(reinterpret_cast<const uint16_t*>(b)[i]));
                },
                r);
            break;
        case DataType::bf16:
            scatter(
                t,
                [](const std::byte* b, int64_t i) {
                    return static_cast<double>(bf16_to_float(reinterpret_cast<const uint16_t*>(b)[i]));
                },
                r);
            break;
    }
    return r;
}

ErrorStats compare(const HostTensors& t, const OracleResult& ref) {
    const ConvProblem& p = t.problem;
    const std::vector<std::byte>& out = output_of(t);
    ErrorStats s;
    const double floor = error_floor(p);
    double num = 0, den = 0;
    for (std::size_t i = 0; i < ref.value.size(); ++i) {
        const double v = load_as_double(out.data(), p.dtype, i);
        if (!std::isfinite(v)) {
            if (s.finite) s.worst_index = i;
            s.finite = false;
            continue;
        }
        const double d = std::fabs(v - ref.value[i]);
        // The error beyond the bound's absolute term (error_floor), scaled by sum|a*b|.
        const double scaled = std::max(0.0, d - floor) / (ref.magnitude[i] + std::numeric_limits<double>::min());
        s.max_abs = std::max(s.max_abs, d);
        if (scaled > s.max_scaled && s.finite) {
            s.max_scaled = scaled;
            s.worst_index = i;
        }
        num += d * d;
        den += ref.value[i] * ref.value[i];
    }
    s.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    if (!s.finite) s.max_scaled = s.max_abs = s.rel_l2 = std::numeric_limits<double>::infinity();
    return s;
}

}  // namespace convtune
