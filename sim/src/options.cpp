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

// Runs a parser whose errors read "<field>: <rule>" and throws them as this request's field.
template <class F>
auto as_field(const std::string& field, F parse) {
    try {
        return parse();
    } catch (const Error& e) {
        std::string rule = e.what();
        if (rule.rfind(field + ": ", 0) == 0) rule.erase(0, field.size() + 2);
        throw InvalidRequest(field, rule);
    }
}

}  // namespace

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& field) {
    std::vector<int64_t> v;
    for (const std::string& s : split_commas(text)) {
        char* end = nullptr;
        const long long x = std::strtoll(s.c_str(), &end, 10);
        if (s.empty() || *end != '\0' || x < 1 || x > (1 << 20))
            throw InvalidRequest(field, "'" + s + "' is not an integer in [1, 1048576] (expected a comma-separated list)");
        v.push_back(x);
    }
    if (v.empty()) throw InvalidRequest(field, "empty list");
    return v;
}

std::vector<double> parse_double_list(const std::string& text, const std::string& field) {
    std::vector<double> v;
    for (const std::string& s : split_commas(text)) {
        char* end = nullptr;
        const double x = std::strtod(s.c_str(), &end);
        if (s.empty() || *end != '\0' || !(x > 0) || x > 64)
            throw InvalidRequest(field, "'" + s + "' is not a number in (0, 64] (expected a comma-separated list)");
        v.push_back(x);
    }
    if (v.empty()) throw InvalidRequest(field, "empty list");
    return v;
}

Stream WorkloadArgs::make_stream() const {
    StreamSpec spec = StreamSpec::parse(stream);
    spec.seed = seed;
    if (!batches.empty()) spec.batches = parse_int_list(batches, "batches");
    if (!scales.empty()) spec.scales = parse_double_list(scales, "scales");
    WorkloadOptions o;
    o.mode = parse_mode(mode);
    if (batch < 0) throw InvalidRequest("batch", "must be >= 1");
    o.batch = batch;
    if (!dtype.empty()) o.dtype = as_field("dtype", [&] { return parse_dtype(dtype); });
    if (!layout.empty()) o.layout = as_field("layout", [&] { return parse_layout(layout); });
    Workload w;
    if (spec.kind != StreamKind::trace) {
        if (workload.empty()) throw InvalidRequest("workload", "required (a built-in name or a file) unless the stream is a trace");
        w = load_workload(workload, shapes_dir);
    } else if (!workload.empty()) {
        throw InvalidRequest("workload", "a trace stream brings its own problems; leave {workload} out");
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
