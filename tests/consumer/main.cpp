// Runs one convolution through an installed convtune the way a user would (benchmark=1, then
// convtune::convolution), and checks it against a naive loop in double within the documented
// error bound of the algorithm the selector chose (docs/architecture.md, Numerics: the bound is
// relative to sum |x*w| of each output element). Then parses a trace line with convtune::sim.
// Prints "consumer: ok ..." and exits 0, or says what went wrong and exits 1.
#include <cmath>
#include <cstdio>
#include <vector>

#include "convtune/convtune.hpp"
#include "convtune/problem.hpp"
#include "convtune/registry.hpp"
#include "convtune/sim/stream.hpp"

int main() {
    using namespace convtune;
    const ConvProblem p = ConvProblem::parse("n=2,c=4,k=6,g=2,in=7x5,ker=3x3,stride=2x1,pad=1x1");
    std::vector<float> x(static_cast<std::size_t>(p.x_elements())), w(static_cast<std::size_t>(p.w_elements())),
        y(static_cast<std::size_t>(p.y_elements()), NAN);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7 % 13)) / 13.0f - 0.5f;
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 5 % 11)) / 11.0f - 0.5f;

    FlagValues f = global_flags();
    f.benchmark = true;
    set_global_flags(f);
    const ConvTensors t{{x.data(), x.size() * sizeof(float)},
                        {w.data(), w.size() * sizeof(float)},
                        {y.data(), y.size() * sizeof(float)}};
    const Status s = convolution(p, t, "cpu");
    if (!s.ok()) {
        std::printf("consumer: convolution failed: %s\n", s.message.c_str());
        return 1;
    }
    // The algorithm that ran: the selector's cached decision for the same problem and flags.
    const auto decision = default_context().selector(find_backend("cpu")).select(p, current_flags());
    const double bound = find_algorithm(decision->algorithm).error_bound(p);

    // Naive NCHW reference in double: the exact result and sum |x*w| per output element.
    const int64_t oh = p.out(0), ow = p.out(1), cg = p.c_per_group(), kg = p.k_per_group();
    double worst = 0;  // max |y - exact| / sum|x*w|
    for (int64_t n = 0; n < p.n; ++n)
        for (int64_t k = 0; k < p.k; ++k)
            for (int64_t i = 0; i < oh; ++i)
                for (int64_t j = 0; j < ow; ++j) {
                    double acc = 0, abs_acc = 0;
                    const int64_t g = k / kg;
                    for (int64_t c = 0; c < cg; ++c)
                        for (int64_t r = 0; r < p.kernel[0]; ++r)
                            for (int64_t q = 0; q < p.kernel[1]; ++q) {
                                const int64_t hi = i * p.stride[0] - p.pad_begin[0] + r,
                                              wi = j * p.stride[1] - p.pad_begin[1] + q;
                                if (hi < 0 || hi >= p.in[0] || wi < 0 || wi >= p.in[1]) continue;
                                const double a =
                                    x[static_cast<std::size_t>(((n * p.c + g * cg + c) * p.in[0] + hi) * p.in[1] + wi)];
                                const double b =
                                    w[static_cast<std::size_t>(((k * cg + c) * p.kernel[0] + r) * p.kernel[1] + q)];
                                acc += a * b;
                                abs_acc += std::fabs(a * b);
                            }
                    const double got = y[static_cast<std::size_t>(((n * p.k + k) * oh + i) * ow + j)];
                    const double rel =
                        std::isnan(got) ? INFINITY : std::fabs(got - acc) / (abs_acc > 0 ? abs_acc : 1.0);
                    worst = std::fmax(worst, rel);
                }
    if (!(worst <= bound)) {
        std::printf("consumer: wrong result from %s: relative error %.3g above its bound %.3g\n",
                    decision->algorithm.c_str(), worst, bound);
        return 1;
    }
    const auto trace = sim::parse_trace(p.to_string() + " x2\n");
    if (trace.size() != 1 || trace[0].size() != 1 || trace[0][0].count != 2 || !(trace[0][0].problem == p)) {
        std::printf("consumer: trace round trip failed\n");
        return 1;
    }
    std::printf("consumer: ok %s with %s (%s), relative error %.3g <= bound %.3g\n", p.to_string().c_str(),
                decision->algorithm.c_str(), std::string(to_string(decision->source)).c_str(), worst, bound);
    return 0;
}
