// The oneDNN backend: each implementation oneDNN 2.6 offers (impl_info_str(), e.g. "jit:avx2",
// "x64:gemm:jit", "jit_wino_4x3:avx512_core") is one algorithm per direction, with the id
// onednn.<direction>.<implementation name, lowercase, non-alphanumerics as '_'>, plus
// onednn.auto: what oneDNN itself picks for convolution_auto ("benchmark off").
//
// The list depends on the CPU (oneDNN dispatches on its ISA), so it is discovered when the
// backend is created, by walking oneDNN's implementation iterators over a fixed set of
// representative problems in every direction, dtype and layout; the order is the order of
// discovery, which is deterministic for a given oneDNN build and CPU. An implementation that
// oneDNN offers only for problems outside that set has no algorithm of its own (onednn.auto
// still reaches it).
//
// The backend caches, per problem (and OpenMP thread count), what oneDNN offers and, per
// problem and algorithm, the plan (primitive + reorders); algorithms themselves hold no
// per-problem state.
#include "onednn/onednn_backend.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "convtune/numeric.hpp"
#include "onednn/onednn_conv.hpp"

namespace convtune {

namespace {

using onednn::Offer;
using onednn::Offers;
using onednn::Plan;

int max_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

std::string sanitize(std::string_view s) {
    std::string r;
    for (char ch : s) {
        const auto u = static_cast<unsigned char>(ch);
        r += std::isalnum(u) ? static_cast<char>(std::tolower(u)) : '_';
    }
    return r;
}

bool is_winograd(std::string_view impl) { return impl.find("wino") != std::string_view::npos; }

// Bound for oneDNN's F(4x4, 3x3) Winograd (jit_wino_4x3), derived in docs/algorithms-onednn.md:
// a sum of n transform-domain products plus at most 32 sequential roundings in the three
// transforms, amplified by at most 16 per dimension (the largest ratio of the transform-domain
// magnitude |A^T|(|G||g||G^T| . |B^T||d||B|)|A| to the direct sum |g||d| for inputs of equal
// magnitude, reached by the last row of A^T = [0 1 -1 8 -8 1]).
double winograd_bound(const ConvProblem& p) {
    double n = 0;
    switch (p.direction) {
        case Direction::fwd: n = static_cast<double>(p.c_per_group()); break;
        case Direction::bwd_data: n = static_cast<double>(p.k_per_group()); break;
        case Direction::bwd_filter: {
            n = static_cast<double>(p.n);
            for (int i = 0; i < p.spatial_dims; ++i) n *= static_cast<double>((p.out(i) + 3) / 4);
            break;
        }
    }
    double amplification = 1;
    for (int i = 0; i < p.spatial_dims; ++i) amplification *= 16;
    return amplification * (n + 32) * unit_roundoff(DataType::f32) + unit_roundoff(p.dtype);
}

class OneDnnBackend;

class OneDnnAlgorithm final : public Algorithm {
public:
    // A named implementation of one direction, or (no direction) oneDNN's own choice.
    OneDnnAlgorithm(const OneDnnBackend& b, std::optional<Direction> dir, std::string impl, Notes notes)
        : backend_(b),
          dir_(dir),
          impl_(std::move(impl)),
          id_(dir ? "onednn." + std::string(to_string(*dir)) + "." + sanitize(impl_) : "onednn.auto"),
          notes_(notes) {}

    std::string_view id() const override { return id_; }
    const Backend& backend() const override;
    Notes notes() const override { return notes_; }
    Support supports(const ConvProblem& p) const override;
    std::size_t workspace_size(const ConvProblem& p) const override;
    Status run(const ConvProblem& p, const ConvTensors& t, Workspace ws) const override;
    double error_bound(const ConvProblem& p) const override;

