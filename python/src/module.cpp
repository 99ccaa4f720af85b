// convtune._convtune: the C++ side of the convtune Python package.
//
// Thin bindings; the Python modules (python/convtune) give them their PyTorch-shaped interface:
//   get_flags() / set_flags(dict)      the process-wide flags (convtune::global_flags / set_global_flags)
//   make_problem(...) / parse_problem  ConvProblem <-> canonical string and a dict of its fields
//   convolution(problem, x, w, y, be)  convtune::convolution on NumPy buffers (the flags apply)
//   tune(**kw) / simulate(**kw)        convtune::app::tune / simulate / run / list / parse, the keyword
//   run / list / parse(**kw)           arguments mapped through the request's field table (app/fields.hpp):
//                                      the text `convtune <op> --json` prints; fields(op) the table's names
//   backends(), version()              backends(): app::list's backends
//   FrameworkContext(db).run(...)      convtune::app::run_framework on a framework's pointers (ints),
//                                      what convtune.torch's Python override calls for each convolution
//   _framework_api()                   the same entry point as a C interface (convtune_framework_api.h,
//                                      a PyCapsule), what convtune.torch's C++ override calls
// Bad input (convtune::Error) becomes convtune.Error, a ValueError, with the CLI's message; an
// error in a request field names the field (shapes_dir) where the CLI names its option.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "convtune/app/framework.hpp"
#include "convtune_framework_api.h"
#include "convtune/app/list.hpp"
#include "convtune/app/parse.hpp"
#include "convtune/app/run.hpp"
#include "convtune/app/simulate.hpp"
#include "convtune/app/tune.hpp"
#include "convtune/build_info.hpp"
#include "convtune/convtune.hpp"
#include "convtune/error.hpp"
#include "convtune/file_io.hpp"
#include "convtune/host_data.hpp"
#include "convtune/policy.hpp"
#include "convtune/registry.hpp"
#include "convtune/tensor.hpp"
#include "convtune/tuning_db.hpp"

namespace py = pybind11;

