// The one table from request fields (convtune::app, the simulator's options) to the options
// that set them, so an InvalidRequest prints as "--shapes-dir: ..." here and "shapes_dir: ..."
// in Python.
#include <array>
#include <utility>

#include "cli.hpp"

namespace convtune::cli {

std::string option_name(std::string_view field) {
    static constexpr std::array<std::pair<std::string_view, std::string_view>, 31> table{{
        {"backend", "--backend"},   {"batch", "--batch"},           {"batches", "--batches"}, {"db", "--db"},
        {"dir", "--dir"},           {"dtype", "--dtype"},           {"flags", "--flags"},     {"from_db", "--from-db"},
        {"iterations", "--iterations"}, {"layout", "--layout"},     {"max_ms", "--max-ms"},   {"min_saving", "--min-saving"},
        {"mode", "--mode"},         {"out", "--out"},               {"plot", "--plot"},       {"policy", "--policy"},
        {"problem", "--problem"},   {"problems", "--problem"},      {"replay", "--replay"},   {"samples", "--samples"},
        {"scales", "--scales"},     {"seed", "--seed"},             {"shapes", "--shapes"},   {"shapes_dir", "--shapes-dir"},
        {"stream", "--stream"},     {"workload", "--workload"},     {"measured", "--pytorch-measured"},
        {"kernel_cache", "--kernel-cache"}, {"repeats", "--repeats"}, {"strict", "--strict"},
        {"db_flush", "--db-flush"},
    }};
    for (const auto& [f, option] : table)
        if (f == field) return std::string(option);
    // A field without an option (none today): its own name.
    return std::string(field);
}

}  // namespace convtune::cli
