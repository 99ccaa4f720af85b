#include "convtune/app/parse.hpp"

#include <nlohmann/json.hpp>

namespace convtune::app {

ParseReport parse(const ParseRequest& r) {
    ParseReport rep{.file = r.file, .lines = read_shape_file(r.file)};  // throws with the line number
    for (ShapeLine& l : rep.lines) l.problem = with_overrides(std::move(l.problem), r.dir, r.dtype, r.layout);
    return rep;
}

nlohmann::json to_json(const ParseReport& r) {
    nlohmann::json problems = nlohmann::json::array();
    for (const ShapeLine& l : r.lines) {
        const ConvProblem& p = l.problem;
        auto dims = [&](const Dims& d) { return std::vector<int64_t>(d.begin(), d.begin() + p.spatial_dims); };
        std::vector<int64_t> out;
        for (int i = 0; i < p.spatial_dims; ++i) out.push_back(p.out(i));
        problems.push_back({{"key", p.to_string()},
                            {"name", l.name},
                            {"repeat", l.repeat},
                            {"dir", std::string(to_string(p.direction))},
                            {"dtype", std::string(to_string(p.dtype))},
                            {"layout", p.layout == Layout::nhwc ? "nhwc" : "nchw"},
                            {"n", p.n},
                            {"c", p.c},
                            {"k", p.k},
                            {"groups", p.groups},
                            {"in", dims(p.in)},
                            {"ker", dims(p.kernel)},
                            {"stride", dims(p.stride)},
                            {"dil", dims(p.dilation)},
                            {"pad", dims(p.pad_begin)},
                            {"pad_end", dims(p.pad_end)},
                            {"out", out}});
    }
    return {{"format", report_format}, {"file", r.file}, {"problems", problems}};
}

std::string to_text(const ParseReport& r) {
    std::string s;
    for (const ShapeLine& l : r.lines) s += to_shape_line(l.problem, l.name, l.repeat) + "\n";
    return s;
}

}  // namespace convtune::app
