#include "convtune/selector.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <deque>
#include <map>
#include <optional>
#include <unordered_set>

#include "convtune/device_tensors.hpp"
#include "convtune/error.hpp"
#include "convtune/host_data.hpp"
#include "convtune/measurement.hpp"
#include "convtune/policy.hpp"
#include "convtune/stats.hpp"

namespace convtune {

std::string flag_filter_reason(const Notes& notes, const ConvProblem& p, const FlagValues& f) {
    if (f.deterministic && notes.has(Note::nondeterministic)) return "deterministic=1 drops NONDETERMINISTIC";
    if (p.dtype == DataType::f32 && !f.allow_tf32 && notes.has(Note::tensor_core)) return "allow_tf32=0 drops TENSOR_CORE for f32";
    if (notes.has(Note::down_convert_inputs)) return "DOWN_CONVERT_INPUTS is always dropped";
    return {};
}

std::string cache_key(const Backend& b, const ConvProblem& p, const FlagValues& f) { return CacheKey::of(b, p, f).to_string(); }

namespace {

using Clock = std::chrono::steady_clock;

// The candidate for algorithm a: its support decided and the flags' filters applied. The
// workspace is asked here only when a limit needs it: asking can build a plan (cuDNN compiles a
// kernel for a runtime-compiled engine), so otherwise the candidates that are timed or chosen
// ask it when they are (workspace_of).
Candidate evaluate(const Algorithm& a, const ConvProblem& p, const FlagValues& f) {
    Candidate c;
    c.id = std::string(a.id());
    c.notes = a.notes();
    if (const Support s = a.supports(p); !s) {
        c.state = Candidate::State::unsupported;
        c.reason = s.reason;
        return c;
    }
    c.notes = a.notes_for(p);
    const bool limited = f.workspace_limit != FlagValues{}.workspace_limit;
    if (limited) c.workspace = a.workspace_size(p);
    if (std::string why = flag_filter_reason(c.notes, p, f); !why.empty()) {
        c.state = Candidate::State::filtered;
        c.reason = std::move(why);
    } else if (limited && *c.workspace > f.workspace_limit) {
        c.state = Candidate::State::over_workspace;
        c.reason = "workspace " + std::to_string(*c.workspace) + " B > limit " + std::to_string(f.workspace_limit) + " B";
    }
    return c;
}

// The explore-slot rule of a search and of an in-band rotation alike: of `limit` candidates,
// `explore` are kept for ones the heuristics do not suggest, so a suggested candidate met once
// `suggested` of them are in waits for the slots the walk leaves.
bool waits_for_explore_slot(const Candidate& c, int suggested, int limit, int explore) {
    return explore > 0 && c.suggested && suggested >= limit - explore;
}

bool was_eligible(Candidate::State s) {
    using S = Candidate::State;
    return s == S::not_timed || s == S::chosen_untimed || s == S::timed || s == S::out_of_memory || s == S::failed;
}

// A decision's candidate list as reported: the candidates that were eligible first (in heuristic
// order), then the ones a filter, the workspace limit or supports() removed, then every other
// algorithm of the backend: unsupported (with supports()' reason and its notes) when the ranking
// was walked to its end (a ranking lists every supporting algorithm), else not checked, with no
// notes: asking them can cost a backend work the decision never needed (cuDNN probes an engine's
// notes on small graphs the first time they are asked: about 4400 engine finalisations, some
// 100 ms, at a process's first decision from the tuning database, measured on the H200).
std::vector<Candidate> complete(const Backend& b, const ConvProblem& p, std::vector<Candidate> cands, bool ranking_ended) {
    std::stable_partition(cands.begin(), cands.end(), [](const Candidate& c) { return was_eligible(c.state); });
    std::unordered_set<std::string> listed;
    for (const Candidate& c : cands) listed.insert(c.id);
    for (const Algorithm* a : b.algorithms()) {
        if (listed.count(std::string(a->id()))) continue;
        Candidate c;
        c.id = std::string(a->id());
        if (ranking_ended) c.notes = a->notes();
        c.state = ranking_ended ? Candidate::State::unsupported : Candidate::State::not_checked;
        c.reason = ranking_ended ? a->supports(p).reason : "not reached: the decision ended before it";
        cands.push_back(std::move(c));
    }
    return cands;
}

std::string no_candidate_message(const Backend& b, const ConvProblem& p, const std::vector<Candidate>& cands) {
    std::string m = "no algorithm of backend '" + std::string(b.name()) + "' can run " + p.to_string() + " under these flags";
    for (const Candidate& c : cands) m += "\n  " + c.id + ": " + std::string(to_string(c.state)) + (c.reason.empty() ? "" : ": " + c.reason);
    return m;
}

const Algorithm* lookup(const Backend& b, const std::string& id) { return b.find(id); }

// The samples of a decision's chosen candidate.
const std::vector<double>& winner_samples(const Decision& d) {
    static const std::vector<double> none;
    for (const Candidate& c : d.candidates)
        if (c.id == d.algorithm) return c.samples_ms;
    return none;
}

// The candidate's workspace, asked of its algorithm the first time it is needed.
std::size_t workspace_of(const Backend& b, const ConvProblem& p, Candidate& c) {
    if (!c.workspace) {
        const Algorithm* a = lookup(b, c.id);
        c.workspace = a ? a->workspace_size(p) : 0;
    }
    return *c.workspace;
}

void fail_candidate(Candidate& c, const Status& st) {
    c.state = st.code == Status::Code::out_of_memory ? Candidate::State::out_of_memory : Candidate::State::failed;
    c.reason = st.message;
}

// What measurement m (after its rounds) found, onto the candidates its trials measured (a
// trial's order is its candidate's list position); returns the winner's id, empty when none.
std::string take_measurement(const Measurement& m, std::vector<Candidate>& cands, const SelectionPolicy& policy) {
    const Choice choice = m.choose();
    for (const Trial& r : m.trials()) {
        Candidate& c = cands[r.order];
        c.first_ms = r.first_ms;
        c.samples_ms = r.samples_ms;
        c.reason = r.reason;
        if (!r.status.ok()) {
            fail_candidate(c, r.status);
            continue;
        }
        c.state = Candidate::State::timed;
        if (!c.suggested && c.reason.empty()) c.reason = "explored: the heuristics do not suggest it";
        c.median_ms = r.median_ms;
        c.spread = r.spread;
    }
    if (choice.trial < 0) return {};
    Candidate& w = cands[m.trials()[static_cast<std::size_t>(choice.trial)].order];
    if (!choice.reason.empty()) w.reason = choice.reason;
    if (policy.persists())
        if (std::string no = persist_refusal(m.strategy(), w.samples_ms); !no.empty()) w.reason += (w.reason.empty() ? "" : "; ") + no;
    return w.id;
}

// The kind of problem a SearchHistory judges candidates on: what changes which kernels compete.
std::string history_kind(const ConvProblem& p, const FlagValues& f) {
    std::string k(to_string(p.dtype));
    k += p.layout == Layout::nhwc ? "/nhwc" : "/nchw";
    if (p.dtype == DataType::f32 && f.allow_tf32) k += "/tf32";
    return k;
}

// Tells the history how each timed candidate of a decision fared against its winner.
void judge(SearchHistory& h, const std::vector<Candidate>& cands, const std::string& winner, const std::string& kind, const Demotion& d) {
    if (!(d.ratio > 0)) return;
    double winner_ms = 0;
    for (const Candidate& c : cands)
        if (c.id == winner) winner_ms = c.median_ms;
    for (const Candidate& c : cands)
        if (c.state == Candidate::State::timed) h.judged(c.id, kind, c.median_ms, winner_ms, d);
}

}  // namespace

// The candidates of one decision, built only as far as the decision needs them: each algorithm
// the backend's ranking yields has its support decided and the filters applied when reached.
// The convtune policies never run a naive reference implementation (Note::reference) when any
// other candidate is eligible (timing one costs seconds on a real layer and it never wins), so
// an eligible reference candidate is held back and enters the list, filtered or eligible, when
// the ranking ends (SelectionPolicy::holds_back_reference). The PyTorch policies keep them, as
// PyTorch times whatever the library offers.
class CandidateList {
public:
    CandidateList(const Backend& b, const ConvProblem& p, const FlagValues& f)
        : b_(b),
          p_(p),
          f_(f),
          ranking_(b.ranking(p)),
          hold_reference_(policy_of(f.policy).holds_back_reference()),
          listed_only_(policy_of(f.policy).times_framework_listings()) {}

