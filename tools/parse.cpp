// convtune parse FILE [--json]: validate a shape file, print one canonical line per problem.
// The work is convtune::app::parse; this file fills the request and prints the report.
#include <fmt/core.h>

#include <memory>

#include "cli.hpp"
#include "convtune/app/parse.hpp"

namespace convtune::cli {

void add_parse(CLI::App& app, Action& action) {
    auto* cmd = app.add_subcommand("parse", "Validate a shape file (benchdnn or canonical) and print canonical lines");
    auto file = std::make_shared<std::string>();
    auto over = std::make_shared<ProblemOverrides>();
    auto json = std::make_shared<bool>(false);
    cmd->add_option("file", *file, "Shape file")->required();
    cmd->add_flag("--json", *json,
                  "Print one JSON document: the problems with their fields (for tools in other languages)");
    over->add_to(*cmd);
    cmd->callback([=, &action] {
        action = [=] {
            const app::ParseReport rep =
                app::parse({.file = *file, .dir = over->dir, .dtype = over->dtype, .layout = over->layout});
            if (*json) {
                fmt::print("{}", app::json_text(app::to_json(rep)));
                return ok;
            }
            fmt::print("{}", app::to_text(rep));
            fmt::print(stderr, "{}: {} problems\n", rep.file, rep.lines.size());
            return ok;
        };
    });
}

}  // namespace convtune::cli
