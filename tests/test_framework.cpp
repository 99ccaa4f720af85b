// convtune::app::run_framework: a framework's (PyTorch's) tensors described by sizes and strides,
// run on the caller's memory through the selector (what convtune.torch calls).
#define BOOST_TEST_MODULE framework
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "convtune/app/framework.hpp"
#include "convtune/host_data.hpp"
#include "convtune/registry.hpp"

using namespace convtune;
using app::FrameworkCall;
using app::FrameworkTensor;

namespace {

// Dense strides of sizes in logical order, channels-first or channels-last.
std::vector<int64_t> strides(const std::vector<int64_t>& s, bool channels_last) {
    const std::size_t r = s.size();
    std::vector<int64_t> st(r);
    if (!channels_last) {
        int64_t acc = 1;
        for (std::size_t i = r; i-- > 0;) st[i] = acc, acc *= s[i];
    } else {
        int64_t acc = 1;
        st[1] = acc, acc *= s[1];
        for (std::size_t i = r; i-- > 2;) st[i] = acc, acc *= s[i];
        st[0] = acc;
    }
    return st;
}

FrameworkCall call(const ConvProblem& p, bool channels_last) {
    FrameworkCall c;
    c.direction = std::string(to_string(p.direction));
    c.dtype = std::string(to_string(p.dtype));
    c.x = {p.x_dims(), strides(p.x_dims(), channels_last), 0, 0};
    c.w = {p.w_dims(), strides(p.w_dims(), channels_last), 0, 0};
    c.y = {p.y_dims(), strides(p.y_dims(), channels_last), 0, 0};
    for (int i = 0; i < p.spatial_dims; ++i) {
        c.stride.push_back(p.stride[i]);
        c.padding.push_back(p.pad_begin[i]);
        c.dilation.push_back(p.dilation[i]);
    }
    c.groups = p.groups;
    c.backend = "cpu";
    return c;
}

const ConvProblem kP = ConvProblem::parse("n=2,c=4,k=6,g=2,in=7x5,ker=3x3,stride=2x1,dil=1x2,pad=1x2");

}  // namespace

BOOST_AUTO_TEST_CASE(layouts_come_from_the_strides) {
    for (bool last : {false, true}) {
        auto r = app::framework_problem(call(kP, last));
        BOOST_REQUIRE(std::holds_alternative<ConvProblem>(r));
        ConvProblem want = kP;
        want.layout = last ? Layout::nhwc : Layout::nchw;
        BOOST_TEST(std::get<ConvProblem>(r).to_string() == want.to_string());
    }
    // 1-D and 3-D.
    for (const char* text : {"n=2,c=3,k=5,in=9,ker=3,pad=1", "n=1,c=2,k=2,in=4x5x6,ker=3x1x3,stride=2x1x1"}) {
        const ConvProblem p = ConvProblem::parse(text);
        auto r = app::framework_problem(call(p, false));
        BOOST_REQUIRE(std::holds_alternative<ConvProblem>(r));
        BOOST_TEST(std::get<ConvProblem>(r).to_string() == p.to_string());
    }
}

BOOST_AUTO_TEST_CASE(size_one_strides_do_not_count_and_other_strides_are_refused) {
    FrameworkCall c = call(kP, false);
    c.x.sizes[0] = 1;  // n = 1: its stride is never stepped
    c.y.sizes[0] = 1;
    c.x.strides[0] = 12345;
    BOOST_TEST(std::holds_alternative<ConvProblem>(app::framework_problem(c)));
    c = call(kP, false);
    c.x.strides[3] = 2;  // a strided view (every other column)
    auto r = app::framework_problem(c);
    BOOST_REQUIRE(std::holds_alternative<std::string>(r));
    BOOST_TEST(std::get<std::string>(r).rfind("layout:", 0) == 0u, std::get<std::string>(r));
    // Mixed layouts are refused: the caller makes its tensors agree.
    c = call(kP, true);
    c.w = call(kP, false).w;
    BOOST_TEST(std::holds_alternative<std::string>(app::framework_problem(c)));
    // A geometry that does not produce y's sizes.
    c = call(kP, false);
    c.stride[0] = 1;
    BOOST_TEST(std::holds_alternative<std::string>(app::framework_problem(c)));
}