    std::vector<Candidate>& items() { return items_; }
    int eligible() const { return eligible_; }
    bool explores() const { return ranking_->explores(); }

    // Appends the next ranked algorithm as a candidate (or, at the ranking's end, the held-back
    // reference candidates); false when there is nothing left to append. With
    // `decide_unsuggested` false, an algorithm the heuristics do not suggest is appended
    // undecided (not_checked, its support not asked) until decide() is called for it.
    bool extend(bool decide_unsuggested = true) {
        while (!ended_) {
            const Algorithm* a = ranking_->next();
            if (!a) {
                ended_ = true;
                break;
            }
            // What "suggested" means to the policy: the heuristics suggest it, or the framework's
            // lists name it (SelectionPolicy::times_framework_listings).
            const bool in_view = listed_only_ ? ranking_->framework_listings(*a) > 0 : ranking_->suggested(*a);
            if (!decide_unsuggested && !in_view) {
                Candidate c;
                c.id = std::string(a->id());
                c.notes = a->notes();
                c.state = Candidate::State::not_checked;
                c.suggested = ranking_->suggested(*a);
                c.listings = ranking_->framework_listings(*a);
                undecided_.emplace(items_.size(), a);
                items_.push_back(std::move(c));
                return true;
            }
            Candidate c = evaluate(*a, p_, f_);
            c.suggested = ranking_->suggested(*a);
            c.listings = ranking_->framework_listings(*a);
            if (c.state == Candidate::State::not_timed && hold_reference_ && c.notes.has(Note::reference)) {
                held_.push_back(std::move(c));
                continue;
            }
            eligible_ += c.state == Candidate::State::not_timed;
            items_.push_back(std::move(c));
            return true;
        }
        if (held_.empty()) return false;
        for (Candidate& c : held_) {
            if (eligible_ > 0) skip_reference(c);
            items_.push_back(std::move(c));
        }
        if (eligible_ == 0) eligible_ = static_cast<int>(held_.size());
        held_.clear();
        return true;
    }
    // Extends until `n` candidates are eligible (n < 0: all) or the ranking has ended.
    void reach(int n) {
        while ((n < 0 || eligible_ < n) && extend()) {
        }
    }
    // Walks the ranking to its end, deciding support for every algorithm the heuristics suggest,
    // in ranking order (SelectionPolicy::decides_support_before_timing); the others are listed
    // undecided.
    void decide_suggested() {
        while (extend(false)) {
        }
    }
    // Whether items()[i] is listed undecided.
    bool undecided(std::size_t i) const { return undecided_.count(i) > 0; }
    // Decides the support of items()[i] (and applies the filters) when it is listed undecided.
    void decide(std::size_t i) {
        const auto it = undecided_.find(i);
        if (it == undecided_.end()) return;
        Candidate c = evaluate(*it->second, p_, f_);
        c.suggested = items_[i].suggested;
        c.listings = items_[i].listings;
        undecided_.erase(it);
        if (c.state == Candidate::State::not_timed && hold_reference_ && c.notes.has(Note::reference) && eligible_ > 0) skip_reference(c);
        eligible_ += c.state == Candidate::State::not_timed;
        items_[i] = std::move(c);
    }
    std::vector<Candidate> finish() && {
        // Candidates left undecided: explained when producing the ranking decided their support
        // already (no extra cost), else left not checked.
        while (!undecided_.empty()) {
            const std::size_t i = undecided_.begin()->first;
            if (ranking_->decided()) {
                decide(i);
                if (items_[i].state == Candidate::State::not_timed) items_[i].reason = "not reached: the decision ended before it";
            } else {
                items_[i].reason = "not reached: the heuristics do not suggest it and the search ended before it";
                undecided_.erase(undecided_.begin());
            }
        }
        if (!ended_ && ranking_->decided()) {
            // Producing the ranking decided every support already: explain the rest too, in
            // heuristic order, at no extra cost.
            while (const Algorithm* a = ranking_->next()) {
                Candidate c = evaluate(*a, p_, f_);
                if (c.state == Candidate::State::not_timed) {
                    if (hold_reference_ && c.notes.has(Note::reference)) skip_reference(c);
                    else c.reason = "not reached: the decision ended before it";
                }
                items_.push_back(std::move(c));
            }
            ended_ = true;
        }
        for (Candidate& c : held_) {  // reached, and others are eligible
            skip_reference(c);
            items_.push_back(std::move(c));
        }
        return complete(b_, p_, std::move(items_), ended_);
    }

private:
    void skip_reference(Candidate& c) const {
        c.state = Candidate::State::filtered;
        c.reason = "REFERENCE is skipped by the " + std::string(to_string(f_.policy)) + " policy while others are eligible";
    }

