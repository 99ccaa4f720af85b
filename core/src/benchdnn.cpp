// Parser for oneDNN benchdnn convolution descriptors and shape files.
//
// Grammar (benchdnn's "knobs_desc"): entries gX mbX icX idX ihX iwX ocX odX ohX owX kdX khX kwX
// sdX shX swX pdX phX pwX ddX dhX dwX nNAME, in any order, optionally separated by '_'.
// The dimension rule is oneDNN's own (tests/benchdnn/conv/conv_aux.cpp, str2desc, and
// sanitize_desc in tests/benchdnn/dnnl_common.cpp): defaults g1 mb2, strides 1, dilations 0
// (0-based: d0 = dense). Each spatial dimension that has entries is completed on its own: its
// missing stride is 1, its dilation 0, a missing output is deduced from the padding (0 when also
// missing) and a missing padding from the output. A lower dimension is copied whole from the one
// above only when it has no entries at all. Any d entry makes the problem 3-D (and then h and w
// are both given or both copied), else any h entry 2-D, else 1-D. The end padding is always
// implied by the sizes and may be asymmetric or negative.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <map>
#include <sstream>

#include "convtune/error.hpp"
#include "convtune/file_io.hpp"
#include "convtune/problem.hpp"

namespace convtune {

namespace {

struct Desc {
    std::map<std::string, int64_t> v;  // "ih" -> 56, ...
    std::string name;
};

bool is_known_key(const std::string& k) {
    static const char* keys[] = {"g", "mb", "ic", "oc", "id", "ih", "iw", "od", "oh", "ow", "kd", "kh", "kw",
                                 "sd", "sh", "sw", "pd", "ph", "pw", "dd", "dh", "dw"};
    for (const char* s : keys)
        if (k == s) return true;
    return false;
}

Desc tokenize(std::string_view s) {
    Desc d;
    std::size_t i = 0;
    while (i < s.size()) {
        const char ch = s[i];
        if (ch == '_' || ch == ' ' || ch == '\t') {
            ++i;
            continue;
        }
        if (ch == 'n' && (i + 1 >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
            // Name: n"quoted" or the rest of the line.
            std::string_view rest = s.substr(i + 1);
            if (!rest.empty() && rest.front() == '"') {
                const auto close = rest.find('"', 1);
                if (close == std::string_view::npos) throw ParseError("name: missing closing quote");
                d.name = std::string(rest.substr(1, close - 1));
                i += 1 + close + 1;
                continue;
            }
            d.name = std::string(rest);
            while (!d.name.empty() && std::isspace(static_cast<unsigned char>(d.name.back()))) d.name.pop_back();
            break;
        }
        if (!std::isalpha(static_cast<unsigned char>(ch)))
            throw ParseError("unexpected character " + quote_input(std::string(1, ch)) + " at position " +
                             std::to_string(i + 1));
        std::size_t j = i;
        while (j < s.size() && std::isalpha(static_cast<unsigned char>(s[j]))) ++j;
        const std::string key(s.substr(i, j - i));
        if (!is_known_key(key))
            throw ParseError("unknown entry " + quote_input(key) + " at position " + std::to_string(i + 1));
        std::size_t e = j;
        if (e < s.size() && s[e] == '-') ++e;
        while (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) ++e;
        int64_t val = 0;
        auto [p, ec] = std::from_chars(s.data() + j, s.data() + e, val);
        if (j == e || ec != std::errc() || p != s.data() + e)
            throw ParseError("entry " + quote_input(key) + " has no valid number at position " + std::to_string(j + 1));
        if (d.v.count(key)) throw ParseError("entry " + quote_input(key) + " given twice");
        if (val >= (int64_t{1} << 31) || val <= -(int64_t{1} << 31))
            throw ParseError("entry '" + key + "': magnitude must be below 2^31 (got " + std::to_string(val) + ")");
        if (val < 0) throw ParseError(key + ": must not be negative (got " + std::to_string(val) + ")");
        d.v[key] = val;
        i = e;
    }
    return d;
}

}  // namespace

ConvProblem ConvProblem::parse_benchdnn(std::string_view text, std::string* name) {
    const Desc d = tokenize(text);
    auto get = [&](const std::string& k, int64_t def) { return d.v.count(k) ? d.v.at(k) : def; };
    if (d.v.count("g") && d.v.at("g") == 0) throw ParseError("g: groups must be >= 1 (got 0)");
    if (get("ic", 0) == 0) throw ParseError("ic: missing or 0 (input channels are required)");
    if (get("oc", 0) == 0) throw ParseError("oc: missing or 0 (output channels are required)");

    // One spatial dimension as benchdnn holds it: 0 means "not given" for the sizes and the
    // dilation, -1 for the padding (conv_aux.cpp, str2desc).
    struct Dim {
        int64_t i, o, k, s, p, d;
    };
    const char dimc[3] = {'d', 'h', 'w'};
    auto key = [&](char prefix, int dim) { return std::string{prefix, dimc[dim]}; };
    std::array<Dim, 3> dims{};
    std::array<bool, 3> given{};
    for (int dim = 0; dim < 3; ++dim) {
        Dim& x = dims[static_cast<std::size_t>(dim)];
        x = {get(key('i', dim), 0), get(key('o', dim), 0), get(key('k', dim), 0),
             get(key('s', dim), 1), get(key('p', dim), -1), get(key('d', dim), 0)};
        if (x.s == 0) throw ParseError(key('s', dim) + ": stride must be >= 1 (got 0)");
        // A dimension has entries unless every value is benchdnn's "not given" (a stride of 1 or
        // a padding of 0 alone does not count).
        given[static_cast<std::size_t>(dim)] = (x.i | x.o | x.k | x.d) != 0 || x.s != 1 || x.p >= 1;
        if (!given[static_cast<std::size_t>(dim)]) continue;
        if (x.i == 0)
            throw ParseError(key('i', dim) + ": missing or 0 (input size is required in a dimension that has entries)");
        if (x.k == 0)
            throw ParseError(key('k', dim) +
                             ": missing or 0 (kernel size is required in a dimension that has entries)");
        const int64_t ek = (x.k - 1) * (x.d + 1) + 1;
        if (x.o == 0) {
            if (x.p < 0) x.p = 0;
            x.o = (x.i - ek + 2 * x.p) / x.s + 1;  // truncating division, as benchdnn's
            if (x.o <= 0)
                throw ParseError(key('o', dim) + ": deduced output size " + std::to_string(x.o) +
                                 " is below 1 (input " + std::to_string(x.i) + ", dilated kernel " +
                                 std::to_string(ek) + ", padding " + std::to_string(x.p) + ")");
        } else if (x.p < 0) {
            x.p = ((x.o - 1) * x.s - x.i + ek) / 2;
        }
    }
    // sanitize_desc: a lower dimension is copied whole from the one above only when it has no
    // entries at all; a 3-D descriptor gives both h and w or neither.
    int nd = 0;
    if (given[0]) {
        nd = 3;
        if (!given[1] && !given[2]) dims[1] = dims[2] = dims[0];
        else if (!given[1] || !given[2])
            throw ParseError(std::string(given[1] ? "iw" : "ih") +
                             ": missing (a descriptor with d entries gives entries for both h and w, or for neither)");
    } else if (given[1]) {
        nd = 2;
        if (!given[2]) dims[2] = dims[1];
    } else if (given[2]) {
        nd = 1;
    } else {
        throw ParseError("ih: missing (no spatial dimension: give at least ih and kh, or id/kd, or iw/kw)");
    }

    ConvProblem p;
    p.spatial_dims = nd;
    p.n = get("mb", 2);
    p.groups = get("g", 1);
    p.c = d.v.at("ic");
    p.k = d.v.at("oc");
    for (int slot = 0; slot < nd; ++slot) {
        const Dim& x = dims[static_cast<std::size_t>(3 - nd + slot)];
        const auto s = static_cast<std::size_t>(slot);
        p.in[s] = x.i;
        p.kernel[s] = x.k;
        p.stride[s] = x.s;
        p.dilation[s] = x.d + 1;
        p.pad_begin[s] = x.p;
        p.pad_end[s] = (x.o - 1) * x.s - x.i + ((x.k - 1) * (x.d + 1) + 1) - x.p;  // desc_t::init_pad_r
    }
    p.validate();
    if (name) *name = d.name;
    return p;
}

int parse_repeat(std::string_view digits, std::string_view what) {
    const std::string w(what), text(digits);
    int64_t r = 0;
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), r);
    if (digits.empty() || ptr != digits.data() + digits.size() ||
        (ec != std::errc() && ec != std::errc::result_out_of_range))
        throw ParseError(w + ": " + quote_input(text) + " is not an integer");
    if (digits.front() == '-' || (ec == std::errc() && r < 1))
        throw ParseError(w + ": must be >= 1 (got " + quote_input(text) + ")");
    if (ec == std::errc::result_out_of_range || r > kMaxRepeat)
        throw ParseError(w + ": " + quote_input(text) + " is above the maximum of " + std::to_string(kMaxRepeat));
    return static_cast<int>(r);
}

