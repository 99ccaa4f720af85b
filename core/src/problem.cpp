// ConvProblem: derived sizes, validation and the canonical text form.
#include "convtune/problem.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <numeric>

#include "convtune/error.hpp"

namespace convtune {

std::string_view to_string(Direction d) {
    switch (d) {
        case Direction::fwd: return "fwd";
        case Direction::bwd_data: return "bwd_data";
        case Direction::bwd_filter: return "bwd_filter";
    }
    return "?";
}

std::string_view to_string(DataType t) {
    switch (t) {
        case DataType::f32: return "f32";
        case DataType::f16: return "f16";
        case DataType::bf16: return "bf16";
        case DataType::f64: return "f64";
    }
    return "?";
}

std::string layout_name(Layout l, int spatial_dims) {
    static const char* first[] = {"ncw", "nchw", "ncdhw"};
    static const char* last[] = {"nwc", "nhwc", "ndhwc"};
    const int i = spatial_dims < 1 ? 0 : spatial_dims > 3 ? 2 : spatial_dims - 1;
    return l == Layout::nchw ? first[i] : last[i];
}

std::size_t size_of(DataType t) {
    switch (t) {
        case DataType::f32: return 4;
        case DataType::f16:
        case DataType::bf16: return 2;
        case DataType::f64: return 8;
    }
    return 0;
}

Direction parse_direction(std::string_view s) {
    for (Direction d : {Direction::fwd, Direction::bwd_data, Direction::bwd_filter})
        if (s == to_string(d)) return d;
    throw ParseError("dir: unknown direction " + quote_input(s) + " (expected fwd, bwd_data or bwd_filter)");
}

DataType parse_dtype(std::string_view s) {
    for (DataType t : {DataType::f32, DataType::f16, DataType::bf16, DataType::f64})
        if (s == to_string(t)) return t;
    throw ParseError("dtype: unknown data type " + quote_input(s) + " (expected f32, f16, bf16 or f64)");
}

// ---- derived sizes ---------------------------------------------------------------------

int64_t ConvProblem::out(int i) const {
    if (i >= spatial_dims) return 1;
    const auto u = static_cast<std::size_t>(i);
    const int64_t span = in[u] + pad_begin[u] + pad_end[u] - effective_kernel(i);
    if (span < 0 || stride[u] <= 0) return 0;
    return span / stride[u] + 1;
}

int64_t ConvProblem::in_spatial() const {
    int64_t r = 1;
    for (int i = 0; i < spatial_dims; ++i) r *= in[static_cast<std::size_t>(i)];
    return r;
}
int64_t ConvProblem::out_spatial() const {
    int64_t r = 1;
    for (int i = 0; i < spatial_dims; ++i) r *= out(i);
    return r;
}
int64_t ConvProblem::kernel_spatial() const {
    int64_t r = 1;
    for (int i = 0; i < spatial_dims; ++i) r *= kernel[static_cast<std::size_t>(i)];
    return r;
}

int64_t ConvProblem::reduction_length() const {
    switch (direction) {
        case Direction::fwd: return c_per_group() * kernel_spatial();
        case Direction::bwd_data: {
            // Kernel tap j reaches input position i when (i + pad - j*dil) is a multiple of the
            // stride s. The taps that do form one residue class of j modulo s/gcd(s, dil), so at
            // most ceil(kernel / (s/gcd(s, dil))) taps per dim reach one input element.
            int64_t taps = 1;
            for (int i = 0; i < spatial_dims; ++i) {
                const auto u = static_cast<std::size_t>(i);
                const int64_t period = stride[u] / std::gcd(stride[u], dilation[u]);
                taps *= (kernel[u] + period - 1) / period;
            }
            return k_per_group() * taps;
        }
        case Direction::bwd_filter: return n * out_spatial();
    }
    return 0;
}

std::vector<int64_t> ConvProblem::x_dims() const {
    std::vector<int64_t> d{n, c};
    for (int i = 0; i < spatial_dims; ++i) d.push_back(in[static_cast<std::size_t>(i)]);
    return d;
}
std::vector<int64_t> ConvProblem::w_dims() const {
    std::vector<int64_t> d{k, c_per_group()};
    for (int i = 0; i < spatial_dims; ++i) d.push_back(kernel[static_cast<std::size_t>(i)]);
    return d;
}
std::vector<int64_t> ConvProblem::y_dims() const {
    std::vector<int64_t> d{n, k};
    for (int i = 0; i < spatial_dims; ++i) d.push_back(out(i));
    return d;
}

// ---- validation ------------------------------------------------------------------------

namespace {

const char* const kSpatialName[3][3] = {{"w", "", ""}, {"h", "w", ""}, {"d", "h", "w"}};

std::string field(const char* base, int spatial_dims, int i) {
    return std::string(base) + "[" + kSpatialName[spatial_dims - 1][i] + "]";
}

bool mul_ok(int64_t& acc, int64_t v) {
    int64_t r = 0;
    if (__builtin_mul_overflow(acc, v, &r)) return false;
    acc = r;
    return true;
}

}  // namespace

std::optional<std::string> ConvProblem::check() const {
    auto fail = [](const std::string& f, const std::string& rule) {
        return std::optional<std::string>(f + ": " + rule);
    };
    if (spatial_dims < 1 || spatial_dims > 3)
        return fail("spatial_dims", "must be 1, 2 or 3 (got " + std::to_string(spatial_dims) + ")");
    if (static_cast<unsigned>(direction) > 2)
        return fail("dir", "unknown direction value " + std::to_string(static_cast<int>(direction)));
    if (static_cast<unsigned>(dtype) > 3)
        return fail("dtype", "unknown data type value " + std::to_string(static_cast<int>(dtype)));
    if (static_cast<unsigned>(layout) > 1)
        return fail("layout", "unknown layout value " + std::to_string(static_cast<int>(layout)));
    if (n < 1) return fail("n", "batch size must be >= 1 (got " + std::to_string(n) + ")");
    if (c < 1) return fail("c", "input channels must be >= 1 (got " + std::to_string(c) + ")");
    if (k < 1) return fail("k", "output channels must be >= 1 (got " + std::to_string(k) + ")");
    if (groups < 1) return fail("g", "groups must be >= 1 (got " + std::to_string(groups) + ")");
    if (c % groups != 0)
        return fail("c", "input channels (" + std::to_string(c) + ") must be divisible by groups (" +
                             std::to_string(groups) + ")");
    if (k % groups != 0)
        return fail("k", "output channels (" + std::to_string(k) + ") must be divisible by groups (" +
                             std::to_string(groups) + ")");
    for (int i = 0; i < kMaxSpatial; ++i) {
        const auto u = static_cast<std::size_t>(i);
        if (i >= spatial_dims) {
            if (in[u] != 1 || kernel[u] != 1 || stride[u] != 1 || dilation[u] != 1 || pad_begin[u] != 0 ||
                pad_end[u] != 0)
                return fail("spatial_dims", "unused spatial slot " + std::to_string(i) +
                                                " must be neutral (size 1, stride 1, dilation 1, padding 0)");
            continue;
        }
        if (in[u] < 1)
            return fail(field("in", spatial_dims, i), "input size must be >= 1 (got " + std::to_string(in[u]) + ")");
        if (kernel[u] < 1)
            return fail(field("ker", spatial_dims, i),
                        "kernel size must be >= 1 (got " + std::to_string(kernel[u]) + ")");
        if (stride[u] < 1)
            return fail(field("stride", spatial_dims, i),
                        "stride must be >= 1 (got " + std::to_string(stride[u]) + ")");
        if (dilation[u] < 1)
            return fail(field("dil", spatial_dims, i),
                        "dilation must be >= 1, 1 meaning a dense kernel (got " + std::to_string(dilation[u]) + ")");
        if (pad_begin[u] < 0)
            return fail(field("pad", spatial_dims, i),
                        "begin padding must be >= 0 (got " + std::to_string(pad_begin[u]) + ")");
        constexpr int64_t kMaxDim = int64_t{1} << 31;
        if (pad_end[u] <= -kMaxDim)
            return fail(field("pad_end", spatial_dims, i),
                        "magnitude must be below 2^31 (got " + std::to_string(pad_end[u]) + ")");
        for (auto [name, v] : {std::pair{"in", in[u]}, {"ker", kernel[u]}, {"stride", stride[u]}, {"dil", dilation[u]},
                               {"pad", pad_begin[u]}, {"pad_end", pad_end[u] < 0 ? -pad_end[u] : pad_end[u]}})
            if (v >= kMaxDim)
                return fail(field(name, spatial_dims, i),
                            "magnitude must be below 2^31 (got " + std::to_string(v) + ")");
        if (pad_end[u] <= -in[u])
            return fail(field("pad_end", spatial_dims, i),
                        "negative end padding must leave at least one input row (got " + std::to_string(pad_end[u]) +
                            " for input " + std::to_string(in[u]) + ")");
        const int64_t padded = in[u] + pad_begin[u] + pad_end[u];
        if (padded < effective_kernel(i))
            return fail(field("ker", spatial_dims, i), "dilated kernel (" + std::to_string(effective_kernel(i)) +
                                                           ") must not exceed the padded input (" +
                                                           std::to_string(padded) + ")");
    }
    for (auto [name, v] : {std::pair{"n", n}, {"c", c}, {"k", k}, {"g", groups}})
        if (v >= (int64_t{1} << 31)) return fail(name, "must be below 2^31 (got " + std::to_string(v) + ")");
    // Element and byte counts of every tensor must fit in int64 (and thus in size_t).
    const auto bytes = static_cast<int64_t>(size_of(DataType::f64));
    // (No dims vectors: this runs on every framework call.)
    auto fits = [&](int64_t a, int64_t b, auto dim) {
        int64_t acc = bytes;
        if (!mul_ok(acc, a) || !mul_ok(acc, b)) return false;
        for (int i = 0; i < spatial_dims; ++i)
            if (!mul_ok(acc, dim(static_cast<std::size_t>(i)))) return false;
        return true;
    };
    const char* const overflow = "element count overflows a 64-bit size";
    if (!fits(n, c, [&](std::size_t u) { return in[u]; })) return fail("x", overflow);
    if (!fits(k, c_per_group(), [&](std::size_t u) { return kernel[u]; })) return fail("w", overflow);
    if (!fits(n, k, [&](std::size_t u) { return out(static_cast<int>(u)); })) return fail("y", overflow);
    int64_t m = 2;
    for (int64_t v : {n, k, c_per_group(), out_spatial(), kernel_spatial()})
        if (!mul_ok(m, v)) return fail("n", "operation count overflows a 64-bit size");
    return std::nullopt;
}

void ConvProblem::validate() const {
    if (auto e = check()) {
        const auto colon = e->find(": ");
        throw InvalidProblem(e->substr(0, colon), e->substr(colon + 2));
    }
}

// ---- canonical text --------------------------------------------------------------------

namespace {

// Appends the decimal text of v (the canonical text is built on every framework call: no streams).
void append_int(std::string& s, int64_t v) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    s.append(buf, r.ptr);
}

// Appends ",<key>=<d0>x<d1>..." for the first nd dims.
void append_dims(std::string& s, std::string_view key, const Dims& d, int nd) {
    s += key;
    for (int i = 0; i < nd; ++i) {
        if (i) s += 'x';
        append_int(s, d[static_cast<std::size_t>(i)]);
    }
}

int64_t parse_int(std::string_view key, std::string_view v) {
    int64_t r = 0;
    const char* b = v.data();
    const char* e = v.data() + v.size();
    if (!v.empty() && *b == '+') ++b;
    auto [p, ec] = std::from_chars(b, e, r);
    if (ec == std::errc::result_out_of_range)
        throw ParseError(std::string(key) + ": value " + quote_input(v) + " is out of range");
    if (ec != std::errc() || p != e || b == e)
        throw ParseError(std::string(key) + ": " + quote_input(v) + " is not an integer");
    return r;
}

// "56x56" -> {56, 56}; returns the number of dims.
int parse_dims(std::string_view key, std::string_view v, Dims& out, int64_t fill) {
    out = {fill, fill, fill};
    int nd = 0;
    while (true) {
        const auto x = v.find('x');
        const std::string_view part = v.substr(0, x);
        if (nd == kMaxSpatial) throw ParseError(std::string(key) + ": more than 3 spatial dims in " + quote_input(v));
        out[static_cast<std::size_t>(nd++)] = parse_int(key, part);
        if (x == std::string_view::npos) break;
        v.remove_prefix(x + 1);
    }
    return nd;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
        s.remove_suffix(1);
    return s;
}

}  // namespace

