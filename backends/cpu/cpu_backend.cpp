// The CPU backend: the algorithm list, and the cost model that ranks algorithms when benchmark
// mode is off (the CPU's "heuristic", what cuDNN's heuristics are for the GPU).
//
// Cost model: every algorithm family gets an estimated time
//     t = arithmetic / (efficiency * rate) + bytes_moved / bandwidth
// where `arithmetic` is the family's own multiply-add count (direct = the problem's MACs,
// Winograd F(m,3) = MACs / (m^2*9/(m+2)^2) in the transform domain plus its transforms, FFT =
// pointwise complex products plus transforms), `efficiency` is the fraction of the machine's
// FMA rate the family reaches (see Efficiency below: checked against bench/cpu),
// and `bytes_moved` counts the extra traffic the family creates (im2col's column matrix, layout
// reorders). Only the ranking matters, so the rate is a constant; the efficiencies carry the
// machine's character. Unsupported algorithms are left out; the reference comes last.
#include "cpu/cpu_backend.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "convtune/error.hpp"
#include "cpu/cpu_levels.hpp"
#include "cpu/isa.hpp"

namespace convtune {

namespace cpu {

// Each level's algorithms (level.cpp, compiled once per level).
#define CONVTUNE_X(ns, name) \
    namespace ns {           \
    const LevelAlgorithms& algorithms(); \
    }
CONVTUNE_CPU_LEVELS(CONVTUNE_X)
#undef CONVTUNE_X

const LevelAlgorithms& active_algorithms() {
    static const LevelAlgorithms* const a = [] {
        using Get = const LevelAlgorithms& (*)();
#define CONVTUNE_X(ns, name) &ns::algorithms,
        constexpr Get by_level[] = {CONVTUNE_CPU_LEVELS(CONVTUNE_X)};
#undef CONVTUNE_X
        return &by_level[active_level_index()]();
    }();
    return *a;
}

}  // namespace cpu

CpuAlgorithm::~CpuAlgorithm() = default;
std::string_view CpuAlgorithm::id() const { return id_; }
const Backend& CpuAlgorithm::backend() const { return cpu_backend(); }
Notes CpuAlgorithm::notes() const { return notes_; }

const Algorithm& cpu_direct() { return *cpu::active_algorithms().direct; }
const Algorithm& cpu_direct_blocked() { return *cpu::active_algorithms().direct_blocked; }
const Algorithm& cpu_im2col_gemm() { return *cpu::active_algorithms().im2col_gemm; }
const Algorithm& cpu_im2col_gemm_tf32() { return *cpu::active_algorithms().im2col_gemm_tf32; }
const Algorithm& cpu_winograd_f2x3() { return *cpu::active_algorithms().winograd_f2x3; }
const Algorithm& cpu_winograd_f4x3() { return *cpu::active_algorithms().winograd_f4x3; }
const Algorithm& cpu_fft() { return *cpu::active_algorithms().fft; }

namespace {

// Efficiency (fraction of FMA peak) per family and layout. Ranking only: their ratios are what
// matter. Set as first estimates before bench/cpu existed, then checked against its forward
// measurements on the AVX2 build host with OpenBLAS (docs/benchmarks.md, run D, 1 thread, NCHW
// and NHWC, 46 layer x layout cases): with these values the model picks the fastest own
// algorithm in 33 of 46 cases and its picks take 1.050x the fastest in total, which no point of a
// grid over all five values (direct_blocked 0.4-0.8, gemm 0.45-0.65, winograd 0.3-0.5) beats;
// the measured per-family medians of the fraction of peak (direct_blocked 0.55/0.62, gemm 0.62)
// rank worse (29 of 46, 1.071x). The misses are close races between im2col+GEMM and
// direct_blocked on 1x1 layers, and NHWC conv1 (3 input channels), where im2col+GEMM runs at 28%
// of peak and direct_blocked wins by 1.74x: the model has no term for short channel runs.
struct Efficiency {
    double direct_blocked_nhwc = 0.45, direct_blocked_nchw = 0.30;
    double gemm = 0.55, gemm_tf32 = 0.45;
    double winograd = 0.35;
    double fft = 0.30;
    double reference = 0.005;
};
constexpr double kRate = 1.0;        // arbitrary units: MAC per unit time at efficiency 1
constexpr double kBytesPerMac = 0.25;  // one byte of extra traffic costs this many MACs (memory vs FMA rate)

// The estimate for a (supported) problem, in arbitrary units, by the algorithm's family. An
// algorithm that is not a CpuAlgorithm has no family: an Error.
double estimate(const Algorithm& a, const ConvProblem& p) {
    static const Efficiency e;
    const auto* cpu = dynamic_cast<const CpuAlgorithm*>(&a);
    if (!cpu)
        throw Error("cpu cost model: '" + std::string(a.id()) + "' is not a CPU algorithm, it has no cost family");
    const CpuFamily family = cpu->family();
    const double macs = static_cast<double>(p.macs());
    const double es = static_cast<double>(size_of(p.dtype));
    const double traffic_mac = kBytesPerMac;
    switch (family) {
    case CpuFamily::reference: return macs / (e.reference * kRate);
    case CpuFamily::direct_blocked:
        return macs / ((p.layout == Layout::nhwc ? e.direct_blocked_nhwc : e.direct_blocked_nchw) * kRate);
    case CpuFamily::gemm:
    case CpuFamily::gemm_tf32: {
        const bool one_by_one = p.kernel_spatial() == 1 &&
                                std::all_of(p.stride.begin(), p.stride.end(), [](int64_t s) { return s == 1; }) &&
                                std::all_of(p.pad_begin.begin(), p.pad_begin.end(), [](int64_t v) { return v == 0; });
        // The column matrix is written once and read once.
        const double col =
            one_by_one ? 0 : 2.0 * static_cast<double>(p.n * p.c * p.kernel_spatial() * p.out_spatial()) * es;
        const double eff = family == CpuFamily::gemm ? e.gemm : e.gemm_tf32;
        return macs / (eff * kRate) + col * traffic_mac;
    }
    case CpuFamily::winograd_f2x3:
    case CpuFamily::winograd_f4x3: {
        const double m = family == CpuFamily::winograd_f2x3 ? 2 : 4, alpha = m + 2;
        const double tiles = static_cast<double>(p.n) * std::ceil(static_cast<double>(p.out(0)) / m) *
                             std::ceil(static_cast<double>(p.out(1)) / m);
        const double gemm = tiles * alpha * alpha * static_cast<double>(p.k * p.c_per_group());
        // Input and output transforms: ~2*alpha^3 adds per tile and channel, memory bound.
        const double transforms = tiles * static_cast<double>(p.c + p.k) * alpha * alpha * 4.0 * es;
        return gemm / (e.winograd * kRate) + transforms * traffic_mac;
    }
    case CpuFamily::fft: {
        double size = 1;
        for (int i = 0; i < p.spatial_dims; ++i)
            size *= static_cast<double>(p.in[static_cast<std::size_t>(i)] + p.pad_begin[static_cast<std::size_t>(i)] +
                                        p.pad_end[static_cast<std::size_t>(i)]);
        const double freq = size / 2 + 1;
        // Complex multiply-add = 4 real MACs per frequency per (n, k, c) triple.
        const double pointwise = 4.0 * freq * static_cast<double>(p.n * p.k * p.c_per_group());
        const double transforms = 2.5 * size * std::log2(std::max(2.0, size)) *
                                  static_cast<double>(p.n * p.c + p.n * p.k + p.k * p.c_per_group());
        return (pointwise + transforms) / (e.fft * kRate);
    }
    }
    throw Error("cpu cost model: '" + std::string(a.id()) + "' has an unknown cost family");
}

class CpuBackend final : public HostBackend {
public:
    CpuBackend() : list_{&cpu_direct(),        &cpu_direct_blocked(), &cpu_im2col_gemm(), &cpu_im2col_gemm_tf32(),
                         &cpu_winograd_f2x3(), &cpu_winograd_f4x3(),  &cpu_fft()} {}
    std::string_view name() const override { return "cpu"; }
    Availability availability() const override { return {}; }
    // The level is part of the device, as oneDNN's ISA is: timings tuned at one level do not
    // describe another.
    BackendIdentity identity() const override {
        return {"convtune-cpu", host_device_name() + ", ISA " + cpu::isa_levels().active, ""};
    }
    std::span<const Algorithm* const> algorithms() const override { return list_; }

    // The cost model's order. The ranking over it is the default one, and so are its named lists
    // (ListName): the heuristic list is every supporting algorithm, the fallback list is empty.
    std::vector<const Algorithm*> heuristic_order(const ConvProblem& p) const override {
        std::vector<std::pair<double, const Algorithm*>> ranked;
        for (const Algorithm* a : list_)
            if (a->supports(p)) ranked.emplace_back(estimate(*a, p), a);
        std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
        std::vector<const Algorithm*> r;
        for (const auto& [cost, a] : ranked) r.push_back(a);
        return r;
    }

    // PyTorch's enabled=False path runs its native im2col + GEMM; so does convtune's.
    const Algorithm* native_fallback(const ConvProblem& p) const override {
        return cpu_im2col_gemm().supports(p) ? &cpu_im2col_gemm() : &cpu_direct();
    }
    // PyTorch v7's fixed deterministic defaults are GEMM-based; the CPU's counterpart is im2col + GEMM.
    const Algorithm* fixed_default(const ConvProblem& p) const override { return native_fallback(p); }

private:
    std::vector<const Algorithm*> list_;
};

}  // namespace

Backend& cpu_backend() {
    static CpuBackend b;
    return b;
}

}  // namespace convtune
