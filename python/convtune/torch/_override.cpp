// convtune.torch's C++ override of aten::convolution: the hot path of convtune.torch without
// Python in it. Compiled where it runs, against the PyTorch that is imported (convtune/torch/_build.py),
// and loaded as the module convtune.torch._override; it does not link convtune: each convolution
// goes through the C interface of convtune._convtune (convtune_framework_api.h) into the one copy of
// convtune in the process (its registry, selectors, tuning databases and flags).
//
// The same semantics as the Python kernels of convtune/torch/__init__.py, reason for reason: which
// calls convtune takes and what PyTorch's flags mean are convtune's (the C interface's refuse() and
// run(): convtune::app::framework_refusal, flags_from_torch), called by both; this file is glue:
//   enable(...)   a torch::Library (IMPL, "aten") with kernels at the device's key (CPU / CUDA) for
//                 `convolution` (the forward through convtune) and `convolution_backward` (backward
//                 data and backward filter through convtune): PyTorch's own autograd kernels stay,
//                 so a convolution's graph node is PyTorch's ConvolutionBackward0, whose backward
//                 (and double backward) calls convolution_backward at the device's key
//   disable()     destroys the library: its registrations go, PyTorch's kernels run again
//   stats(h) / reset_stats(h)
// Tensors that carry the Python dispatch key (FakeTensor, tensor subclasses) are classified by the
// Python side (its `classify`), on that cold path only.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <pybind11/pybind11.h>
#include <ATen/ops/convolution_backward_native.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/library.h>
#include <torch/version.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "convtune_framework_api.h"