namespace convtune::python {

namespace {

constexpr std::size_t kUnlimited = std::numeric_limits<std::size_t>::max();

// Flags ----------------------------------------------------------------------------------------

py::dict flags_to_dict(const FlagValues& f) {
    py::dict d;
    for (const char* key : flag_names()) {
        if (const BoolFlag* b = find_bool_flag(key)) d[key] = f.*(b->field);
        else if (std::string_view(key) == "policy") d[key] = std::string(to_string(f.policy));
        else if (std::string_view(key) == "workspace_limit" && f.workspace_limit == kUnlimited) d[key] = py::none();
        else if (const NumericFlag* n = find_numeric_flag(key))
            std::visit([&](auto field) { d[key] = f.*field; }, n->field);
    }
    return d;
}

// The name of v's Python type, for an error.
std::string type_name(py::handle v) { return py::str(py::type::handle_of(v).attr("__name__")); }

template <class T>
T get_number(const std::string& key, py::handle v, T lo) {
    if (py::isinstance<py::bool_>(v) ||
        !(py::isinstance<py::int_>(v) || (std::is_floating_point_v<T> && py::isinstance<py::float_>(v))))
        throw py::type_error(key + ": expected " + (std::is_floating_point_v<T> ? "a number" : "an int") + ", got " +
                             type_name(v));
    if (!(v.cast<double>() >= static_cast<double>(lo)))
        throw Error(key + ": must be >= " + fmt::format("{}", lo) + " (got " + py::str(v).cast<std::string>() + ")");
    if constexpr (std::is_integral_v<T>) {
        // Compared as Python ints: a value beyond the field's type is refused, not wrapped or
        // left to the binding's cast error.
        const py::int_ hi(std::numeric_limits<T>::max());
        const int above = PyObject_RichCompareBool(v.ptr(), hi.ptr(), Py_GT);
        if (above < 0) throw py::error_already_set();
        if (above)
            throw Error(key + ": must be <= " + fmt::format("{}", std::numeric_limits<T>::max()) + " (got " +
                        py::str(v).cast<std::string>() + ")");
    }
    return v.cast<T>();
}

bool get_bool(const std::string& key, py::handle v) {
    if (!py::isinstance<py::bool_>(v))
        throw py::type_error(key + ": expected a bool, got " + type_name(v));
    return v.cast<bool>();
}

// Applies the dict's entries to `f`; unknown keys and bad values throw before anything changes.
FlagValues apply_flags(FlagValues f, const py::dict& d) {
    for (auto [k, v] : d) {
        const std::string key = py::str(k);
        if (const BoolFlag* b = find_bool_flag(key)) f.*(b->field) = get_bool(key, v);
        else if (key == "policy") f.policy = parse_policy(py::str(v).cast<std::string>());
        else if (key == "workspace_limit" && v.is_none()) f.workspace_limit = kUnlimited;
        else if (const NumericFlag* n = find_numeric_flag(key))
            std::visit(
                [&](auto field) {
                    f.*field = get_number(key, v, static_cast<std::remove_reference_t<decltype(f.*field)>>(n->lo));
                },
                n->field);
        else throw Error("flags: unknown flag " + quote_input(key));
    }
    if (f.max_samples < f.min_samples) throw Error("max_samples: must be >= min_samples");
    return f;
}

// Problems -------------------------------------------------------------------------------------

Dims dims_of(const std::string& name, const std::vector<int64_t>& v, std::size_t nd, int64_t neutral) {
    if (v.size() != nd)
        throw Error(name + ": expected " + std::to_string(nd) + " values (one per spatial dim), got " +
                    std::to_string(v.size()));
    Dims d{neutral, neutral, neutral};
    for (std::size_t i = 0; i < nd; ++i) d[i] = v[i];
    return d;
}

ConvProblem make_problem(const std::string& direction, const std::string& dtype, const std::string& layout, int64_t n,
                         int64_t c, int64_t k, int64_t groups, const std::vector<int64_t>& in,
                         const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                         const std::vector<int64_t>& dilation, const std::vector<int64_t>& pad,
                         const std::vector<int64_t>& pad_end) {
    const std::size_t nd = in.size();
    if (nd < 1 || nd > 3) throw Error("spatial_dims: must be 1, 2 or 3 (got " + std::to_string(nd) + ")");
    ConvProblem p;
    p.direction = parse_direction(direction);
    p.dtype = parse_dtype(dtype);
    p.layout = parse_layout(layout, static_cast<int>(nd));
    p.spatial_dims = static_cast<int>(nd);
    p.n = n;
    p.c = c;
    p.k = k;
    p.groups = groups;
    p.in = dims_of("in", in, nd, 1);
    p.kernel = dims_of("ker", kernel, nd, 1);
    p.stride = dims_of("stride", stride, nd, 1);
    p.dilation = dims_of("dil", dilation, nd, 1);
    p.pad_begin = dims_of("pad", pad, nd, 0);
    p.pad_end = dims_of("pad_end", pad_end, nd, 0);
    p.validate();
    return p;
}

std::vector<int64_t> vec(const Dims& d, int nd) { return {d.begin(), d.begin() + nd}; }

py::dict problem_to_dict(const ConvProblem& p) {
    const int nd = p.spatial_dims;
    std::vector<int64_t> out;
    for (int i = 0; i < nd; ++i) out.push_back(p.out(i));
    py::dict d;
    d["canonical"] = p.to_string();
    d["direction"] = std::string(to_string(p.direction));
    d["dtype"] = std::string(to_string(p.dtype));
    d["layout"] = layout_name(p.layout, nd);
    d["spatial_dims"] = nd;
    d["n"] = p.n;
    d["c"] = p.c;
    d["k"] = p.k;
    d["groups"] = p.groups;
    d["in"] = vec(p.in, nd);
    d["kernel"] = vec(p.kernel, nd);
    d["stride"] = vec(p.stride, nd);
    d["dilation"] = vec(p.dilation, nd);
    d["pad"] = vec(p.pad_begin, nd);
    d["pad_end"] = vec(p.pad_end, nd);
    d["out"] = out;
    d["x_shape"] = p.x_dims();
    d["w_shape"] = p.w_dims();
    d["y_shape"] = p.y_dims();
    d["macs"] = p.macs();
    d["flops"] = p.flops();
    return d;
}

// Convolution ----------------------------------------------------------------------------------

char dtype_char(DataType t) {
    switch (t) {
        case DataType::f32: return 'f';
        case DataType::f16: return 'e';
        case DataType::f64: return 'd';
        case DataType::bf16: return '?';
    }
    return '?';
}

// Checks one NumPy buffer against the tensor the problem expects and returns its view.
TensorView view_of(const ConvProblem& p, const char* name, const py::array& a, const std::vector<int64_t>& dims,
                   bool written) {
    if (a.dtype().kind() != 'f' || a.dtype().char_() != dtype_char(p.dtype))
        throw py::type_error(std::string(name) + ": expected " + std::string(to_string(p.dtype)) + " data, got " +
                             std::string(py::str(a.dtype())));
    if (!(a.flags() & py::array::c_style)) throw Error(std::string(name) + ": must be C-contiguous");
    if (written && !a.writeable()) throw Error(std::string(name) + ": must be writeable");
    std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
    if (shape != dims) {
        auto s = [](const std::vector<int64_t>& v) {
            std::string r = "(";
            for (std::size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
            return r + (v.size() == 1 ? ",)" : ")");
        };
        throw Error(std::string(name) + ": shape " + s(shape) + " does not match the problem's " + s(dims));
    }
    return {const_cast<void*>(a.data()), static_cast<std::size_t>(a.nbytes())};
}

// Runs the problem on the given arrays: x, w, y as the problem's direction reads and writes them
// (fwd writes y, bwd_data writes x, bwd_filter writes w).
void convolution_numpy(const std::string& problem, const py::array& x, const py::array& w, const py::array& y,
                       const std::string& backend) {
    const ConvProblem p = ConvProblem::parse(problem);
    if (p.layout != Layout::nchw) throw Error("layout: the Python module takes channels-first (NCHW) arrays");
    ConvTensors t{view_of(p, "x", x, p.x_dims(), p.direction == Direction::bwd_data),
                  view_of(p, "w", w, p.w_dims(), p.direction == Direction::bwd_filter),
                  view_of(p, "y", y, p.y_dims(), p.direction == Direction::fwd)};
    Backend& b = find_backend(backend);
    require_available(b);
    Status s;
    {
        py::gil_scoped_release release;
        if (b.memory() == Memory::host) {
            s = convolution(p, t, backend);
        } else {
            // Device memory: upload the inputs, run, download the output.
            TensorView* views[3] = {&t.x, &t.w, &t.y};
            TensorView* out = p.direction == Direction::fwd ? &t.y : p.direction == Direction::bwd_data ? &t.x : &t.w;
            DeviceBuffer bufs[3];
            ConvTensors dev;
            TensorView* dviews[3] = {&dev.x, &dev.w, &dev.y};
            for (int i = 0; i < 3; ++i) {
                bufs[i] = b.allocate(views[i]->bytes);
                if (!bufs[i]) {
                    s = Status::out_of_memory("cannot allocate " + std::to_string(views[i]->bytes) +
                                              " bytes on backend " + backend);
                    break;
                }
                *dviews[i] = {bufs[i].data(), views[i]->bytes};
                if (views[i] != out) b.upload(bufs[i].data(), views[i]->data, views[i]->bytes);
            }
            if (s.ok()) s = convolution(p, dev, backend);
            if (s.ok()) {
                const int oi = out == &t.x ? 0 : out == &t.w ? 1 : 2;
                b.download(out->data, bufs[oi].data(), out->bytes);
                b.synchronize();
            }
        }
    }
    if (!s.ok()) {
        const std::string msg = "convolution failed (" + std::string(s.code_name()) + "): " + s.message;
        if (s.code == Status::Code::out_of_memory) {
            PyErr_SetString(PyExc_MemoryError, msg.c_str());
            throw py::error_already_set();
        }
        throw std::runtime_error(msg);
    }
}

// Requests from keyword arguments ----------------------------------------------------------------
// A request is filled through its one field table (app::visit_fields, convtune/app/fields.hpp):
// each keyword names a field, None leaves it at its default; an unknown keyword, or a value of the
// wrong type, is an error naming it.



[[noreturn]] void wrong_type(std::string_view key, std::string_view expected, py::handle v) {
    throw py::type_error(fmt::format("{}: expected {}, got {}", key, expected, type_name(v)));
}

std::string text_of(std::string_view key, py::handle v) {
    if (!py::isinstance<py::str>(v)) wrong_type(key, "a str", v);
    return v.cast<std::string>();
}

// A dict of flags for a FlagsField, applied once the request's other fields are set.
struct PendingFlags {
    app::FlagsField field;
    py::dict flags;
};

void set_field(std::string_view key, py::handle v, std::string& f, std::vector<PendingFlags>&) { f = text_of(key, v); }
void set_field(std::string_view key, py::handle v, std::optional<std::string>& f, std::vector<PendingFlags>&) {
    f = text_of(key, v);
}
void set_field(std::string_view key, py::handle v, std::vector<std::string>& f, std::vector<PendingFlags>&) {
    if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v)) wrong_type(key, "a list of str", v);
    std::vector<std::string> texts;
    for (py::handle x : v) {
        if (!py::isinstance<py::str>(x)) wrong_type(key, "a list of str", x);
        texts.push_back(x.cast<std::string>());
    }
    f = std::move(texts);
}
void set_field(std::string_view key, py::handle v, bool& f, std::vector<PendingFlags>&) {
    f = get_bool(std::string(key), v);
}
template <class T>
    requires std::is_integral_v<T>
void set_field(std::string_view key, py::handle v, T& f, std::vector<PendingFlags>&) {
    f = get_number<T>(std::string(key), v, std::numeric_limits<T>::min());
}
void set_field(std::string_view key, py::handle v, double& f, std::vector<PendingFlags>&) {
    if (py::isinstance<py::bool_>(v) || !(py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v)))
        wrong_type(key, "a number", v);
    f = v.cast<double>();
}
void set_field(std::string_view key, py::handle v, app::FlagsField&& f, std::vector<PendingFlags>& pending) {
    if (py::isinstance<py::str>(v)) f.text = v.cast<std::string>();
    else if (py::isinstance<py::dict>(v)) pending.push_back({std::move(f), v.cast<py::dict>()});
    else throw py::type_error(std::string(key) + ": expected None, a 'key=value,...' string or a dict");
}