    std::optional<Direction> direction() const { return dir_; }
    const std::string& impl() const { return impl_; }
    // The offer this algorithm runs for p, or nullptr.
    const Offer* offer(const ConvProblem& p, const Offers& o) const {
        if (dir_) return p.direction == *dir_ ? o.find(impl_) : nullptr;
        return o.automatic ? &*o.automatic : nullptr;
    }

private:
    const OneDnnBackend& backend_;
    std::optional<Direction> dir_;
    std::string impl_;
    std::string id_;
    Notes notes_;
};

// Representative problems the implementation list is discovered on (each in every direction,
// dtype and layout): the kinds of layers convtune meets, small enough to describe quickly.
constexpr const char* kDiscoveryProblems[] = {
    "n=2,c=64,k=64,in=14x14,ker=3x3,pad=1x1",             // 3x3 (Winograd-eligible)
    "n=2,c=64,k=256,in=14x14,ker=1x1",                    // 1x1
    "n=2,c=256,k=512,in=14x14,ker=1x1,stride=2x2",        // 1x1 strided
    "n=2,c=64,k=128,in=28x28,ker=3x3,stride=2x2,pad=1x1", // 3x3 strided
    "n=1,c=3,k=64,in=32x32,ker=7x7,stride=2x2,pad=3x3",   // first layer
    "n=2,c=32,k=32,g=32,in=14x14,ker=3x3,pad=1x1",        // depthwise
    "n=2,c=64,k=64,g=2,in=14x14,ker=3x3,pad=1x1",         // grouped
    "n=1,c=16,k=16,in=12x12,ker=3x3,dil=2x2,pad=2x2",     // dilated
    "n=2,c=3,k=5,in=7x9,ker=3x3,pad=1x1",                 // few channels
    "n=1,c=4,k=8,in=6x6,ker=1x1,stride=2x2,pad_end=-1x-1",// negative end padding
    "n=2,c=16,k=16,in=32,ker=3,pad=1",                    // 1-D
    "n=1,c=16,k=16,in=8x8x8,ker=3x3x3,pad=1x1x1",         // 3-D
};

class OneDnnBackend final : public HostBackend {
public:
    OneDnnBackend() { discover(); }

    std::string_view name() const override { return "onednn"; }
    Availability availability() const override { return {}; }
    BackendIdentity identity() const override {
        const dnnl_version_t* v = dnnl_version();
        return {"oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch),
                host_device_name() + ", ISA " + onednn::effective_isa_name(), ""};
    }
    std::span<const Algorithm* const> algorithms() const override { return list_; }

    // onednn.auto (oneDNN's choice) first, then the named implementations in the order of
    // convolution_auto's iterator, then the rest (Winograd, which auto lists only when it deems
    // it profitable) in the order found. The ranking over it is the default one, and so are its
    // named lists (ListName): the heuristic list is every supporting algorithm, the fallback list
    // is empty.
    std::vector<const Algorithm*> heuristic_order(const ConvProblem& p) const override {
        std::vector<const Algorithm*> r;
        const auto o = offers(p);
        auto add = [&](const Algorithm* a) {
            if (a && std::find(r.begin(), r.end(), a) == r.end()) r.push_back(a);
        };
        if (o->automatic) add(auto_);
        for (const std::string& impl : o->auto_order)
            if (o->find(impl)) add(lookup(p.direction, impl));
        for (const Offer& off : o->named) add(lookup(p.direction, off.impl));
        return r;
    }

    std::shared_ptr<const Offers> offers(const ConvProblem& p) const {
        const std::string key = p.to_string() + "#" + std::to_string(max_threads());
        {
            std::lock_guard lock(mutex_);
            if (auto it = offers_.find(key); it != offers_.end()) return it->second;
        }
        auto o = std::make_shared<const Offers>(onednn::compute_offers(p));
        std::lock_guard lock(mutex_);
        return offers_.emplace(key, std::move(o)).first->second;
    }

    // The plan of algorithm a for p, built on first use; nullptr with the reason in *why.
    std::shared_ptr<const Plan> plan(const ConvProblem& p, const OneDnnAlgorithm& a, Status* why) const {
        const std::string key = p.to_string() + "#" + std::to_string(max_threads()) + "#" + std::string(a.id());
        {
            std::lock_guard lock(mutex_);
            if (auto it = plans_.find(key); it != plans_.end()) return it->second;
        }
        const auto o = offers(p);
        const Offer* off = a.offer(p, *o);
        if (!off) {
            *why = Status::unsupported(std::string(a.id()) + " does not support " + p.to_string());
            return nullptr;
        }
        std::shared_ptr<const Plan> plan;
        try {
            plan = std::make_shared<const Plan>(onednn::build_plan(p, *off));
        } catch (const dnnl::error& e) {
            *why = onednn::status_from(e, "oneDNN " + off->impl + " primitive creation");
            return nullptr;
        } catch (const std::bad_alloc&) {
            *why = Status::out_of_memory("oneDNN " + off->impl + ": out of host memory creating the primitive");
            return nullptr;
        } catch (const std::exception& e) {
            *why = Status::failure(e.what());
            return nullptr;
        }
        std::lock_guard lock(mutex_);
        return plans_.emplace(key, std::move(plan)).first->second;
    }

private:
    const Algorithm* lookup(Direction d, const std::string& impl) const {
        for (const auto& a : algos_)
            if (a->direction() == d && a->impl() == impl) return a.get();
        return nullptr;
    }