    const Backend& b_;
    const ConvProblem& p_;
    const FlagValues& f_;
    std::unique_ptr<Ranking> ranking_;
    bool hold_reference_;
    bool listed_only_;
    bool ended_ = false;
    int eligible_ = 0;
    std::vector<Candidate> items_, held_;
    std::map<std::size_t, const Algorithm*> undecided_;  // items_ position -> its algorithm
};

int64_t adaptive_threshold(const Decision& provisional, const FlagValues& f) {
    if (f.adaptive_after > 0) return f.adaptive_after;
    // Ski rental: a search times each eligible candidate up to benchmark_limit of them (a
    // warm-up and up to max_samples runs, each about as long as the heuristic's pick or
    // longer), so it costs about timed x (1 + max_samples) calls of the shape. Running the
    // heuristic's pick that many times first keeps the total within about twice the better of
    // "never search" and "search at once", whichever the stream turns out to favour
    // (docs/autotuning.md has the numbers).
    int64_t eligible = 0;
    for (const Candidate& c : provisional.candidates)
        eligible += c.state == Candidate::State::not_timed || c.state == Candidate::State::chosen_untimed;
    if (const int limit = policy_of(f.policy).search_reach(f); limit > 0) eligible = std::min<int64_t>(eligible, limit);  // what the search times
    return std::max<int64_t>(2, eligible * (1 + f.max_samples));
}

Selector::Selector(const Backend& backend, TuningCache& cache, TuningDatabase* db) : backend_(backend), cache_(cache), db_(db) {}

Decision Selector::decide(const ConvProblem& p, const FlagValues& f) const { return decide(p, f, nullptr, nullptr); }

DeviceBuffer Selector::workspace(std::size_t bytes, const WorkspaceSource* ws) const {
    if (!ws || !*ws) return backend_.allocate(bytes);
    DeviceBuffer b = (*ws)(bytes);
    return b && b.bytes() >= bytes ? std::move(b) : DeviceBuffer{};
}

Decision Selector::decide(const ConvProblem& p, const FlagValues& f, const ConvTensors* t, const WorkspaceSource* ws) const {
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
    const SelectionPolicy& policy = policy_of(f.policy);
    CandidateList list(backend_, p, f);
    // A search extends the list itself as it goes; benchmark off reaches what the policy asks
    // (the first eligible candidate; the adaptive policy's provisional decision counts what a
    // search would time, for adaptive_threshold).
    list.reach(f.benchmark ? 1 : policy.heuristic_reach(f));
    if (list.eligible() == 0) throw Error(no_candidate_message(backend_, p, std::move(list).finish()));

    if (f.benchmark) return search(p, f, list, d.key, t, ws);

    if (policy.uses_fixed_default(f)) {
        if (const Algorithm* fd = backend_.fixed_default(p)) {
            list.reach(-1);
            for (Candidate& c : list.items())
                if (c.id == fd->id() && c.state == Candidate::State::not_timed) {
                    workspace_of(backend_, p, c);
                    c.state = Candidate::State::chosen_untimed;
                    c.reason = "PyTorch v7: deterministic && !benchmark uses the fixed default";
                    d.algorithm = c.id;
                    d.source = Source::fixed;
                    d.candidates = std::move(list).finish();
                    return d;
                }
        }
    }
    for (Candidate& c : list.items())
        if (c.state == Candidate::State::not_timed) {
            workspace_of(backend_, p, c);
            c.state = Candidate::State::chosen_untimed;
            c.reason = "the heuristic's first eligible choice";
            d.algorithm = c.id;
            break;
        }
    d.source = Source::heuristic;
    d.candidates = std::move(list).finish();
    return d;
}

Decision Selector::search(const ConvProblem& p, const FlagValues& f, CandidateList& list, const std::string& key,
                          const ConvTensors* caller, const WorkspaceSource* source) const {
    Decision d;
    d.key = key;
    d.source = Source::search;
    if (observer_) observer_->search_started(p);
    const bool host_memory = uses_host_memory(backend_);
    // Without the caller's tensors: scratch tensors with real-looking data (none on a device
    // that needs none); their preparation is not search time.
    std::optional<DeviceTensors> scratch;
    ConvTensors t;
    if (caller) {
        t = *caller;
    } else {
        if (host_memory) check_memory_budget(p);
        scratch.emplace(backend_, p);
        t = scratch->require("to time candidates").views();
    }

    const SelectionPolicy& policy = policy_of(f.policy);
    const int limit = policy.search_reach(f);
    // Of the limit, `explore` slots are kept for candidates the heuristics do not suggest:
    // suggested ones past limit - explore wait (`deferred`) while the walk looks for unsuggested
    // ones, and get the slots the walk leaves. The heuristic's pick is always timed.
    const int explore = policy.explore_slots(f, limit, list.explores());
    int succeeded = 0, suggested_timed = 0;
    std::vector<std::size_t> deferred;
    // One workspace buffer for the whole search, grown when a candidate needs more: allocating
    // and freeing one per candidate costs a device synchronisation each on a GPU.
    DeviceBuffer ws;
    Measurement m(policy.measurement(f));
    const auto t0 = Clock::now();
    std::vector<Candidate>& cands = list.items();
    const std::string limit_reason = "benchmark_limit=" + std::to_string(f.benchmark_limit) + " reached";
    // PyTorch builds a plan for every configuration its heuristics suggest before timing any.
    if (policy.decides_support_before_timing()) list.decide_suggested();
    // Listed-only policies (times_framework_listings): a candidate counts, and is timed, once per
    // listing; the listings after the first only cost time (PyTorch sorts them as separate plans).
    const bool by_listings = policy.times_framework_listings();
    // Earlier searches of this process may have demoted some candidates (search_history.hpp).
    const Demotion demotion = policy.demotion();
    const std::string kind = history_kind(p, f);
    // Enters candidate cands[i] into the measurement (its workspace first); true when it ran.
    auto time_candidate = [&](std::size_t i) {
        Candidate& c = cands[i];
        const Algorithm* a = lookup(backend_, c.id);
        const std::size_t need = workspace_of(backend_, p, c);
        if (std::string msg = host_memory ? over_memory_budget(p, need) : std::string(); !msg.empty()) {
            c.state = Candidate::State::out_of_memory;
            c.reason = msg;
            return false;
        }
        if (need > ws.bytes()) {
            ws = DeviceBuffer{};  // free the smaller one first
            ws = workspace(need, source);
            if (!ws) {
                c.state = Candidate::State::out_of_memory;
                c.reason = "cannot allocate " + std::to_string(need) + " B of workspace";
                return false;
            }
        }
        // One timed call, reported to the observer (a simulator's meter). The workspace is read
        // at each call: the buffer may have grown since.
        TimedCall call = [this, a, &p, &t, &ws, need](Status& st) {
            const Workspace w{need ? ws.data() : nullptr, need};
            const double ms = backend_.time_ms([&] { st = a->run(p, t, w); });
            if (observer_) observer_->candidate_timed(p, *a, ms);
            if (st.ok()) history_.ran(*a);
            return ms;
        };
        const TimedCall again = by_listings && c.listings > 1 ? call : TimedCall{};
        const Trial& r = m.enter(i, std::move(call), a->compiles_at_first_use(p), history_.warm(*a));
        if (!r.status.ok()) {
            fail_candidate(c, r.status);
            return false;
        }
        // Each further listing: its own warm-up and timed call, as PyTorch times a duplicate plan.
        for (int k = 1; again && k < c.listings; ++k) {
            Status st;
            again(st);
            again(st);
        }
        return true;
    };
    // Candidates in heuristic order, the list extended as the search reaches its end, until
    // `limit` have been timed or the ranking has ended.
    for (std::size_t i = 0; i < cands.size() || ((limit < 0 || succeeded < limit) && list.extend()); ++i) {
        if (list.undecided(i)) {
            if (limit >= 0 && succeeded >= limit) continue;  // not reached: its support stays undecided
            if (by_listings && cands[i].listings == 0) continue;  // never seen by the framework's search
            list.decide(i);
        }
        Candidate& c = cands[i];
        if (c.state != Candidate::State::not_timed) continue;
        if (by_listings && c.listings == 0) {
            c.reason = "not in the framework's lists (Ranking::framework_listings): its search never sees it";
            continue;
        }
        if (limit >= 0 && succeeded >= limit) {
            c.reason = limit_reason;
            continue;
        }
        if (waits_for_explore_slot(c, suggested_timed, limit, explore)) {
            deferred.push_back(i);
            continue;
        }
        if (succeeded > 0)  // the heuristic's pick is timed whatever its history
            if (std::string why = history_.demoted(c.id, kind, demotion); !why.empty()) {
                c.reason = std::move(why);
                continue;
            }
        if (time_candidate(i)) {
            succeeded += by_listings ? c.listings : 1;
            suggested_timed += c.suggested;
        }
    }
    // The slots the unsuggested candidates left, in heuristic order.
    for (std::size_t i : deferred) {
        Candidate& c = cands[i];
        if (succeeded >= limit) {
            c.reason = limit_reason + " (" + std::to_string(explore) + " kept for candidates the heuristics do not suggest)";
            continue;
        }
        if (std::string why = history_.demoted(c.id, kind, demotion); !why.empty()) {
            c.reason = std::move(why);
            continue;
        }
        succeeded += time_candidate(i);
    }
    // What the measurement found, onto the candidates.
    m.finish();
    const std::string winner = take_measurement(m, cands, policy);
    judge(history_, cands, winner, kind, demotion);
    d.search_ms = ms_since(t0);
    d.candidates = std::move(list).finish();
    if (winner.empty()) throw Error(no_candidate_message(backend_, p, d.candidates));
    d.algorithm = winner;
    for (const Candidate& c : d.candidates)
        if (c.id == winner) d.median_ms = c.median_ms;
    return d;
}

std::shared_ptr<const Decision> Selector::select(const ConvProblem& p, const FlagValues& f) { return select(p, f, nullptr, nullptr); }

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
    const SelectionPolicy& policy = policy_of(f.policy);
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
                        c.reason += "; provisional: the " + std::string(policy.name()) + " policy times the shape's own calls in turn and pins one";
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
    const SelectionPolicy& policy = policy_of(f.policy);
    if (!db_ || !policy.persists() || !persist_refusal(policy.measurement(f), winner_samples(d)).empty()) return;
    const auto now = std::chrono::system_clock::now();
    DbRecord r{d.algorithm, d.median_ms, 0, 0, d.search_ms, static_cast<int64_t>(std::chrono::system_clock::to_time_t(now))};
    for (const Candidate& c : d.candidates)
        if (c.id == d.algorithm) r.spread = c.spread, r.samples = static_cast<int>(c.samples_ms.size());
    db_->store(env, key, r);
}

