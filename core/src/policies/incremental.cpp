// incremental: in-band tuning, after cuTENSOR's incremental autotuning. A shape is never searched:
// its real calls are the samples.
//   key        as convtune (`benchmark` is part of it)
//   when       never a search. With benchmark on, each real call of the shape (Selector::run)
//              runs the candidate whose call is due and times it, as an execution, as it
//              runs: every candidate computes the right output, so no call is spent on
//              timing alone. The first call runs the heuristic's first eligible candidate (what
//              benchmark off runs), the second it again (a sample of what it takes), the next
//              ones the other candidates' first calls (their warm-ups), then rounds of one call
//              of each candidate still racing. Exploring is paced (measurement.hpp,
//              ExplorationBudget, one per selector): a call of another candidate than the pick is
//              made only while exploring's extra cost so far, plus that call's estimate, stays
//              within 20% of what the selector's calls would have taken without it; otherwise the
//              call runs the fastest candidate called so far. So a first iteration full of new
//              shapes runs their picks, and a shape is pinned later than without pacing. Once the
//              measurement has decided, the shape is pinned. select() without a call answers
//              with the heuristic's pick, marked provisional, until then. With benchmark off it
//              is the convtune policy.
//   which      as convtune's search: the eligible candidates in heuristic order (deterministic
//              keeps only deterministic ones, so only those rotate and one of them is pinned), at
//              most benchmark_limit of them (0: all), a naive reference only when nothing else is
//              eligible, with convtune's explore slots (explore_slots of the benchmark_limit kept
//              for candidates the heuristics do not suggest, when the ranking has such); a
//              candidate that fails or runs out of memory is replaced by the next.
//   how        MeasureStrategy::in_band (measurement.hpp): convtune's robust rule on the calls as
//              they come, paced (explore_fraction 0.2): racing drops a candidate clearly slower than the leader (every
//              call over 3x the leader's slowest after the first round; from min_samples on, slower beyond the noise),
//              the rotation ends when one candidate is left, when the ones left are tied with stable medians, at
//              max_samples rounds (the cap) or once search_budget_ms of calls have run; then the fastest median is
//              pinned if its lead over the heuristic's pick exceeds the noise, else the heuristic's pick.
//   persisted  as convtune: the pinned decision, with its spread and sample count, is stored in
//              the tuning database (unless its spread is above 50%), and a later process reads
//              it back and rotates nothing
#include <deque>
#include <mutex>
#include <unordered_map>

#include "../search.hpp"
#include "policies.hpp"

namespace convtune::policies {

namespace {

// An in-band shape until it is pinned: its own copies of the problem and flags (the candidate
// list refers to them), the candidates reached so far and the measurement of their calls.
// Its measurement is paced by the selector's exploration budget, shared by every in-band shape.
struct Rotation {
    Rotation(const Backend& b, const ConvProblem& problem, const FlagValues& flags, ExplorationBudget& budget)
        : p(problem), f(flags), list(b, p, f), m(f.policy->measurement(f), &budget),
          limit(f.policy->search_reach(f)), explore(f.policy->explore_slots(f, limit, list.explores())) {
        // As in a search: a suggested candidate that would wait is listed undecided, its support
        // asked only when it gets a slot.
        list.defer_suggested([this] { return suggested_slots_full(suggested_entered, limit, explore); });
    }
    std::mutex mutex;  // one call of the shape at a time
    const ConvProblem p;
    const FlagValues f;
    CandidateList list;
    Measurement m;
    const int limit;         // candidates that rotate at most (-1: all)
    const int explore;       // of them, kept for candidates the heuristics do not suggest (as a search's)
    std::size_t next = 0;    // the list position to look at for the next candidate to enter
    int suggested_entered = 0;
    std::deque<std::size_t>
        deferred;            // suggested candidates past limit - explore, waiting for the slots the walk leaves
    bool entering = true;    // candidates are still being entered (their first calls)
    bool pinned = false;

