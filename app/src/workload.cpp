#include "convtune/app/workload.hpp"

#include "convtune/error.hpp"

namespace convtune::app {

using namespace convtune::sim;

namespace {

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

Stream WorkloadRequest::make_stream() const {
    StreamSpec spec = StreamSpec::parse(stream);
    if (spec.kind == StreamKind::trace) {
        // A trace's problems are written out whole: nothing of the workload's options applies.
        const std::pair<const char*, bool> given[] = {{"mode", !mode.empty()},         {"batch", batch != 0},
                                                      {"dtype", !dtype.empty()},       {"layout", !layout.empty()},
                                                      {"batches", !batches.empty()},   {"scales", !scales.empty()},
                                                      {"shapes_dir", !shapes_dir.empty()}};
        for (const auto& [field, set] : given)
            if (set)
                throw InvalidRequest(
                    field,
                    "does not apply to a trace stream: its problems are written out whole (direction, batch, data "
                    "type, layout, sizes); leave {" +
                        std::string(field) + "} out");
    }
    // The lists a stream draws from apply to the streams that draw them, and only there.
    const bool draws_batches = spec.kind == StreamKind::batch || spec.kind == StreamKind::mixed;
    const bool draws_scales = spec.kind == StreamKind::resolution || spec.kind == StreamKind::mixed;
    if (!batches.empty() && !draws_batches && spec.kind != StreamKind::trace)
        throw InvalidRequest("batches", "applies to the batch and mixed streams only; this stream is " + stream);
    if (!scales.empty() && !draws_scales && spec.kind != StreamKind::trace)
        throw InvalidRequest("scales", "applies to the resolution and mixed streams only; this stream is " + stream);
    spec.seed = seed;
    if (!batches.empty()) spec.batches = parse_int_list(batches, "batches");
    if (!scales.empty()) spec.scales = parse_double_list(scales, "scales");
    WorkloadOptions o;
    o.mode = parse_mode(mode.empty() ? "infer" : mode);
    if (batch < 0) throw InvalidRequest("batch", "must be >= 1");
    o.batch = batch;
    if (!dtype.empty()) o.dtype = as_field("dtype", [&] { return parse_dtype(dtype); });
    if (!layout.empty()) o.layout = as_field("layout", [&] { return parse_layout(layout); });
    Workload w;
    if (spec.kind != StreamKind::trace) {
        if (workload.empty())
            throw InvalidRequest("workload", "required (a built-in name or a file) unless the stream is a trace");
        w = load_workload(workload, shapes_dir);
    } else if (!workload.empty()) {
        throw InvalidRequest("workload", "a trace stream brings its own problems; leave {workload} out");
    }
    return Stream(spec, std::move(w), o);
}

std::string WorkloadRequest::describe(const Stream& s) const {
    std::string d;
    if (s.spec().kind == StreamKind::trace)
        return "trace " + s.spec().trace_path + " (" + std::to_string(s.trace_length()) + " iterations)";
    const Workload& w = s.workload();
    d = w.name + " (" + std::to_string(w.layers.size()) + " layers, " + std::to_string(w.convolutions()) +
        " convolutions per pass), ";
    d += s.options().mode == Mode::train ? "training" : "inference";
    d += ", batch " + std::to_string(s.base_batch());
    if (s.options().dtype) d += ", " + std::string(to_string(*s.options().dtype));
    if (s.options().layout) d += ", " + layout_name(*s.options().layout, 2);
    d += ", stream " + std::string(to_string(s.spec().kind));
    return d;
}

}  // namespace convtune::app
