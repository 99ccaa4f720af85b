// What ranks send each other as JSON text: decisions in their exact form (to_json(Decision,
// DecisionForm::exact) and decision_from_json, decision.hpp: every rank runs the same build, so
// enums travel as their numbers and notes as their bits), database records as the database file
// holds them (to_json(DbRecord), db_record_from_json, tuning_db.hpp), and environments, below.
#pragma once

#include <nlohmann/json.hpp>

#include "convtune/tuning_db.hpp"

namespace convtune::dist {

nlohmann::json to_wire(const Environment& e);
Environment environment_from_wire(const nlohmann::json& j);

}  // namespace convtune::dist
