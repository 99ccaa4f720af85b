// convtune db show|check PATH, convtune db merge OUT IN...
#include <fmt/core.h>

#include <filesystem>

#include "cli.hpp"
#include "convtune/error.hpp"
#include "convtune/file_io.hpp"
#include "convtune/registry.hpp"
#include "convtune/tuning_db.hpp"

namespace convtune::cli {

namespace {

bool known_algorithm(const std::string& id) {
    for (Backend* b : backends())
        if (b->find(id)) return true;
    return false;
}

int show(const std::string& path) {
    const auto sections = TuningDatabase::read_file(path);
    for (const DbSection& s : sections) {
        fmt::print("{}  ({} entries)\n", s.env.describe(), s.entries.size());
        for (const auto& [key, r] : s.entries)
            fmt::print("  {:<36} {:>9.3f} ms  spread {:>4.0f}%  n={:<3} search {:>8.1f} ms  {}\n", r.algorithm, r.median_ms, 100 * r.spread,
                       r.samples, r.search_ms, key);
    }
    return ok;
}

int check(const std::string& path) {
    const auto sections = TuningDatabase::read_file(path);  // throws with the reason
    std::size_t entries = 0, unknown = 0;
    for (const DbSection& s : sections)
        for (const auto& [key, r] : s.entries) {
            ++entries;
            if (!known_algorithm(r.algorithm)) {
                ++unknown;
                fmt::print(stderr, "convtune: warning: {}: algorithm '{}' is not in this build\n", key, r.algorithm);
            }
        }
    fmt::print("{}: valid, {} environments, {} entries, {} with algorithms unknown to this build\n", path, sections.size(), entries,
               unknown);
    return ok;
}

// Under the lock every writer of OUT takes (TuningDatabase::store's): an entry a concurrent
// `tune --db OUT` stores is either in the file read here or stored after this write, never lost.
int merge(const std::string& out, const std::vector<std::string>& inputs) {
    check_output_path(out);
    const FileLock lock(out);
    std::vector<DbSection> acc;
    std::error_code ec;
    if (std::filesystem::exists(out, ec)) acc = TuningDatabase::read_file(out);
    for (const std::string& in : inputs) acc = TuningDatabase::merge(std::move(acc), TuningDatabase::read_file(in));
    TuningDatabase::write_file(out, acc);
    std::size_t n = 0;
    for (const DbSection& s : acc) n += s.entries.size();
    fmt::print("{}: {} environments, {} entries\n", out, acc.size(), n);
    return ok;
}

}  // namespace

void add_db(CLI::App& app, Action& action) {
    auto* cmd = app.add_subcommand("db", "Inspect, check and merge tuning databases");
    cmd->require_subcommand(1);
    auto path = std::make_shared<std::string>();
    auto inputs = std::make_shared<std::vector<std::string>>();
    auto* s = cmd->add_subcommand("show", "List every environment and entry");
    s->add_option("path", *path, "Database file")->required();
    s->callback([=, &action] { action = [=] { return show(*path); }; });
    auto* c = cmd->add_subcommand("check", "Validate a database file (exit 2 with the reason when invalid)");
    c->add_option("path", *path, "Database file")->required();
    c->callback([=, &action] { action = [=] { return check(*path); }; });
    auto* m = cmd->add_subcommand("merge", "Merge databases into OUT (newer records win)");
    m->add_option("out", *path, "Output database (created or updated)")->required();
    m->add_option("inputs", *inputs, "Databases to merge in")->required();
    m->callback([=, &action] { action = [=] { return merge(*path, *inputs); }; });
}

}  // namespace convtune::cli
