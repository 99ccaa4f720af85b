// convtune db show|check PATH [--json], convtune db merge OUT IN... [--json]
// The work is convtune::app::db_show / db_check / db_merge; this file prints their reports.
#include <fmt/core.h>

#include <memory>

#include "cli.hpp"
#include "convtune/app/db.hpp"

namespace convtune::cli {

namespace {

int show(const std::string& path, bool json) {
    const app::DbShowReport r = app::db_show({path});
    fmt::print("{}", json ? app::json_text(app::to_json(r)) : app::to_text(r));
    return ok;
}

int check(const std::string& path, bool json) {
    const app::DbCheckReport r = app::db_check({path});
    for (const app::DbCheckReport::Unknown& u : r.unknown)
        fmt::print(stderr, "convtune: warning: {}: algorithm '{}' is not in this build\n", u.key, u.algorithm);
    if (json) fmt::print("{}", app::json_text(app::to_json(r)));
    else
        fmt::print("{}: valid, {} environments, {} entries, {} with algorithms unknown to this build\n", r.path,
                   r.environments, r.entries, r.unknown.size());
    return ok;
}

int merge(const std::string& out, const std::vector<std::string>& inputs, bool json) {
    const app::DbMergeReport r = app::db_merge({out, inputs});
    if (json) fmt::print("{}", app::json_text(app::to_json(r)));
    else fmt::print("{}: {} environments, {} entries\n", r.out, r.environments, r.entries);
    return ok;
}

}  // namespace

void add_db(CLI::App& app, Action& action) {
    auto* cmd = app.add_subcommand("db", "Inspect, check and merge tuning databases");
    cmd->require_subcommand(1);
    auto path = std::make_shared<std::string>();
    auto inputs = std::make_shared<std::vector<std::string>>();
    auto json = std::make_shared<bool>(false);
    auto* s = cmd->add_subcommand("show", "List every environment and entry");
    s->add_option("path", *path, "Database file")->required();
    s->add_flag("--json", *json, "Print one JSON document");
    s->callback([=, &action] { action = [=] { return show(*path, *json); }; });
    auto* c = cmd->add_subcommand("check", "Validate a database file (exit 2 with the reason when invalid)");
    c->add_option("path", *path, "Database file")->required();
    c->add_flag("--json", *json, "Print one JSON document");
    c->callback([=, &action] { action = [=] { return check(*path, *json); }; });
    auto* m = cmd->add_subcommand("merge", "Merge databases into OUT (newer records win)");
    m->add_option("out", *path, "Output database (created or updated)")->required();
    m->add_option("inputs", *inputs, "Databases to merge in")->required();
    m->add_flag("--json", *json, "Print one JSON document");
    m->callback([=, &action] { action = [=] { return merge(*path, *inputs, *json); }; });
}

}  // namespace convtune::cli