Status Selector::execute(const Algorithm& a, const ConvProblem& p, const ConvTensors& t, double* timed_ms,
                         const WorkspaceSource* source) const {
    const std::size_t wsb = a.workspace_size(p);
    if (std::string m = uses_host_memory(backend_) ? over_memory_budget(p, wsb) : std::string(); !m.empty()) return Status::out_of_memory(m);
    DeviceBuffer ws = wsb ? workspace(wsb, source) : DeviceBuffer{};
    if (wsb && !ws) return Status::out_of_memory("cannot allocate " + std::to_string(wsb) + " B of workspace for " + std::string(a.id()));
    Status st;
    if (!observer_ && !timed_ms) return a.run(p, t, {ws.data(), wsb});
    const double ms = backend_.time_execution_ms([&] { st = a.run(p, t, {ws.data(), wsb}); });
    if (timed_ms) *timed_ms = ms;
    if (observer_) observer_->executed(p, a, st, ms);
    return st;
}

// An in-band shape until it is pinned: its own copies of the problem and flags (the candidate
// list refers to them), the candidates reached so far and the measurement of their calls.
// Its measurement is paced by the selector's exploration budget, shared by every in-band shape.
struct Rotation {
    Rotation(const Backend& b, const ConvProblem& problem, const FlagValues& flags, ExplorationBudget& budget)
        : p(problem), f(flags), list(b, p, f), m(policy_of(f.policy).measurement(f), &budget),
          limit(policy_of(f.policy).search_reach(f)), explore(policy_of(f.policy).explore_slots(f, limit, list.explores())) {}
    std::mutex mutex;  // one call of the shape at a time
    const ConvProblem p;
    const FlagValues f;
    CandidateList list;
    Measurement m;
    const int limit;         // candidates that rotate at most (-1: all)
    const int explore;       // of them, kept for candidates the heuristics do not suggest (as a search's)
    std::size_t next = 0;    // the list position to look at for the next candidate to enter
    int suggested_entered = 0;
    std::deque<std::size_t> deferred;  // suggested candidates past limit - explore, waiting for the slots the walk leaves
    bool entering = true;    // candidates are still being entered (their first calls)
    bool pinned = false;

