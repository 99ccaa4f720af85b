#include "convtune/algorithm.hpp"

#include "convtune/numeric.hpp"

namespace convtune {

namespace {
constexpr std::pair<Note, std::string_view> kNoteNames[] = {
    {Note::tensor_core, "tensor_core"}, {Note::nondeterministic, "nondeterministic"},
    {Note::down_convert_inputs, "down_convert_inputs"}, {Note::winograd, "winograd"},
    {Note::fft, "fft"}, {Note::reference, "reference"}, {Note::layout_conversion, "layout_conversion"},
};
}  // namespace

std::vector<std::string_view> Notes::names() const {
    std::vector<std::string_view> r;
    for (auto [n, s] : kNoteNames)
        if (has(n)) r.push_back(s);
    return r;
}

std::string Notes::to_string() const {
    std::string r;
    for (auto s : names()) {
        if (!r.empty()) r += ',';
        r += s;
    }
    return r;
}

std::string_view Status::code_name() const {
    switch (code) {
        case Code::ok: return "ok";
        case Code::unsupported: return "unsupported";
        case Code::out_of_memory: return "out_of_memory";
        case Code::failed: return "failed";
    }
    return "?";
}

double default_error_bound(const ConvProblem& p, Notes notes) {
    const double u_acc = p.dtype == DataType::f64 ? unit_roundoff(DataType::f64) : unit_roundoff(DataType::f32);
    double acc = static_cast<double>(p.reduction_length()) * u_acc;
    if (notes.has(Note::winograd)) acc *= 64;
    if (notes.has(Note::fft)) acc *= 16;
    double bound = acc + unit_roundoff(p.dtype);
    if (notes.has(Note::tensor_core) && p.dtype == DataType::f32) bound += 2 * 0x1p-11;
    if (notes.has(Note::down_convert_inputs)) bound += 2 * 0x1p-8;
    return bound;
}

double error_floor(const ConvProblem& p) {
    const DataType acc = p.dtype == DataType::f64 ? DataType::f64 : DataType::f32;
    return 64.0 * static_cast<double>(p.reduction_length()) * subnormal_rounding(acc) + subnormal_rounding(p.dtype);
}

Notes Algorithm::notes_for(const ConvProblem&) const { return notes(); }

double Algorithm::error_bound(const ConvProblem& p) const { return default_error_bound(p, notes()); }

}  // namespace convtune