BOOST_AUTO_TEST_CASE(runs_on_the_callers_memory_with_the_callers_workspace) {
    for (bool last : {false, true}) {
        ConvProblem p = kP;
        p.layout = last ? Layout::nhwc : Layout::nchw;
        HostTensors want = make_host_tensors(p, 3), got = make_host_tensors(p, 3);
        BOOST_REQUIRE(convolution(p, want.views(), "cpu").ok());
        FrameworkCall c = call(kP, last);
        c.x.data = reinterpret_cast<std::uintptr_t>(got.x.data()), c.x.bytes = got.x.size();
        c.w.data = reinterpret_cast<std::uintptr_t>(got.w.data()), c.w.bytes = got.w.size();
        c.y.data = reinterpret_cast<std::uintptr_t>(got.y.data()), c.y.bytes = got.y.size();
        c.flags = parse_flags("benchmark=1");
        int asked = 0;
        std::vector<std::vector<std::byte>> keep;
        c.workspace = [&](std::size_t n) {
            ++asked;
            keep.emplace_back(n);
            return DeviceBuffer(keep.back().data(), n, [](void*) {});
        };
        Context ctx("");
        const app::FrameworkResult r = app::run_framework(ctx, c);
        BOOST_TEST(r.ran, r.detail);
        BOOST_TEST(r.source == "search");
        BOOST_TEST(!r.algorithm.empty());
        BOOST_TEST((r.problem && r.problem->to_string() == p.to_string()));
        BOOST_TEST(asked > 0);  // some CPU algorithm of this problem needs workspace (im2col)
        // Bitwise what convolution() computes with the same algorithm.
        HostTensors same = make_host_tensors(p, 3);
        BOOST_REQUIRE(execute(*find_backend("cpu").find(r.algorithm), same).status.ok());
        BOOST_TEST(std::memcmp(same.y.data(), got.y.data(), got.y.size()) == 0);
        // The second call is served from memory.
        BOOST_TEST(app::run_framework(ctx, c).source == "memory");
    }
}

BOOST_AUTO_TEST_CASE(what_cannot_run_is_a_fallback_not_an_error) {
    FrameworkCall c = call(kP, false);
    c.x.strides[2] = 1;
    Context ctx("");
    app::FrameworkResult r = app::run_framework(ctx, c);
    BOOST_TEST(!r.ran);
    BOOST_TEST(r.fallback == "layout");
    c = call(kP, false);
    c.dtype = "i8";
    r = app::run_framework(ctx, c);
    BOOST_TEST(r.fallback == "problem");
    BOOST_TEST(!r.detail.empty());
    // Tensors smaller than the problem needs: the selector's check refuses them.
    c = call(kP, false);
    r = app::run_framework(ctx, c);
    BOOST_TEST(!r.ran);
    BOOST_TEST(r.fallback == "unsupported");
    // A host device has no streams: the exchange is a no-op.
    BOOST_TEST(find_backend("cpu").exchange_thread_stream(reinterpret_cast<void*>(0x10)) == nullptr);
}

BOOST_AUTO_TEST_CASE(where_pytorch_runs_its_own_depthwise_kernel_cudnn_is_not_asked) {
    using app::pytorch_runs_own_kernel;
    // PyTorch's rule: depthwise (groups = C > 1, K a multiple of C), contiguous, not f16 -> its kernel.
    BOOST_TEST(pytorch_runs_own_kernel(32, 32, 32, false, "f32"));
    BOOST_TEST(pytorch_runs_own_kernel(32, 32, 64, false, "bf16"));
    // Not claimed: channels last (cuDNN), f16 (PyTorch's workload table decides), f64, grouped but
    // not depthwise, K not a multiple of C, one group.
    BOOST_TEST(!pytorch_runs_own_kernel(32, 32, 32, true, "f32"));
    BOOST_TEST(!pytorch_runs_own_kernel(32, 32, 32, false, "f16"));
    BOOST_TEST(!pytorch_runs_own_kernel(32, 32, 32, false, "f64"));
    BOOST_TEST(!pytorch_runs_own_kernel(8, 32, 32, false, "f32"));
    BOOST_TEST(!pytorch_runs_own_kernel(16, 16, 24, false, "f32"));
    BOOST_TEST(!pytorch_runs_own_kernel(1, 1, 1, false, "f32"));
    // As a refusal: on cuda only, after the other rules, allocation-free when taken.
    const app::FrameworkOperand f32{"cuda", 0, "torch.strided", "torch.float32"};
    int32_t home = -1;
    app::FrameworkRequest q{.device = "cuda", .x = f32, .w = f32, .home = &home, .groups = 32, .channels = 32,
                            .out_channels = 32};
    const app::FrameworkRefusal why = app::framework_refusal(q);
    BOOST_REQUIRE(why);
    BOOST_TEST(std::string(why.category) == "pytorch_kernel");
    BOOST_TEST(why.detail.find("depthwise") != std::string::npos);
    q.channels_last = true;
    BOOST_TEST(!app::framework_refusal(q));
    q.channels_last = false;
    q.enabled = false;
    BOOST_TEST(std::string(app::framework_refusal(q).category) == "cudnn_disabled");
    const app::FrameworkOperand cpu{"cpu", -1, "torch.strided", "torch.float32"};
    BOOST_TEST(!app::framework_refusal(
        {.device = "cpu", .x = cpu, .w = cpu, .groups = 32, .channels = 32, .out_channels = 32}));
    bool listed = false;
    for (const char* c : app::framework_fallback_categories()) listed |= std::string(c) == "pytorch_kernel";
    BOOST_TEST(listed);
}

