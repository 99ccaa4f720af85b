// convtune parse FILE: validate a shape file, print one canonical line per problem.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "convtune/error.hpp"

namespace convtune::cli {

void add_parse(CLI::App& app, Action& action) {
    auto* cmd = app.add_subcommand("parse", "Validate a shape file (benchdnn or canonical) and print canonical lines");
    auto file = std::make_shared<std::string>();
    auto over = std::make_shared<ProblemOverrides>();
    auto json = std::make_shared<bool>(false);
    cmd->add_option("file", *file, "Shape file")->required();
    cmd->add_flag("--json", *json, "Print a JSON array of problems with their fields (for tools in other languages)");
    over->add_to(*cmd);
    cmd->callback([=, &action] {
        action = [=] {
            const auto lines = read_shape_file(*file);  // throws with the line number
            if (*json) {
                // One object per line: the canonical key and every field spelled out, spatial
                // sizes as arrays of the problem's spatial rank, so a reader needs no parser.
                nlohmann::json doc = nlohmann::json::array();
                for (const ShapeLine& l : lines) {
                    const ConvProblem p = over->apply(l.problem);
                    auto dims = [&](const Dims& d) { return std::vector<int64_t>(d.begin(), d.begin() + p.spatial_dims); };
                    doc.push_back({{"key", p.to_string()}, {"name", l.name}, {"repeat", l.repeat},
                                   {"dir", std::string(to_string(p.direction))}, {"dtype", std::string(to_string(p.dtype))},
                                   {"layout", p.layout == Layout::nhwc ? "nhwc" : "nchw"}, {"n", p.n}, {"c", p.c},
                                   {"k", p.k}, {"groups", p.groups}, {"in", dims(p.in)}, {"ker", dims(p.kernel)},
                                   {"stride", dims(p.stride)}, {"dil", dims(p.dilation)}, {"pad", dims(p.pad_begin)},
                                   {"pad_end", dims(p.pad_end)}, {"out", [&] {
                                       std::vector<int64_t> o;
                                       for (int i = 0; i < p.spatial_dims; ++i) o.push_back(p.out(i));
                                       return o;
                                   }()}});
                }
                fmt::print("{}\n", doc.dump(1));
                return ok;
            }
            for (const ShapeLine& l : lines) {
                fmt::print("{}\n", to_shape_line(over->apply(l.problem), l.name, l.repeat));
            }
            fmt::print(stderr, "{}: {} problems\n", *file, lines.size());
            return ok;
        };
    });
}

}  // namespace convtune::cli
