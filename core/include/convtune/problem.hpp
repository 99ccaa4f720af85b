// ConvProblem: the value type every other part of convtune speaks.
//
// A convolution of x (n, c, spatial...) with w (k, c/groups, kernel...) into y (n, k, out...).
// Spatial dimensions are stored outermost first: (w) for 1-D, (h, w) for 2-D, (d, h, w) for 3-D.
// The output size is derived, never stored:
//     out[i] = (in[i] + pad_begin[i] + pad_end[i] - ((kernel[i]-1)*dilation[i] + 1)) / stride[i] + 1
// Dilation is 1-based (PyTorch's convention: 1 = dense kernel). pad_end may be negative (the last
// input rows are never read), pad_begin may not.
//
// The problem is the core of the tuning-cache key, a test id and a workload line, so its
// canonical string form (to_string / parse) is stable: new fields will only ever be added as
// optional trailing keys with a default, so old databases stay readable.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace convtune {

enum class Direction { fwd, bwd_data, bwd_filter };
enum class DataType { f32, f16, bf16, f64 };
// Channels-first (NCW / NCHW / NCDHW) or channels-last (NWC / NHWC / NDHWC).
enum class Layout { nchw, nhwc };

inline constexpr int kMaxSpatial = 3;
using Dims = std::array<int64_t, kMaxSpatial>;

std::string_view to_string(Direction d);
std::string_view to_string(DataType t);
// The layout's name for the given number of spatial dims, e.g. nhwc -> "ndhwc" for 3-D.
std::string layout_name(Layout l, int spatial_dims);
struct ConvProblem;
// p with its direction, dtype and layout replaced where the text is not empty (layout: nchw or
// nhwc, or the spatial-rank name such as ncdhw); validated. Throws convtune::Error on a bad value.
ConvProblem with_overrides(ConvProblem p, std::string_view dir, std::string_view dtype, std::string_view layout);
// The one reading of a layout name: "nchw" / "nhwc" for any number of spatial dims, or the name
// of `spatial_dims` (ncw, ndhwc, ...); spatial_dims 0 accepts the name of any. find_layout
// returns nullopt, parse_layout throws ParseError "layout: unknown layout ..." on anything else.
std::optional<Layout> find_layout(std::string_view text, int spatial_dims = 0);
Layout parse_layout(std::string_view text, int spatial_dims = 0);
std::size_t size_of(DataType t);
Direction parse_direction(std::string_view s);  // throws ParseError
DataType parse_dtype(std::string_view s);       // throws ParseError

struct ConvProblem {
    Direction direction = Direction::fwd;
    DataType dtype = DataType::f32;
    Layout layout = Layout::nchw;
    int spatial_dims = 2;  // 1, 2 or 3
    int64_t n = 1;         // batch
    int64_t c = 1;         // input channels, all groups
    int64_t k = 1;         // output channels, all groups
    int64_t groups = 1;
    Dims in{1, 1, 1};
    Dims kernel{1, 1, 1};
    Dims stride{1, 1, 1};
    Dims dilation{1, 1, 1};
    Dims pad_begin{0, 0, 0};
    Dims pad_end{0, 0, 0};

    // Derived sizes ---------------------------------------------------------------------
    int64_t out(int i) const;                 // output size of spatial dim i
    int64_t effective_kernel(int i) const { return (kernel[i] - 1) * dilation[i] + 1; }
    int64_t c_per_group() const { return c / groups; }
    int64_t k_per_group() const { return k / groups; }
    int64_t in_spatial() const;   // product of in[]
    int64_t out_spatial() const;  // product of out()
    int64_t kernel_spatial() const;
    int64_t x_elements() const { return n * c * in_spatial(); }
    int64_t w_elements() const { return k * c_per_group() * kernel_spatial(); }
    int64_t y_elements() const { return n * k * out_spatial(); }
    // Multiply-adds of the direct method (the same for all three directions).
    int64_t macs() const { return n * k * c_per_group() * out_spatial() * kernel_spatial(); }
    double flops() const { return 2.0 * static_cast<double>(macs()); }
    // Length of the sum that produces one output element, per direction (drives tolerances).
    int64_t reduction_length() const;

    // Full tensor dims in logical order (n, c, spatial...) / (k, c/g, kernel...) / (n, k, out...).
    std::vector<int64_t> x_dims() const;
    std::vector<int64_t> w_dims() const;
    std::vector<int64_t> y_dims() const;

    bool operator==(const ConvProblem&) const = default;

    // Validation ----------------------------------------------------------------------------
    // The first broken rule as "field: rule", or nullopt when the problem is valid.
    std::optional<std::string> check() const;
    // Throws InvalidProblem naming the field and the rule.
    void validate() const;

    // Text forms ----------------------------------------------------------------------------
    // Canonical form: comma-separated key=value in a fixed order, e.g.
    //   dir=fwd,dtype=f32,layout=nchw,n=2,c=64,k=64,g=1,in=56x56,ker=3x3,stride=1x1,dil=1x1,pad=1x1,pad_end=1x1
    std::string to_string() const;
    void append_to(std::string& s) const;  // the same text, appended to s (a key built around it)
    // Accepts the canonical form, keys in any order, with defaults for omitted keys
    // (dir=fwd, dtype=f32, layout=nchw, n=1, g=1, stride=1, dil=1, pad=0, pad_end=pad).
    // The result is validated. Throws ParseError / InvalidProblem.
    static ConvProblem parse(std::string_view text);
    // A oneDNN benchdnn descriptor such as ic64ih56oc64oh56kh3ph1n"name" (see docs/problem-format.md).
    // Direction/dtype/layout are not part of the descriptor and come from the arguments.
    // `name` receives the descriptor's name when given. The result is validated.
    static ConvProblem parse_benchdnn(std::string_view text, std::string* name = nullptr);
    // Either form: canonical when is_canonical_form(text), else benchdnn.
    static ConvProblem parse_any(std::string_view text);
};

// One non-comment line of a shape file.
struct ShapeLine {
    int line_number = 0;
    std::string name;  // benchdnn name without the repeat hint
    int repeat = 1;    // from a "*N" hint in the name
    ConvProblem problem;
};
// The largest repeat count accepted: a "*N" hint in a benchdnn name, "xN" on a workload layer or a
// trace line. Larger counts are refused with this limit named, never clamped.
inline constexpr int kMaxRepeat = 10000;
// The count N of a repeat hint from its digits ("3", "-5", ...); throws ParseError "<what>: ..."
// unless N is an integer in [1, kMaxRepeat].
int parse_repeat(std::string_view digits, std::string_view what);
// True when the text is in the canonical form (its first '=' comes before any digit or quote),
// false for a benchdnn descriptor, whose name may itself contain '='.
bool is_canonical_form(std::string_view text);
// The line `convtune parse` prints for a shape-file line: p's canonical form, then the name and
// a repeat above 1 as a comment ("  # name x3"), so that the line reads back as p.
std::string to_shape_line(const ConvProblem& p, std::string_view name, int repeat);
// The line without its comment: '#' starts one anywhere, except inside a double-quoted benchdnn
// name (n"...").
std::string_view strip_comment(std::string_view line);
// Reads a benchdnn shape file (or a file of canonical lines). Throws ParseError naming the
// line number on the first bad line.
std::vector<ShapeLine> read_shape_file(const std::string& path);
std::vector<ShapeLine> parse_shape_text(std::string_view text);

}  // namespace convtune