BOOST_AUTO_TEST_CASE(refusals_are_decided_from_the_frameworks_names_in_order) {
    const app::FrameworkOperand f32{"cpu", -1, "torch.strided", "torch.float32"};
    app::FrameworkRequest q{.device = "cpu", .x = f32, .w = f32};
    BOOST_TEST(!app::framework_refusal(q));
    BOOST_TEST(app::framework_refusal(q).detail.empty());
    auto category = [&](app::FrameworkRequest r) {
        const app::FrameworkRefusal why = app::framework_refusal(r);
        return std::string(why ? why.category : "") + "|" + why.detail;
    };
    app::FrameworkRequest r = q;
    r.w.device = "cuda", r.w.index = 1;
    BOOST_TEST(category(r) == "device|tensors on cpu / cuda:1; convtune.torch is enabled for cpu");
    r = q;
    r.x.layout = "torch.sparse_coo";
    r.x.dtype = "torch.int64";  // the layout's rule comes first
    BOOST_TEST(category(r) == "layout|tensor layout torch.sparse_coo / torch.strided");
    r = q;
    r.w.dtype = "torch.float64";
    BOOST_TEST(category(r) == "dtype|torch.float32 / torch.float64");
    r = q;
    r.x.dtype = r.w.dtype = "torch.int8";
    BOOST_TEST(category(r) == "dtype|torch.int8 / torch.int8");
    r = q;
    r.transposed = true;
    r.enabled = false;
    BOOST_TEST(category(r) == "transposed|transposed convolutions run PyTorch's own path");
    r = q;
    r.enabled = false;
    BOOST_TEST(category(r) == "cudnn_disabled|torch.backends.cudnn.enabled is False: PyTorch's own kernels");
    // cuda: the first call taken claims its device; a call on another is refused; a refused call claims nothing.
    int32_t home = -1;
    app::FrameworkRequest g{.device = "cuda",
                            .x = {"cuda", 1, "torch.strided", "torch.float16"},
                            .w = {"cuda", 1, "torch.strided", "torch.float16"},
                            .transposed = true,
                            .home = &home};
    BOOST_TEST(category(g).starts_with("transposed|"));
    BOOST_TEST(home == -1);
    g.transposed = false;
    BOOST_TEST(!app::framework_refusal(g));
    BOOST_TEST(home == 1);
    g.x.index = g.w.index = 0;
    BOOST_TEST(category(g) == "device|cuda:0: convtune's cuDNN handles live on cuda:1, the first device it ran on");
    BOOST_TEST(home == 1);
    std::vector<std::string> all;
    for (const char* c : app::framework_fallback_categories()) all.emplace_back(c);
    // framework_refusal's 6 (device, layout, dtype, transposed, cudnn_disabled, pytorch_kernel), run_framework's 3
    BOOST_TEST(all.size() == 9u);
}

BOOST_AUTO_TEST_CASE(pytorch_flags_as_convtunes) {
    FlagValues base;
    base.benchmark_limit = 7;
    app::TorchFlagValues t{.enabled = false, .benchmark = true, .deterministic = true, .allow_tf32 = false};
    FlagValues f = app::flags_from_torch(base, t, "pytorch");
    BOOST_TEST(!f.enabled);
    BOOST_TEST(f.benchmark);
    BOOST_TEST(f.deterministic);
    BOOST_TEST(!f.allow_tf32);
    BOOST_TEST(f.benchmark_limit == 7);  // no such flag in this PyTorch: convtune's stays
    BOOST_TEST(to_string(f.policy) == "pytorch");
    BOOST_TEST(app::torch_flag_keys(t).size() == 5u);
    t.benchmark_limit = 3;
    BOOST_TEST(app::flags_from_torch(base, t, "convtune").benchmark_limit == 3);
    BOOST_TEST(app::torch_flag_keys(t).size() == 6u);
    t.benchmark_limit = int64_t{1} << 40;
    BOOST_CHECK_THROW(app::flags_from_torch(base, t, "convtune"), Error);
    BOOST_CHECK_THROW(app::flags_from_torch(base, {}, "fastest"), Error);
    // The framework's dtype names are convtune's too.
    BOOST_TEST(std::string(app::framework_dtype("torch.bfloat16")) == "bf16");
    BOOST_TEST(app::framework_dtype("torch.int8") == nullptr);
    FrameworkCall c = call(kP, false);
    c.dtype = "torch.float64";
    const auto p = app::framework_problem(c);
    BOOST_REQUIRE(std::holds_alternative<ConvProblem>(p));
    BOOST_TEST((std::get<ConvProblem>(p).dtype == DataType::f64));
}
