// A request's fields as data: one table per request type, what the Python binding fills a
// request from (keyword arguments mapped through it, never positional lists) and what names the
// CLI's options.
//
// For each request type R, beside its struct, `template <class V> void visit_fields(R& r, V&& v)`
// calls v(name, field) for every field a caller may set, in one order:
//   name   its public name: the Python keyword, and the CLI option with dashes for underscores
//          ("shapes_dir": --shapes-dir; tools/fields.cpp), also the name an InvalidRequest gives it;
//   field  the member itself, whose type is the field's kind and says how a value sets it:
//          std::string (text), std::optional<std::string> (text; unset: the default the request
//          documents), std::vector<std::string> (a list of texts), bool, an integer type (int,
//          int64_t, uint64_t: a whole number within the type), double (a number), or FlagsField.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/flags.hpp"

namespace convtune::app {

// Flags given as text ("key=value,...", parse_flags) or, from Python, as a dict applied over the
// flags the request's other fields give (`base`, e.g. tune_flags: benchmark=1, then the policy).
struct FlagsField {
    std::string& text;
    std::optional<FlagValues>& values;
    std::function<FlagValues()> base;
};

// The public names of R's fields, in the table's order.
template <class R>
std::vector<std::string_view> field_names() {
    R r{};
    std::vector<std::string_view> names;
    visit_fields(r, [&](std::string_view name, auto&&) { names.push_back(name); });
    return names;
}

}  // namespace convtune::app