    // The list position of the next candidate to enter, or nullopt once `limit` have run their
    // first call successfully or the ranking has ended. As in a search, `explore` of the limit
    // are kept for candidates the heuristics do not suggest: suggested ones past limit - explore
    // wait until the ranking has ended and then take the slots left, in heuristic order.
    // Candidates demoted by the selector's history (after the first, the heuristic's pick) are
    // passed over.
    std::optional<std::size_t> next_candidate(const SearchHistory& history) {
        const Demotion demotion = policy_of(f.policy).demotion();
        const std::string kind = history_kind(p, f);
        while (entering) {
            int ok = 0;
            for (const Trial& t : m.trials()) ok += t.status.ok();
            if (limit >= 0 && ok >= limit) break;
            std::size_t i = 0;
            bool waited = false;
            if (next < list.items().size() || list.extend()) {
                i = next++;
            } else if (!deferred.empty()) {
                i = deferred.front();
                deferred.pop_front();
                waited = true;
            } else {
                break;
            }
            Candidate& c = list.items()[i];
            if (c.state != Candidate::State::not_timed) continue;
            if (!waited && waits_for_explore_slot(c, suggested_entered, limit, explore)) {
                deferred.push_back(i);
                continue;
            }
            if (!m.trials().empty())
                if (std::string why = history.demoted(c.id, kind, demotion); !why.empty()) {
                    c.reason = std::move(why);
                    continue;
                }
            suggested_entered += c.suggested;
            return i;
        }
        entering = false;
        return std::nullopt;
    }
};