// The request `op` takes, from its keyword arguments.
template <class R>
R request_from(std::string_view op, const py::kwargs& kw) {
    const std::vector<std::string_view> names = app::field_names<R>();
    for (auto [k, v] : kw) {
        const std::string key = py::str(k);
        if (std::find(names.begin(), names.end(), key) == names.end())
            throw py::type_error(
                fmt::format("{}: not a field of {} (its fields: {})", key, op, fmt::join(names, ", ")));
    }
    R r{};
    std::vector<PendingFlags> pending;
    app::visit_fields(r, [&](std::string_view name, auto&& field) {
        const py::str key(name.data(), name.size());
        if (!kw.contains(key) || kw[key].is_none()) return;
        set_field(name, kw[key], std::forward<decltype(field)>(field), pending);
    });
    for (PendingFlags& p : pending) p.field.values = apply_flags(p.field.base(), p.flags);
    return r;
}

// tune / simulate / run / list / parse -----------------------------------------------------------
// convtune::app does the work and writes the JSON; `convtune <op> --json` prints the very same text.

std::string tune_json(const py::kwargs& kw) {
    const app::TuneRequest r = request_from<app::TuneRequest>("tune", kw);
    std::ostringstream out;
    app::TuneJsonWriter w(out);
    py::gil_scoped_release release;
    app::tune(r, &w);
    return out.str();
}

