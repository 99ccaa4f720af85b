#include "convtune/app/framework.hpp"

#include <atomic>
#include <limits>
#include <string>

#include "convtune/error.hpp"
#include "convtune/registry.hpp"
#include "convtune/tensor.hpp"

namespace convtune::app {

namespace {

std::string list(const std::vector<int64_t>& v) {
    std::string r = "(";
    for (std::size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
    return r + ")";
}

// Whether t's strides are those of `layout` (tensor.hpp) for its sizes; the stride of a
// dimension of size 1 does not matter (it is never stepped), as in PyTorch's is_contiguous.
bool has_layout(const FrameworkTensor& t, Layout layout, int nd) {
    Dims spatial{1, 1, 1};
    for (int i = 0; i < nd; ++i) spatial[static_cast<std::size_t>(i)] = t.sizes[static_cast<std::size_t>(i) + 2];
    const Strides s = make_strides(layout, nd, t.sizes[1], spatial);
    const std::size_t rank = static_cast<std::size_t>(nd) + 2;
    for (std::size_t i = 0; i < rank; ++i) {
        const int64_t want = i == 0 ? s.outer : i == 1 ? s.channel : s.spatial[i - 2];
        if (t.sizes[i] != 1 && t.strides[i] != want) return false;
    }
    return true;
}

// Whether `sizes` (of rank nd + 2) are (a, b, rest(0), ..., rest(nd - 1)): the check of the
// weight's and output's sizes, made at every framework call without building the expected list.
template <class Rest>
bool sizes_are(const std::vector<int64_t>& sizes, int64_t a, int64_t b, int nd, Rest rest) {
    if (sizes.size() != static_cast<std::size_t>(nd) + 2 || sizes[0] != a || sizes[1] != b) return false;
    for (int i = 0; i < nd; ++i)
        if (sizes[static_cast<std::size_t>(i) + 2] != rest(i)) return false;
    return true;
}

// The nd values from v on, then `neutral`.
Dims dims(const int64_t* v, int nd, int64_t neutral) {
    Dims d{neutral, neutral, neutral};
    for (int i = 0; i < nd; ++i) d[static_cast<std::size_t>(i)] = v[i];
    return d;
}

// PyTorch's text of a device: "cpu", "cuda:1".
std::string device_text(const FrameworkOperand& t) {
    std::string r(t.device);
    if (t.index >= 0) {
        r += ':';
        r += std::to_string(t.index);
    }
    return r;
}

std::string pair_text(std::string_view x, std::string_view w) {
    std::string r(x);
    r += " / ";
    r += w;
    return r;
}

FrameworkRefusal refused(const char* category, std::string detail) { return {category, std::move(detail)}; }

constexpr const char* kFallbackCategories[] = {"device",         "layout",         "dtype",   "transposed",
                                               "cudnn_disabled", "pytorch_kernel", "problem", "unsupported",
                                               "failed"};

}  // namespace

FlagValues flags_from_torch(FlagValues f, const TorchFlagValues& t, std::string_view policy) {
    f.enabled = t.enabled;
    f.benchmark = t.benchmark;
    f.deterministic = t.deterministic;
    f.allow_tf32 = t.allow_tf32;
    if (t.benchmark_limit >= 0) {
        if (t.benchmark_limit > std::numeric_limits<int>::max())
            throw Error("benchmark_limit: must be <= " + std::to_string(std::numeric_limits<int>::max()) + " (got " +
                        std::to_string(t.benchmark_limit) + ")");
        f.benchmark_limit = static_cast<int>(t.benchmark_limit);
    }
    f.policy = parse_policy(policy);
    return f;
}

std::vector<std::string_view> torch_flag_keys(const TorchFlagValues& t) {
    std::vector<std::string_view> keys{"enabled", "benchmark", "deterministic", "allow_tf32"};
    if (t.benchmark_limit >= 0) keys.emplace_back("benchmark_limit");
    keys.emplace_back("policy");
    return keys;
}

const char* framework_dtype(std::string_view name) {
    static constexpr std::pair<std::string_view, const char*> kNames[] = {
        {"torch.float32", "f32"}, {"torch.float16", "f16"}, {"torch.bfloat16", "bf16"}, {"torch.float64", "f64"}};
    for (const auto& [framework, ours] : kNames)
        if (name == framework) return ours;
    return nullptr;
}

FrameworkRefusal framework_refusal(const FrameworkRequest& r) {
    if (r.x.device != r.device || r.w.device != r.device)
        return refused("device", "tensors on " + pair_text(device_text(r.x), device_text(r.w)) +
                                     "; convtune.torch is enabled for " + std::string(r.device));
    constexpr std::string_view strided = "torch.strided";
    if (r.x.layout != strided || r.w.layout != strided)
        return refused("layout", "tensor layout " + pair_text(r.x.layout, r.w.layout));
    const char* const dtype = framework_dtype(r.x.dtype);  // convtune's name, nullptr where it runs none
    if (!dtype || r.w.dtype != r.x.dtype) return refused("dtype", pair_text(r.x.dtype, r.w.dtype));
    if (r.transposed) return refused("transposed", "transposed convolutions run PyTorch's own path");
    if (r.device == "cuda" && r.home) {
        std::atomic_ref<int32_t> home(*r.home);
        int32_t expected = -1;
        home.compare_exchange_strong(expected, r.x.index);
        const int32_t first = home.load();
        if (r.x.index != first)
            return refused("device", device_text(r.x) + ": convtune's cuDNN handles live on cuda:" +
                                         std::to_string(first) + ", the first device it ran on");
    }
    if (!r.enabled) return refused("cudnn_disabled", "torch.backends.cudnn.enabled is False: PyTorch's own kernels");
    if (r.device == "cuda" && pytorch_runs_own_kernel(r.groups, r.channels, r.out_channels, r.channels_last, dtype))
        return refused("pytorch_kernel", "PyTorch runs its own CUDA depthwise kernel here, not cuDNN (" +
                                             std::string(r.x.dtype) +
                                             ", contiguous memory format): no search to pay, as with PyTorch");
    return {};
}

std::span<const char* const> framework_fallback_categories() { return kFallbackCategories; }

std::variant<ConvProblem, std::string> framework_problem(const FrameworkCall& c) {
    const std::size_t rank = c.x.sizes.size();
    if (rank < 3 || rank > 5)
        return "spatial_dims: tensors of rank 3, 4 or 5 (1-D to 3-D), got rank " + std::to_string(rank);
    const int nd = static_cast<int>(rank) - 2;
    for (const auto* t : {&c.x, &c.w, &c.y})
        if (t->sizes.size() != rank || t->strides.size() != rank)
            return "rank: x, w and y must have the same rank with one stride per size";
    for (const auto* v : {&c.stride, &c.padding, &c.dilation})
        if (v->size() != static_cast<std::size_t>(nd))
            return "geometry: stride, padding and dilation need one value per spatial dim";
    ConvProblem p;
    try {
        p.direction = parse_direction(c.direction);
        const char* ours = framework_dtype(c.dtype);
        p.dtype = parse_dtype(ours ? std::string_view(ours) : std::string_view(c.dtype));
    } catch (const Error& e) {
        return std::string(e.what());
    }
    // channels-first unless every tensor is channels-last (a tensor whose strides fit both, such
    // as a 1x1 kernel's weight, counts as either).
    const FrameworkTensor* ts[3] = {&c.x, &c.w, &c.y};
    bool first = true, last = true;
    for (const FrameworkTensor* t : ts) {
        first = first && has_layout(*t, Layout::nchw, nd);
        last = last && has_layout(*t, Layout::nhwc, nd);
    }
    if (!first && !last)
        return "layout: x " + list(c.x.strides) + ", w " + list(c.w.strides) + ", y " + list(c.y.strides) +
               ": strides must be those of one dense layout for all three tensors, channels-first or channels-last";
    p.layout = first ? Layout::nchw : Layout::nhwc;
    p.spatial_dims = nd;
    p.n = c.x.sizes[0];
    p.c = c.x.sizes[1];
    p.k = c.w.sizes[0];
    p.groups = c.groups;
    p.in = dims(c.x.sizes.data() + 2, nd, 1);
    p.kernel = dims(c.w.sizes.data() + 2, nd, 1);
    p.stride = dims(c.stride.data(), nd, 1);
    p.dilation = dims(c.dilation.data(), nd, 1);
    p.pad_begin = dims(c.padding.data(), nd, 0);
    p.pad_end = p.pad_begin;
    if (std::optional<std::string> why = p.check()) return *why;
    if (!sizes_are(c.w.sizes, p.k, p.c_per_group(), nd, [&](int i) { return p.kernel[static_cast<std::size_t>(i)]; }))
        return "w: sizes " + list(c.w.sizes) + " do not match the problem's " + list(p.w_dims());
    if (!sizes_are(c.y.sizes, p.n, p.k, nd, [&](int i) { return p.out(i); }))
        return "y: sizes " + list(c.y.sizes) + " do not match the problem's " + list(p.y_dims());
    return p;
}

bool pytorch_runs_own_kernel(int64_t groups, int64_t channels, int64_t out_channels, bool channels_last,
                             std::string_view dtype) {
    const bool depthwise = groups > 1 && groups == channels && out_channels % channels == 0;
    return depthwise && !channels_last && (dtype == "f32" || dtype == "bf16");
}

FrameworkResult run_framework(Context& ctx, const FrameworkCall& c) {
    Backend& b = find_backend(c.backend);
    require_available(b);
    FrameworkResult r;
    auto problem = framework_problem(c);
    if (auto* why = std::get_if<std::string>(&problem)) {
        r.fallback = why->rfind("layout:", 0) == 0 ? "layout" : "problem";
        r.detail = *why;
        return r;
    }
    const ConvProblem& p = std::get<ConvProblem>(problem);
    r.problem = p;
    const ConvTensors t{{reinterpret_cast<void*>(c.x.data), c.x.bytes},
                        {reinterpret_cast<void*>(c.w.data), c.w.bytes},
                        {reinterpret_cast<void*>(c.y.data), c.y.bytes}};
    // The caller's stream for this call only: the thread's previous stream comes back after it.
    struct StreamGuard {
        const Backend& b;
        void* old;
        StreamGuard(const Backend& be, void* s) : b(be), old(be.exchange_thread_stream(s)) {}
        ~StreamGuard() { b.exchange_thread_stream(old); }
    } guard(b, c.stream);
    RunInfo d;
    Status s;
    try {
        s = ctx.selector(b).run(p, t, c.flags, c.workspace ? &c.workspace : nullptr, &d);
    } catch (const Error& e) {
        // No algorithm of the backend can run p under these flags (the selector's message lists
        // why each was rejected), or tensors smaller than p needs.
        r.fallback = "unsupported";
        r.detail = e.what();
        return r;
    }
    r.source = std::string(to_string(d.source));
    r.search_ms = d.search_ms;
    r.algorithm = d.algorithm;
    if (!s.ok()) {
        r.fallback = "failed";
        r.detail = std::string(s.code_name()) + ": " + s.message;
        return r;
    }
    r.ran = true;
    return r;
}

}  // namespace convtune::app