    // The list position of the next candidate to enter, or nullopt once `limit` have run their
    // first call successfully or the ranking has ended. As in a search, `explore` of the limit
    // are kept for candidates the heuristics do not suggest: suggested ones past limit - explore
    // wait until the ranking has ended and then take the slots left, in heuristic order.
    // Candidates demoted by the selector's history (after the first, the heuristic's pick) are
    // passed over.
    std::optional<std::size_t> next_candidate(const SearchHistory& history) {
        const Demotion demotion = f.policy->demotion();
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
            if (!waited && list.undecided(i) && c.suggested) {
                deferred.push_back(i);
                continue;
            }
            if (c.state != Candidate::State::not_timed && !list.undecided(i)) continue;
            if (!waited && waits_for_explore_slot(c, suggested_entered, limit, explore)) {
                deferred.push_back(i);
                continue;
            }
            if (!m.trials().empty())
                if (std::string why = history.demoted(c.id, kind, demotion); !why.empty()) {
                    c.reason = std::move(why);
                    continue;
                }
            if (list.undecided(i)) {
                list.decide(i);
                if (list.items()[i].state != Candidate::State::not_timed) continue;
            }
            suggested_entered += c.suggested;
            return i;
        }
        entering = false;
        return std::nullopt;
    }
};

// The selector's in-band shapes not yet pinned, by cache key.
struct Rotations final : PolicyState {
    std::mutex mutex;
    std::unordered_map<std::string, std::shared_ptr<Rotation>> shapes;
};

class Incremental final : public ConvtuneSearch {
public:
    bool in_band(const FlagValues& f) const override { return f.benchmark; }
    MeasureStrategy measurement(const FlagValues& f) const override { return MeasureStrategy::in_band(f); }
    std::unique_ptr<PolicyState> make_state() const override { return std::make_unique<Rotations>(); }
    std::optional<Status> run_in_band(InBandCall& call) const override;
};

// The shape's next call: the candidate whose call is due runs, timed as it runs; once the
// measurement has decided, the shape is pinned.
std::optional<Status> Incremental::run_in_band(InBandCall& call) const {
    const ConvProblem& p = call.p;
    const FlagValues& f = call.f;
    const std::string& key = call.key;
    const Backend& b = call.backend();
    SearchHistory& history = call.history();
    Rotations& rotations = static_cast<Rotations&>(*call.state);
    std::shared_ptr<Rotation> r;
    {
        std::lock_guard lock(rotations.mutex);
        std::shared_ptr<Rotation>& slot = rotations.shapes[key];
        if (!slot) slot = std::make_shared<Rotation>(b, p, f, call.exploration());
        r = slot;
    }
    std::lock_guard lock(r->mutex);
    if (r->pinned) return std::nullopt;  // by the call this one waited for
    std::optional<Status> computed;  // this call's output, when a candidate computed it
    for (;;) {
        // The next candidate enters once the last one entered has made its first call (a paced
        // call may have run another instead).
        if (const std::optional<std::size_t> i = r->m.awaiting_warm_up() ? std::nullopt : r->next_candidate(history)) {
            workspace_of(b, p, r->list.items()[*i]);
            const Algorithm* entering = b.find(r->list.items()[*i].id);
            r->m.add(*i, entering && entering->compiles_at_first_use(p), entering && history.warm(*entering));
        }
        const int due = r->m.due();
        if (due < 0) break;  // decided
        const Trial& trial = r->m.trials()[static_cast<std::size_t>(due)];
        const Algorithm* a = b.find(r->list.items()[trial.order].id);
        double ms = 0;
        const Status st = a ? call.execute(*a, &ms) : Status::failure("unknown algorithm");
        if (st.ok()) history.ran(*a);
        r->m.record(static_cast<std::size_t>(due), ms, st);
        if (!st.ok()) continue;  // no output: the next due candidate makes this call
        computed = st;
        if (r->entering || r->m.due() >= 0) return computed;
        break;  // this call decided it
    }
    // Decided: pin the shape (and persist it as a searched decision).
    Decision d;
    d.key = key;
    d.source = Source::search;
    const std::string winner = take_measurement(r->m, r->list.items(), *this);
    judge(history, r->list.items(), winner, history_kind(p, f), demotion());
    for (Candidate& c : r->list.items())
        if (c.state == Candidate::State::not_timed && r->limit >= 0 && c.reason.empty())
            c.reason = "benchmark_limit=" + std::to_string(f.benchmark_limit) + " reached";
    d.candidates = std::move(r->list).finish();
    {
        std::lock_guard lock(rotations.mutex);
        rotations.shapes.erase(key);
    }
    r->pinned = true;
    if (winner.empty()) throw Error(no_candidate_message(b, p, d.candidates));
    d.algorithm = winner;
    for (Candidate& c : d.candidates)
        if (c.id == winner) {
            d.median_ms = c.median_ms;
            c.reason = "pinned in-band after " + std::to_string(r->m.calls()) + " calls" +
                       (c.reason.empty() ? "" : "; " + c.reason);
        }
    call.pin(std::move(d));
    return computed;
}

}  // namespace

const SelectionPolicy& incremental() {
    static const Incremental p;
    return p;
}

}  // namespace convtune::policies