// The JSON text of `op`'s report on the request its keyword arguments give (`name`: the
// operation's, for errors), run without the GIL.
template <class R, class Op>
std::string report_json(std::string_view name, Op op, const py::kwargs& kw) {
    const R r = request_from<R>(name, kw);
    py::gil_scoped_release release;
    return app::json_text(app::to_json(op(r)));
}

// Framework calls (convtune.torch) ----------------------------------------------------------------

// (sizes, strides, data pointer, bytes) -> FrameworkTensor
app::FrameworkTensor framework_tensor(const py::tuple& t) {
    if (t.size() != 4) throw py::type_error("tensor: expected (sizes, strides, data_ptr, bytes)");
    return {t[0].cast<std::vector<int64_t>>(), t[1].cast<std::vector<int64_t>>(), t[2].cast<std::uintptr_t>(),
            t[3].cast<std::size_t>()};
}

// Workspace from a Python callable: alloc(bytes) -> (owner, data_ptr); the owner (a framework
// tensor) is kept alive until the buffer is freed. An exception in it (the framework's out of
// memory) is an empty buffer: the selector treats it as out of memory.
WorkspaceSource workspace_source(const py::object& alloc) {
    if (alloc.is_none()) return {};
    return [alloc](std::size_t bytes) -> DeviceBuffer {
        py::gil_scoped_acquire gil;
        try {
            const py::tuple r = alloc(bytes);
            auto* owner = new py::object(r[0]);
            const auto ptr = r[1].cast<std::uintptr_t>();
            return DeviceBuffer(reinterpret_cast<void*>(ptr), bytes, [owner](void*) {
                py::gil_scoped_acquire g;
                delete owner;
            });
        } catch (const py::error_already_set&) {
            return {};
        }
    };
}