std::optional<Status> Selector::rotate(const ConvProblem& p, const ConvTensors& t, const FlagValues& f, const std::string& key,
                                      const WorkspaceSource* source) {
    std::shared_ptr<Rotation> r;
    {
        std::lock_guard lock(rotations_mutex_);
        std::shared_ptr<Rotation>& slot = rotations_[key];
        if (!slot) slot = std::make_shared<Rotation>(backend_, p, f, exploration_);
        r = slot;
    }
    std::lock_guard lock(r->mutex);
    if (r->pinned) return std::nullopt;  // by the call this one waited for
    std::optional<Status> computed;  // this call's output, when a candidate computed it
    for (;;) {
        // The next candidate enters once the last one entered has made its first call (a paced
        // call may have run another instead).
        if (const std::optional<std::size_t> i = r->m.awaiting_warm_up() ? std::nullopt : r->next_candidate(history_)) {
            workspace_of(backend_, p, r->list.items()[*i]);
            const Algorithm* entering = lookup(backend_, r->list.items()[*i].id);
            r->m.add(*i, entering && entering->compiles_at_first_use(p), entering && history_.warm(*entering));
        }
        const int due = r->m.due();
        if (due < 0) break;  // decided
        const Trial& trial = r->m.trials()[static_cast<std::size_t>(due)];
        const Algorithm* a = lookup(backend_, r->list.items()[trial.order].id);
        double ms = 0;
        const Status st = a ? execute(*a, p, t, &ms, source) : Status::failure("unknown algorithm");
        if (st.ok()) history_.ran(*a);
        r->m.record(static_cast<std::size_t>(due), ms, st);
        if (!st.ok()) continue;  // no output: the next due candidate makes this call
        computed = st;
        if (r->entering || r->m.due() >= 0) return computed;
        break;  // this call decided it
    }
    // Decided: pin the shape (and persist it as a searched decision).
    const SelectionPolicy& policy = policy_of(f.policy);
    Decision d;
    d.key = key;
    d.source = Source::search;
    const std::string winner = take_measurement(r->m, r->list.items(), policy);
    judge(history_, r->list.items(), winner, history_kind(p, f), policy.demotion());
    for (Candidate& c : r->list.items())
        if (c.state == Candidate::State::not_timed && r->limit >= 0 && c.reason.empty())
            c.reason = "benchmark_limit=" + std::to_string(f.benchmark_limit) + " reached";
    d.candidates = std::move(r->list).finish();
    {
        std::lock_guard lock(rotations_mutex_);
        rotations_.erase(key);
    }
    r->pinned = true;
    if (winner.empty()) throw Error(no_candidate_message(backend_, p, d.candidates));
    d.algorithm = winner;
    for (Candidate& c : d.candidates)
        if (c.id == winner) {
            d.median_ms = c.median_ms;
            c.reason = "pinned in-band after " + std::to_string(r->m.calls()) + " calls" + (c.reason.empty() ? "" : "; " + c.reason);
        }
    persist(environment_of(backend_), key, d, f);
    cache_.put(key, std::move(d));
    return computed;
}

