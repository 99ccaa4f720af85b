// parse: a shape file (benchdnn or canonical lines) validated, each line's problem in its
// canonical form with its fields spelled out.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "convtune/app/fields.hpp"
#include "convtune/app/report.hpp"
#include "convtune/problem.hpp"

namespace convtune::app {

struct ParseRequest {
    std::string file;                // the shape file
    std::string dir, dtype, layout;  // overrides of every problem's fields ("" = as written)
};

// ParseRequest's field table (fields.hpp).
template <class V>
void visit_fields(ParseRequest& r, V&& v) {
    v("file", r.file);
    v("dir", r.dir);
    v("dtype", r.dtype);
    v("layout", r.layout);
}

struct ParseReport {
    std::string file;
    std::vector<ShapeLine> lines;  // in the file's order, the overrides applied
};

// Throws ParseError naming the line of the first bad one.
ParseReport parse(const ParseRequest& r);
// {"format", "file", "problems": [{"key" (canonical form), "name", "repeat", "dir", "dtype",
//  "layout", "n", "c", "k", "groups", "in", "ker", "stride", "dil", "pad", "pad_end", "out"}]}:
// spatial sizes as arrays of the problem's spatial rank, so that a reader needs no parser.
nlohmann::json to_json(const ParseReport& r);
// One line per problem as the file would write it back (to_shape_line).
std::string to_text(const ParseReport& r);

}  // namespace convtune::app