#define CONVTUNE_TORCH_AT_LEAST(major, minor) \
    (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace py = pybind11;

namespace {

using Reason = std::optional<std::pair<std::string, std::string>>;  // (category, detail)

// Counts by name; looked up by a C string at every call, so the maps compare transparently and
// a name is copied into a std::string only the first time it is counted.
using Counts = std::map<std::string, int64_t, std::less<>>;

void bump(Counts& m, std::string_view key) {
    auto it = m.find(key);
    if (it == m.end()) it = m.emplace(std::string(key), 0).first;
    ++it->second;
}

struct Stats {
    Counts convtune{{"fwd", 0}, {"bwd_data", 0}, {"bwd_filter", 0}};
    Counts fallback, sources, algorithms;
    std::map<std::string, std::string> details;
    double search_ms = 0;
};

struct State {
    const convtune_framework_api* api = nullptr;
    void* context = nullptr;  // convtune's FrameworkContext (kept alive by the Python side while enabled)
    c10::DeviceType device = c10::DeviceType::CPU;
    std::string device_name, backend, policy;
    // The CUDA device convtune's handles live on (the first one used; -1: none yet): read and set by
    // the interface's refuse() only, atomically.
    int32_t cuda_index = -1;
    PyObject* classify = nullptr;     // Python: (x, w) -> (reason, detail) or None; borrowed, valid while enabled
    PyObject* raw_stream = nullptr;   // Python: index -> the current stream (a PyTorch without Stream::native_handle)
    std::mutex mutex;
    Stats stats;
    std::unique_ptr<torch::Library> library;
};

// Every state made lives as long as the process (a state is small, and a call in flight on another
// thread may hold one while it is disabled); the enabled one, read at each call without a lock, is one of them or null.
std::mutex g_mutex;                           // guards g_states
std::vector<std::unique_ptr<State>> g_states;
std::atomic<State*> g_active{nullptr};

State* active() { return g_active.load(std::memory_order_acquire); }

bool is_active(const State* s) { return active() == s; }

void count_fallback(State& s, std::string_view reason, std::string_view detail) {
    if (!is_active(&s)) return;
    std::lock_guard<std::mutex> lock(s.mutex);
    bump(s.stats.fallback, reason);
    if (!detail.empty()) s.stats.details.emplace(std::string(reason), std::string(detail));
}

// PyTorch's flags at this call (torch.backends.cudnn, torch.use_deterministic_algorithms), as
// convtune.torch.torch_flags() reads them.
struct TorchFlags {
    bool enabled, benchmark, deterministic, allow_tf32;
    int64_t benchmark_limit;  // -1: this PyTorch has no such flag
};

TorchFlags torch_flags() {
    auto& c = at::globalContext();
    TorchFlags f{};
    f.enabled = c.userEnabledCuDNN();
    f.benchmark = c.benchmarkCuDNN();
    f.deterministic = c.deterministicCuDNN() || c.deterministicAlgorithms();
    f.allow_tf32 = c.allowTF32CuDNN();
#if CONVTUNE_TORCH_AT_LEAST(2, 0)  // torch.backends.cudnn.benchmark_limit
    f.benchmark_limit = c.benchmarkLimitCuDNN();
#else
    f.benchmark_limit = -1;
#endif
    return f;
}

// PyTorch's name of a dtype (str(dtype)): a static string for those convtune runs and the other
// common ones; the rest are made in `spill`.
const char* dtype_name(c10::ScalarType t, std::string& spill) {
    switch (t) {
        case at::kFloat: return "torch.float32";
        case at::kDouble: return "torch.float64";
        case at::kHalf: return "torch.float16";
        case at::kBFloat16: return "torch.bfloat16";
        case at::kInt: return "torch.int32";
        case at::kLong: return "torch.int64";
        case at::kShort: return "torch.int16";
        case at::kChar: return "torch.int8";
        case at::kByte: return "torch.uint8";
        case at::kBool: return "torch.bool";
        case at::kComplexFloat: return "torch.complex64";
        case at::kComplexDouble: return "torch.complex128";
        default: return (spill = std::string("torch.") + c10::toString(t)).c_str();
    }
}

const char* layout_name(c10::Layout l, std::string& spill) {
    switch (l) {
        case c10::kStrided: return "torch.strided";
        case c10::kSparse: return "torch.sparse_coo";
        default: {
            std::ostringstream o;
            o << "torch." << l;
            return (spill = o.str()).c_str();
        }
    }
}

const char* device_type_name(c10::DeviceType d, std::string& spill) {
    switch (d) {
        case c10::DeviceType::CPU: return "cpu";
        case c10::DeviceType::CUDA: return "cuda";
        default: return (spill = c10::DeviceTypeName(d, /*lower_case=*/true)).c_str();
    }
}

// x or w as the interface's refuse() reads them: PyTorch's names, static strings for what
// convtune runs (the others, refused, are kept here).
struct Operand {
    std::string spill[3];
    convtune_operand d{};  // points into spill: not copied
    explicit Operand(const at::Tensor& t) {
        d.device = device_type_name(t.device().type(), spill[0]);
        d.index = t.device().index();
        d.layout = layout_name(t.layout(), spill[1]);
        d.dtype = dtype_name(t.scalar_type(), spill[2]);
    }
    Operand(const Operand&) = delete;
    Operand& operator=(const Operand&) = delete;
};

std::string list_text(const std::vector<int64_t>& v) {
    std::string r = "[";
    for (std::size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
    return r + "]";
}

bool has_python_key(const at::Tensor& t) { return t.key_set().has(c10::DispatchKey::Python); }

// FakeTensor / tensor subclass: the Python side's classification (convtune.torch._python_refusal).
Reason python_refusal(State& s, const at::Tensor& x, const at::Tensor& w) {
    py::gil_scoped_acquire gil;
    py::object px = py::reinterpret_steal<py::object>(THPVariable_Wrap(x));
    py::object pw = py::reinterpret_steal<py::object>(THPVariable_Wrap(w));
    if (!px || !pw || !s.classify) throw py::error_already_set();
    py::object r = py::reinterpret_borrow<py::object>(s.classify)(px, pw);
    if (r.is_none()) return std::nullopt;
    py::tuple t = r.cast<py::tuple>();
    return std::make_pair(t[0].cast<std::string>(), t[1].cast<std::string>());
}

// convtune's rules (the interface's refuse()): whether it takes x and w under PyTorch's flags f.
at::MemoryFormat memory_format(const at::Tensor& x, const at::Tensor& w);

Reason convtune_rules(State& s, const at::Tensor& x, const at::Tensor& w, bool transposed, int64_t groups,
                      const TorchFlags& f) {
    const Operand xo(x), wo(w);
    const bool strided = x.layout() == c10::kStrided && w.layout() == c10::kStrided;
    const convtune_request q{s.device_name.c_str(),
                             xo.d,
                             wo.d,
                             transposed,
                             f.enabled,
                             &s.cuda_index,
                             groups,
                             x.dim() > 1 ? x.size(1) : 0,
                             w.dim() > 0 ? w.size(0) : 0,
                             strided && memory_format(x, w) != at::MemoryFormat::Contiguous};
    convtune_refusal r;
    TORCH_CHECK(s.api->refuse(&q, &r) == 0, "convtune: ", r.detail);
    if (!r.category) return std::nullopt;
    return std::make_pair(std::string(r.category), std::string(r.detail));
}

// Why convtune does not take this call at all (nullopt: it may): the Python side's classification
// of Python-key tensors, then convtune's rules.
Reason refusal(State& s, const at::Tensor& x, const at::Tensor& w, bool transposed, int64_t groups,
               const TorchFlags& f) {
    if (has_python_key(x) || has_python_key(w)) {
        if (Reason r = python_refusal(s, x, w)) return r;
    }
    return convtune_rules(s, x, w, transposed, groups, f);
}

std::vector<int64_t> spatial(at::IntArrayRef v, int64_t nd) {
    std::vector<int64_t> r(v.begin(), v.end());
    if (r.size() == 1 && nd > 1) r.assign(static_cast<std::size_t>(nd), r[0]);
    return r;
}

// PyTorch's rule (convtune.capture._layout): channels-last when the input or the weight is.
at::MemoryFormat memory_format(const at::Tensor& x, const at::Tensor& w) {
    if (x.dim() != 4 && x.dim() != 5) return at::MemoryFormat::Contiguous;
    const auto fmt = x.dim() == 4 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d;
    for (const at::Tensor* t : {&x, &w})
        if (t->is_contiguous(fmt) && !t->is_contiguous()) return fmt;
    return at::MemoryFormat::Contiguous;
}

convtune_tensor describe(const at::Tensor& t) {
    convtune_tensor d{};
    d.rank = static_cast<int32_t>(t.dim());
    for (int64_t i = 0; i < t.dim() && i < 5; ++i) {
        d.sizes[i] = t.size(i);
        d.strides[i] = t.stride(i);
    }
    d.data = t.data_ptr();
    d.bytes = static_cast<size_t>(t.numel()) * t.element_size();
    return d;
}

// The workspace of one call: PyTorch's caching allocator, whose blocks are stream-ordered (a block
// freed here is reused only by later work on the same stream). A buffer is held until convtune
// releases it (a search grows its buffer: the smaller one goes first) or the call returns.
struct Workspace {
    c10::Device device;
    std::vector<at::Tensor> held;
};

void* workspace_alloc(void* user, size_t bytes) {
    auto* w = static_cast<Workspace*>(user);
    try {
        at::Tensor t = at::empty({static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte).device(w->device));
        w->held.push_back(t);
        return t.data_ptr();
    } catch (const std::exception&) {
        return nullptr;  // PyTorch's out of memory: convtune treats it as such
    }
}

void workspace_release(void* user, void* data) {
    auto* w = static_cast<Workspace*>(user);
    for (auto it = w->held.begin(); it != w->held.end(); ++it)
        if (it->data_ptr() == data) {
            w->held.erase(it);
            return;
        }
}

// Whether c10::Stream has native_handle() (PyTorch 2.11 and later), found by the compiler rather
// than by version number.
template <class S, class = void>
struct HasNativeHandle : std::false_type {};
template <class S>
struct HasNativeHandle<S, std::void_t<decltype(std::declval<const S&>().native_handle())>> : std::true_type {};
constexpr bool kNativeStreamHandle = HasNativeHandle<c10::Stream>::value;

template <class S>
std::optional<void*> native_stream(const S& s) {
    if constexpr (HasNativeHandle<S>::value) return s.native_handle();
    else return std::nullopt;
}

void* current_stream(State& s, const c10::Device& dev) {
    if (dev.type() != c10::DeviceType::CUDA) return nullptr;
    const c10::Stream stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(dev);
    if (const std::optional<void*> handle = native_stream(stream)) return *handle;
    // No native handle in this PyTorch, and no CUDA headers here: ask PyTorch's Python side.
    py::gil_scoped_acquire gil;
    py::object r = py::reinterpret_borrow<py::object>(s.raw_stream)(static_cast<int>(dev.index()));
    return reinterpret_cast<void*>(r.cast<std::uintptr_t>());
}

// One convtune::app::run_framework call through the C interface; counts what it did. True when it ran.
bool run(State& s, const char* direction, const at::Tensor& x, const at::Tensor& w, const at::Tensor& y,
         const std::vector<int64_t>& stride, const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation,
         int64_t groups, const TorchFlags& f) {
    const c10::Device dev = x.device();
    convtune_call c{};
    c.direction = direction;
    std::string spill;
    c.dtype = dtype_name(x.scalar_type(), spill);  // PyTorch's name: convtune's framework_dtype maps it
    c.x = describe(x);
    c.w = describe(w);
    c.y = describe(y);
    c.spatial_dims = static_cast<int32_t>(stride.size());
    for (std::size_t i = 0; i < stride.size() && i < 3; ++i) {
        c.stride[i] = stride[i];
        c.padding[i] = padding[i];
        c.dilation[i] = dilation[i];
    }
    c.groups = groups;
    c.backend = s.backend.c_str();
    c.enabled = f.enabled;
    c.benchmark = f.benchmark;
    c.deterministic = f.deterministic;
    c.allow_tf32 = f.allow_tf32;
    c.benchmark_limit = f.benchmark_limit;
    c.policy = s.policy.c_str();
    Workspace ws{dev, {}};
    c.alloc = &workspace_alloc;
    c.release = &workspace_release;
    c.alloc_user = &ws;
    convtune_result r{};
    int rc;
    {
        // The thread's cuDNN handle is made on the current device: switch only when it is another.
        c10::OptionalDeviceGuard guard;
        if (dev.type() == c10::DeviceType::CUDA && c10::impl::getDeviceGuardImpl(dev.type())->getDevice() != dev)
            guard.reset_device(dev);
        c.stream = current_stream(s, dev);
        rc = s.api->run(s.context, &c, &r);
    }
    TORCH_CHECK(rc == 0, "convtune: ", r.detail);
    if (!r.ran) {
        count_fallback(s, r.fallback, r.detail);
        return false;
    }
    if (is_active(&s)) {
        std::lock_guard<std::mutex> lock(s.mutex);
        bump(s.stats.convtune, direction);
        bump(s.stats.sources, r.source);
        bump(s.stats.algorithms, r.algorithm);
        s.stats.search_ms += r.search_ms;
    }
    return true;
}

// PyTorch's own convolution with its own derivative (aten::_convolution), under its flags.
at::Tensor pytorch_convolution(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& b,
                               at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                               bool transposed, at::IntArrayRef output_padding, int64_t groups, const TorchFlags& f) {
    return at::_convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups, f.benchmark,
                            f.deterministic, f.enabled, f.allow_tf32);
}

// The forward through convtune (PyTorch's aten::_convolution when convtune cannot run it), in
// PyTorch's memory format for x and w; no autograd.
at::Tensor conv_forward(State& s, const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& b,
                        const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                        const std::vector<int64_t>& dilation, int64_t groups, const TorchFlags& f) {
    const int64_t nd = x.dim() - 2;
    const at::MemoryFormat fmt = memory_format(x, w);
    std::vector<int64_t> out{x.size(0), w.size(0)};
    for (int64_t i = 0; i < nd; ++i) {
        const int64_t num = x.size(2 + i) + 2 * padding[i] - dilation[i] * (w.size(2 + i) - 1) - 1;
        // Python's floor division, as the Python kernel computes it.
        const int64_t q = num >= 0 ? num / stride[i] : -((-num + stride[i] - 1) / stride[i]);
        out.push_back(q + 1);
    }
    if (*std::min_element(out.begin(), out.end()) >= 1) {
        const at::Tensor xc = x.contiguous(fmt), wc = w.contiguous(fmt);
        at::Tensor y = at::empty(out, x.options().memory_format(fmt));
        if (run(s, "fwd", xc, wc, y, stride, padding, dilation, groups, f)) {
            if (b && b->defined()) {
                std::vector<int64_t> shape(static_cast<std::size_t>(nd + 2), 1);
                shape[1] = -1;
                y.add_(b->view(shape));
            }
            return y;
        }
    } else {
        count_fallback(s, "problem", "output size " + list_text(out));
    }
    return pytorch_convolution(x, w, b, stride, padding, dilation, false,
                               std::vector<int64_t>(static_cast<std::size_t>(nd), 0), groups, f);
}

// aten::convolution_backward at the device's key, which PyTorch's own autograd node of a
// convolution (ConvolutionBackward0) calls, and its double backward (create_graph=True) too: the
// data and filter gradients through convtune, PyTorch's own kernel for what convtune does not take
// (transposed convolutions, refused problems, a direction convtune could not run), counted.
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_kernel(
    const at::Tensor& gy, const at::Tensor& x, const at::Tensor& w, at::OptionalIntArrayRef bias_sizes,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> mask) {
    State* const s = active();
    const TorchFlags f = torch_flags();
    Reason why;
    if (s && (mask[0] || mask[1])) why = refusal(*s, x, w, transposed, groups, f);
    if (!s || transposed || why) {  // a transposed call is refused above (why is set) while enabled
        if (s && why) count_fallback(*s, why->first, why->second);
        return at::native::convolution_backward(gy, x, w, bias_sizes, stride, padding, dilation, transposed,
                                                output_padding, groups, mask);
    }
    const int64_t nd = x.dim() - 2;
    const std::vector<int64_t> st = spatial(stride, nd), pa = spatial(padding, nd), di = spatial(dilation, nd);
    const at::MemoryFormat fmt = memory_format(x, w);
    const at::Tensor gyc = gy.contiguous(fmt);
    at::Tensor g[3];
    std::array<bool, 3> todo{false, false, false};
    const char* directions[2] = {"bwd_data", "bwd_filter"};
    for (int i = 0; i < 2; ++i) {
        if (!mask[i]) continue;
        const at::Tensor& like = i == 0 ? x : w;
        at::Tensor xw[2];
        xw[i] = at::empty(like.sizes(), like.options().memory_format(fmt));
        xw[1 - i] = (i == 0 ? w : x).contiguous(fmt);
        if (run(*s, directions[i], xw[0], xw[1], gyc, st, pa, di, groups, f)) g[i] = xw[i];
        else todo[i] = true;
    }
    if (todo[0] || todo[1]) {
        auto r = at::native::convolution_backward(gy, x, w, at::OptionalIntArrayRef(), stride, padding, dilation,
                                                  false, output_padding, groups, todo);
        if (todo[0]) g[0] = std::get<0>(r);
        if (todo[1]) g[1] = std::get<1>(r);
    }
    if (mask[2]) {
        std::vector<int64_t> dims{0};
        for (int64_t i = 2; i < 2 + nd; ++i) dims.push_back(i);
        g[2] = gy.sum(dims);
    }
    return {g[0], g[1], g[2]};
}

// aten::convolution at the device's own key: every forward, below PyTorch's autograd kernel (which
// recorded the graph node, if any) or without it (torch.inference_mode(), graphs that AOTAutograd compiled).
at::Tensor device_kernel(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& b,
                         at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                         at::IntArrayRef output_padding, int64_t groups) {
    State* const s = active();
    const TorchFlags f = torch_flags();
    Reason why;
    if (s) why = refusal(*s, x, w, transposed, groups, f);
    if (!s || why) {  // refusals and disabled cuDNN go to PyTorch, counted
        if (why) count_fallback(*s, why->first, why->second);
        return pytorch_convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups, f);
    }
    const int64_t nd = x.dim() - 2;
    return conv_forward(*s, x, w, b, spatial(stride, nd), spatial(padding, nd), spatial(dilation, nd), groups, f);
}

// Registering over aten's kernels warns "Overriding a previously registered kernel": that is the point.
class QuietWarnings : public c10::WarningHandler {
public:
#if CONVTUNE_TORCH_AT_LEAST(2, 0)
    void process(const c10::Warning&) override {}
#else
    void process(const c10::SourceLocation&, const std::string&, const bool) override {}
#endif
};

int64_t enable(py::capsule api, std::uintptr_t context, const std::string& device, const std::string& backend,
               const std::string& policy, py::object classify, py::object raw_stream) {
    auto* a = static_cast<const convtune_framework_api*>(PyCapsule_GetPointer(api.ptr(), CONVTUNE_FRAMEWORK_API_NAME));
    if (!a) throw py::error_already_set();
    if (a->version != CONVTUNE_FRAMEWORK_API_VERSION || a->struct_size < sizeof(convtune_framework_api))
        throw std::runtime_error("convtune's framework interface is version " + std::to_string(a->version) +
                                 ", this override needs " + std::to_string(CONVTUNE_FRAMEWORK_API_VERSION));
    if (device != "cpu" && device != "cuda")
        throw std::runtime_error("device: must be cpu or cuda (got '" + device + "')");
    auto owned = std::make_unique<State>();
    State* const s = owned.get();
    s->api = a;
    s->context = reinterpret_cast<void*>(context);
    s->device = device == "cuda" ? c10::DeviceType::CUDA : c10::DeviceType::CPU;
    s->device_name = device;
    s->backend = backend;
    s->policy = policy;
    s->classify = classify.ptr();
    s->raw_stream = raw_stream.ptr();
    {
        QuietWarnings quiet;
#if CONVTUNE_TORCH_AT_LEAST(2, 0)
        c10::WarningUtils::WarningHandlerGuard guard(&quiet);
#else
        c10::Warning::WarningHandlerGuard guard(&quiet);
#endif
        s->library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::optional<c10::DispatchKey>(),
                                                      __FILE__, __LINE__);
        const bool cuda = s->device == c10::DeviceType::CUDA;
        // At the device's key only: PyTorch's own autograd kernel of aten::convolution (at
        // AutogradCUDA / AutogradCPU) records its own node, ConvolutionBackward0, and calls these.
        const c10::DispatchKey key = cuda ? c10::DispatchKey::CUDA : c10::DispatchKey::CPU;
        s->library->impl("convolution", torch::dispatch(key, TORCH_FN(device_kernel)));
        s->library->impl("convolution_backward", torch::dispatch(key, TORCH_FN(backward_kernel)));
    }
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        g_states.push_back(std::move(owned));
    }
    g_active.store(s, std::memory_order_release);
    return static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(s));
}

