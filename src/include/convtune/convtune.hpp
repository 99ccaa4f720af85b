// The user-facing call: run a convolution with the current flags.
//
//     convtune::convolution(problem, tensors);            // cpu backend, flags from current_flags()
//     convtune::FlagsGuard g(convtune::parse_flags("benchmark=1"));
//     convtune::convolution(problem, tensors, "onednn");
//
// A process-wide Context holds one tuning cache, the tuning database named by CONVTUNE_DB (if
// set) and one selector per backend. Tensors are device memory of the chosen backend (host
// memory for the cpu and onednn backends).
#pragma once

#include <memory>
#include <mutex>
#include <vector>
#include <string>
#include <string_view>

#include "convtune/flags.hpp"
#include "convtune/selector.hpp"

namespace convtune {

class Context {
public:
    // db_path empty = no persistence.
    explicit Context(const std::string& db_path = "", std::size_t cache_capacity = 10000);
    Selector& selector(const Backend& b);
    TuningCache& cache() { return cache_; }
    TuningDatabase* database() { return db_.get(); }

private:
    TuningCache cache_;
    std::unique_ptr<TuningDatabase> db_;
    std::mutex mutex_;
    std::vector<std::unique_ptr<Selector>> selectors_;
};

// The tuning database named by the CONVTUNE_DB environment variable ("" when unset): the
// default of the process-wide context and of `convtune tune` / convtune.tune().
std::string default_db_path();

// The process-wide context (database from default_db_path()).
Context& default_context();

// Selects (per the current flags) and runs. Bad input throws convtune::Error; a run that fails
// on every eligible algorithm returns its Status.
Status convolution(const ConvProblem& p, const ConvTensors& t, std::string_view backend = "cpu");

}  // namespace convtune
