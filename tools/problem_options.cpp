#include <charconv>
#include <cmath>
#include <cstdlib>

#include "cli.hpp"
#include "convtune/error.hpp"

namespace convtune::cli {

const CLI::Validator& non_empty() {
    static const CLI::Validator v(
        [](std::string& s) { return s.empty() ? std::string("must not be empty") : std::string(); }, "NONEMPTY");
    return v;
}

const CLI::Validator& seed() {
    static const CLI::Validator v(
        [](std::string& s) {
            uint64_t x = 0;
            const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
            if (s.empty() || s.front() == '-' || s.front() == '+' || ec != std::errc() || p != s.data() + s.size())
                return "'" + s + "' is not an integer in [0, 18446744073709551615]";
            return std::string();
        },
        "SEED");
    return v;
}

const CLI::Validator& fraction() {
    static const CLI::Validator v(
        [](std::string& s) {
            char* end = nullptr;
            const double x = std::strtod(s.c_str(), &end);
            if (s.empty() || *end != '\0' || !std::isfinite(x) || x < 0 || x > 1)
                return "'" + s + "' is not a number in [0, 1]";
            return std::string();
        },
        "FRACTION");
    return v;
}

void ProblemOverrides::add_to(CLI::App& app) {
    app.add_option("--dir", dir, "Override the direction: fwd, bwd_data, bwd_filter")->check(non_empty());
    app.add_option("--dtype", dtype, "Override the data type: f32, f16, bf16")->check(non_empty());
    app.add_option("--layout", layout, "Override the layout: nchw (channels first) or nhwc (channels last)")
        ->check(non_empty());
}

ConvProblem ProblemOverrides::apply(ConvProblem p) const { return with_overrides(std::move(p), dir, dtype, layout); }

}  // namespace convtune::cli