py::dict run_framework(Context& ctx, const std::string& direction, const std::string& dtype, const py::tuple& x,
                       const py::tuple& w, const py::tuple& y, const std::vector<int64_t>& stride,
                       const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, int64_t groups,
                       const std::string& backend, const py::dict& flags, std::uintptr_t stream,
                       const py::object& alloc) {
    app::FrameworkCall c{.direction = direction,
                         .dtype = dtype,
                         .x = framework_tensor(x),
                         .w = framework_tensor(w),
                         .y = framework_tensor(y),
                         .stride = stride,
                         .padding = padding,
                         .dilation = dilation,
                         .groups = groups,
                         .backend = backend,
                         .flags = apply_flags(current_flags(), flags),
                         .stream = reinterpret_cast<void*>(stream),
                         .workspace = workspace_source(alloc)};
    app::FrameworkResult r;
    {
        py::gil_scoped_release release;
        r = app::run_framework(ctx, c);
    }
    py::dict d;
    d["ran"] = r.ran;
    d["fallback"] = r.fallback;
    d["detail"] = r.detail;
    d["problem"] = r.problem ? r.problem->to_string() : std::string();
    d["algorithm"] = r.algorithm;
    d["source"] = r.source;
    d["search_ms"] = r.search_ms;
    return d;
}

// The C interface (convtune_framework_api.h) -------------------------------------------------------

// PyTorch's flags of the call on top of `f` (app::flags_from_torch).
FlagValues framework_flags(FlagValues f, const convtune_call& c) {
    if (!c.policy) throw Error("policy: missing");
    const app::TorchFlagValues t{.enabled = c.enabled != 0,
                                 .benchmark = c.benchmark != 0,
                                 .deterministic = c.deterministic != 0,
                                 .allow_tf32 = c.allow_tf32 != 0,
                                 .benchmark_limit = c.benchmark_limit};
    return app::flags_from_torch(f, t, c.policy);
}

app::FrameworkTensor framework_tensor(const char* name, const convtune_tensor& t) {
    if (t.rank < 0 || t.rank > 5)
        throw Error(std::string(name) + ": rank must be 0 to 5 (got " + std::to_string(t.rank) + ")");
    return {{t.sizes, t.sizes + t.rank},
            {t.strides, t.strides + t.rank},
            reinterpret_cast<std::uintptr_t>(t.data),
            t.bytes};
}

template <std::size_t N>
void copy_text(char (&dst)[N], const std::string& s) {
    const std::size_t n = std::min(s.size(), N - 1);
    std::memcpy(dst, s.data(), n);
    dst[n] = '\0';
}

// A C entry point's body: 0 when it returns, -1 with the message in `detail` when it throws.
template <std::size_t N, class Body>
int c_entry(char (&detail)[N], Body&& body) noexcept {
    try {
        body();
        return 0;
    } catch (const std::exception& e) {
        copy_text(detail, e.what());
    } catch (...) {
        copy_text(detail, "unknown error");
    }
    return -1;
}

int c_run(void* context, const convtune_call* c, convtune_result* r) noexcept {
    *r = convtune_result{};
    return c_entry(r->detail, [&] {
        if (!context || !c) throw Error("framework_api.run: null context or call");
        if (c->spatial_dims < 0 || c->spatial_dims > 3)
            throw Error("spatial_dims: must be 0 to 3 (got " + std::to_string(c->spatial_dims) + ")");
        const auto nd = static_cast<std::size_t>(c->spatial_dims);
        WorkspaceSource ws;
        if (c->alloc) {
            ws = [alloc = c->alloc, release = c->release, user = c->alloc_user](std::size_t bytes) -> DeviceBuffer {
                void* p = alloc(user, bytes);
                if (!p) return {};
                return DeviceBuffer(p, bytes, [release, user](void* q) {
                    if (release) release(user, q);
                });
            };
        }
        app::FrameworkCall fc{.direction = c->direction ? c->direction : "",
                              .dtype = c->dtype ? c->dtype : "",
                              .x = framework_tensor("x", c->x),
                              .w = framework_tensor("w", c->w),
                              .y = framework_tensor("y", c->y),
                              .stride = {c->stride, c->stride + nd},
                              .padding = {c->padding, c->padding + nd},
                              .dilation = {c->dilation, c->dilation + nd},
                              .groups = c->groups,
                              .backend = c->backend ? c->backend : "",
                              .flags = framework_flags(current_flags(), *c),
                              .stream = c->stream,
                              .workspace = std::move(ws)};
        const app::FrameworkResult fr = app::run_framework(*static_cast<Context*>(context), fc);
        r->ran = fr.ran;
        copy_text(r->fallback, fr.fallback);
        copy_text(r->detail, fr.detail);
        copy_text(r->algorithm, fr.algorithm);
        copy_text(r->source, fr.source);
        r->search_ms = fr.search_ms;
    });
}

app::FrameworkOperand framework_operand(const char* name, const convtune_operand& t) {
    if (!t.device || !t.layout || !t.dtype) throw Error(std::string(name) + ": missing device, layout or dtype");
    return {t.device, t.index, t.layout, t.dtype};
}