bool is_canonical_form(std::string_view text) {
    // The first '=' of a canonical line closes its first key, which has no digit; a benchdnn
    // descriptor has a digit (ic3...) or its quoted name before any '='.
    const auto eq = text.find('=');
    if (eq == std::string_view::npos) return false;
    const std::string_view head = text.substr(0, eq);
    return std::none_of(head.begin(), head.end(), [](char c) { return c == '"' || (c >= '0' && c <= '9'); });
}

std::string to_shape_line(const ConvProblem& p, std::string_view name, int repeat) {
    std::string s = p.to_string();
    if (!name.empty()) {
        s += "  # ";
        s += name;
        if (repeat > 1) s += " x" + std::to_string(repeat);
    }
    return s;
}

std::string_view strip_comment(std::string_view line) {
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        if (line[i] == '"') quoted = !quoted;
        else if (line[i] == '#' && !quoted) return line.substr(0, i);
    }
    return line;
}

std::vector<ShapeLine> parse_shape_text(std::string_view text) {
    std::vector<ShapeLine> out;
    int line_no = 0;
    while (!text.empty()) {
        const auto nl = text.find('\n');
        std::string_view line = strip_comment(text.substr(0, nl));
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        ++line_no;
        while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.remove_prefix(1);
        while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
        if (line.empty()) continue;
        ShapeLine sl;
        sl.line_number = line_no;
        try {
            if (is_canonical_form(line)) {
                sl.problem = ConvProblem::parse(line);
            } else {
                sl.problem = ConvProblem::parse_benchdnn(line, &sl.name);
                // A name ending in "*N" (N an integer, possibly negative) carries a repeat hint.
                const auto star = sl.name.rfind('*');
                const std::string_view tail =
                    star == std::string::npos ? std::string_view{} : std::string_view(sl.name).substr(star + 1);
                const std::string_view digits = !tail.empty() && tail.front() == '-' ? tail.substr(1) : tail;
                if (!digits.empty() &&
                    std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
                    sl.repeat = parse_repeat(tail, "name: repeat hint");
                    sl.name.resize(star);
                }
            }
        } catch (const Error& e) {
            throw ParseError("line " + std::to_string(line_no) + ": " + e.what() + " in " + quote_input(line));
        }
        out.push_back(std::move(sl));
    }
    return out;
}

std::vector<ShapeLine> read_shape_file(const std::string& path) {
    const std::string text = read_file_bounded(path, kMaxShapeFileBytes, "shape file");
    try {
        return parse_shape_text(text);
    } catch (const ParseError& e) {
        throw ParseError(path + ": " + e.what());
    }
}

}  // namespace convtune
