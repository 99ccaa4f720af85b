// What ranks send each other: decisions, database records and environments as JSON text. Every
// rank runs the same build, so enums travel as their numbers and notes as their bits (lossless,
// unlike the report form to_json(Decision), which names them).
#pragma once

#include <nlohmann/json.hpp>

#include "convtune/decision.hpp"
#include "convtune/tuning_db.hpp"

namespace convtune::dist {

nlohmann::json to_wire(const Decision& d);
Decision decision_from_wire(const nlohmann::json& j);
nlohmann::json to_wire(const DbRecord& r);
DbRecord record_from_wire(const nlohmann::json& j);
nlohmann::json to_wire(const Environment& e);
Environment environment_from_wire(const nlohmann::json& j);

}  // namespace convtune::dist
