#include "convtune/sim/options.hpp"

#include <cstdlib>
#include <sstream>

#include "convtune/error.hpp"

namespace convtune::sim {

namespace {

std::vector<std::string> split_commas(const std::string& text) {
    std::vector<std::string> out;
    std::stringstream ss(text);
    for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
    return out;
}

}  // namespace

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& option) {
    std::vector<int64_t> v;
    for (const std::string& s : split_commas(text)) {
        char* end = nullptr;
        const long long x = std::strtoll(s.c_str(), &end, 10);
        if (s.empty() || *end != '\0' || x < 1 || x > (1 << 20))
            throw Error(option + ": '" + s + "' is not an integer in [1, 1048576] (expected a comma-separated list)");
        v.push_back(x);
    }
    if (v.empty()) throw Error(option + ": empty list");
    return v;
}

std::vector<double> parse_double_list(const std::string& text, const std::string& option) {
    std::vector<double> v;
    for (const std::string& s : split_commas(text)) {
        char* end = nullptr;
        const double x = std::strtod(s.c_str(), &end);
        if (s.empty() || *end != '\0' || !(x > 0) || x > 64)
            throw Error(option + ": '" + s + "' is not a number in (0, 64] (expected a comma-separated list)");
        v.push_back(x);
    }
    if (v.empty()) throw Error(option + ": empty list");
    return v;
}

Stream WorkloadArgs::make_stream() const {
    StreamSpec spec = StreamSpec::parse(stream);
    spec.seed = seed;
    if (!batches.empty()) spec.batches = parse_int_list(batches, "--batches");
    if (!scales.empty()) spec.scales = parse_double_list(scales, "--scales");
    WorkloadOptions o;
    o.mode = parse_mode(mode);
    if (batch < 0) throw Error("--batch: must be >= 1");
    o.batch = batch;
    try {
        if (!dtype.empty()) o.dtype = parse_dtype(dtype);
    } catch (const Error& e) {
        throw Error(std::string("--dtype: ") + e.what());
    }
    if (!layout.empty()) {
        if (layout == "nchw" || layout == "ncw" || layout == "ncdhw") o.layout = Layout::nchw;
        else if (layout == "nhwc" || layout == "nwc" || layout == "ndhwc") o.layout = Layout::nhwc;
        else throw Error("--layout: unknown layout '" + layout + "' (expected nchw or nhwc)");
    }
    Workload w;
    if (spec.kind != StreamKind::trace) {
        if (workload.empty()) throw Error("--workload: required (a built-in name or a file) unless the stream is a trace");
        w = load_workload(workload, shapes_dir);
    } else if (!workload.empty()) {
        throw Error("--workload: a trace stream brings its own problems; leave --workload out");
    }
    return Stream(spec, std::move(w), o);
}

std::string WorkloadArgs::describe(const Stream& s) const {
    std::string d;
    if (s.spec().kind == StreamKind::trace) return "trace " + s.spec().trace_path + " (" + std::to_string(s.trace_length()) + " iterations)";
    const Workload& w = s.workload();
    d = w.name + " (" + std::to_string(w.layers.size()) + " layers, " + std::to_string(w.convolutions()) + " convolutions per pass), ";
    d += s.options().mode == Mode::train ? "training" : "inference";
    d += ", batch " + std::to_string(s.base_batch());
    if (s.options().dtype) d += ", " + std::string(to_string(*s.options().dtype));
    if (s.options().layout) d += ", " + layout_name(*s.options().layout, 2);
    d += ", stream " + std::string(to_string(s.spec().kind));
    return d;
}

}  // namespace convtune::sim
