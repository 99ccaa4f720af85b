#include "example_backend.hpp"

namespace convtune::example {

namespace {

// y[n][k][o] = sum over c, r of x[n][c][o * stride - pad + r * dilation] * w[k][c][r], over the
// three spatial slots (unused ones are neutral), accumulated in double. No workspace.
class Direct final : public Algorithm {
public:
    std::string_view id() const override { return "example.direct"; }
    const Backend& backend() const override { return example_backend(); }
    Notes notes() const override { return {}; }
    Support supports(const ConvProblem& p) const override {
        if (auto e = p.check()) return Support::no("invalid problem: " + *e);
        if (p.direction != Direction::fwd) return Support::no("forward only");
        if (p.dtype != DataType::f32) return Support::no("f32 only");
        if (p.layout != Layout::nchw) return Support::no("NCHW only");
        if (p.groups != 1) return Support::no("groups = 1 only");
        return Support::yes();
    }
    std::size_t workspace_size(const ConvProblem&) const override { return 0; }
    Status run(const ConvProblem& p, const ConvTensors& t, Workspace) const override {
        if (!supports(p)) return Status::unsupported("example.direct: " + supports(p).reason);
        const float* x = static_cast<const float*>(t.x.data);
        const float* w = static_cast<const float*>(t.w.data);
        float* y = static_cast<float*>(t.y.data);
        const int64_t O[3] = {p.out(0), p.out(1), p.out(2)};
        for (int64_t n = 0; n < p.n; ++n)
            for (int64_t k = 0; k < p.k; ++k)
                for (int64_t o0 = 0; o0 < O[0]; ++o0)
                    for (int64_t o1 = 0; o1 < O[1]; ++o1)
                        for (int64_t o2 = 0; o2 < O[2]; ++o2) {
                            double acc = 0;
                            for (int64_t c = 0; c < p.c; ++c)
                                for (int64_t r0 = 0; r0 < p.kernel[0]; ++r0)
                                    for (int64_t r1 = 0; r1 < p.kernel[1]; ++r1)
                                        for (int64_t r2 = 0; r2 < p.kernel[2]; ++r2) {
                                            const int64_t i0 = o0 * p.stride[0] - p.pad_begin[0] + r0 * p.dilation[0];
                                            const int64_t i1 = o1 * p.stride[1] - p.pad_begin[1] + r1 * p.dilation[1];
                                            const int64_t i2 = o2 * p.stride[2] - p.pad_begin[2] + r2 * p.dilation[2];
                                            if (i0 < 0 || i0 >= p.in[0] || i1 < 0 || i1 >= p.in[1] || i2 < 0 ||
                                                i2 >= p.in[2])
                                                continue;
                                            const float xv =
                                                x[(((n * p.c + c) * p.in[0] + i0) * p.in[1] + i1) * p.in[2] + i2];
                                            const float wv = w[(((k * p.c + c) * p.kernel[0] + r0) * p.kernel[1] + r1) *
                                                                   p.kernel[2] +
                                                               r2];
                                            acc += static_cast<double>(xv) * wv;
                                        }
                            y[(((n * p.k + k) * O[0] + o0) * O[1] + o1) * O[2] + o2] = static_cast<float>(acc);
                        }
        return Status::success();
    }
};

// The Catalogue's defaults: the fixed order is the heuristic's, and its ranking's named lists
// (ListName) are the defaults (heuristic: every supporting algorithm; fallback: none).
class ExampleBackend final : public HostBackend {
public:
    std::string_view name() const override { return "example"; }
    Availability availability() const override { return {}; }
    BackendIdentity identity() const override { return {"example 1.0", host_device_name(), ""}; }
    std::span<const Algorithm* const> algorithms() const override { return list_; }

private:
    Direct direct_;
    const Algorithm* list_[1] = {&direct_};
};

}  // namespace

Backend& example_backend() {
    static ExampleBackend b;
    return b;
}

}  // namespace convtune::example