int c_refuse(const convtune_request* q, convtune_refusal* r) noexcept {
    r->category = nullptr;
    r->detail[0] = '\0';
    return c_entry(r->detail, [&] {
        if (!q || !q->device) throw Error("framework_api.refuse: null request or device");
        const app::FrameworkRefusal why = app::framework_refusal({.device = q->device,
                                                                  .x = framework_operand("x", q->x),
                                                                  .w = framework_operand("w", q->w),
                                                                  .transposed = q->transposed != 0,
                                                                  .enabled = q->enabled != 0,
                                                                  .home = q->home,
                                                                  .groups = q->groups,
                                                                  .channels = q->channels,
                                                                  .out_channels = q->out_channels,
                                                                  .channels_last = q->channels_last != 0});
        if (why) {
            r->category = why.category;
            copy_text(r->detail, why.detail);
        }
    });
}

constexpr convtune_framework_api kFrameworkApi{CONVTUNE_FRAMEWORK_API_VERSION, sizeof(convtune_framework_api), &c_run,
                                               &c_refuse};

// (device type, index, layout, dtype): x or w for app::framework_refusal, as convtune.torch names them.
struct OperandNames {
    std::string device, layout, dtype;
    int32_t index;
    app::FrameworkOperand operand() const { return {device, index, layout, dtype}; }
};

// app::framework_refusal for convtune.torch's Python override: (category or None, detail, home).
py::tuple framework_refusal(const std::string& device, const py::tuple& x, const py::tuple& w, bool transposed,
                            bool enabled, int32_t home, int64_t groups, int64_t channels, int64_t out_channels,
                            bool channels_last) {
    auto names = [](const py::tuple& t) {
        if (t.size() != 4) throw py::type_error("operand: expected (device type, index, layout, dtype)");
        return OperandNames{t[0].cast<std::string>(), t[2].cast<std::string>(), t[3].cast<std::string>(),
                            t[1].cast<int32_t>()};
    };
    const OperandNames xn = names(x), wn = names(w);
    const app::FrameworkRefusal why = app::framework_refusal({.device = device,
                                                              .x = xn.operand(),
                                                              .w = wn.operand(),
                                                              .transposed = transposed,
                                                              .enabled = enabled,
                                                              .home = &home,
                                                              .groups = groups,
                                                              .channels = channels,
                                                              .out_channels = out_channels,
                                                              .channels_last = channels_last});
    return py::make_tuple(why ? py::object(py::str(why.category)) : py::object(py::none()), why.detail, home);
}

// app::flags_from_torch for convtune.torch.flag_values: a dict of the convtune flags PyTorch's
// flags (a dict as convtune.torch.torch_flags() returns it) and `policy` set.
py::dict framework_flag_values(const py::dict& t, const std::string& policy) {
    app::TorchFlagValues v{.enabled = t["enabled"].cast<bool>(),
                           .benchmark = t["benchmark"].cast<bool>(),
                           .deterministic = t["deterministic"].cast<bool>(),
                           .allow_tf32 = t["allow_tf32"].cast<bool>()};
    if (t.contains("benchmark_limit") && !t["benchmark_limit"].is_none())
        v.benchmark_limit = t["benchmark_limit"].cast<int64_t>();
    const py::dict all = flags_to_dict(app::flags_from_torch(current_flags(), v, policy));
    py::dict d;
    for (const std::string_view key : app::torch_flag_keys(v)) {
        const py::str k(key.data(), key.size());
        d[k] = all[k];
    }
    return d;
}

}  // namespace

}  // namespace convtune::python