    void discover() {
        struct Found {
            Direction dir;
            std::string impl;
            bool reorders = false;
        };
        std::vector<Found> found;
        bool auto_reorders = false, auto_winograd = false;
        for (const char* spec : kDiscoveryProblems) {
            const ConvProblem base = ConvProblem::parse(spec);
            for (Direction d : {Direction::fwd, Direction::bwd_data, Direction::bwd_filter})
                for (DataType t : {DataType::f32, DataType::bf16, DataType::f16})
                    for (Layout l : {Layout::nchw, Layout::nhwc}) {
                        ConvProblem p = base;
                        p.direction = d;
                        p.dtype = t;
                        p.layout = l;
                        const Offers o = onednn::compute_offers(p);
                        for (const Offer& off : o.named) {
                            auto it = std::find_if(found.begin(), found.end(),
                                                   [&](const Found& f) { return f.dir == d && f.impl == off.impl; });
                            if (it == found.end()) it = found.insert(found.end(), Found{d, off.impl});
                            it->reorders = it->reorders || off.reorders;
                        }
                        if (o.automatic) {
                            auto_reorders = auto_reorders || o.automatic->reorders;
                            auto_winograd = auto_winograd || is_winograd(o.automatic->impl);
                        }
                    }
        }
        Notes auto_notes;
        if (auto_reorders) auto_notes = auto_notes | Note::layout_conversion;
        if (auto_winograd) auto_notes = auto_notes | Note::winograd;
        algos_.push_back(std::make_unique<OneDnnAlgorithm>(*this, std::nullopt, "convolution_auto", auto_notes));
        auto_ = algos_.back().get();
        for (Direction d : {Direction::fwd, Direction::bwd_data, Direction::bwd_filter})
            for (const Found& f : found) {
                if (f.dir != d) continue;
                Notes n;
                if (is_winograd(f.impl)) n = n | Note::winograd;
                if (f.impl.rfind("ref:", 0) == 0) n = n | Note::reference;
                if (f.reorders) n = n | Note::layout_conversion;
                algos_.push_back(std::make_unique<OneDnnAlgorithm>(*this, d, f.impl, n));
            }
        for (const auto& a : algos_) list_.push_back(a.get());
    }

    std::vector<std::unique_ptr<OneDnnAlgorithm>> algos_;
    std::vector<const Algorithm*> list_;
    const Algorithm* auto_ = nullptr;
    mutable std::mutex mutex_;
    mutable std::map<std::string, std::shared_ptr<const Offers>> offers_;
    mutable std::map<std::string, std::shared_ptr<const Plan>> plans_;
};


const Backend& OneDnnAlgorithm::backend() const { return backend_; }

Support OneDnnAlgorithm::supports(const ConvProblem& p) const {
    if (dir_ && p.direction != *dir_)
        return Support::no(id_ + " runs the " + std::string(to_string(*dir_)) + " direction only");
    const auto o = backend_.offers(p);
    if (offer(p, *o)) return Support::yes();
    if (!o->none_reason.empty()) return Support::no(o->none_reason);
    if (!dir_) return Support::no("oneDNN's convolution_auto offers no implementation for this problem");
    if (const std::string* why = o->withheld_reason(impl_)) return Support::no(*why);
    return Support::no("oneDNN does not offer " + impl_ + " for this problem (it offers: " + o->list() + ")");
}

std::size_t OneDnnAlgorithm::workspace_size(const ConvProblem& p) const {
    Status why;
    const auto plan = backend_.plan(p, *this, &why);
    return plan ? plan->workspace_bytes : 0;
}

Status OneDnnAlgorithm::run(const ConvProblem& p, const ConvTensors& t, Workspace ws) const {
    Status why;
    const auto plan = backend_.plan(p, *this, &why);
    if (!plan) return why;
    return onednn::execute_plan(*plan, t, ws);
}

double OneDnnAlgorithm::error_bound(const ConvProblem& p) const {
    std::string_view impl = impl_;
    if (!dir_) {  // the bound of whatever oneDNN picks for this problem
        const auto o = backend_.offers(p);
        impl = o->automatic ? std::string_view(o->automatic->impl) : std::string_view();
        if (is_winograd(impl)) return winograd_bound(p);
        return default_error_bound(p, Notes{});
    }
    if (is_winograd(impl)) return winograd_bound(p);
    return default_error_bound(p, notes_);
}

}  // namespace

Backend& onednn_backend() {
    static OneDnnBackend b;
    return b;
}

}  // namespace convtune