void disable() {
    State* const s = g_active.exchange(nullptr, std::memory_order_acq_rel);
    if (s) s->library.reset();  // unregisters the kernels: PyTorch's own run again
}

State& state_of(int64_t handle) {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (const auto& s : g_states)
        if (reinterpret_cast<std::uintptr_t>(s.get()) == static_cast<std::uintptr_t>(handle)) return *s;
    throw std::runtime_error("convtune.torch._override: no such state");
}

py::dict stats(int64_t handle) {
    State& s = state_of(handle);
    std::lock_guard<std::mutex> lock(s.mutex);
    auto dict = [](const Counts& m) {
        py::dict d;
        for (const auto& [k, v] : m) d[py::str(k)] = v;
        return d;
    };
    py::dict details;
    for (const auto& [k, v] : s.stats.details) details[py::str(k)] = v;
    py::dict d;
    d["convtune"] = dict(s.stats.convtune);
    d["fallback"] = dict(s.stats.fallback);
    d["sources"] = dict(s.stats.sources);
    d["algorithms"] = dict(s.stats.algorithms);
    d["search_ms"] = s.stats.search_ms;
    d["details"] = details;
    return d;
}

void reset_stats(int64_t handle) {
    State& s = state_of(handle);
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stats = Stats{};
}

}  // namespace

PYBIND11_MODULE(_override, m) {
    m.doc() = "convtune.torch's C++ override of aten::convolution (built by convtune.torch._build)";
    m.attr("torch_version") = py::str(TORCH_VERSION);
    m.attr("api_version") = CONVTUNE_FRAMEWORK_API_VERSION;
    m.attr("native_stream_handle") = kNativeStreamHandle;  // else the CUDA stream comes from Python
    m.def("enable", &enable, py::arg("api"), py::arg("context"), py::arg("device"), py::arg("backend"),
          py::arg("policy"), py::arg("classify"), py::arg("raw_stream"));
    m.def("disable", &disable);
    m.def("stats", &stats, py::arg("handle"));
    m.def("reset_stats", &reset_stats, py::arg("handle"));
}
