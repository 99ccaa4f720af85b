// convtune: the default policy.
//   key        `benchmark` is part of it (unlike PyTorch's)
//   when       at once, on the shape's first call
//   which      benchmark off: the heuristic's first eligible candidate; on: candidates in
//              heuristic order until benchmark_limit have run, keeping explore_slots of them for
//              candidates the backend's heuristics do not suggest (the heuristic's pick is always
//              timed; a suggested candidate waiting for the slots they leave is decided, on cuDNN
//              its plan built, only when it gets one); a naive reference implementation only when
//              nothing else is eligible;
//              an algorithm over 10x the winner in 2 earlier searches of this process on the same
//              kind of problem, and never within 1.5x of one, is demoted (not timed)
//   how        MeasureStrategy::robust (measurement.hpp)
//   persisted  in the tuning database when one is given
// Its walk is every policy's default: SelectionPolicy::pick and SelectionPolicy::search are
// defined here, on the answers above (a policy answering otherwise walks the same way with its
// own reach, slots and demotion).
#include <algorithm>
#include <vector>

#include "../search.hpp"
#include "policies.hpp"

namespace convtune {

std::span<const ListName> SelectionPolicy::draws_from() const {
    static constexpr ListName kAll[] = {ListName::all};
    return kAll;
}

Decision SelectionPolicy::pick(SearchContext& ctx) const {
    std::vector<Candidate>& cands = ctx.list.items();
    for (std::size_t i = 0; i < cands.size(); ++i)
        if (cands[i].state == Candidate::State::not_timed)
            return ctx.choose_untimed(i, Source::heuristic, "the heuristic's first eligible choice");
    throw ctx.no_candidate();  // the selector checked that one is eligible
}

Decision SelectionPolicy::search(SearchContext& ctx) const {
    const FlagValues& f = ctx.f;
    SearchTimer timer(ctx);
    const int limit = search_reach(f);
    // Of the limit, `explore` slots are kept for candidates the heuristics do not suggest:
    // suggested ones past limit - explore wait (`deferred`) while the walk looks for unsuggested
    // ones, and get the slots the walk leaves. The heuristic's pick is always timed.
    const int explore = explore_slots(f, limit, ctx.list.explores());
    int succeeded = 0, suggested_timed = 0;
    std::vector<std::size_t> deferred;
    Measurement m(measurement(f));
    std::vector<Candidate>& cands = ctx.list.items();
    const std::string limit_reason = "benchmark_limit=" + std::to_string(f.benchmark_limit) + " reached";
    // Earlier searches of this process may have demoted some candidates (search_history.hpp).
    const Demotion demotion = this->demotion();
    const std::string kind = history_kind(ctx.p, f);
    // A demoted candidate the heuristics do not suggest is passed over before its support is
    // asked (the walk past the heuristics' lists reaches every engine of the backend, and on
    // cuDNN asking builds one); the heuristic's pick, the first to run, is timed whatever its history.
    ctx.list.skip_unsuggested([&](std::string_view id) {
        return succeeded > 0 ? ctx.history().demoted(id, kind, demotion) : std::string();
    });
    // A suggested candidate that would wait for a slot the explore slots leave is listed
    // undecided: its support (on cuDNN: its engine and plan) is asked only if it gets one.
    ctx.list.defer_suggested([&] { return suggested_slots_full(suggested_timed, limit, explore); });
    // Candidates in heuristic order, the list extended as the search reaches its end, until
    // `limit` have been timed or the ranking has ended.
    for (std::size_t i = 0; i < cands.size() || ((limit < 0 || succeeded < limit) && ctx.list.extend()); ++i) {
        Candidate& c = cands[i];
        if (ctx.list.undecided(i) && c.suggested) {
            deferred.push_back(i);
            continue;
        }
        if (c.state != Candidate::State::not_timed) continue;
        if (limit >= 0 && succeeded >= limit) {
            c.reason = limit_reason;
            continue;
        }
        if (waits_for_explore_slot(c, suggested_timed, limit, explore)) {
            deferred.push_back(i);
            continue;
        }
        if (succeeded > 0)  // the heuristic's pick is timed whatever its history
            if (std::string why = ctx.history().demoted(c.id, kind, demotion); !why.empty()) {
                c.reason = std::move(why);
                continue;
            }
        if (timer.time(i, m)) {
            succeeded += 1;
            suggested_timed += c.suggested;
        }
    }
    // The slots the unsuggested candidates left, in heuristic order.
    for (std::size_t i : deferred) {
        Candidate& c = cands[i];
        if (succeeded >= limit) {
            c.reason =
                limit_reason + " (" + std::to_string(explore) + " kept for candidates the heuristics do not suggest)";
            continue;
        }
        if (std::string why = ctx.history().demoted(c.id, kind, demotion); !why.empty()) {
            c.reason = std::move(why);
            continue;
        }
        if (ctx.list.undecided(i)) {
            ctx.list.decide(i);
            if (cands[i].state != Candidate::State::not_timed) continue;
        }
        succeeded += timer.time(i, m);
    }
    ctx.list.skip_unsuggested({});  // they refer to this frame
    ctx.list.defer_suggested({});
    return timer.finish(m);
}

namespace policies {

int ConvtuneSearch::explore_slots(const FlagValues& f, int limit, bool explores) const {
    return limit > 0 && explores ? std::clamp(f.explore_slots, 0, limit - 1) : 0;
}

MeasureStrategy ConvtuneSearch::measurement(const FlagValues& f) const { return MeasureStrategy::robust(f); }

namespace {

class Convtune final : public ConvtuneSearch {};

}  // namespace

const SelectionPolicy& convtune() {
    static const Convtune p;
    return p;
}

}  // namespace policies

}  // namespace convtune
