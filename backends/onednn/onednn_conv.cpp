#include "onednn/onednn_conv.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <unordered_map>

#include "convtune/tensor.hpp"
#include "onednn/onednn_defects.hpp"

namespace convtune::onednn {

namespace {

using dnnl::memory;
using Dt = memory::data_type;

constexpr std::size_t kAlign = 64;
std::size_t align_up(std::size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

Dt dnnl_type(DataType t) {
    switch (t) {
        case DataType::f32: return Dt::f32;
        case DataType::bf16: return Dt::bf16;
        case DataType::f16: return Dt::f16;
        case DataType::f64: break;
    }
    throw std::logic_error("oneDNN has no f64 convolution");
}

// A plain memory descriptor from logical dims and convtune's element strides.
memory::desc strided(const memory::dims& dims, Dt t, const memory::dims& strides) {
    return memory::desc(dims, t, strides);
}

// x or y: (n, channels, spatial...) in the problem's layout.
memory::desc activation_md(const ConvProblem& p, int64_t channels, const Dims& sizes) {
    const Strides s = make_strides(p.layout, p.spatial_dims, channels, sizes);
    memory::dims dims{p.n, channels}, st{s.outer, s.channel};
    for (int i = 0; i < p.spatial_dims; ++i) {
        dims.push_back(sizes[static_cast<std::size_t>(i)]);
        st.push_back(s.spatial[static_cast<std::size_t>(i)]);
    }
    return strided(dims, dnnl_type(p.dtype), st);
}

// w: (k, c/g, kernel...) or, with groups, (g, k/g, c/g, kernel...) — oneDNN's grouped weights.
memory::desc weights_md(const ConvProblem& p) {
    const Strides s = w_strides(p);
    memory::dims dims, st;
    if (p.groups > 1) {
        dims = {p.groups, p.k_per_group(), p.c_per_group()};
        st = {s.outer * p.k_per_group(), s.outer, s.channel};
    } else {
        dims = {p.k, p.c};
        st = {s.outer, s.channel};
    }
    for (int i = 0; i < p.spatial_dims; ++i) {
        dims.push_back(p.kernel[static_cast<std::size_t>(i)]);
        st.push_back(s.spatial[static_cast<std::size_t>(i)]);
    }
    return strided(dims, dnnl_type(p.dtype), st);
}

// The dense row-major (abcd...) descriptor of md's dims: a format every reorder knows.
memory::desc dense_md(const memory::desc& md) {
    using tag = memory::format_tag;
    static constexpr tag tags[] = {tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde, tag::abcdef};
    const memory::dims dims = md.dims();
    if (dims.empty() || dims.size() > 6)
        throw std::runtime_error("no dense format for a tensor of " + std::to_string(dims.size()) + " dims");
    return memory::desc(dims, md.data_type(), tags[dims.size() - 1]);
}

memory::desc as_any(const memory::desc& md) { return memory::desc(md.dims(), md.data_type(), memory::format_tag::any); }

struct Geometry {
    memory::dims strides, dilates, pad_l, pad_r;
};

// Strides, 0-based dilations and paddings as oneDNN takes them (padding_r may be negative).
Geometry geometry(const ConvProblem& p) {
    Geometry g;
    for (int i = 0; i < p.spatial_dims; ++i) {
        const auto u = static_cast<std::size_t>(i);
        g.strides.push_back(p.stride[u]);
        // oneDNN's dilation is 0-based. Along a dim of kernel size 1 dilation changes nothing;
        // it is passed as none, which routes around jit:avx512_core_amx_bf16's backward weights
        // returning garbage for dilated 1x1 kernels (issue 35, onednn_defects.hpp).
        g.dilates.push_back(p.kernel[u] == 1 ? 0 : p.dilation[u] - 1);
        g.pad_l.push_back(p.pad_begin[u]);
        g.pad_r.push_back(p.pad_end[u]);
    }
    return g;
}

struct UserMds {
    memory::desc x, w, y;
};
UserMds user_mds(const ConvProblem& p) {
    return {activation_md(p, p.c, p.in), weights_md(p), activation_md(p, p.k, out_dims(p))};
}

// The descriptors' memory descs for a choice of formats.
UserMds op_mds(const UserMds& u, Formats f) {
    switch (f) {
        case Formats::plain: return u;
        case Formats::plain_data: return {u.x, as_any(u.w), u.y};
        case Formats::any: break;
    }
    return {as_any(u.x), as_any(u.w), as_any(u.y)};
}

dnnl::primitive_attr user_scratchpad_attr() {
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
}

// An open implementation iterator of (p, alg, formats), at its first primitive descriptor
// (pd empty when there is none). oneDNN's iterator keeps pointers to the operation descriptor
// and to the forward hint, so both live here and the object never moves.
struct Iterator {
    Iterator() = default;
    Iterator(const Iterator&) = delete;
    Iterator& operator=(const Iterator&) = delete;

    std::optional<dnnl::convolution_forward::desc> hint_desc;
    dnnl::convolution_forward::primitive_desc hint;
    std::optional<dnnl::convolution_forward::desc> fwd;
    std::optional<dnnl::convolution_backward_data::desc> bwd_data;
    std::optional<dnnl::convolution_backward_weights::desc> bwd_weights;
    dnnl::primitive_desc pd;
};

dnnl::convolution_forward::desc forward_desc(const ConvProblem& p, dnnl::algorithm alg, Formats f,
                                             dnnl::prop_kind kind) {
    const UserMds m = op_mds(user_mds(p), f);
    const Geometry g = geometry(p);
    return dnnl::convolution_forward::desc(kind, alg, m.x, m.w, m.y, g.strides, g.dilates, g.pad_l, g.pad_r);
}

// The forward primitive descriptor backward iterators take as their hint: the same algorithm
// and formats when oneDNN has one, else direct, else convolution_auto with `any` formats.
void open_hint(Iterator& it, const ConvProblem& p, dnnl::algorithm alg, Formats f) {
    const std::pair<dnnl::algorithm, Formats> tries[] = {
        {alg, f}, {dnnl::algorithm::convolution_direct, f}, {dnnl::algorithm::convolution_auto, Formats::any}};
    for (auto [a, ff] : tries) {
        try {
            it.hint_desc.emplace(forward_desc(p, a, ff, dnnl::prop_kind::forward_training));
            it.hint =
                dnnl::convolution_forward::primitive_desc(*it.hint_desc, user_scratchpad_attr(), cpu_engine(), true);
            if (it.hint) return;
        } catch (const dnnl::error&) {
        }
    }
}

// Opens the iterator. Throws dnnl::error when oneDNN rejects the descriptor itself.
void open(Iterator& it, const ConvProblem& p, dnnl::algorithm alg, Formats f) {
    const dnnl::primitive_attr attr = user_scratchpad_attr();
    if (p.direction == Direction::fwd) {
        it.fwd.emplace(forward_desc(p, alg, f, dnnl::prop_kind::forward_inference));
        it.pd = dnnl::convolution_forward::primitive_desc(*it.fwd, attr, cpu_engine(), true);
        return;
    }
    open_hint(it, p, alg, f);
    if (!it.hint) return;
    const UserMds m = op_mds(user_mds(p), f);
    const Geometry g = geometry(p);
    if (p.direction == Direction::bwd_data) {
        it.bwd_data.emplace(alg, m.x, m.w, m.y, g.strides, g.dilates, g.pad_l, g.pad_r);
        it.pd = dnnl::convolution_backward_data::primitive_desc(*it.bwd_data, attr, cpu_engine(), it.hint, true);
    } else {
        it.bwd_weights.emplace(alg, m.x, m.w, m.y, g.strides, g.dilates, g.pad_l, g.pad_r);
        it.pd = dnnl::convolution_backward_weights::primitive_desc(*it.bwd_weights, attr, cpu_engine(), it.hint, true);
    }
}

// The queries and execution arguments of x, w, y for a direction.
struct Roles {
    dnnl::query q[3];
    int arg[3];
    int out;
};
Roles roles(Direction d) {
    using dnnl::query;
    switch (d) {
        case Direction::fwd:
            return {
                {query::src_md, query::weights_md, query::dst_md}, {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST}, 2};
        case Direction::bwd_data:
            return {{query::diff_src_md, query::weights_md, query::diff_dst_md},
                    {DNNL_ARG_DIFF_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_DST},
                    0};
        case Direction::bwd_filter:
            return {{query::src_md, query::diff_weights_md, query::diff_dst_md},
                    {DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_DST},
                    1};
    }
    return {};
}

bool needs_reorder(const dnnl::primitive_desc& pd, const ConvProblem& p, const UserMds& u) {
    const Roles r = roles(p.direction);
    const memory::desc* user[3] = {&u.x, &u.w, &u.y};
    for (int i = 0; i < 3; ++i)
        if (pd.query_md(r.q[i]) != *user[i]) return true;
    return false;
}

bool channels_last(const memory::desc& md) {
    const auto& b = md.data.format_desc.blocking;
    return md.data.format_kind == dnnl_blocked && b.inner_nblks == 0 && md.data.ndims > 2 && b.strides[1] == 1;
}

// The reason to withhold this primitive descriptor (onednn_defects.hpp, the one list), or nullopt.
std::optional<std::string> known_defect(const ConvProblem& p, const dnnl::primitive_desc& pd) {
    const dnnl::query q = p.direction == Direction::bwd_data ? dnnl::query::diff_src_md : dnnl::query::src_md;
    return onednn::known_defect(p, pd.impl_info_str(), channels_last(pd.query_md(q)));
}

// Visits every primitive descriptor of the iterator; a rejected descriptor visits nothing.
template <class F>
void walk(const ConvProblem& p, dnnl::algorithm alg, Formats f, F&& visit) {
    Iterator it;
    try {
        open(it, p, alg, f);
    } catch (const dnnl::error&) {
        return;
    }
    if (!it.pd) return;
    do visit(it.pd);
    while (it.pd.next_impl());
}

}  // namespace

const dnnl::engine& cpu_engine() {
    static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}

std::string effective_isa_name() {
    switch (dnnl::get_effective_cpu_isa()) {
        case dnnl::cpu_isa::sse41: return "sse41";
        case dnnl::cpu_isa::avx: return "avx";
        case dnnl::cpu_isa::avx2: return "avx2";
        case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
        case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
        case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
        case dnnl::cpu_isa::avx512_core: return "avx512_core";
        case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
        case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
        case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
        default: break;
    }
    return "generic x86-64";
}

std::string_view to_string(Formats f) {
    switch (f) {
        case Formats::plain: return "plain";
        case Formats::plain_data: return "plain_data";
        case Formats::any: return "any";
    }
    return "?";
}

const Offer* Offers::find(std::string_view impl) const {
    for (const Offer& o : named)
        if (o.impl == impl) return &o;
    return nullptr;
}

const std::string* Offers::withheld_reason(std::string_view impl) const {
    for (const auto& [name, why] : withheld)
        if (name == impl) return &why;
    return nullptr;
}

std::string Offers::list() const {
    std::string r;
    for (const Offer& o : named) r += (r.empty() ? "" : ", ") + o.impl;
    return r.empty() ? "none" : r;
}

Offers compute_offers(const ConvProblem& p) {
    Offers o;
    if (auto e = p.check()) {
        o.none_reason = "invalid problem: " + *e;
        return o;
    }
    if (p.dtype == DataType::f64) {
        o.none_reason = "oneDNN has no f64 convolution";
        return o;
    }
    const UserMds u = user_mds(p);
    for (Formats f : {Formats::plain, Formats::plain_data, Formats::any})
        for (dnnl::algorithm alg : {dnnl::algorithm::convolution_direct, dnnl::algorithm::convolution_winograd})
            walk(p, alg, f, [&](const dnnl::primitive_desc& pd) {
                std::string name = pd.impl_info_str();
                if (o.find(name)) return;
                if (auto why = known_defect(p, pd)) {
                    if (!o.withheld_reason(name)) o.withheld.emplace_back(name, std::move(*why));
                    return;
                }
                o.named.push_back({std::move(name), alg, f, needs_reorder(pd, p, u)});
            });
    // A later descriptor may have offered a withheld implementation in formats that work.
    std::erase_if(o.withheld, [&](const auto& w) { return o.find(w.first) != nullptr; });
    for (Formats f : {Formats::any, Formats::plain_data, Formats::plain}) {
        walk(p, dnnl::algorithm::convolution_auto, f, [&](const dnnl::primitive_desc& pd) {
            if (known_defect(p, pd)) return;  // oneDNN's next choice stands in
            std::string name = pd.impl_info_str();
            if (!o.automatic) o.automatic = Offer{name, dnnl::algorithm::convolution_auto, f, needs_reorder(pd, p, u)};
            if (std::find(o.auto_order.begin(), o.auto_order.end(), name) == o.auto_order.end())
                o.auto_order.push_back(name);
        });
        if (o.automatic) break;
    }
    if (o.named.empty() && !o.automatic)
        o.none_reason = "oneDNN " + std::to_string(dnnl_version()->major) + "." +
                        std::to_string(dnnl_version()->minor) + " offers no " + std::string(to_string(p.dtype)) + " " +
                        std::string(to_string(p.direction)) +
                        " convolution for this problem on this CPU (effective ISA " + effective_isa_name() + ")";
    return o;
}

Plan build_plan(const ConvProblem& p, const Offer& offer) {
    Iterator it;
    open(it, p, offer.alg, offer.formats);
    dnnl::primitive_desc& pd = it.pd;
    bool found = false;
    if (pd) {
        do {
            if (offer.impl == pd.impl_info_str()) {
                found = true;
                break;
            }
        } while (pd.next_impl());
    }
    if (!found)
        throw std::runtime_error("oneDNN no longer offers " + offer.impl + " for this problem (" +
                                 std::string(to_string(offer.formats)) + " formats)");

    Plan plan;
    plan.impl = offer.impl;
    const Roles r = roles(p.direction);
    const UserMds u = user_mds(p);
    plan.user_md[0] = u.x;
    plan.user_md[1] = u.w;
    plan.user_md[2] = u.y;
    plan.out = r.out;
    plan.conv = dnnl::primitive(pd);
    plan.conv_scratch = pd.scratchpad_desc();
    std::size_t scratch = plan.conv_scratch.get_size();
    const dnnl::primitive_attr attr = user_scratchpad_attr();
    auto step = [&](const memory::desc& from, const memory::desc& to) {
        dnnl::reorder::primitive_desc rpd(cpu_engine(), from, cpu_engine(), to, attr);
        ReorderStep st{dnnl::reorder(rpd), rpd.scratchpad_desc()};
        scratch = std::max(scratch, st.scratch.get_size());
        return st;
    };
    for (int i = 0; i < 3; ++i) {
        plan.arg[i] = r.arg[i];
        plan.impl_md[i] = pd.query_md(r.q[i]);
        plan.reorder[i] = plan.impl_md[i] != plan.user_md[i];
        if (!plan.reorder[i]) continue;
        const bool output = i == r.out;
        const memory::desc& from = output ? plan.impl_md[i] : plan.user_md[i];
        const memory::desc& to = output ? plan.user_md[i] : plan.impl_md[i];
        try {
            plan.convert[i].push_back(step(from, to));
        } catch (const dnnl::error&) {
            plan.mid_md[i] = dense_md(plan.user_md[i]);
            plan.convert[i].push_back(step(from, plan.mid_md[i]));
            plan.convert[i].push_back(step(plan.mid_md[i], to));
        }
    }
    plan.scratch_bytes = align_up(scratch);
    std::size_t at = plan.scratch_bytes;
    for (int i = 0; i < 3; ++i) {
        if (!plan.reorder[i]) continue;
        plan.offset[i] = at;
        at += align_up(plan.impl_md[i].get_size());
        if (plan.convert[i].size() > 1) {
            plan.mid_offset[i] = at;
            at += align_up(plan.mid_md[i].get_size());
        }
    }
    // Slack to align the workspace start to 64 bytes inside run(): kernels use aligned vector
    // loads on the reordered copies (the Winograd kernels fault on 16-byte-aligned buffers).
    plan.workspace_bytes = at > 0 ? at + kAlign : 0;
    return plan;
}

Status status_from(const dnnl::error& e, std::string_view what) {
    std::string m = std::string(what) + ": " + e.what();
    if (e.status == dnnl_out_of_memory) return Status::out_of_memory(std::move(m));
    return Status::failure(std::move(m));
}

Status execute_plan(const Plan& plan, const ConvTensors& t, Workspace ws) {
    if (plan.workspace_bytes > 0 && (ws.data == nullptr || ws.bytes < plan.workspace_bytes))
        return Status::failure("workspace of " + std::to_string(ws.bytes) + " bytes, " + plan.impl + " needs " +
                               std::to_string(plan.workspace_bytes));
    try {
        const dnnl::engine& eng = cpu_engine();
        dnnl::stream s(eng);
        const auto addr = reinterpret_cast<std::uintptr_t>(ws.data);
        auto* base = static_cast<std::byte*>(ws.data) + (align_up(addr) - addr);
        // Arguments of one primitive, with the scratchpad (at the workspace start) when it has one.
        auto args = [&](std::unordered_map<int, memory> a, const memory::desc& scratch) {
            if (scratch.get_size() > 0) a.emplace(DNNL_ARG_SCRATCHPAD, memory(scratch, eng, base));
            return a;
        };
        void* user_ptr[3] = {t.x.data, t.w.data, t.y.data};
        memory user[3], impl[3];
        for (int i = 0; i < 3; ++i) {
            user[i] = memory(plan.user_md[i], eng, user_ptr[i]);
            impl[i] = plan.reorder[i] ? memory(plan.impl_md[i], eng, base + plan.offset[i]) : user[i];
        }
        // Runs tensor i's conversion chain from `from` to `to`.
        auto convert = [&](int i, const memory& from, const memory& to) {
            const auto& steps = plan.convert[i];
            if (steps.size() == 1) {
                steps[0].prim.execute(s, args({{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}, steps[0].scratch));
                return;
            }
            const memory mid(plan.mid_md[i], eng, base + plan.mid_offset[i]);
            steps[0].prim.execute(s, args({{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, mid}}, steps[0].scratch));
            steps[1].prim.execute(s, args({{DNNL_ARG_FROM, mid}, {DNNL_ARG_TO, to}}, steps[1].scratch));
        };
        for (int i = 0; i < 3; ++i)
            if (plan.reorder[i] && i != plan.out) convert(i, user[i], impl[i]);
        plan.conv.execute(
            s, args({{plan.arg[0], impl[0]}, {plan.arg[1], impl[1]}, {plan.arg[2], impl[2]}}, plan.conv_scratch));
        const int o = plan.out;
        if (plan.reorder[o]) convert(o, impl[o], user[o]);
        s.wait();
    } catch (const dnnl::error& e) {
        return status_from(e, "oneDNN " + plan.impl);
    } catch (const std::bad_alloc&) {
        return Status::out_of_memory("oneDNN " + plan.impl + ": out of host memory");
    }
    return Status::success();
}

}  // namespace convtune::onednn
