// cpu.direct — the naive direct convolution, the reference every other CPU algorithm is
// measured against (and the fallback that supports everything).
//
// Computes: fwd    y[n,k,o]   = sum_{c in group(k), r} x[n,c,o*s-pb+r*d] * w[k,c',r]
//           bwd_data dx[n,c,i] = sum_{k in group(c), r : i = o*s-pb+r*d} dy[n,k,o] * w[k,c',r]
//           bwd_filter dw[k,c',r] = sum_{n,o} x[n,c,o*s-pb+r*d] * dy[n,k,o]
// Applies to every valid problem: 1-3 spatial dims, groups, stride, dilation, asymmetric and
// negative end padding, both layouts, f32/f16/bf16 storage (f64 too).
// Workspace: none. Numerics: each output is one sequential sum in f32 (f64 for f64 data),
// in a fixed order, so reruns are bitwise identical. Parallel over (n, k) / (n, c) / (k, c')
// with OpenMP; each output element is owned by one thread.
#include "convtune/tensor.hpp"
#include "cpu/level.hpp"
#include "cpu/elem.hpp"

namespace convtune::cpu::CONVTUNE_ISA_NS {

namespace {

using cpu::dispatch_dtype;

template <class E>
void direct(const ConvProblem& p, const ConvTensors& t) {
    using T = typename E::T;
    using Acc = typename E::Acc;
    const Strides xs = x_strides(p), ws = w_strides(p), ys = y_strides(p);
    const Dims od = out_dims(p);
    const Dims& id = p.in;
    const Dims& kd = p.kernel;
    const Dims& st = p.stride;
    const Dims& dl = p.dilation;
    const Dims& pb = p.pad_begin;
    const int64_t cpg = p.c_per_group(), kpg = p.k_per_group();
    const T* x = static_cast<const T*>(t.x.data);
    const T* w = static_cast<const T*>(t.w.data);
    const T* y = static_cast<const T*>(t.y.data);
    T* xo = static_cast<T*>(t.x.data);
    T* wo = static_cast<T*>(t.w.data);
    T* yo = static_cast<T*>(t.y.data);

    if (p.direction == Direction::fwd) {
#pragma omp parallel for collapse(2) schedule(static)
        for (int64_t n = 0; n < p.n; ++n)
            for (int64_t k = 0; k < p.k; ++k) {
                const int64_t g = k / kpg;
                for (int64_t o0 = 0; o0 < od[0]; ++o0)
                    for (int64_t o1 = 0; o1 < od[1]; ++o1)
                        for (int64_t o2 = 0; o2 < od[2]; ++o2) {
                            Acc acc = 0;
                            for (int64_t cc = 0; cc < cpg; ++cc) {
                                const int64_t c = g * cpg + cc;
                                for (int64_t r0 = 0; r0 < kd[0]; ++r0) {
                                    const int64_t i0 = o0 * st[0] - pb[0] + r0 * dl[0];
                                    if (i0 < 0 || i0 >= id[0]) continue;
                                    for (int64_t r1 = 0; r1 < kd[1]; ++r1) {
                                        const int64_t i1 = o1 * st[1] - pb[1] + r1 * dl[1];
                                        if (i1 < 0 || i1 >= id[1]) continue;
                                        for (int64_t r2 = 0; r2 < kd[2]; ++r2) {
                                            const int64_t i2 = o2 * st[2] - pb[2] + r2 * dl[2];
                                            if (i2 < 0 || i2 >= id[2]) continue;
                                            acc += static_cast<Acc>(E::load(x[xs.at(n, c, i0, i1, i2)])) *
                                                   static_cast<Acc>(E::load(w[ws.at(k, cc, r0, r1, r2)]));
                                        }
                                    }
                                }
                            }
                            yo[ys.at(n, k, o0, o1, o2)] = E::store(acc);
                        }
            }
    } else if (p.direction == Direction::bwd_data) {
#pragma omp parallel for collapse(2) schedule(static)
        for (int64_t n = 0; n < p.n; ++n)
            for (int64_t c = 0; c < p.c; ++c) {
                const int64_t g = c / cpg, cc = c - g * cpg;
                for (int64_t i0 = 0; i0 < id[0]; ++i0)
                    for (int64_t i1 = 0; i1 < id[1]; ++i1)
                        for (int64_t i2 = 0; i2 < id[2]; ++i2) {
                            Acc acc = 0;
                            for (int64_t kk = 0; kk < kpg; ++kk) {
                                const int64_t k = g * kpg + kk;
                                for (int64_t r0 = 0; r0 < kd[0]; ++r0) {
                                    const int64_t t0 = i0 + pb[0] - r0 * dl[0];
                                    if (t0 < 0 || t0 % st[0] != 0 || t0 / st[0] >= od[0]) continue;
                                    for (int64_t r1 = 0; r1 < kd[1]; ++r1) {
                                        const int64_t t1 = i1 + pb[1] - r1 * dl[1];
                                        if (t1 < 0 || t1 % st[1] != 0 || t1 / st[1] >= od[1]) continue;
                                        for (int64_t r2 = 0; r2 < kd[2]; ++r2) {
                                            const int64_t t2 = i2 + pb[2] - r2 * dl[2];
                                            if (t2 < 0 || t2 % st[2] != 0 || t2 / st[2] >= od[2]) continue;
                                            acc += static_cast<Acc>(
                                                       E::load(y[ys.at(n, k, t0 / st[0], t1 / st[1], t2 / st[2])])) *
                                                   static_cast<Acc>(E::load(w[ws.at(k, cc, r0, r1, r2)]));
                                        }
                                    }
                                }
                            }
                            xo[xs.at(n, c, i0, i1, i2)] = E::store(acc);
                        }
            }
    } else {
#pragma omp parallel for collapse(2) schedule(static)
        for (int64_t k = 0; k < p.k; ++k)
            for (int64_t cc = 0; cc < cpg; ++cc) {
                const int64_t g = k / kpg, c = g * cpg + cc;
                for (int64_t r0 = 0; r0 < kd[0]; ++r0)
                    for (int64_t r1 = 0; r1 < kd[1]; ++r1)
                        for (int64_t r2 = 0; r2 < kd[2]; ++r2) {
                            Acc acc = 0;
                            for (int64_t n = 0; n < p.n; ++n)
                                for (int64_t o0 = 0; o0 < od[0]; ++o0) {
                                    const int64_t i0 = o0 * st[0] - pb[0] + r0 * dl[0];
                                    if (i0 < 0 || i0 >= id[0]) continue;
                                    for (int64_t o1 = 0; o1 < od[1]; ++o1) {
                                        const int64_t i1 = o1 * st[1] - pb[1] + r1 * dl[1];
                                        if (i1 < 0 || i1 >= id[1]) continue;
                                        for (int64_t o2 = 0; o2 < od[2]; ++o2) {
                                            const int64_t i2 = o2 * st[2] - pb[2] + r2 * dl[2];
                                            if (i2 < 0 || i2 >= id[2]) continue;
                                            acc += static_cast<Acc>(E::load(x[xs.at(n, c, i0, i1, i2)])) *
                                                   static_cast<Acc>(E::load(y[ys.at(n, k, o0, o1, o2)]));
                                        }
                                    }
                                }
                            wo[ws.at(k, cc, r0, r1, r2)] = E::store(acc);
                        }
            }
    }
}

class Direct final : public CpuAlgorithm {
public:
    Direct() : CpuAlgorithm("cpu.direct", Note::reference, CpuFamily::reference) {}
    Support supports(const ConvProblem& p) const override {
        if (auto e = p.check()) return Support::no("invalid problem: " + *e);
        return Support::yes();
    }
    std::size_t workspace_size(const ConvProblem&) const override { return 0; }
    Status run(const ConvProblem& p, const ConvTensors& t, Workspace) const override {
        dispatch_dtype(p.dtype, [&](auto e) { direct<decltype(e)>(p, t); });
        return Status::success();
    }
};

}  // namespace

const Algorithm& cpu_direct() {
    static const Direct a;
    return a;
}

}  // namespace convtune::cpu::CONVTUNE_ISA_NS
