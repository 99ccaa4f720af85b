#include "convtune/app/db.hpp"

#include <fmt/core.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "convtune/error.hpp"
#include "convtune/file_io.hpp"
#include "convtune/registry.hpp"

namespace convtune::app {

namespace {

bool known_algorithm(const std::string& id) {
    for (Backend* b : backends())
        if (b->find(id)) return true;
    return false;
}

int64_t count_entries(const std::vector<DbSection>& sections) {
    int64_t n = 0;
    for (const DbSection& s : sections) n += static_cast<int64_t>(s.entries.size());
    return n;
}

}  // namespace

DbShowReport db_show(const DbShowRequest& r) { return {r.path, TuningDatabase::read_file(r.path)}; }

nlohmann::json to_json(const DbShowReport& r) {
    nlohmann::json envs = nlohmann::json::array();
    for (const DbSection& s : r.sections) {
        nlohmann::json entries = nlohmann::json::array();
        for (const auto& [key, e] : s.entries)
            entries.push_back({{"key", key},
                               {"algorithm", e.algorithm},
                               {"median_ms", e.median_ms},
                               {"spread", e.spread},
                               {"samples", e.samples},
                               {"search_ms", e.search_ms},
                               {"time", e.time}});
        envs.push_back({{"environment", s.env.describe()},
                        {"convtune", s.env.convtune},
                        {"backend", s.env.backend},
                        {"library", s.env.library},
                        {"device", s.env.device},
                        {"driver", s.env.driver},
                        {"entries", entries}});
    }
    return {{"format", report_format}, {"path", r.path}, {"environments", envs}};
}

std::string to_text(const DbShowReport& r) {
    std::string out;
    for (const DbSection& s : r.sections) {
        out += fmt::format("{}  ({} entries)\n", s.env.describe(), s.entries.size());
        for (const auto& [key, e] : s.entries)
            out += fmt::format("  {:<36} {:>9.3f} ms  spread {:>4.0f}%  n={:<3} search {:>8.1f} ms  {}\n", e.algorithm,
                               e.median_ms, 100 * e.spread, e.samples, e.search_ms, key);
    }
    return out;
}

DbCheckReport db_check(const DbCheckRequest& r) {
    const auto sections = TuningDatabase::read_file(r.path);  // throws with the reason
    DbCheckReport rep{r.path, static_cast<int64_t>(sections.size()), count_entries(sections), {}};
    for (const DbSection& s : sections)
        for (const auto& [key, e] : s.entries)
            if (!known_algorithm(e.algorithm)) rep.unknown.push_back({key, e.algorithm});
    return rep;
}

nlohmann::json to_json(const DbCheckReport& r) {
    nlohmann::json unknown = nlohmann::json::array();
    for (const DbCheckReport::Unknown& u : r.unknown) unknown.push_back({{"key", u.key}, {"algorithm", u.algorithm}});
    return {{"format", report_format},        {"path", r.path},       {"valid", true},
            {"environments", r.environments}, {"entries", r.entries}, {"unknown", unknown}};
}

DbMergeReport db_merge(const DbMergeRequest& r) {
    if (r.out.empty()) throw InvalidRequest("out", "required");
    // Under the lock every writer of OUT takes (TuningDatabase::store's): an entry a concurrent
    // `tune --db OUT` stores is either in the file read here or stored after this write, never lost.
    check_output_path(r.out);
    const FileLock lock(r.out);
    std::vector<DbSection> acc;
    std::error_code ec;
    if (std::filesystem::exists(r.out, ec)) acc = TuningDatabase::read_file(r.out);
    for (const std::string& in : r.inputs) acc = TuningDatabase::merge(std::move(acc), TuningDatabase::read_file(in));
    TuningDatabase::write_file(r.out, acc);
    return {r.out, static_cast<int64_t>(acc.size()), count_entries(acc)};
}

nlohmann::json to_json(const DbMergeReport& r) {
    return {{"format", report_format}, {"out", r.out}, {"environments", r.environments}, {"entries", r.entries}};
}

}  // namespace convtune::app
