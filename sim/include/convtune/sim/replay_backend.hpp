// ReplayBackend: a Backend whose algorithms mirror a recording (ids, notes, support, workspace,
// heuristic order, fallback) and whose run() advances a virtual clock instead of computing.
//
// The n-th call of algorithm a on problem p in a scenario takes, in virtual time: the recorded
// first (cold) call when n = 0 and the recording has one, else one of the recorded samples drawn
// by a hash of (seed, p, a, n). So the spread and the single-sample noise of the real device are
// reproduced, a replay is reproducible from its seed, and the n-th call costs the same whichever
// flag setting is simulated. When the recording measured them, the scenario's first call also
// pays the process start-up (startup_ms), and every warm call of an execution (set_in_sequence:
// a call of the workload's sequence, not a search's timed sample) is scaled by the recording's
// sequence_factor.
//
// Deciding costs what the recording measured, once per scenario as in a live process (whose
// backend keeps its plans and heuristics answers): the first supports(p) of an algorithm on a
// problem costs its support_ms (on cuDNN the plan build, a runtime compile included), the first
// ranking(p) of a problem its ranking_ms (the heuristics queries). Neither is inside a timed call,
// so neither changes what a search measures: they advance the clock and are counted apart
// (deciding_ms), for the simulator to charge to search. A recording without them charges
// nothing. Where it has support times, the ranking does not claim to have decided support
// (Ranking::decided), so a decision asks supports() only of what it reaches, as on cuDNN.
//
// A problem the recording lacks is estimated (Estimation::any; with Estimation::same_layer only
// from a recorded problem of the same layer, as `tune --replay` does, so that no decision of a
// tuning database rests on assumed support; with Estimation::none it is unsupported by every
// algorithm, as `simulate --strict` wants). Its support, heuristic order, fallback, fixed default and
// workspace (scaled by the ratio of multiply-adds) are assumed from the nearest recorded problem
// (fewest multiply-adds apart) of, in this order of preference: the same layer (everything but
// batch and input sizes equal); the same direction, type, layout and kind (grouped/depthwise,
// dilated, 1x1 or not); the same direction, type and layout; the same direction. Each
// algorithm's median time comes from the PerfModel fitted on the recording (perf_model.hpp), with
// its uncertainty; the neighbour's samples and cold-call overhead are carried over around it.
// A problem whose direction the recording never measured stays unanswerable.
//
// Memory is virtual too (allocate returns placeholders; nothing is read or written), so replaying
// big problems costs no host memory; needs_tensor_data() is false, so tensors are allocated but
// never filled.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "convtune/sim/perf_model.hpp"
#include "convtune/sim/recording.hpp"

namespace convtune::sim {

class ReplayBackend final : public Backend {
public:
    enum class Estimation { none, same_layer, any };
    explicit ReplayBackend(Recording r, uint64_t seed = 1, Estimation estimation = Estimation::same_layer);
    ~ReplayBackend() override;

    std::string_view name() const override { return recording_.environment.backend; }
    Availability availability() const override { return {}; }
    BackendIdentity identity() const override;
    std::span<const Algorithm* const> algorithms() const override { return list_; }
    std::vector<const Algorithm*> heuristic_order(const ConvProblem& p) const override;
    // heuristic_order, with the recording's unsuggested ids reported as not suggested and its
    // listings (those of kRecordedLists together, recording.hpp) as its heuristic list's; its
    // fallback list is empty.
    std::unique_ptr<Ranking> ranking(const ConvProblem& p) const override;
    const Algorithm* native_fallback(const ConvProblem& p) const override;
    const Algorithm* fixed_default(const ConvProblem& p) const override;
    DeviceBuffer allocate(std::size_t bytes) const override;
    void upload(void*, const void*, std::size_t) const override {}
    void download(void*, const void*, std::size_t) const override {}
    double time_ms(const std::function<void()>& fn) const override;
    bool needs_tensor_data() const override { return false; }
    // Whether the calls that follow are a workload's executions, run in sequence, rather than a
    // selector's timed samples, run in isolation: the recording's sequence_factor applies to the
    // warm ones. The simulator's meter sets it around each execution its selector reports
    // (SelectorObserver::executing, executed); reset() clears it.
    void set_in_sequence(bool on) const;

    const Recording& recording() const { return recording_; }
    // A fresh process: virtual clock 0, no call, support decision or ranking seen yet, draws
    // from `seed`.
    void reset(uint64_t seed);
    double clock_ms() const;
    // Since reset(): the virtual time charged for support decisions and rankings (in clock_ms,
    // in no timed call).
    double deciding_ms() const;

    // The record answering p: recorded, estimated (see above), or nullptr.
    const ProblemRecord* lookup(const ConvProblem& p) const;

    // How an estimated problem was estimated.
    struct Estimate {
        std::unique_ptr<ProblemRecord> record;  // nullptr: unanswerable
        std::string neighbour;                  // the recorded problem support was assumed from
        // The same layer recorded at a second size (batch or input), when the recording has one:
        // the times follow the layer's own scaling between the two (PerfModel::predict).
        std::string partner;
        std::string basis;                      // which preference level found it (see above)
        std::map<std::string, double> sigma;    // per algorithm: standard deviation of log(time)
        // Multiply-adds of p against the nearest recorded problem of its direction and type
        // (of its direction when the type was never recorded): >= 1, either way round.
        double extrapolation = 1;
        bool floored = false;  // some algorithm's time was raised to the launch floor (PerfModel)
    };
    // nullptr for a recorded problem (or with Estimation::none).
    const Estimate* estimate(const ConvProblem& p) const;
    const PerfModel& model() const { return model_; }
    Estimation estimation() const { return estimation_; }
    // Since reset(): how much lower and higher the virtual time could be if every estimated call
    // was at the low or high end of its stated range (PerfModel::kSigmas).
    std::pair<double, double> uncertainty_ms() const;
    bool is_recorded(const ConvProblem& p) const { return recording_.find(p) != nullptr; }

    // Used by the replayed algorithms.
    Status replay_run(const ConvProblem& p, const std::string& id) const;
    Support replay_supports(const ConvProblem& p, const std::string& id) const;

private:
    const Estimate& unrecorded(const ConvProblem& p) const;  // p is not recorded: its estimate, made once

    Recording recording_;
    PerfModel model_;
    Estimation estimation_;
    std::vector<std::unique_ptr<Algorithm>> owned_;
    std::vector<const Algorithm*> list_;
    mutable std::mutex mutex_;
    mutable uint64_t seed_;
    mutable double clock_ = 0;
    mutable double timing_ = 0;  // time of the calls inside the innermost time_ms
    mutable bool in_sequence_ = false;  // set_in_sequence
    mutable bool started_ = false;  // the scenario's first call (and its start-up cost) is done
    mutable std::map<std::string, int64_t> calls_;  // "<problem>|<id>" -> calls so far
    mutable std::set<std::string> decided_;  // "<problem>|<id>" whose support was decided
    mutable std::set<std::string> ranked_;   // problems ranked
    mutable double deciding_ = 0;            // deciding_ms()
    mutable double below_ = 0, above_ = 0;  // uncertainty_ms()
    mutable std::map<std::string, Estimate> estimated_;
};

}  // namespace convtune::sim
