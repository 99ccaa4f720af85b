// Parser for oneDNN benchdnn convolution descriptors and shape files.
//
// Grammar (benchdnn's "knobs_desc"): entries gX mbX icX idX ihX iwX ocX odX ohX owX kdX khX kwX
// sdX shX swX pdX phX pwX ddX dhX dwX nNAME, in any order, optionally separated by '_'.
// Defaults g1 mb2, strides 1, dilations 0 (benchdnn's dilation is 0-based: d0 = dense).
// Missing spatial values are promoted from the next higher dimension (w from h, h from d);
// any d entry makes the problem 3-D, any h entry 2-D, otherwise it is 1-D. A missing output
// size is deduced from the padding; a missing padding whose output is given is deduced from
// the output; the end padding is always implied by the sizes and may be asymmetric or negative.
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
            throw ParseError("unexpected character '" + std::string(1, ch) + "' at position " + std::to_string(i + 1));
        std::size_t j = i;
        while (j < s.size() && std::isalpha(static_cast<unsigned char>(s[j]))) ++j;
        const std::string key(s.substr(i, j - i));
        if (!is_known_key(key)) throw ParseError("unknown entry '" + key + "' at position " + std::to_string(i + 1));
        std::size_t e = j;
        if (e < s.size() && s[e] == '-') ++e;
        while (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) ++e;
        int64_t val = 0;
        auto [p, ec] = std::from_chars(s.data() + j, s.data() + e, val);
        if (j == e || ec != std::errc() || p != s.data() + e)
            throw ParseError("entry '" + key + "' has no valid number at position " + std::to_string(j + 1));
        if (d.v.count(key)) throw ParseError("entry '" + key + "' given twice");
        if (val >= (int64_t{1} << 31) || val <= -(int64_t{1} << 31)) throw ParseError("entry '" + key + "': magnitude must be below 2^31 (got " + std::to_string(val) + ")");
        d.v[key] = val;
        i = e;
    }
    return d;
}

}  // namespace

