// ConvProblem: canonical round trips, benchdnn parsing of every peer shape file, validation.
#define BOOST_TEST_MODULE problem
#include <boost/test/unit_test.hpp>

#include <filesystem>

#include "convtune/error.hpp"
#include "convtune/problem.hpp"
#include "convtune/tensor.hpp"
#include "support/sweep.hpp"
#include "support/check.hpp"

using namespace convtune;
using test::error_of;
using test::starts_with;

BOOST_AUTO_TEST_SUITE(canonical)

BOOST_AUTO_TEST_CASE(round_trip_sweep) {
    for (const auto& c : test::expand(test::awkward_shapes(), {DataType::f32, DataType::f16, DataType::bf16})) {
        const std::string s = c.problem.to_string();
        const ConvProblem q = ConvProblem::parse(s);
        BOOST_TEST((q == c.problem), s);
        BOOST_TEST(q.to_string() == s);
    }
}

BOOST_AUTO_TEST_CASE(defaults_and_derived_output) {
    const ConvProblem p = ConvProblem::parse("c=64,k=128,in=56x56,ker=3x3,stride=2x2,pad=1x1");
    BOOST_TEST(p.n == 1);
    BOOST_TEST(p.groups == 1);
    BOOST_TEST(p.pad_end[0] == 1);
    BOOST_TEST(p.out(0) == 28);
    BOOST_TEST(p.out(1) == 28);
    BOOST_TEST(
        p.to_string() ==
        "dir=fwd,dtype=f32,layout=nchw,n=1,c=64,k=128,g=1,in=56x56,ker=3x3,stride=2x2,dil=1x1,pad=1x1,pad_end=1x1");
    const ConvProblem q =
        ConvProblem::parse("dir=bwd_filter, dtype=bf16, layout=ndhwc, c=4, k=4, in=4x5x6, ker=3x3x3, n=3");
    BOOST_TEST(q.spatial_dims == 3);
    BOOST_TEST((q.layout == Layout::nhwc));
    BOOST_TEST(q.to_string().find("layout=ndhwc") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bwd_data_reduction_length_is_the_largest_tap_count) {
    // reduction_length() of bwd_data bounds the terms summed into one dx element (it scales the
    // default error bound). Count them by brute force in 1-D: the bound must hold, and be reached
    // when the input is long enough, including strides that share a factor with the dilation.
    for (int64_t s = 1; s <= 4; ++s)
        for (int64_t d = 1; d <= 4; ++d)
            for (int64_t k = 1; k <= 5; ++k) {
                const std::string spec = "dir=bwd_data,c=1,k=2,in=40,ker=" + std::to_string(k) +
                                         ",stride=" + std::to_string(s) + ",dil=" + std::to_string(d) +
                                         ",pad=" + std::to_string((k - 1) * d);
                const ConvProblem p = ConvProblem::parse(spec);
                int64_t most = 0;
                for (int64_t i = 0; i < p.in[0]; ++i) {
                    int64_t taps = 0;
                    for (int64_t o = 0; o < p.out(0); ++o)
                        for (int64_t j = 0; j < k; ++j) taps += o * s + j * d - p.pad_begin[0] == i;
                    most = std::max(most, taps);
                }
                BOOST_TEST(p.reduction_length() == p.k * most,
                           spec << ": bound " << p.reduction_length() << ", counted " << p.k * most);
            }
}

BOOST_AUTO_TEST_CASE(malformed_strings) {
    BOOST_TEST(starts_with(error_of([] { ConvProblem::parse(""); }), "problem: empty"));
    BOOST_TEST(
        starts_with(error_of([] { ConvProblem::parse("c=1,k=1,in=5,ker=3,foo=1"); }), "problem: unknown key 'foo'"));
    BOOST_TEST(starts_with(error_of([] { ConvProblem::parse("c=1,k=1,in=5,ker=3x3"); }), "ker: has 2 dims"));
    BOOST_TEST(starts_with(error_of([] { ConvProblem::parse("c=x,k=1,in=5,ker=3"); }), "c: 'x' is not an integer"));
    BOOST_TEST(starts_with(error_of([] { ConvProblem::parse("k=1,in=5,ker=3"); }), "c: missing"));
    BOOST_TEST(starts_with(error_of([] { ConvProblem::parse("c=1,c=2,k=1,in=5,ker=3"); }), "c: given twice"));
    BOOST_TEST(
        starts_with(error_of([] { ConvProblem::parse("c=1,k=1,in=5,ker=3,dir=up"); }), "dir: unknown direction"));
    BOOST_TEST(
        starts_with(error_of([] { ConvProblem::parse("c=1,k=1,in=5,ker=3,dtype=f8"); }), "dtype: unknown data type"));
    BOOST_TEST(starts_with(error_of([] { ConvProblem::parse("c=1,k=1,in=5x5,ker=3x3,layout=ncdhw"); }),
                           "layout: 'ncdhw' is a 3-D layout"));
    BOOST_TEST(starts_with(error_of([] { ConvProblem::parse("c=1,k=1,in=5x5x5x5,ker=3"); }), "in: more than 3"));
    BOOST_TEST(starts_with(error_of([] { ConvProblem::parse("c=1,,k=1,in=5,ker=3"); }), "problem: empty entry"));
    BOOST_TEST(starts_with(error_of([] { ConvProblem::parse("c=99999999999999999999,k=1,in=5,ker=3"); }), "c: value"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(validation)

BOOST_AUTO_TEST_CASE(every_rule_names_its_field) {
    struct Bad { const char* spec; const char* prefix; };
    const Bad cases[] = {
        {"n=0,c=1,k=1,in=5,ker=3", "n: batch size must be >= 1"},
        {"n=-2,c=1,k=1,in=5,ker=3", "n: batch size must be >= 1"},
        {"c=0,k=1,in=5,ker=3", "c: input channels must be >= 1"},
        {"c=1,k=0,in=5,ker=3", "k: output channels must be >= 1"},
        {"c=4,k=4,g=0,in=5,ker=3", "g: groups must be >= 1"},
        {"c=3,k=4,g=2,in=5,ker=3", "c: input channels (3) must be divisible by groups (2)"},
        {"c=4,k=3,g=2,in=5,ker=3", "k: output channels (3) must be divisible by groups (2)"},
        {"c=1,k=1,in=0x5,ker=1x1", "in[h]: input size must be >= 1"},
        {"c=1,k=1,in=5x5,ker=1x0", "ker[w]: kernel size must be >= 1"},
        {"c=1,k=1,in=5,ker=3,stride=0", "stride[w]: stride must be >= 1"},
        {"c=1,k=1,in=5,ker=3,dil=0", "dil[w]: dilation must be >= 1"},
        {"c=1,k=1,in=5,ker=3,pad=-1", "pad[w]: begin padding must be >= 0"},
        {"c=1,k=1,in=5x5x5,ker=7x3x3", "ker[d]: dilated kernel (7) must not exceed the padded input (5)"},
        {"c=1,k=1,in=5x5,ker=3x3,dil=1x3", "ker[w]: dilated kernel (7)"},
        {"c=1,k=1,in=5,ker=3,pad_end=-5", "pad_end[w]: negative end padding must leave"},
        {"n=4294967296,c=4294967296,k=1,in=4,ker=1", "n: must be below 2^31"},
        {"n=2000000000,c=2000000000,k=1,in=2000000000,ker=1", "x: element count overflows"},
        {"c=1,k=1,in=3000000000,ker=1", "in[w]: magnitude must be below 2^31"},
    };
    for (const Bad& b : cases) {
        const std::string e = error_of([&] { ConvProblem::parse(b.spec); });
        BOOST_TEST(starts_with(e, b.prefix), b.spec << " -> '" << e << "' (expected '" << b.prefix << "...')");
    }
}

BOOST_AUTO_TEST_CASE(check_and_validate_agree) {
    ConvProblem p;
    p.c = 3;
    p.k = 4;
    p.groups = 2;
    BOOST_TEST(p.check().has_value());
    BOOST_CHECK_THROW(p.validate(), InvalidProblem);
    try {
        p.validate();
    } catch (const InvalidProblem& e) {
        BOOST_TEST(e.field() == "c");
    }
    ConvProblem unused;  // a 2-D problem whose unused third slot is not neutral
    unused.in = {4, 4, 2};
    BOOST_TEST(starts_with(*unused.check(), "spatial_dims: unused spatial slot 2"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(benchdnn)

BOOST_AUTO_TEST_CASE(readme_examples) {
    // Asymmetric padding: 0 on top, 1 at the bottom.
    ConvProblem p = ConvProblem::parse_benchdnn("ic32oc13_ih13oh12kh3ph0");
    BOOST_TEST(p.n == 2);  // benchdnn's default mini-batch
    BOOST_TEST(p.spatial_dims == 2);
    BOOST_TEST(p.in[1] == 13);  // iw promoted from ih
    BOOST_TEST(p.pad_begin[0] == 0);
    BOOST_TEST(p.pad_end[0] == 1);
    BOOST_TEST(p.out(0) == 12);
    // Strided 1x1: the end padding is negative (the last input row is never read).
    std::string name;
    p = ConvProblem::parse_benchdnn(R"(ic256ih56oc512oh28kh1sh2ph0n"resnet_50_v1_5:res3a_branch1")", &name);
    BOOST_TEST(name == "resnet_50_v1_5:res3a_branch1");
    BOOST_TEST(p.pad_end[0] == -1);
    BOOST_TEST(p.out(1) == 28);
    // 0-based dilation: dh1 is PyTorch's dilation 2; padding deduced from the output.
    p = ConvProblem::parse_benchdnn("mb1ic16ih20oc16oh20kh3dh1");
    BOOST_TEST(p.dilation[0] == 2);
    BOOST_TEST(p.pad_begin[0] == 2);
    BOOST_TEST(p.pad_end[0] == 2);
    // Padding deduced from the given output, no pad entry at all.
    p = ConvProblem::parse_benchdnn("ic3ih224oc64oh112kh7sh2");
    BOOST_TEST(p.pad_begin[0] == 2);
    BOOST_TEST(p.pad_end[0] == 3);
    // 1-D and 3-D.
    p = ConvProblem::parse_benchdnn(R"(mb1_g1ic32oc32_iw84350ow84349kw2sw1dw0pw0n"wavenet:conv1d_1")");
    BOOST_TEST(p.spatial_dims == 1);
    BOOST_TEST(p.in[0] == 84350);
    BOOST_TEST(p.out(0) == 84349);
    p = ConvProblem::parse_benchdnn("mb1ic3ih132iw132id116oc32kh3kw3kd3ph0pw0pd0sh1sw1sd1");
    BOOST_TEST(p.spatial_dims == 3);
    BOOST_TEST(p.in[0] == 116);
    BOOST_TEST(p.in[1] == 132);
    BOOST_TEST(p.out(0) == 114);
    // Promotion from d when only d entries exist.
    p = ConvProblem::parse_benchdnn("ic4id8oc4kd3");
    BOOST_TEST(p.spatial_dims == 3);
    BOOST_TEST(p.in[2] == 8);
    BOOST_TEST(p.kernel[1] == 3);
    // Different widths: w has entries of its own, so its output is deduced, not promoted from h.
    p = ConvProblem::parse_benchdnn("ic3ih10iw20oc4oh8kh3kw3");
    BOOST_TEST(p.out(1) == 18);
    // Unquoted name to the end of the line, groups.
    p = ConvProblem::parse_benchdnn("g32mb8ic32ih112oc32oh112kh3ph1nmobilenet:conv2_1/dw", &name);
    BOOST_TEST(p.groups == 32);
    BOOST_TEST(name == "mobilenet:conv2_1/dw");
}

BOOST_AUTO_TEST_CASE(malformed_descriptors) {
    const std::pair<const char*, const char*> cases[] = {
        {"ih56oc64kh3", "ic: missing"},
        {"ic64ih56kh3", "oc: missing"},
        {"ic64oc64kh3", "ih: missing"},
        {"ic64ih56oc64", "kh: missing"},
        {"ic64ih56oc64kh3zz4", "unknown entry 'zz'"},
        {"ic64ih56oc64kh3ph", "entry 'ph' has no valid number"},
        {"ic64ih5oc64kh9", "oh: deduced output size"},
        {"ic64ih56oc64kh3sh0", "sh: stride must be >= 1"},
        {"ic64ih56oc64kh3dh-2", "dh: must not be negative"},
        {"ic64ic32ih56oc64kh3", "entry 'ic' given twice"},
        {"ic63ih56oc64kh3g2", "c: input channels (63) must be divisible"},
        {"ic64ih56oc64kh3n\"unterminated", "name: missing closing quote"},
        {"ic64ih56oc64kh3?", "unexpected character '?'"},
    };
    for (auto [spec, prefix] : cases) {
        const std::string e = error_of([&] { ConvProblem::parse_benchdnn(spec); });
        BOOST_TEST(starts_with(e, prefix), spec << " -> '" << e << "'");
    }
}

BOOST_AUTO_TEST_CASE(every_peer_file_parses_and_round_trips) {
    int files = 0, problems = 0;
    for (const auto& entry : std::filesystem::directory_iterator(test::peer_shapes_dir())) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("shapes_", 0) != 0) continue;
        ++files;
        std::vector<ShapeLine> lines;
        BOOST_REQUIRE_NO_THROW(lines = read_shape_file(entry.path().string()));
        BOOST_TEST(!lines.empty(), name);
        for (const ShapeLine& l : lines) {
            ++problems;
            BOOST_TEST(!l.problem.check().has_value());
            BOOST_TEST((ConvProblem::parse(l.problem.to_string()) == l.problem), name << ":" << l.line_number);
            for (int i = 0; i < l.problem.spatial_dims; ++i) BOOST_TEST(l.problem.out(i) >= 1);
        }
    }
    BOOST_TEST(files == 15);
    BOOST_TEST(problems == 339);  // every uncommented line of the 15 files
    BOOST_TEST_MESSAGE(files << " files, " << problems << " problems");
}

BOOST_AUTO_TEST_CASE(resnet50_file_contents) {
    const auto lines = read_shape_file(test::peer_shapes_dir() + "/shapes_resnet_50_v1_5");
    // 23 uncommented layers with repeat hints summing to the network's 53 convolutions.
    int convs = 0;
    for (const auto& l : lines) convs += l.repeat;
    BOOST_TEST(lines.size() == 23u);
    BOOST_TEST(convs == 53);
    BOOST_TEST(lines[1].name == "resnet_50_v1_5:res2a_branch1");
    BOOST_TEST(lines[1].repeat == 4);
}

BOOST_AUTO_TEST_CASE(shape_file_errors_name_the_line) {
    const std::string e = error_of([] { parse_shape_text("# comment\n\nic3ih8oc4kh3\nic3ih8oc4kh33\n"); });
    BOOST_TEST(starts_with(e, "line 4: oh: deduced output size"), e);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tensor_strides)

// The shared stride helper (make_strides, through x_strides, w_strides and y_strides), which the
// reference algorithm and the oracle both use and so cannot check each other on, against the
// memory order tensor.hpp documents: elements numbered one after another by nested loops, the
// channel outermost after n (channels-first) or innermost (channels-last).
BOOST_AUTO_TEST_CASE(strides_match_the_documented_memory_order) {
    const char* specs[] = {"n=2,c=3,k=5,in=7,ker=3",
                           "n=2,c=6,k=4,g=2,in=5x7,ker=3x2,stride=2x1",
                           "n=3,c=4,k=2,in=3x4x5,ker=2x3x1,pad=1x0x0"};
    int checked = 0;
    for (const char* spec : specs) {
        for (Layout layout : {Layout::nchw, Layout::nhwc}) {
            ConvProblem p = ConvProblem::parse(spec);
            p.layout = layout;
            struct Tensor { const char* name; Strides s; int64_t outer, channels; Dims sizes; };
            const Tensor tensors[] = {{"x", x_strides(p), p.n, p.c, p.in},
                                      {"w", w_strides(p), p.k, p.c_per_group(), p.kernel},
                                      {"y", y_strides(p), p.n, p.k, out_dims(p)}};
            for (const Tensor& t : tensors) {
                const int64_t d0 = p.spatial_dims > 0 ? t.sizes[0] : 1, d1 = p.spatial_dims > 1 ? t.sizes[1] : 1,
                              d2 = p.spatial_dims > 2 ? t.sizes[2] : 1;
                // sizes[i] for i < spatial_dims; the index passed for an unused slot is 0.
                auto at = [&](int64_t o, int64_t ch, int64_t a, int64_t b, int64_t c) {
                    const int64_t idx[3] = {a, b, c};
                    int64_t s[3] = {0, 0, 0};
                    for (int i = 0; i < p.spatial_dims; ++i) s[i] = idx[i];
                    return t.s.at(o, ch, s[0], s[1], s[2]);
                };
                int64_t next = 0, wrong = 0;
                // The spatial loops run over the used dimensions only (outermost first).
                const int64_t e0 = d0, e1 = p.spatial_dims > 1 ? d1 : 1, e2 = p.spatial_dims > 2 ? d2 : 1;
                for (int64_t o = 0; o < t.outer; ++o) {
                    if (layout == Layout::nchw) {
                        for (int64_t ch = 0; ch < t.channels; ++ch)
                            for (int64_t a = 0; a < e0; ++a)
                                for (int64_t b = 0; b < e1; ++b)
                                    for (int64_t c = 0; c < e2; ++c) wrong += at(o, ch, a, b, c) != next++;
                    } else {
                        for (int64_t a = 0; a < e0; ++a)
                            for (int64_t b = 0; b < e1; ++b)
                                for (int64_t c = 0; c < e2; ++c)
                                    for (int64_t ch = 0; ch < t.channels; ++ch) wrong += at(o, ch, a, b, c) != next++;
                    }
                }
                const std::string what = std::string(t.name) + " of " + p.to_string();
                BOOST_TEST(wrong == 0, what);
                BOOST_TEST(next == t.outer * t.channels * e0 * e1 * e2, what);
                ++checked;
            }
        }
    }
    BOOST_TEST(checked == 18);
    // One value written out by hand: x of an NHWC (n, h, w, c) tensor, n=2 c=3 h=4 w=5, element
    // (1, 2, 3, 4) sits at ((1 * 4 + 3) * 5 + 4) * 3 + 2.
    const Strides s = make_strides(Layout::nhwc, 2, 3, Dims{4, 5, 1});
    BOOST_TEST(s.at(1, 2, 3, 4) == ((1 * 4 + 3) * 5 + 4) * 3 + 2);
    const Strides c = make_strides(Layout::nchw, 2, 3, Dims{4, 5, 1});
    BOOST_TEST(c.at(1, 2, 3, 4) == ((1 * 3 + 2) * 4 + 3) * 5 + 4);
}

BOOST_AUTO_TEST_SUITE_END()
