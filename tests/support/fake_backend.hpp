// A scripted backend for exact tests of the selector and the simulator: every algorithm has
// fixed (or scripted) run times on a virtual clock, notes, a workspace size, and can be made
// to fail or run out of memory. Nothing is computed; time_ms returns the virtual time the
// algorithms "spent" inside the timed function, so totals are exact.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "convtune/backend.hpp"

namespace convtune::test {

struct FakeSpec {
    std::string id;
    std::vector<double> times_ms{1.0};  // run i takes times_ms[min(i, size-1)]
    Notes notes{};
    std::size_t workspace = 0;
    enum class Mode { ok, fails, out_of_memory, unsupported } mode = Mode::ok;
    // Optional: support only problems with this direction.
    int only_direction = -1;
    // Time as a multiple of the problem's GFLOP instead of times_ms (for simulations over many
    // shapes): ms = ms_per_gflop * flops / 1e9 (0 = use times_ms).
    double ms_per_gflop = 0;
    // false: the ranking yields it as not suggested by the heuristics (Ranking::suggested); a
    // backend with such an algorithm has a ranking that explores().
    bool suggested = true;
    // Its kernel is compiled at first use (Algorithm::compiles_at_first_use).
    bool compiles = false;
    // How many times the ranking's heuristic list holds it (Ranking::in_list; its fallback list is
    // empty); -1: the default (1 when suggested, else 0).
    int listings = -1;
    // Wall time workspace_size() takes (sleeps), as a deferred plan build with a kernel compile.
    double plan_build_ms = 0;
    // Its notes are known before supports() (Algorithm::notes_before_support), as a cuDNN engine's
    // are once the engine is built and before its plan is.
    bool notes_early = false;
};

class FakeBackend : public HostBackend {
public:
    FakeBackend(std::string name, std::vector<FakeSpec> specs, const Algorithm* native = nullptr,
                std::string fixed = "");
    ~FakeBackend() override;
    std::string_view name() const override { return name_; }
    Availability availability() const override { return {}; }
    BackendIdentity identity() const override { return {"fake 1.0", "virtual device", ""}; }
    std::span<const Algorithm* const> algorithms() const override { return list_; }
    const Algorithm* native_fallback(const ConvProblem&) const override;
    const Algorithm* fixed_default(const ConvProblem&) const override;
    // Every algorithm in the fixed order, support not decided (as cuDNN's ranking does): the
    // selector decides it for the candidates it reaches (support_queries counts them).
    std::unique_ptr<Ranking> ranking(const ConvProblem& p) const override;
    double time_ms(const std::function<void()>& fn) const override;
    DeviceBuffer allocate(std::size_t bytes) const override;

    // Virtual clock (ms) advanced by every run, and how many times each algorithm ran.
    double clock_ms() const { return clock_ms_; }
    int runs(const std::string& id) const;
    // How often an algorithm's workspace_size() was asked, and how many allocations succeeded.
    int workspace_queries(const std::string& id) const;
    // How often an algorithm's supports() was asked.
    int support_queries(const std::string& id) const;
    int allocations() const { return allocations_; }
    void reset_counters();
    void advance(double ms) const { clock_ms_ += ms; }
    // Allocations larger than this fail (out of memory), 0 = unlimited.
    std::size_t memory_limit = 0;
    // The ranking's lists report their default counts (Ranking::in_list) until it has ended, as
    // cuDNN's ranking learns that the fallback list names a configuration again only once it
    // walks past that list, after mode A yielded the configuration.
    bool listings_known_at_end = false;
    // When set, every run's time is multiplied by load(clock_ms()): the machine's load as it
    // drifts over (virtual) time, and any noise the test draws in it.
    std::function<double(double)> load;

private:
    std::string name_;
    std::vector<std::unique_ptr<Algorithm>> owned_;
    std::vector<const Algorithm*> list_;
    std::string fallback_id_, fixed_id_;
    mutable double clock_ms_ = 0;
    mutable std::atomic<int> allocations_{0};
};

}  // namespace convtune::test
