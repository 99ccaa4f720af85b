// convtune parse FILE: validate a shape file, print one canonical line per problem.
#include <fmt/core.h>

#include <filesystem>

#include "cli.hpp"
#include "convtune/error.hpp"

namespace convtune::cli {

void add_parse(CLI::App& app, Action& action) {
    auto* cmd = app.add_subcommand("parse", "Validate a shape file (benchdnn or canonical) and print canonical lines");
    auto file = std::make_shared<std::string>();
    auto over = std::make_shared<ProblemOverrides>();
    cmd->add_option("file", *file, "Shape file")->required();
    over->add_to(*cmd);
    cmd->callback([=, &action] {
        action = [=] {
            std::error_code ec;
            if (std::filesystem::is_directory(*file, ec)) throw Error(*file + ": is a directory (expected a shape file)");
            const auto lines = read_shape_file(*file);  // throws with the line number
            for (const ShapeLine& l : lines) {
                fmt::print("{}\n", to_shape_line(over->apply(l.problem), l.name, l.repeat));
            }
            fmt::print(stderr, "{}: {} problems\n", *file, lines.size());
            return ok;
        };
    });
}

}  // namespace convtune::cli
