// convtune list [backends|recordings] [--json]: backends, their availability and identity, algorithms
// with notes; or the recording library (`--replay NAME`) and what each of its recordings covers.
// The work is convtune::app::list; this file fills the request and prints the report.
#include <fmt/core.h>

#include <memory>

#include "cli.hpp"
#include "convtune/app/list.hpp"

namespace convtune::cli {

void add_list(CLI::App& app, Action& action) {
    auto* cmd = app.add_subcommand("list", "List backends and their algorithms with numerical notes");
    auto json = std::make_shared<bool>(false);
    auto r = std::make_shared<app::ListRequest>();
    cmd->add_option("what", r->what,
                    "backends (the default) or recordings (the recording library behind --replay NAME)")
        ->check(CLI::IsMember({"backends", "recordings"}));
    cmd->add_flag("--json", *json, "Print one JSON document");
    cmd->callback([json, r, &action] {
        action = [json, r] {
            const app::ListReport rep = app::list(*r);
            fmt::print("{}", *json ? app::json_text(app::to_json(rep)) : app::to_text(rep));
            return ok;
        };
    });
}

}  // namespace convtune::cli
