// Report: a simulation as a terminal table, JSON, CSV or an SVG plot of cumulative time per
// iteration (one line per setting, break-even points marked).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "convtune/progress.hpp"
#include "convtune/sim/simulator.hpp"

namespace convtune::sim {

struct ReportContext {
    std::string title;   // e.g. "resnet50, inference, stream fixed"
    std::string details; // one more line: engine, backend, seed
};

std::string format_table(const SimulationResult& r, const ReportContext& c);
nlohmann::json to_json(const SimulationResult& r, const ReportContext& c);
std::string to_csv(const SimulationResult& r);
std::string to_svg(const SimulationResult& r, const ReportContext& c);

// The library's progress bar (convtune/progress.hpp), under the name the simulator's users know.
using convtune::Progress;

}  // namespace convtune::sim