Status Selector::run(const ConvProblem& p, const ConvTensors& t, const FlagValues& f, const WorkspaceSource* source,
                     RunInfo* info) {
    check_tensors(p, t);
    bool hit = false;
    std::shared_ptr<const Decision> d = select_cached(p, f, &t, source, &hit);
    auto tell = [&] {
        if (info) *info = {d->algorithm, hit ? Source::memory : d->source, hit ? 0.0 : d->search_ms};
    };
    const bool in_band = f.enabled && policy_of(f.policy).in_band(f);
    if (d->provisional && in_band) {
        tell();
        if (std::optional<Status> st = rotate(p, t, f, d->key, source)) return *st;
        d = select_cached(p, f, &t, source, &hit);  // pinned
    }
    if (in_band) exploration_.ran(d->median_ms);  // a pinned shape's call: the exploration budget's base
    tell();
    // The chosen algorithm first: the whole of a call whose choice runs.
    Status last = Status::failure("no candidate");
    if (const Algorithm* a = d->algorithm.empty() ? nullptr : lookup(backend_, d->algorithm)) {
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
        else if (c.state == Candidate::State::not_timed || c.state == Candidate::State::chosen_untimed) untimed.push_back(&c);
    }
    std::stable_sort(timed.begin(), timed.end(), [](auto* a, auto* b) { return a->median_ms < b->median_ms; });
    order.insert(order.end(), timed.begin(), timed.end());
    order.insert(order.end(), untimed.begin(), untimed.end());
    // Runs one candidate other than the decision's choice (which failed above); true when it ran,
    // and then it is the choice.
    auto attempt = [&](const Candidate& c) {
        if (c.id == d->algorithm) return false;
        const Algorithm* a = lookup(backend_, c.id);
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
