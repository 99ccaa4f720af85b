// What every application report shares: the version of its JSON form and how that form is
// printed, so the CLI and the Python module return the same bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace convtune::app {

// The version of every report's JSON form (its "format" field). Raise it when a field changes
// meaning or goes away; adding a field keeps it.
inline constexpr int report_format = 1;

// A report's JSON text: two-space indentation and a final newline (what `--json` prints).
std::string json_text(const nlohmann::json& doc);

// Called as long operations progress: done, total, what is being worked on.
using ProgressFn = std::function<void(int64_t, int64_t, const std::string&)>;

}  // namespace convtune::app
