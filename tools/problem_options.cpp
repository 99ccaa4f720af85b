#include "cli.hpp"
#include "convtune/error.hpp"

namespace convtune::cli {

void ProblemOverrides::add_to(CLI::App& app) {
    app.add_option("--dir", dir, "Override the direction: fwd, bwd_data, bwd_filter");
    app.add_option("--dtype", dtype, "Override the data type: f32, f16, bf16");
    app.add_option("--layout", layout, "Override the layout: nchw (channels first) or nhwc (channels last)");
}

ConvProblem ProblemOverrides::apply(ConvProblem p) const {
    if (!dir.empty()) p.direction = parse_direction(dir);
    if (!dtype.empty()) p.dtype = parse_dtype(dtype);
    if (!layout.empty()) {
        if (layout == "nchw" || layout == layout_name(Layout::nchw, p.spatial_dims)) p.layout = Layout::nchw;
        else if (layout == "nhwc" || layout == layout_name(Layout::nhwc, p.spatial_dims)) p.layout = Layout::nhwc;
        else throw ParseError("layout: unknown layout '" + layout + "' (expected nchw or nhwc)");
    }
    p.validate();
    return p;
}

}  // namespace convtune::cli
