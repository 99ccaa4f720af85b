#include "convtune/sim/replay_backend.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <limits>

#include "convtune/hash.hpp"
#include "convtune/stats.hpp"

namespace convtune::sim {

namespace {

using convtune::fnv1a;
constexpr auto mix = splitmix64;

class ReplayAlgorithm final : public Algorithm {
public:
    ReplayAlgorithm(const ReplayBackend& b, AlgorithmInfo info) : backend_(b), info_(std::move(info)) {}
    std::string_view id() const override { return info_.id; }
    const Backend& backend() const override { return backend_; }
    Notes notes() const override { return info_.notes; }
    Notes notes_for(const ConvProblem& p) const override {
        const ProblemRecord* r = backend_.lookup(p);
        const AlgorithmRecord* a = r ? r->find(info_.id) : nullptr;
        return a && a->notes ? *a->notes : info_.notes;
    }
    Support supports(const ConvProblem& p) const override { return backend_.replay_supports(p, info_.id); }
    std::size_t workspace_size(const ConvProblem& p) const override {
        const ProblemRecord* r = backend_.lookup(p);
        const AlgorithmRecord* a = r ? r->find(info_.id) : nullptr;
        return a ? a->workspace : 0;
    }
    Status run(const ConvProblem& p, const ConvTensors&, Workspace) const override {
        return backend_.replay_run(p, info_.id);
    }

private:
    const ReplayBackend& backend_;
    AlgorithmInfo info_;
};

// Same layer = same everything except the batch and the input sizes.
bool same_layer(const ConvProblem& a, const ConvProblem& b) {
    ConvProblem x = a, y = b;
    x.n = y.n = 1;
    x.in = y.in = Dims{1, 1, 1};
    x.pad_end = y.pad_end = Dims{0, 0, 0};
    return x == y;
}

// What a neighbour of another layer must share: groups (dense, depthwise or grouped), dilation
// and whether the kernel is 1x1.
std::string kind_of(const ConvProblem& p) {
    std::string k = p.groups == 1 ? "dense" : (p.groups == p.c && p.groups == p.k ? "depthwise" : "grouped");
    if (p.dilation != Dims{1, 1, 1}) k += ",dilated";
    if (p.kernel == Dims{1, 1, 1}) k += ",1x1";
    return k;
}

alignas(64) unsigned char g_placeholder[64];

}  // namespace

ReplayBackend::ReplayBackend(Recording r, uint64_t seed, Estimation estimation)
    : recording_(std::move(r)), model_(recording_), estimation_(estimation), seed_(seed) {
    for (const AlgorithmInfo& a : recording_.algorithms) {
        owned_.push_back(std::make_unique<ReplayAlgorithm>(*this, a));
        list_.push_back(owned_.back().get());
    }
}

ReplayBackend::~ReplayBackend() = default;

BackendIdentity ReplayBackend::identity() const {
    return {recording_.environment.library, recording_.environment.device, recording_.environment.driver};
}

const ProblemRecord* ReplayBackend::lookup(const ConvProblem& p) const {
    if (const ProblemRecord* r = recording_.find(p)) return r;
    return estimation_ != Estimation::none ? unrecorded(p).record.get() : nullptr;
}

const ReplayBackend::Estimate* ReplayBackend::estimate(const ConvProblem& p) const {
    return estimation_ == Estimation::none || recording_.find(p) ? nullptr : &unrecorded(p);
}

const ReplayBackend::Estimate& ReplayBackend::unrecorded(const ConvProblem& p) const {
    std::lock_guard lock(mutex_);
    const std::string key = p.to_string();
    if (auto it = estimated_.find(key); it != estimated_.end()) return it->second;
    Estimate& e = estimated_[key];  // an entry without a record remembers "unanswerable"
    const double macs = static_cast<double>(std::max<int64_t>(p.macs(), 1));
    auto log_work = [](const ConvProblem& q) { return std::log(static_cast<double>(std::max<int64_t>(q.macs(), 1))); };
    const double x = log_work(p);
    auto log_ratio = [&](const ProblemRecord& r) { return std::abs(x - log_work(r.problem)); };
    // The preference level of r as p's neighbour (lower is better; 4 = not a neighbour).
    auto level = [&](const ProblemRecord& r) {
        const ConvProblem& q = r.problem;
        if (q.direction != p.direction) return 4;
        if (same_layer(q, p)) return 0;
        if (q.dtype != p.dtype || q.layout != p.layout) return 3;
        return kind_of(q) == kind_of(p) ? 1 : 2;
    };
    static constexpr const char* kBasis[] = {"same layer", "same direction, type, layout and kind",
                                             "same direction, type and layout (another kind)",
                                             "same direction (another type or layout)"};
    const ProblemRecord* near = nullptr;
    int best_level = 4;
    double best = std::numeric_limits<double>::infinity(), nearest_same_type = best, nearest_dir = best;
    for (const ProblemRecord& r : recording_.problems) {
        const int l = level(r);
        if (l == 4) continue;
        const double d = log_ratio(r);
        nearest_dir = std::min(nearest_dir, d);
        if (r.problem.dtype == p.dtype) nearest_same_type = std::min(nearest_same_type, d);
        if (l < best_level || (l == best_level && d < best)) best_level = l, best = d, near = &r;
    }
    if (!near || (estimation_ == Estimation::same_layer && best_level != 0)) return e;
    e.neighbour = near->problem.to_string();
    e.basis = kBasis[best_level];
    // A second size of the same layer, for the layer's own scaling (PerfModel::predict): one on the
    // other side of p's work from the neighbour where there is one (an interpolation), else the
    // nearest other size.
    const ProblemRecord* partner = nullptr;
    if (best_level == 0) {
        const double x_near = log_work(near->problem);
        bool bracket = false;
        double nearest = std::numeric_limits<double>::infinity();
        for (const ProblemRecord& r : recording_.problems) {
            if (&r == near || level(r) != 0 || r.problem.macs() == near->problem.macs()) continue;
            const double xr = log_work(r.problem);
            const bool other_side = (xr - x) * (x_near - x) < 0;
            const double d = std::abs(xr - x);
            if ((other_side && !bracket) || (other_side == bracket && d < nearest))
                partner = &r, bracket = other_side, nearest = d;
        }
        if (partner) e.partner = partner->problem.to_string();
    }
    e.extrapolation = std::exp(std::isfinite(nearest_same_type) ? nearest_same_type : nearest_dir);
    auto est = std::make_unique<ProblemRecord>(*near);
    est->problem = p;
    const double ratio = macs / static_cast<double>(std::max<int64_t>(near->problem.macs(), 1));
    est->db_search_ms *= ratio;  // a tuning-database recording's search time: linear in the work
    for (AlgorithmRecord& a : est->algorithms) {
        if (!a.supported) continue;
        a.workspace = static_cast<std::size_t>(std::llround(static_cast<double>(a.workspace) * ratio));
        const auto pred = model_.predict(a.id, p, *near, best_level == 0, partner);
        if (!pred) continue;  // failed or out of memory on the neighbour: it fails here too
        const double m = median(a.samples_ms);
        const double scale = m > 0 ? pred->ms / m : 1;
        if (a.first_ms) *a.first_ms = pred->ms + std::max(0.0, *a.first_ms - m);  // the cold call's overhead is kept
        for (double& s : a.samples_ms) s = std::max(s * scale, pred->floor_ms);
        e.sigma[a.id] = pred->sigma;
        e.floored = e.floored || pred->floored;
    }
    e.record = std::move(est);
    return e;
}

std::pair<double, double> ReplayBackend::uncertainty_ms() const {
    std::lock_guard lock(mutex_);
    return {below_, above_};
}

std::vector<const Algorithm*> ReplayBackend::heuristic_order(const ConvProblem& p) const {
    std::vector<const Algorithm*> out;
    const ProblemRecord* r = lookup(p);
    if (!r) return out;
    for (const std::string& id : r->heuristic)
        if (const Algorithm* a = find(id)) out.push_back(a);
    return out;
}

std::unique_ptr<Ranking> ReplayBackend::ranking(const ConvProblem& p) const {
    std::set<const Algorithm*> unsuggested;
    std::map<const Algorithm*, int> listings;  // the recorded ones, as the heuristic list's (recording.hpp)
    bool decided = true;  // producing the list decided every support: free unless support is charged
    if (const ProblemRecord* r = lookup(p)) {
        for (const std::string& id : r->unsuggested)
            if (const Algorithm* a = find(id)) unsuggested.insert(a);
        for (const auto& [id, n] : r->listings)
            if (const Algorithm* a = find(id)) listings[a] = n;
        decided = std::none_of(r->algorithms.begin(), r->algorithms.end(),
                               [](const AlgorithmRecord& a) { return a.support_ms.has_value(); });
        if (r->ranking_ms) {
            std::lock_guard lock(mutex_);
            if (ranked_.insert(p.to_string()).second) {
                clock_ += *r->ranking_ms;
                deciding_ += *r->ranking_ms;
            }
        }
    }
    return list_ranking(heuristic_order(p), decided, std::move(unsuggested), std::move(listings));
}

Support ReplayBackend::replay_supports(const ConvProblem& p, const std::string& id) const {
    const ProblemRecord* r = lookup(p);
    if (!r) return Support::no("the recording has no timings for this problem");
    const AlgorithmRecord* a = r->find(id);
    if (!a) return Support::no("the recording has no timings of this algorithm on this problem");
    if (a->support_ms) {
        std::lock_guard lock(mutex_);
        if (decided_.insert(p.to_string() + "|" + id).second) {
            clock_ += *a->support_ms;
            deciding_ += *a->support_ms;
        }
    }
    if (!a->supported) return Support::no(a->reason);
    return Support::yes();
}

const Algorithm* ReplayBackend::native_fallback(const ConvProblem& p) const {
    const ProblemRecord* r = lookup(p);
    return r && !r->fallback.empty() ? find(r->fallback) : nullptr;
}

const Algorithm* ReplayBackend::fixed_default(const ConvProblem& p) const {
    const ProblemRecord* r = lookup(p);
    return r && !r->fixed.empty() ? find(r->fixed) : nullptr;
}

DeviceBuffer ReplayBackend::allocate(std::size_t bytes) const {
    // Virtual memory: a non-null placeholder that nothing reads or writes.
    return DeviceBuffer(g_placeholder, bytes, [](void*) {});
}

double ReplayBackend::time_ms(const std::function<void()>& fn) const {
    // The sum of the calls' times, not a difference of clock readings: exact, whatever the clock.
    double outer = 0;
    {
        std::lock_guard lock(mutex_);
        outer = timing_;
        timing_ = 0;
    }
    fn();
    std::lock_guard lock(mutex_);
    const double spent = timing_;
    timing_ = outer + spent;
    return spent;
}

void ReplayBackend::set_in_sequence(bool on) const {
    std::lock_guard lock(mutex_);
    in_sequence_ = on;
}

void ReplayBackend::reset(uint64_t seed) {
    std::lock_guard lock(mutex_);
    seed_ = seed;
    clock_ = 0;
    timing_ = 0;
    in_sequence_ = false;
    started_ = false;
    below_ = above_ = 0;
    calls_.clear();
    decided_.clear();
    ranked_.clear();
    deciding_ = 0;
}

double ReplayBackend::clock_ms() const {
    std::lock_guard lock(mutex_);
    return clock_;
}

double ReplayBackend::deciding_ms() const {
    std::lock_guard lock(mutex_);
    return deciding_;
}

Status ReplayBackend::replay_run(const ConvProblem& p, const std::string& id) const {
    const ProblemRecord* r = recording_.find(p);
    const Estimate* e = nullptr;
    if (!r && estimation_ != Estimation::none) {
        e = &unrecorded(p);
        r = e->record.get();
    }
    const AlgorithmRecord* a = r ? r->find(id) : nullptr;
    if (!a || !a->supported)
        return Status::unsupported("the recording has no timings of " + id + " on " + p.to_string());
    if (a->status == Status::Code::out_of_memory) return Status::out_of_memory("recorded: " + a->message);
    if (a->status != Status::Code::ok) return Status::failure("recorded: " + a->message);
    std::lock_guard lock(mutex_);
    const std::string key = p.to_string() + "|" + id;
    const int64_t n = calls_[key]++;
    double ms = 0;
    if (n == 0 && a->first_ms) {
        ms = *a->first_ms;
    } else {
        const uint64_t h = mix(mix(seed_) ^ fnv1a(key) ^ mix(static_cast<uint64_t>(n)));
        ms = a->samples_ms[h % a->samples_ms.size()];
        const std::optional<double>& sf = r->sequence_factor ? r->sequence_factor : recording_.sequence_factor;
        if (in_sequence_ && sf) ms *= *sf;
    }
    if (e) {
        if (const auto it = e->sigma.find(id); it != e->sigma.end()) {
            const double u = std::exp(PerfModel::kSigmas * it->second);
            below_ += ms - ms / u;
            above_ += ms * u - ms;
        }
    }
    if (!started_) {
        started_ = true;
        const std::optional<double>& su = r->startup_ms ? r->startup_ms : recording_.startup_ms;
        if (su) ms += *su;
    }
    clock_ += ms;
    timing_ += ms;
    return Status::success();
}

}  // namespace convtune::sim
