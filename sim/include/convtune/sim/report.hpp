// Report: a simulation as a terminal table, JSON, CSV or an SVG plot of cumulative time per
// iteration (one line per setting, break-even points marked).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

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

// A progress bar on stderr ("\r[=====     ] 12/50 label").
class Progress {
public:
    Progress(std::string label, bool enabled);
    ~Progress();
    void update(int64_t done, int64_t total, const std::string& what);
    void finish();

private:
    std::string label_;
    bool enabled_;
    bool drawn_ = false;
    double last_ = -1;
};

}  // namespace convtune::sim
