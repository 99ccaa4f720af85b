#include "convtune/app/report.hpp"

#include <nlohmann/json.hpp>

namespace convtune::app {

std::string json_text(const nlohmann::json& doc) { return doc.dump(2) + "\n"; }

}  // namespace convtune::app
