// db show / check / merge: tuning database files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "convtune/app/report.hpp"
#include "convtune/tuning_db.hpp"

namespace convtune::app {

struct DbShowRequest {
    std::string path;
};
struct DbShowReport {
    std::string path;
    std::vector<DbSection> sections;
};
DbShowReport db_show(const DbShowRequest& r);  // throws ParseError with the reason
// {"format", "path", "environments": [{"environment", "backend", "library", "device", "driver",
//  "convtune", "entries": [{"key", "algorithm", "median_ms", "spread", "samples", "search_ms", "time"}]}]}
nlohmann::json to_json(const DbShowReport& r);
std::string to_text(const DbShowReport& r);

struct DbCheckRequest {
    std::string path;
};
struct DbCheckReport {
    std::string path;
    int64_t environments = 0, entries = 0;
    struct Unknown {
        std::string key, algorithm;
    };
    std::vector<Unknown> unknown;  // entries whose algorithm this build does not have
};
DbCheckReport db_check(const DbCheckRequest& r);  // an invalid file throws ParseError
// {"format", "path", "valid": true, "environments", "entries", "unknown": [{"key", "algorithm"}]}
nlohmann::json to_json(const DbCheckReport& r);

struct DbMergeRequest {
    std::string out;                  // created or updated
    std::vector<std::string> inputs;  // merged in, in order; the newer record wins
};
struct DbMergeReport {
    std::string out;
    int64_t environments = 0, entries = 0;
};
DbMergeReport db_merge(const DbMergeRequest& r);
// {"format", "out", "environments", "entries"}
nlohmann::json to_json(const DbMergeReport& r);

}  // namespace convtune::app
