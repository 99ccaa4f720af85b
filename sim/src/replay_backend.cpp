#include "convtune/sim/replay_backend.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <limits>

#include "convtune/hash.hpp"

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
    Support supports(const ConvProblem& p) const override {
        const ProblemRecord* r = backend_.lookup(p);
        if (!r) return Support::no("the recording has no timings for this problem");
        const AlgorithmRecord* a = r->find(info_.id);
        if (!a) return Support::no("the recording has no timings of this algorithm on this problem");
        if (!a->supported) return Support::no(a->reason);
        return Support::yes();
    }
    std::size_t workspace_size(const ConvProblem& p) const override {
        const ProblemRecord* r = backend_.lookup(p);
        const AlgorithmRecord* a = r ? r->find(info_.id) : nullptr;
        return a ? a->workspace : 0;
    }
    Status run(const ConvProblem& p, const ConvTensors&, Workspace) const override { return backend_.replay_run(p, info_.id); }

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

alignas(64) unsigned char g_placeholder[64];

}  // namespace

ReplayBackend::ReplayBackend(Recording r, uint64_t seed, bool estimate_missing)
    : recording_(std::move(r)), estimate_(estimate_missing), seed_(seed) {
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
    if (!estimate_) return nullptr;
    std::lock_guard lock(mutex_);
    const std::string key = p.to_string();
    if (auto it = estimated_.find(key); it != estimated_.end()) return it->second.get();
    const ProblemRecord* near = nullptr;
    double best = std::numeric_limits<double>::infinity();
    const double macs = static_cast<double>(p.macs());
    for (const ProblemRecord& r : recording_.problems) {
        if (!same_layer(r.problem, p)) continue;
        const double d = std::abs(std::log(macs / static_cast<double>(r.problem.macs())));
        if (d < best) best = d, near = &r;
    }
    std::unique_ptr<ProblemRecord> est;
    if (near) {
        est = std::make_unique<ProblemRecord>(*near);
        est->problem = p;
        const double ratio = macs / static_cast<double>(near->problem.macs());
        est->db_search_ms *= ratio;
        for (AlgorithmRecord& a : est->algorithms) {
            a.workspace = static_cast<std::size_t>(std::llround(static_cast<double>(a.workspace) * ratio));
            if (a.first_ms) *a.first_ms *= ratio;
            for (double& s : a.samples_ms) s *= ratio;
        }
    }
    const ProblemRecord* out = est.get();
    estimated_[key] = std::move(est);  // a null entry remembers "no neighbour"
    return out;
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
    if (const ProblemRecord* r = lookup(p))
        for (const std::string& id : r->unsuggested)
            if (const Algorithm* a = find(id)) unsuggested.insert(a);
    return list_ranking(heuristic_order(p), true, std::move(unsuggested));
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

double ReplayBackend::time_execution_ms(const std::function<void()>& fn) const {
    struct Flag {
        const ReplayBackend& b;
        bool before;
        explicit Flag(const ReplayBackend& r) : b(r) {
            std::lock_guard lock(b.mutex_);
            before = b.executing_;
            b.executing_ = true;
        }
        ~Flag() {
            std::lock_guard lock(b.mutex_);
            b.executing_ = before;
        }
    } flag(*this);
    return time_ms(fn);
}

void ReplayBackend::reset(uint64_t seed) {
    std::lock_guard lock(mutex_);
    seed_ = seed;
    clock_ = 0;
    timing_ = 0;
    executing_ = false;
    started_ = false;
    calls_.clear();
}

double ReplayBackend::clock_ms() const {
    std::lock_guard lock(mutex_);
    return clock_;
}

Status ReplayBackend::replay_run(const ConvProblem& p, const std::string& id) const {
    const ProblemRecord* r = lookup(p);
    const AlgorithmRecord* a = r ? r->find(id) : nullptr;
    if (!a || !a->supported) return Status::unsupported("the recording has no timings of " + id + " on " + p.to_string());
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
        if (executing_ && recording_.sequence_factor) ms *= *recording_.sequence_factor;
    }
    if (!started_) {
        started_ = true;
        if (recording_.startup_ms) ms += *recording_.startup_ms;
    }
    clock_ += ms;
    timing_ += ms;
    return Status::success();
}

}  // namespace convtune::sim
