#include "cli.hpp"
#include "convtune/error.hpp"

namespace convtune::cli {

void ProblemOverrides::add_to(CLI::App& app) {
    app.add_option("--dir", dir, "Override the direction: fwd, bwd_data, bwd_filter");
    app.add_option("--dtype", dtype, "Override the data type: f32, f16, bf16");
    app.add_option("--layout", layout, "Override the layout: nchw (channels first) or nhwc (channels last)");
}

ConvProblem ProblemOverrides::apply(ConvProblem p) const { return with_overrides(std::move(p), dir, dtype, layout); }

}  // namespace convtune::cli