std::string ConvProblem::to_string() const {
    std::string s;
    s.reserve(160);
    append_to(s);
    return s;
}

void ConvProblem::append_to(std::string& s) const {
    s += "dir=";
    s += convtune::to_string(direction);
    s += ",dtype=";
    s += convtune::to_string(dtype);
    s += ",layout=";
    s += layout_name(layout, spatial_dims);
    for (auto [key, v] : {std::pair{",n=", n}, {",c=", c}, {",k=", k}, {",g=", groups}}) {
        s += key;
        append_int(s, v);
    }
    append_dims(s, ",in=", in, spatial_dims);
    append_dims(s, ",ker=", kernel, spatial_dims);
    append_dims(s, ",stride=", stride, spatial_dims);
    append_dims(s, ",dil=", dilation, spatial_dims);
    append_dims(s, ",pad=", pad_begin, spatial_dims);
    append_dims(s, ",pad_end=", pad_end, spatial_dims);
}

ConvProblem ConvProblem::parse(std::string_view text) {
    text = trim(text);
    if (text.empty()) throw ParseError("problem: empty string");
    if (text.back() == ',') throw ParseError("problem: empty entry (trailing comma)");
    ConvProblem p;
    std::optional<int> nd_in, nd_ker;
    std::optional<Dims> stride, dil, pad, pad_end;
    std::optional<int> nd_stride, nd_dil, nd_pad, nd_pad_end;
    std::optional<std::string> layout;
    bool have[4] = {false, false, false, false};  // n c k g duplicates
    std::vector<std::string> seen;
    while (!text.empty()) {
        const auto comma = text.find(',');
        const std::string_view item = trim(text.substr(0, comma));
        text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
        if (item.empty()) throw ParseError("problem: empty entry (two commas in a row?)");
        const auto eq = item.find('=');
        if (eq == std::string_view::npos)
            throw ParseError("problem: entry " + quote_input(item) + " is not key=value");
        const std::string key(trim(item.substr(0, eq)));
        const std::string_view val = trim(item.substr(eq + 1));
        // The key is known before it is named in a message (an unknown one is echoed clipped).
        static constexpr std::string_view known[] = {"dir", "dtype", "layout", "n",   "c",   "k",      "g",
                                                     "in",  "ker",   "stride", "dil", "pad", "pad_end"};
        if (std::find(std::begin(known), std::end(known), key) == std::end(known))
            throw ParseError("problem: unknown key " + quote_input(key) +
                             " (known: dir, dtype, layout, n, c, k, g, in, ker, stride, dil, pad, pad_end)");
        for (const auto& s : seen)
            if (s == key) throw ParseError(key + ": given twice");
        seen.push_back(key);
        if (val.empty()) throw ParseError(key + ": empty value");
        Dims d{};
        if (key == "dir") p.direction = parse_direction(val);
        else if (key == "dtype") p.dtype = parse_dtype(val);
        else if (key == "layout") layout = std::string(val);
        else if (key == "n") p.n = parse_int(key, val), have[0] = true;
        else if (key == "c") p.c = parse_int(key, val), have[1] = true;
        else if (key == "k") p.k = parse_int(key, val), have[2] = true;
        else if (key == "g") p.groups = parse_int(key, val), have[3] = true;
        else if (key == "in") nd_in = parse_dims(key, val, p.in, 1);
        else if (key == "ker") nd_ker = parse_dims(key, val, p.kernel, 1);
        else if (key == "stride") nd_stride = parse_dims(key, val, d, 1), stride = d;
        else if (key == "dil") nd_dil = parse_dims(key, val, d, 1), dil = d;
        else if (key == "pad") nd_pad = parse_dims(key, val, d, 0), pad = d;
        else if (key == "pad_end") nd_pad_end = parse_dims(key, val, d, 0), pad_end = d;
    }
    if (!have[1]) throw ParseError("c: missing (input channels are required)");
    if (!have[2]) throw ParseError("k: missing (output channels are required)");
    if (!nd_in) throw ParseError("in: missing (input spatial size, e.g. in=56x56)");
    if (!nd_ker) throw ParseError("ker: missing (kernel size, e.g. ker=3x3)");
    const int nd = *nd_in;
    p.spatial_dims = nd;
    auto same = [nd](const char* key, const std::optional<int>& n2) {
        if (n2 && *n2 != nd)
            throw ParseError(std::string(key) + ": has " + std::to_string(*n2) + " dims but in has " +
                             std::to_string(nd));
    };
    same("ker", nd_ker);
    same("stride", nd_stride);
    same("dil", nd_dil);
    same("pad", nd_pad);
    same("pad_end", nd_pad_end);
    if (stride) p.stride = *stride;
    if (dil) p.dilation = *dil;
    if (pad) p.pad_begin = *pad;
    p.pad_end = pad_end ? *pad_end : p.pad_begin;
    if (layout) {
        // The canonical form names the layout for its own number of spatial dims.
        const std::optional<Layout> l = find_layout(*layout, nd);
        if (l && *layout == layout_name(*l, nd)) {
            p.layout = *l;
        } else if (const std::optional<Layout> other = find_layout(*layout, 0)) {
            throw ParseError("layout: " + quote_input(*layout) + " is a " + std::to_string(layout->size() - 2) +
                             "-D layout but the problem has " + std::to_string(nd) + " spatial dims (use " +
                             layout_name(*other, nd) + ")");
        } else {
            throw ParseError("layout: unknown layout " + quote_input(*layout) + " (expected " +
                             layout_name(Layout::nchw, nd) + " or " + layout_name(Layout::nhwc, nd) + ")");
        }
    }
    p.validate();
    return p;
}

ConvProblem ConvProblem::parse_any(std::string_view text) {
    if (is_canonical_form(text)) return parse(text);
    return parse_benchdnn(text);
}

std::optional<Layout> find_layout(std::string_view text, int spatial_dims) {
    for (Layout l : {Layout::nchw, Layout::nhwc}) {
        if (text == layout_name(l, 2)) return l;
        for (int d = 1; d <= 3; ++d)
            if ((spatial_dims == 0 || spatial_dims == d) && text == layout_name(l, d)) return l;
    }
    return std::nullopt;
}

Layout parse_layout(std::string_view text, int spatial_dims) {
    if (const std::optional<Layout> l = find_layout(text, spatial_dims)) return *l;
    throw ParseError("layout: unknown layout " + quote_input(text) + " (expected nchw or nhwc)");
}

ConvProblem with_overrides(ConvProblem p, std::string_view dir, std::string_view dtype, std::string_view layout) {
    if (!dir.empty()) p.direction = parse_direction(dir);
    if (!dtype.empty()) p.dtype = parse_dtype(dtype);
    if (!layout.empty()) p.layout = parse_layout(layout, p.spatial_dims);
    p.validate();
    return p;
}

}  // namespace convtune