ConvProblem ConvProblem::parse_benchdnn(std::string_view text, std::string* name) {
    Desc d = tokenize(text);
    auto has = [&](const char* k) { return d.v.count(k) != 0; };
    auto get = [&](const char* k, int64_t def) { return has(k) ? d.v.at(k) : def; };

    const char dimc[3] = {'d', 'h', 'w'};
    auto key = [&](char prefix, int dim) { return std::string{prefix, dimc[dim]}; };
    auto any_of_dim = [&](int dim) {
        for (char p : {'i', 'o', 'k', 's', 'p', 'd'})
            if (has(key(p, dim).c_str())) return true;
        return false;
    };
    int nd = any_of_dim(0) ? 3 : any_of_dim(1) ? 2 : 1;
    if (!has("ic")) throw ParseError("ic: missing (input channels are required)");
    if (!has("oc")) throw ParseError("oc: missing (output channels are required)");

    ConvProblem p;
    p.spatial_dims = nd;
    p.n = get("mb", 2);
    p.groups = get("g", 1);
    p.c = d.v.at("ic");
    p.k = d.v.at("oc");
    const int first = 3 - nd;  // benchdnn dim index of the outermost used dim
    // Promote each kind of value from the next higher used dim. `def` < 0 means required.
    auto fetch = [&](char prefix, int64_t def, std::array<std::optional<int64_t>, 3>& out) {
        std::optional<int64_t> prev;
        for (int dim = first; dim < 3; ++dim) {
            const std::string k = key(prefix, dim);
            if (has(k.c_str())) prev = d.v.at(k);
            out[static_cast<std::size_t>(dim)] = prev;
        }
        for (int dim = first; dim < 3; ++dim) {
            auto& o = out[static_cast<std::size_t>(dim)];
            if (!o && def != INT64_MIN) o = def;
        }
    };
    std::array<std::optional<int64_t>, 3> I, O, K, S, P, D;
    fetch('i', INT64_MIN, I);
    fetch('o', INT64_MIN, O);
    // An output size is promoted only together with its input size; a dim that names its own
    // input size but no output size gets its output deduced.
    for (int dim = first; dim < 3; ++dim)
        if (has(key('i', dim).c_str()) && !has(key('o', dim).c_str())) O[static_cast<std::size_t>(dim)].reset();
    fetch('k', INT64_MIN, K);
    fetch('s', 1, S);
    fetch('p', INT64_MIN, P);
    fetch('d', 0, D);
    for (int dim = first; dim < 3; ++dim) {
        const auto u = static_cast<std::size_t>(dim);
        const int slot = dim - first;
        const auto s = static_cast<std::size_t>(slot);
        if (!I[u]) throw ParseError(key('i', dim) + ": missing (input size is required)");
        if (!K[u]) throw ParseError(key('k', dim) + ": missing (kernel size is required)");
        const int64_t i = *I[u], k = *K[u], st = *S[u], dl = *D[u];
        if (st < 1) throw ParseError(key('s', dim) + ": stride must be >= 1 (got " + std::to_string(st) + ")");
        if (dl < 0) throw ParseError(key('d', dim) + ": dilation must be >= 0 (benchdnn's 0-based dilation; got " + std::to_string(dl) + ")");
        if (k < 1) throw ParseError(key('k', dim) + ": kernel size must be >= 1 (got " + std::to_string(k) + ")");
        if (i < 1) throw ParseError(key('i', dim) + ": input size must be >= 1 (got " + std::to_string(i) + ")");
        const int64_t ek = (k - 1) * (dl + 1) + 1;
        int64_t pb = 0, o = 0;
        if (P[u]) {
            pb = *P[u];
            o = O[u] ? *O[u] : (i - ek + 2 * pb) / st + 1;
            if (!O[u] && i - ek + 2 * pb < 0) o = 0;
        } else if (O[u]) {
            o = *O[u];
            pb = ((o - 1) * st - i + ek) / 2;
        } else {
            pb = 0;
            o = i - ek < 0 ? 0 : (i - ek) / st + 1;
        }
        if (o < 1)
            throw ParseError(key('o', dim) + ": deduced output size " + std::to_string(o) + " is below 1 (input " + std::to_string(i) +
                             ", dilated kernel " + std::to_string(ek) + ", padding " + std::to_string(pb) + ")");
        p.in[s] = i;
        p.kernel[s] = k;
        p.stride[s] = st;
        p.dilation[s] = dl + 1;
        p.pad_begin[s] = pb;
        p.pad_end[s] = (o - 1) * st - i + ek - pb;
        if (p.out(slot) != o)
            throw ParseError(key('o', dim) + ": output size " + std::to_string(o) + " is inconsistent with the other sizes");
    }
    p.validate();
    if (name) *name = d.name;
    return p;
}

std::vector<ShapeLine> parse_shape_text(std::string_view text) {
    std::vector<ShapeLine> out;
    int line_no = 0;
    while (!text.empty()) {
        const auto nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        ++line_no;
        while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.remove_prefix(1);
        while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
        if (line.empty() || line.front() == '#') continue;
        ShapeLine sl;
        sl.line_number = line_no;
        try {
            if (line.find('=') != std::string_view::npos) {
                sl.problem = ConvProblem::parse(line);
            } else {
                sl.problem = ConvProblem::parse_benchdnn(line, &sl.name);
            }
        } catch (const Error& e) {
            throw ParseError("line " + std::to_string(line_no) + ": " + e.what() + " in '" + std::string(line) + "'");
        }
        const auto star = sl.name.rfind('*');
        if (star != std::string::npos) {
            int r = 0;
            const std::string_view tail = std::string_view(sl.name).substr(star + 1);
            auto [ptr, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), r);
            if (ec == std::errc() && ptr == tail.data() + tail.size() && r >= 1) {
                sl.repeat = r;
                sl.name.resize(star);
            }
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