PYBIND11_MODULE(_convtune, m) {
    using namespace convtune;
    using namespace convtune::python;
    m.doc() = "convtune's C++ core; use the convtune package, not this module";

    py::register_exception<Error>(m, "Error", PyExc_ValueError);

    m.def("version", [] { return build_info().version; }, "convtune's version string");
    m.def(
        "build_info",
        [] {
            const BuildInfo b = build_info();
            py::dict d;
            d["version"] = b.version;
            d["arch"] = b.arch;
            d["isa"] = b.isa;
            d["cpu_levels"] = b.cpu_levels;
            d["cpu_level"] = b.cpu_level;
            d["backends"] = b.backends;
            d["compiler"] = b.compiler;
            d["text"] = to_text(b);
            return d;
        },
        "What this build is: version, arch (-march, '' = portable), isa, cpu_levels (the CPU algorithms' "
        "instruction-set levels) and cpu_level (the one running), backends compiled in, compiler, and text (what "
        "`convtune --version` prints)");
    m.def("get_flags", [] { return flags_to_dict(global_flags()); }, "The process-wide flags as a dict");
    m.def("set_flags", [](const py::dict& d) { set_global_flags(apply_flags(global_flags(), d)); },
          "Sets the process-wide flags named in the dict (validated first: nothing changes on an error)");
    m.def("current_flags", [] { return flags_to_dict(current_flags()); },
          "The flags in effect on this thread: its override when it has one, else the process-wide ones");
    m.def(
        "get_thread_flags",
        [] {
            const std::optional<FlagValues> t = thread_flags();
            return t ? py::object(flags_to_dict(*t)) : py::object(py::none());
        },
        "This thread's override (convtune::thread_flags) as a dict, or None when it has none");
    m.def(
        "set_thread_flags",
        [](const py::object& d) {
            if (d.is_none()) return set_thread_flags(std::nullopt);
            if (!py::isinstance<py::dict>(d)) throw py::type_error("set_thread_flags: expected a dict or None");
            set_thread_flags(apply_flags(current_flags(), d.cast<py::dict>()));
        },
        py::arg("flags"),
        "Sets this thread's override to the flags in effect on it with the dict's entries applied (validated first); "
        "None clears it");
    m.def(
        "policies",
        [] {
            std::vector<std::string> names;
            for (Policy p : all_policies()) names.emplace_back(to_string(p));
            return names;
        },
        "The names of every registered selection policy, in the registry's order");
    m.def("default_flags", [] { return flags_to_dict(FlagValues{}); }, "The defaults of every flag");
    m.def(
        "flag_lower_bounds",
        [] {
            py::dict d;
            for (const NumericFlag& n : numeric_flags()) d[n.key] = n.lo;
            return d;
        },
        "The lower bound of every numeric flag (convtune::numeric_flags)");
    m.def("flags_string", [](const py::dict& d) { return apply_flags(global_flags(), d).to_string(); },
          "The flags' text form (as the CLI and the trace files write it)");

    m.def(
        "backends",
        [] {
            py::list out;
            for (const app::BackendListing& b : app::list_backends(false)) {
                py::dict d;
                d["name"] = b.name;
                d["available"] = b.available;
                d["reason"] = b.reason;
                if (b.available) {
                    d["library"] = b.library;
                    d["device"] = b.device;
                    d["driver"] = b.driver;
                }
                py::list algos;
                for (const app::BackendListing::Algo& a : b.algorithms) algos.append(a.id);
                d["algorithms"] = algos;
                out.append(d);
            }
            return out;
        },
        "convtune::app::list's backends (`convtune list`): name, available, reason, library, device and driver (when "
        "available), the ids of the algorithms");

    m.def("backend_work", [](const std::string& name) { return find_backend(name).work_counts(); }, py::arg("name"),
          "The preparation work a backend has done in this process, by kind (Backend::work_counts: cuDNN's heuristic "
          "queries, engine and plan builds, ...; empty for a backend that prepares nothing)");

    m.def(
        "make_problem",
        [](const std::string& direction, const std::string& dtype, const std::string& layout, int64_t n, int64_t c,
           int64_t k, int64_t groups, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel,
           const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation, const std::vector<int64_t>& pad,
           const std::vector<int64_t>& pad_end) {
            return problem_to_dict(
                make_problem(direction, dtype, layout, n, c, k, groups, in, kernel, stride, dilation, pad, pad_end));
        },
        py::arg("direction"), py::arg("dtype"), py::arg("layout"), py::arg("n"), py::arg("c"), py::arg("k"),
        py::arg("groups"), py::arg("in_"), py::arg("kernel"), py::arg("stride"), py::arg("dilation"), py::arg("pad"),
        py::arg("pad_end"));
    m.def(
        "parse_problem", [](const std::string& text) { return problem_to_dict(ConvProblem::parse_any(text)); },
        py::arg("text"));

    m.def("check_memory_budget", [](const std::string& problem) { check_memory_budget(ConvProblem::parse(problem)); },
          py::arg("problem"),
          "Raises Error naming each tensor's size and the budget when the problem's x + w + y exceed memory_budget()");
    m.def(
        "memory_budget", [] { return memory_budget(); },
        "The host memory budget in bytes (CONVTUNE_MAX_BYTES or the default)");

    py::class_<Context>(m, "FrameworkContext",
                        "A tuning cache, the tuning database at `db` (\"\" = none) and one selector per backend")
        .def(py::init<const std::string&>(), py::arg("db"))
        .def(
            "run", &run_framework, py::arg("direction"), py::arg("dtype"), py::arg("x"), py::arg("w"), py::arg("y"),
            py::arg("stride"), py::arg("padding"), py::arg("dilation"), py::arg("groups"), py::arg("backend"),
            py::arg("flags"), py::arg("stream"), py::arg("alloc"),
            "convtune::app::run_framework: x, w, y are (sizes, strides, data_ptr, bytes); flags a dict applied to the "
            "current flags; stream an int (0: the default); alloc(bytes) -> (owner, data_ptr) or None. Returns a dict: "
            "ran, fallback, detail, problem, algorithm, source, search_ms")
        .def(
            "_address", [](Context& c) { return reinterpret_cast<std::uintptr_t>(&c); },
            "The context's address for the C interface's run (valid while this object lives)");

    m.def(
        "framework_refusal", &framework_refusal, py::arg("device"), py::arg("x"), py::arg("w"), py::arg("transposed"),
        py::arg("enabled"), py::arg("home"), py::arg("groups") = 1, py::arg("channels") = 0,
        py::arg("out_channels") = 0, py::arg("channels_last") = false,
        "convtune::app::framework_refusal: x and w are (device type, index, layout, dtype) in PyTorch's names; home "
        "the CUDA device convtune's handles live on (-1: none yet); groups, x's channels, w's output channels and "
        "whether the call is channels-last. Returns (category or None, detail, home)");
    m.def(
        "framework_flags", &framework_flag_values, py::arg("torch_flags"), py::arg("policy"),
        "convtune::app::flags_from_torch: the convtune flags (a dict of only those it sets) that PyTorch's flags (a "
        "dict: enabled, benchmark, deterministic, allow_tf32, benchmark_limit or None) and the policy mean");
    m.def(
        "framework_fallback_categories",
        [] {
            std::vector<std::string> r;
            for (const char* c : app::framework_fallback_categories()) r.emplace_back(c);
            return r;
        },
        "Every fallback category convtune::app names (framework_refusal's and run_framework's)");
    m.def(
        "_framework_api",
        [] { return py::capsule(static_cast<const void*>(&kFrameworkApi), CONVTUNE_FRAMEWORK_API_NAME); },
        "The C interface of convtune_framework_api.h (a PyCapsule named " CONVTUNE_FRAMEWORK_API_NAME
        "): run_framework for extensions built apart from convtune (convtune.torch's C++ override)");

    m.def("convolution", &convolution_numpy, py::arg("problem"), py::arg("x"), py::arg("w"), py::arg("y"),
          py::arg("backend"));

    m.def(
        "write_file_atomic",
        [](const std::string& path, const py::bytes& data) {
            std::string bytes = data;  // copied while the GIL is held
            py::gil_scoped_release release;
            write_file_atomic(path, bytes);
        },
        py::arg("path"), py::arg("data"),
        "Writes data (bytes) to path as convtune's CLI writes its outputs: only where a regular file or nothing "
        "stands, through a temporary file, fsync and rename; raises convtune.Error naming the path otherwise");
    // The application operations: keyword arguments are the request's fields (app::visit_fields),
    // the result is the JSON text `convtune <op> --json` prints.
    m.def("tune", &tune_json, "convtune::app::tune: its request's fields as keyword arguments, its JSON text");
    m.def(
        "simulate",
        [](const py::kwargs& kw) { return report_json<app::SimulateRequest>("simulate", &app::simulate, kw); },
        "convtune::app::simulate: its request's fields as keyword arguments, its JSON text");
    m.def(
        "run", [](const py::kwargs& kw) { return report_json<app::RunRequest>("run", &app::run, kw); },
        "convtune::app::run: its request's fields as keyword arguments, its JSON text");
    m.def(
        "list", [](const py::kwargs& kw) { return report_json<app::ListRequest>("list", &app::list, kw); },
        "convtune::app::list: its request's fields as keyword arguments, its JSON text");
    m.def(
        "parse", [](const py::kwargs& kw) { return report_json<app::ParseRequest>("parse", &app::parse, kw); },
        "convtune::app::parse: its request's fields as keyword arguments, its JSON text");
    m.def(
        "fields",
        [](const std::string& op) -> std::vector<std::string_view> {
            if (op == "tune") return app::field_names<app::TuneRequest>();
            if (op == "simulate") return app::field_names<app::SimulateRequest>();
            if (op == "run") return app::field_names<app::RunRequest>();
            if (op == "list") return app::field_names<app::ListRequest>();
            if (op == "parse") return app::field_names<app::ParseRequest>();
            throw py::value_error("fields: no operation " + quote_input(op));
        },
        py::arg("op"), "The fields of an operation's request (tune, simulate, run, list, parse), in its table's order");
}
