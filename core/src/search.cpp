// The tools of a policy's walk (search.hpp).
#include "search.hpp"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "convtune/host_data.hpp"
#include "convtune/stats.hpp"

namespace convtune {

Candidate evaluate(const Algorithm& a, const ConvProblem& p, const FlagValues& f) {
    Candidate c;
    c.id = std::string(a.id());
    c.notes = a.notes();
    // Notes known before the support check are filtered first (Algorithm::notes_before_support):
    // nothing is built for what the flags drop. Where supports(p) holds, the state and reason are
    // those the filters give after it; where it would not, the candidate is filtered instead of
    // unsupported (not eligible either way).
    if (const std::optional<Notes> early = a.notes_before_support(p))
        if (std::string why = flag_filter_reason(*early, p, f); !why.empty()) {
            c.notes = *early;
            c.state = Candidate::State::filtered;
            c.reason = std::move(why);
            return c;
        }
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
        c.reason =
            "workspace " + std::to_string(*c.workspace) + " B > limit " + std::to_string(f.workspace_limit) + " B";
    }
    return c;
}

bool suggested_slots_full(int suggested, int limit, int explore) { return explore > 0 && suggested >= limit - explore; }

bool waits_for_explore_slot(const Candidate& c, int suggested, int limit, int explore) {
    return c.suggested && suggested_slots_full(suggested, limit, explore);
}

namespace {

using Clock = std::chrono::steady_clock;

bool was_eligible(Candidate::State s) {
    using S = Candidate::State;
    return s == S::not_timed || s == S::chosen_untimed || s == S::timed || s == S::out_of_memory || s == S::failed;
}

}  // namespace

std::vector<Candidate> complete(const Backend& b, const ConvProblem& p, std::vector<Candidate> cands,
                                bool ranking_ended) {
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
    std::string m =
        "no algorithm of backend '" + std::string(b.name()) + "' can run " + p.to_string() + " under these flags";
    for (const Candidate& c : cands)
        m += "\n  " + c.id + ": " + std::string(to_string(c.state)) + (c.reason.empty() ? "" : ": " + c.reason);
    return m;
}

std::size_t workspace_of(const Backend& b, const ConvProblem& p, Candidate& c) {
    if (!c.workspace) {
        const Algorithm* a = b.find(c.id);
        c.workspace = a ? a->workspace_size(p) : 0;
    }
    return *c.workspace;
}

void fail_candidate(Candidate& c, const Status& st) {
    c.state = st.code == Status::Code::out_of_memory ? Candidate::State::out_of_memory : Candidate::State::failed;
    c.reason = st.message;
}

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
        if (std::string no = persist_refusal(m.strategy(), w.samples_ms); !no.empty())
            w.reason += (w.reason.empty() ? "" : "; ") + no;
    return w.id;
}

std::string history_kind(const ConvProblem& p, const FlagValues& f) {
    std::string k(to_string(p.dtype));
    k += p.layout == Layout::nhwc ? "/nhwc" : "/nchw";
    if (p.dtype == DataType::f32 && f.allow_tf32) k += "/tf32";
    return k;
}

void judge(SearchHistory& h, const std::vector<Candidate>& cands, const std::string& winner, const std::string& kind,
           const Demotion& d) {
    if (!(d.ratio > 0)) return;
    double winner_ms = 0;
    for (const Candidate& c : cands)
        if (c.id == winner) winner_ms = c.median_ms;
    for (const Candidate& c : cands)
        if (c.state == Candidate::State::timed) h.judged(c.id, kind, c.median_ms, winner_ms, d);
}

CandidateList::CandidateList(const Backend& b, const ConvProblem& p, const FlagValues& f)
    : b_(b),
      p_(p),
      f_(f),
      ranking_(b.ranking(p)),
      lists_(f.policy->draws_from()),
      hold_reference_(f.policy->holds_back_reference()) {}

