#include "convtune/selector.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <optional>

#include "convtune/error.hpp"
#include "convtune/host_data.hpp"
#include "convtune/measurement.hpp"
#include "convtune/policy.hpp"
#include "search.hpp"

namespace convtune {

std::string flag_filter_reason(const Notes& notes, const ConvProblem& p, const FlagValues& f) {
    if (f.deterministic && notes.has(Note::nondeterministic)) return "deterministic=1 drops NONDETERMINISTIC";
    if (p.dtype == DataType::f32 && !f.allow_tf32 && notes.has(Note::tensor_core))
        return "allow_tf32=0 drops TENSOR_CORE for f32";
    if (notes.has(Note::down_convert_inputs)) return "DOWN_CONVERT_INPUTS is always dropped";
    return {};
}

std::string cache_key(const Backend& b, const ConvProblem& p, const FlagValues& f) {
    return CacheKey::of(b, p, f).to_string();
}

namespace {

// The samples of a decision's chosen candidate.
const std::vector<double>& winner_samples(const Decision& d) {
    static const std::vector<double> none;
    for (const Candidate& c : d.candidates)
        if (c.id == d.algorithm) return c.samples_ms;
    return none;
}

}  // namespace

Selector::Selector(const Backend& backend, TuningCache& cache, TuningDatabase* db)
    : backend_(backend), cache_(cache), db_(db) {
    for (Policy p : all_policies()) states_.emplace_back(&*p, p->make_state());
}

PolicyState* Selector::state_of(const SelectionPolicy& p) const {
    for (const auto& [policy, state] : states_)
        if (policy == &p) return state.get();
    return nullptr;
}

Decision Selector::decide(const ConvProblem& p, const FlagValues& f) const { return decide(p, f, nullptr, nullptr); }

DeviceBuffer Selector::workspace(std::size_t bytes, const WorkspaceSource* ws) const {
    if (!ws || !*ws) return backend_.allocate(bytes);
    DeviceBuffer b = (*ws)(bytes);
    return b && b.bytes() >= bytes ? std::move(b) : DeviceBuffer{};
}

Decision Selector::decide(const ConvProblem& p, const FlagValues& f, const ConvTensors* t,
                          const WorkspaceSource* ws) const {
    p.validate();
    Decision d;
    d.key = cache_key(backend_, p, f);
    if (!f.enabled) {
        const Algorithm* fb = backend_.native_fallback(p);
        if (!fb) throw Error("enabled=0: backend '" + std::string(backend_.name()) + "' has no native fallback");
        Candidate c;
        c.id = std::string(fb->id());
        c.notes = fb->notes();
        c.state = Candidate::State::chosen_untimed;
        c.reason = "enabled=0 runs the native fallback";
        c.workspace = fb->workspace_size(p);
        d.candidates.push_back(c);
        d.algorithm = c.id;
        d.source = Source::fallback;
        return d;
    }
    const SelectionPolicy& policy = *f.policy;
    SearchContext ctx(*this, p, f, std::move(d.key), t, ws);
    // The walk extends the list itself as it goes; benchmark off reaches what the policy asks
    // (the first eligible candidate; the adaptive policy's provisional decision counts what a
    // search would time, for adaptive_threshold).
    ctx.list.reach(f.benchmark ? 1 : policy.heuristic_reach(f));
    if (ctx.list.eligible() == 0) throw ctx.no_candidate();
    return f.benchmark ? policy.search(ctx) : policy.pick(ctx);
}

std::shared_ptr<const Decision> Selector::select(const ConvProblem& p, const FlagValues& f) {
    return select(p, f, nullptr, nullptr);
}

std::shared_ptr<const Decision> Selector::select(const ConvProblem& p, const FlagValues& f, const ConvTensors* t,
                                                 const WorkspaceSource* ws) {
    bool hit = false;
    std::shared_ptr<const Decision> d = select_cached(p, f, t, ws, &hit);
    if (!hit) return d;
    auto copy = std::make_shared<Decision>(*d);
    copy->source = Source::memory;
    copy->search_ms = 0;
    return copy;
}

std::shared_ptr<const Decision> Selector::select_cached(const ConvProblem& p, const FlagValues& f, const ConvTensors* t,
                                                        const WorkspaceSource* ws, bool* hit_out) {
    *hit_out = false;
    p.validate();  // before the key is built from it
    if (!f.enabled) return std::make_shared<const Decision>(decide(p, f, t, ws));
    const std::string key = cache_key(backend_, p, f);
    const SelectionPolicy& policy = *f.policy;
    const bool persistent = db_ && policy.persists();
    int64_t seen = 0;
    const bool defers = policy.defers_search(f);
    if (defers) seen = cache_.note_occurrence(key);
    // An in-band shape is never searched: its provisional decision stands until run() pins it.
    bool wait = policy.in_band(f) || (defers && !policy.search_due(seen, nullptr, f));
    // The environment (device, driver, library) only where a decision is computed: a call that
    // the memory cache answers asks nothing of the device (on cuDNN, cudaGetDeviceProperties and
    // reading the driver's release cost more than the rest of such a call).
    std::optional<Environment> env_made;
    auto env = [&]() -> const Environment& {
        if (!env_made) env_made = environment_of(backend_);
        return *env_made;
    };

    auto compute = [&]() -> Decision {
        if (persistent && f.benchmark) {
            auto known = [this](const std::string& id) { return backend_.find(id) != nullptr; };
            if (auto rec = db_->find(env(), key, known)) {
                // Use it only if the algorithm is still eligible for this problem and these flags.
                if (const Algorithm* a = backend_.find(rec->algorithm)) {
                    Candidate c = evaluate(*a, p, f);
                    if (c.state == Candidate::State::not_timed) {
                        c.state = Candidate::State::chosen_untimed;
                        c.reason = "from the tuning database";
                        c.median_ms = rec->median_ms;
                        c.spread = rec->spread;
                        Decision d;
                        d.key = key;
                        d.algorithm = rec->algorithm;
                        d.source = Source::database;
                        d.median_ms = rec->median_ms;
                        d.candidates = complete(backend_, p, {std::move(c)}, false);
                        return d;
                    }
                }
            }
        }
        if (wait) {
            FlagValues off = f;
            off.benchmark = false;
            Decision d = decide(p, off, t, ws);
            d.key = key;
            d.provisional = true;
            if (policy.in_band(f))
                for (Candidate& c : d.candidates)
                    if (c.id == d.algorithm)
                        c.reason += "; provisional: the " + std::string(policy.name()) +
                                    " policy times the shape's own calls in turn and pins one";
            return d;
        }
        Decision d = decide(p, f, t, ws);
        if (d.source == Source::search) persist(env(), key, d, f);
        return d;
    };
    bool hit = false;
    std::shared_ptr<const Decision> d = cache_.get_or_compute(key, compute, &hit);
    if (hit && d->provisional && defers && policy.search_due(seen, d.get(), f)) {
        // The shape has now recurred often enough: search it.
        wait = false;
        cache_.erase(key);
        d = cache_.get_or_compute(key, compute, &hit);
    }
    *hit_out = hit;
    return d;
}

void Selector::persist(const Environment& env, const std::string& key, const Decision& d, const FlagValues& f) {
    const SelectionPolicy& policy = *f.policy;
    if (!db_ || !policy.persists() || !persist_refusal(policy.measurement(f), winner_samples(d)).empty()) return;
    const auto now = std::chrono::system_clock::now();
    DbRecord r{d.algorithm, d.median_ms, 0,
               0,           d.search_ms, static_cast<int64_t>(std::chrono::system_clock::to_time_t(now))};
    for (const Candidate& c : d.candidates)
        if (c.id == d.algorithm) r.spread = c.spread, r.samples = static_cast<int>(c.samples_ms.size());
    db_->store(env, key, r);
}

Status Selector::execute(const Algorithm& a, const ConvProblem& p, const ConvTensors& t, double* timed_ms,
                         const WorkspaceSource* source) const {
    const std::size_t wsb = a.workspace_size(p);
    if (std::string m = backend_.memory() == Memory::host ? over_memory_budget(p, wsb) : std::string(); !m.empty())
        return Status::out_of_memory(m);
    DeviceBuffer ws = wsb ? workspace(wsb, source) : DeviceBuffer{};
    if (wsb && !ws)
        return Status::out_of_memory("cannot allocate " + std::to_string(wsb) + " B of workspace for " +
                                     std::string(a.id()));
    Status st;
    if (!observer_ && !timed_ms) return a.run(p, t, {ws.data(), wsb});
    if (observer_) observer_->executing(p, a);
    const double ms = backend_.time_ms([&] { st = a.run(p, t, {ws.data(), wsb}); });
    if (timed_ms) *timed_ms = ms;
    if (observer_) observer_->executed(p, a, st, ms);
    return st;
}

Status Selector::run(const ConvProblem& p, const ConvTensors& t, const FlagValues& f, const WorkspaceSource* source,
                     RunInfo* info) {
    check_tensors(p, t);
    bool hit = false;
    std::shared_ptr<const Decision> d = select_cached(p, f, &t, source, &hit);
    auto tell = [&] {
        if (info) *info = {d->algorithm, hit ? Source::memory : d->source, hit ? 0.0 : d->search_ms};
    };
    const SelectionPolicy& policy = *f.policy;
    const bool in_band = f.enabled && policy.in_band(f);
    if (d->provisional && in_band) {
        tell();
        InBandCall call(*this, p, t, f, d->key, source, state_of(policy));
        if (std::optional<Status> st = policy.run_in_band(call)) return *st;
        d = select_cached(p, f, &t, source, &hit);  // pinned
    }
    if (in_band) exploration_.ran(d->median_ms);  // a pinned shape's call: the exploration budget's base
    tell();
    // The chosen algorithm first: the whole of a call whose choice runs.
    Status last = Status::failure("no candidate");
    if (const Algorithm* a = d->algorithm.empty() ? nullptr : backend_.find(d->algorithm)) {
        last = execute(*a, p, t, nullptr, source);
        // Its kernel is loaded now (search_history.hpp); a call the memory cache answered has
        // told the history already, so the hot path asks nothing of it.
        if (last.ok() && !hit) history_.ran(*a);
        if (last.ok()) return last;
    }
    // It failed: the other eligible candidates, timed ones fastest first, then untimed ones in
    // heuristic order.
    std::vector<const Candidate*> order, timed, untimed;
    for (const Candidate& c : d->candidates) {
        if (c.id == d->algorithm) continue;
        if (c.state == Candidate::State::timed) timed.push_back(&c);
        else if (c.state == Candidate::State::not_timed || c.state == Candidate::State::chosen_untimed)
            untimed.push_back(&c);
    }
    std::stable_sort(timed.begin(), timed.end(), [](auto* a, auto* b) { return a->median_ms < b->median_ms; });
    order.insert(order.end(), timed.begin(), timed.end());
    order.insert(order.end(), untimed.begin(), untimed.end());
    // Runs one candidate other than the decision's choice (which failed above); true when it ran,
    // and then it is the choice.
    auto attempt = [&](const Candidate& c) {
        if (c.id == d->algorithm) return false;
        const Algorithm* a = backend_.find(c.id);
        if (!a) return false;
        last = execute(*a, p, t, nullptr, source);
        if (!last.ok()) return false;
        history_.ran(*a);
        if (f.enabled) {
            Decision nd = *d;
            nd.algorithm = c.id;
            nd.source = Source::fallback;
            cache_.put(cache_key(backend_, p, f), std::move(nd));
        }
        return true;
    };
    for (const Candidate* c : order)
        if (attempt(*c)) return last;
    // Then the candidates the decision did not reach, decided as the ranking reaches them.
    const bool unreached = std::any_of(d->candidates.begin(), d->candidates.end(),
                                       [](const Candidate& c) { return c.state == Candidate::State::not_checked; });
    if (!unreached || !f.enabled) return last;
    CandidateList rest(backend_, p, f);
    for (std::size_t i = 0; i < rest.items().size() || rest.extend(); ++i) {
        const Candidate& c = rest.items()[i];
        if (c.state != Candidate::State::not_timed) continue;
        if (std::any_of(order.begin(), order.end(), [&](const Candidate* o) { return o->id == c.id; })) continue;
        if (attempt(c)) return last;
    }
    return last;
}

}  // namespace convtune