bool CandidateList::extend(bool decide_all) {
    while (!ended_) {
        const Algorithm* a = ranking_->next();
        if (!a) {
            ended_ = true;
            break;
        }
        const int listings = ranking_->in_lists(*a, lists_);
        const bool suggested = ranking_->suggested(*a);
        // Appends `a` with its support not asked; an undecided one (its `suggested` read) may be
        // decided later (decide(i)).
        auto not_checked = [&](std::string reason, bool undecided) {
            Candidate c;
            c.id = std::string(a->id());
            c.notes = a->notes();
            c.state = Candidate::State::not_checked;
            c.reason = std::move(reason);
            c.listings = listings;
            if (undecided) {
                c.suggested = suggested;
                undecided_.emplace(items_.size(), a);
            }
            items_.push_back(std::move(c));
            return true;
        };
        if (!decide_all && listings == 0) return not_checked({}, true);
        if (skip_ && !suggested)
            if (std::string why = skip_(a->id()); !why.empty()) return not_checked(std::move(why), false);
        if (defer_ && suggested && defer_()) return not_checked({}, true);
        Candidate c = evaluate(*a, p_, f_);
        c.suggested = suggested;
        c.listings = listings;
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

void CandidateList::reach(int n) {
    while ((n < 0 || eligible_ < n) && extend()) {
    }
}

void CandidateList::decide_drawn() {
    while (extend(false)) {
    }
    // A ranking knows how many times its lists hold an algorithm once it has walked past them
    // (cuDNN's fallback list names again configurations mode A yielded): each candidate's count,
    // read as it was reached, is read again now that the ranking has ended, and one that turns
    // out to be listed after all has its support decided.
    std::unordered_map<std::string_view, const Algorithm*> by_id;
    for (const Algorithm* a : b_.algorithms()) by_id.emplace(a->id(), a);
    for (std::size_t i = 0; i < items_.size(); ++i) {
        const auto it = by_id.find(items_[i].id);
        if (it == by_id.end()) continue;
        items_[i].listings = ranking_->in_lists(*it->second, lists_);
        if (items_[i].listings > 0) decide(i);
    }
}

void CandidateList::decide(std::size_t i) {
    const auto it = undecided_.find(i);
    if (it == undecided_.end()) return;
    Candidate c = evaluate(*it->second, p_, f_);
    c.suggested = items_[i].suggested;
    c.listings = items_[i].listings;
    undecided_.erase(it);
    if (c.state == Candidate::State::not_timed && hold_reference_ && c.notes.has(Note::reference) && eligible_ > 0)
        skip_reference(c);
    eligible_ += c.state == Candidate::State::not_timed;
    items_[i] = std::move(c);
}

std::vector<Candidate> CandidateList::finish() && {
    // Candidates left undecided: explained when producing the ranking decided their support
    // already (no extra cost), else left not checked.
    // A reason the walk gave (a deferred candidate's: the limit reached) is kept.
    while (!undecided_.empty()) {
        const std::size_t i = undecided_.begin()->first;
        std::string why = std::move(items_[i].reason);
        if (ranking_->decided()) {
            decide(i);
            if (items_[i].state == Candidate::State::not_timed)
                items_[i].reason = why.empty() ? "not reached: the decision ended before it" : std::move(why);
        } else {
            items_[i].reason = why.empty() ? (items_[i].suggested
                                                  ? "not reached: the search ended before it"
                                                  : "not reached: the heuristics do not suggest it and the search ended "
                                                    "before it")
                                           : std::move(why);
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

void CandidateList::skip_reference(Candidate& c) const {
    c.state = Candidate::State::filtered;
    c.reason = "REFERENCE is skipped by the " + std::string(to_string(f_.policy)) + " policy while others are eligible";
}

Error SearchContext::no_candidate() { return Error(no_candidate_message(backend(), p, std::move(list).finish())); }

Decision SearchContext::choose_untimed(std::size_t i, Source source, const std::string& reason) {
    Candidate& c = list.items()[i];
    workspace_of(backend(), p, c);
    c.state = Candidate::State::chosen_untimed;
    c.reason = reason;
    Decision d;
    d.key = key;
    d.algorithm = c.id;
    d.source = source;
    d.candidates = std::move(list).finish();
    return d;
}

SearchTimer::SearchTimer(SearchContext& ctx) : ctx_(ctx) {
    if (SelectorObserver* o = ctx.observer()) o->search_started(ctx.p);
    if (ctx.tensors) {
        t_ = *ctx.tensors;
    } else {
        if (ctx.backend().memory() == Memory::host) check_memory_budget(ctx.p);
        scratch_.emplace(ctx.backend(), ctx.p);
        t_ = scratch_->require("to time candidates").views();
    }
    t0_ = Clock::now();
}

bool SearchTimer::time(std::size_t i, Measurement& m, int repeats) {
    const Backend& b = ctx_.backend();
    const ConvProblem& p = ctx_.p;
    Candidate& c = ctx_.list.items()[i];
    const Algorithm* a = b.find(c.id);
    const std::size_t need = workspace_of(b, p, c);
    if (std::string msg = b.memory() == Memory::host ? over_memory_budget(p, need) : std::string(); !msg.empty()) {
        c.state = Candidate::State::out_of_memory;
        c.reason = msg;
        return false;
    }
    if (need > ws_.bytes()) {
        ws_ = DeviceBuffer{};  // free the smaller one first
        ws_ = ctx_.workspace(need);
        if (!ws_) {
            c.state = Candidate::State::out_of_memory;
            c.reason = "cannot allocate " + std::to_string(need) + " B of workspace";
            return false;
        }
    }
    // One timed call, reported to the observer (a simulator's meter). The workspace is read at
    // each call: the buffer may have grown since.
    TimedCall call = [this, a, &b, &p, need](Status& st) {
        const Workspace w{need ? ws_.data() : nullptr, need};
        const double ms = b.time_ms([&] { st = a->run(p, t_, w); });
        if (SelectorObserver* o = ctx_.observer()) o->candidate_timed(p, *a, ms);
        if (st.ok()) ctx_.history().ran(*a);
        return ms;
    };
    const TimedCall again = repeats > 0 ? call : TimedCall{};
    const Trial& r = m.enter(i, std::move(call), a->compiles_at_first_use(p), ctx_.history().warm(*a));
    if (!r.status.ok()) {
        fail_candidate(c, r.status);
        return false;
    }
    for (int k = 0; k < repeats; ++k) {
        Status st;
        again(st);
        again(st);
    }
    return true;
}

Decision SearchTimer::finish(Measurement& m) {
    Decision d;
    d.key = ctx_.key;
    d.source = Source::search;
    m.finish();
    const SelectionPolicy& policy = *ctx_.f.policy;
    const std::string winner = take_measurement(m, ctx_.list.items(), policy);
    judge(ctx_.history(), ctx_.list.items(), winner, history_kind(ctx_.p, ctx_.f), policy.demotion());
    d.search_ms = ms_since(t0_);
    d.candidates = std::move(ctx_.list).finish();
    if (winner.empty()) throw Error(no_candidate_message(ctx_.backend(), ctx_.p, d.candidates));
    d.algorithm = winner;
    for (const Candidate& c : d.candidates)
        if (c.id == winner) d.median_ms = c.median_ms;
    return d;
}

void InBandCall::pin(Decision d) const {
    selector.persist(environment_of(backend()), key, d, f);
    selector.cache_.put(key, std::move(d));
}

}  // namespace convtune
