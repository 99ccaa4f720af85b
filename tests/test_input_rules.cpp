// Inputs read right and wrong ones refused: benchdnn's own dimension rule, names with '=' and
// trailing comments, bounded repeat hints, the check's absolute term for subnormal outputs.
#define BOOST_TEST_MODULE input_rules
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <limits>

#include "convtune/error.hpp"
#include "convtune/numeric.hpp"
#include "convtune/registry.hpp"
#include "convtune/flags.hpp"
#include "convtune/sim/recording.hpp"
#include "convtune/sim/stream.hpp"
#include "convtune/tuning_db.hpp"
#include "convtune/sim/workload.hpp"
#include "support/check.hpp"
#include "support/sweep.hpp"

using namespace convtune;
using convtune::test::host_algorithms;
using test::error_of;
using test::starts_with;

namespace {

std::string canonical(std::string_view benchdnn) { return ConvProblem::parse_benchdnn(benchdnn).to_string(); }

}  // namespace

BOOST_AUTO_TEST_SUITE(benchdnn_dimensions)

// The lines of the issue, with the canonical form oneDNN's str2desc + sanitize_desc give them.
BOOST_AUTO_TEST_CASE(a_lower_dimension_with_entries_is_completed_on_its_own) {
    // shapes_regression_dw: w has iw/ow/kw of its own, so its stride is 1, its dilation 0 and its
    // padding deduced from ow; nothing comes from h.
    BOOST_TEST(
        canonical("mb1_g16ic16oc16_ih15oh7kh6sh2ph3_iw10ow10kw3") ==
        "dir=fwd,dtype=f32,layout=nchw,n=1,c=16,k=16,g=16,in=15x10,ker=6x3,stride=2x1,dil=1x1,pad=3x1,pad_end=0x1");
    // shapes_tails: pd1 is not copied into h and w, which have entries of their own.
    BOOST_TEST(
        canonical("ic65oc65_id5od5kd3pd1_ih1oh1kh1_iw1ow1kw1") ==
        "dir=fwd,dtype=f32,layout=ncdhw,n=2,c=65,k=65,g=1,in=5x1x1,ker=3x1x1,stride=1x1x1,dil=1x1x1,pad=1x0x0,pad_end=1x0x0");
    // A dilation of h is not a dilation of w once w has entries.
    BOOST_TEST(canonical("ic8ih9oc8oh9kh3dh1_iw7kw3") ==
               "dir=fwd,dtype=f32,layout=nchw,n=2,c=8,k=8,g=1,in=9x7,ker=3x3,stride=1x1,dil=2x1,pad=2x0,pad_end=2x0");
}

BOOST_AUTO_TEST_CASE(a_dimension_without_entries_is_copied_whole) {
    // w has no entries: every value of h, computed padding included, is copied.
    BOOST_TEST(canonical("ic4ih8oc4oh4kh3sh2") ==
               "dir=fwd,dtype=f32,layout=nchw,n=2,c=4,k=4,g=1,in=8x8,ker=3x3,stride=2x2,dil=1x1,pad=0x0,pad_end=1x1");
    // 3-D with only d entries: h and w are copies of d.
    BOOST_TEST(
        canonical("ic4id8oc4kd3pd1sd2") ==
        "dir=fwd,dtype=f32,layout=ncdhw,n=2,c=4,k=4,g=1,in=8x8x8,ker=3x3x3,stride=2x2x2,dil=1x1x1,pad=1x1x1,pad_end=0x0x0");
    // benchdnn does not count a stride of 1 or a padding of 0 as an entry: "sw1pw0" leaves w without
    // entries, so w is a copy of h (its padding 1, not 0).
    BOOST_TEST(canonical("ic4ih8oc4kh3ph1_sw1pw0") ==
               "dir=fwd,dtype=f32,layout=nchw,n=2,c=4,k=4,g=1,in=8x8,ker=3x3,stride=1x1,dil=1x1,pad=1x1,pad_end=1x1");
    // An output of 0 is benchdnn's "not given": deduced.
    BOOST_TEST(canonical("ic4ih5oc4oh0kh3") ==
               "dir=fwd,dtype=f32,layout=nchw,n=2,c=4,k=4,g=1,in=5x5,ker=3x3,stride=1x1,dil=1x1,pad=0x0,pad_end=0x0");
}

BOOST_AUTO_TEST_CASE(what_benchdnn_refuses_is_refused) {
    const std::pair<const char*, const char*> cases[] = {
        {"ic4ih8oc4kh3_iw8", "kw: missing or 0"},             // w has entries: kw is not taken from kh
        {"ic4ih8oc4kh3_sw2", "iw: missing or 0"},             // a stride other than 1 is an entry
        {"ic4id8oc4kd3_ih8kh3", "iw: missing (a descriptor with d entries"},  // 3-D: h and w, or neither
        {"ic4id8oc4kd3_iw8kw3", "ih: missing (a descriptor with d entries"},
        {"ic4oc4", "ih: missing (no spatial dimension"},
        {"ic4ih8oc4kh3ph-1", "ph: must not be negative"},
        {"g0ic4ih8oc4kh3", "g: groups must be >= 1"},
        {"ic0ih8oc4kh3", "ic: missing or 0"},
    };
    for (auto [spec, prefix] : cases) {
        const std::string e = error_of([&] { ConvProblem::parse_benchdnn(spec); });
        BOOST_TEST(starts_with(e, prefix), spec << " -> '" << e << "' (expected '" << prefix << "')");
    }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(shape_lines)

BOOST_AUTO_TEST_CASE(a_benchdnn_name_with_equals_stays_benchdnn) {
    const auto lines = parse_shape_text("mb1ic16ih8oc16oh8kh3ph1n\"ic%simd_width_!=0_with_im2col\"\n");
    BOOST_TEST_REQUIRE(lines.size() == 1u);
    BOOST_TEST(lines[0].name == "ic%simd_width_!=0_with_im2col");
    BOOST_TEST(lines[0].problem.c == 16);
    BOOST_TEST(ConvProblem::parse_any("ic16ih8oc16kh3nx=y").c == 16);
    BOOST_TEST(is_canonical_form("c=1,k=1,in=5,ker=3"));
    BOOST_TEST(is_canonical_form(",c=1"));  // refused by the canonical parser, which names it
    BOOST_TEST(!is_canonical_form("ic3ih5oc3kh3n\"a=b\""));
}

BOOST_AUTO_TEST_CASE(a_comment_may_follow_a_problem) {
    const auto lines = parse_shape_text(
        "ic3ih8oc4kh3 # benchdnn line\n"
        "c=1,k=1,in=5,ker=3# canonical line\n"
        "ic3ih8oc4kh3n\"a#b*2\" # the quoted '#' is the name's\n");
    BOOST_TEST_REQUIRE(lines.size() == 3u);
    BOOST_TEST(lines[0].problem.k == 4);
    BOOST_TEST(lines[1].problem.in[0] == 5);
    BOOST_TEST(lines[2].name == "a#b");
    BOOST_TEST(lines[2].repeat == 2);
    BOOST_TEST(strip_comment("ic3n\"x#y\"#z") == "ic3n\"x#y\"");
}

BOOST_AUTO_TEST_CASE(repeat_hints_are_bounded_and_never_clamped) {
    BOOST_TEST(parse_shape_text("ic3ih8oc4kh3n\"a*3\"")[0].repeat == 3);
    BOOST_TEST(parse_shape_text("ic3ih8oc4kh3n\"a*10000\"")[0].repeat == kMaxRepeat);
    // A '*' not followed by an integer is part of the name.
    BOOST_TEST(parse_shape_text("ic3ih8oc4kh3n\"a*b\"")[0].name == "a*b");
    const std::pair<const char*, const char*> cases[] = {
        {"ic3ih8oc4kh3n\"a*0\"", "line 1: name: repeat hint: must be >= 1 (got '0')"},
        {"ic3ih8oc4kh3n\"a*-5\"", "line 1: name: repeat hint: must be >= 1 (got '-5')"},
        {"ic3ih8oc4kh3n\"a*10001\"", "line 1: name: repeat hint: '10001' is above the maximum of 10000"},
        {"ic3ih8oc4kh3n\"a*2147483647\"", "line 1: name: repeat hint: '2147483647' is above the maximum of 10000"},
        {"ic3ih8oc4kh3n\"a*99999999999999999999\"",
         "line 1: name: repeat hint: '99999999999999999999' is above the maximum"},
    };
    for (auto [text, prefix] : cases) {
        const std::string e = error_of([&] { parse_shape_text(text); });
        BOOST_TEST(starts_with(e, prefix), text << " -> '" << e << "' (expected '" << prefix << "')");
    }
    // The same limit for a workload layer's and a trace line's xN.
    BOOST_TEST(
        sim::parse_workload_text("convtune-workload 1\nlayer a x10000 c=1,k=1,in=5,ker=3\n", "w").layers[0].repeat ==
        kMaxRepeat);
    BOOST_TEST(starts_with(
        error_of([] { sim::parse_workload_text("convtune-workload 1\nlayer a x10001 c=1,k=1,in=5,ker=3\n", "w"); }),
        "workload line 2: bad repeat 'x10001': '10001' is above the maximum of 10000"));
    BOOST_TEST(starts_with(
        error_of([] { sim::parse_workload_text("convtune-workload 1\nlayer a x0 c=1,k=1,in=5,ker=3\n", "w"); }),
        "workload line 2: bad repeat 'x0': must be >= 1"));
    BOOST_TEST(sim::parse_trace("c=1,k=1,in=5,ker=3 x10000\n")[0][0].count == kMaxRepeat);
    BOOST_TEST(starts_with(error_of([] { sim::parse_trace("c=1,k=1,in=5,ker=3 x2147483647\n"); }),
                           "trace line 1: bad count 'x2147483647': '2147483647' is above the maximum of 10000"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(check_bound)

namespace {

const char* kSubnormal =
    "dir=bwd_filter,dtype=f16,layout=ncdhw,n=1,c=16,k=16,g=1,in=1x1x13,ker=1x1x3,stride=1x1x5,dil=1x1x6,pad=0x0x1,pad_end=0x0x-1";

}  // namespace

// The issue's reproducer: correct f16 results whose outputs are subnormal pass every algorithm.
BOOST_AUTO_TEST_CASE(correctly_rounded_subnormal_outputs_pass) {
    const ConvProblem p = ConvProblem::parse(kSubnormal);
    const HostTensors in = make_host_tensors(p, 1);
    const OracleResult ref = oracle(in);
    int ran = 0;
    for (const Algorithm* a : host_algorithms()) {
        if (!a->supports(p)) continue;
        const auto o = test::check_against(*a, in, ref);
        BOOST_TEST(o.passed, o.message);
        ran += o.ran;
    }
    BOOST_TEST(ran > 0, "no algorithm ran the reproducer");
}

// The absolute term lets no wrong result through: one output element moved by 4 subnormal
// spacings (8 times the floor) fails, on the same problem.
BOOST_AUTO_TEST_CASE(a_wrong_subnormal_result_still_fails) {
    const ConvProblem p = ConvProblem::parse(kSubnormal);
    const HostTensors in = make_host_tensors(p, 1);
    const OracleResult ref = oracle(in);
    HostTensors t = in;
    BOOST_TEST_REQUIRE(execute(find_algorithm("cpu.direct"), t).status.ok());
    const double bound = find_algorithm("cpu.direct").error_bound(p);
    BOOST_TEST_REQUIRE(compare(t, ref).max_scaled <= bound);
    // The element with the smallest magnitude, where the floor matters most.
    std::size_t i = 0;
    for (std::size_t j = 0; j < ref.magnitude.size(); ++j)
        if (ref.magnitude[j] < ref.magnitude[i]) i = j;
    const double wrong = load_as_double(output_of(t).data(), p.dtype, i) + 4 * 0x1p-24;
    store_from_double(output_of(t).data(), p.dtype, i, wrong);
    // Independently of compare(): the error is beyond the bound's relative and absolute terms.
    BOOST_TEST_REQUIRE(std::fabs(wrong - ref.value[i]) > bound * ref.magnitude[i] + error_floor(p));
    BOOST_TEST(compare(t, ref).max_scaled > bound);
}

BOOST_AUTO_TEST_CASE(the_floor_is_half_the_subnormal_spacing) {
    BOOST_TEST(subnormal_rounding(DataType::f16) == 0.5 * f16_to_float(1));     // smallest f16 subnormal
    BOOST_TEST(subnormal_rounding(DataType::bf16) == 0.5 * bf16_to_float(1));   // smallest bf16 subnormal
    BOOST_TEST(subnormal_rounding(DataType::f32) == 0.5 * std::numeric_limits<float>::denorm_min());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(recordings)

namespace {

// A minimal valid recording; each case replaces one piece of it.
std::string recording(const std::string& problem_fields, const std::string& samples = "[1.5,2.0]") {
    return R"({"format":"convtune-recording","version":1,"source":"measured","samples":2,)"
           R"("environment":{"convtune":"0","backend":"cpu","library":"l","device":"d","driver":""},)"
           R"("algorithms":[{"id":"cpu.direct","notes":[]},{"id":"cpu.im2col_gemm","notes":[]}],)"
           R"("problems":[{"problem":"c=1,k=1,in=5,ker=3",)" +
           problem_fields + R"("algorithms":{"cpu.direct":{"first_ms":3,"samples_ms":)" + samples +
           R"(},"cpu.im2col_gemm":{"unsupported":"no"}}}]})";
}

std::string load_error(const std::string& text) {
    return error_of([&] { sim::Recording::from_json(text, "rec"); });
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_valid_recording_loads) {
    const sim::Recording r =
        sim::Recording::from_json(recording(R"("heuristic":["cpu.direct"],"fallback":"cpu.direct",)"), "rec");
    BOOST_TEST(r.problems.size() == 1u);
    BOOST_TEST(r.problems[0].fallback == "cpu.direct");
}

BOOST_AUTO_TEST_CASE(every_field_is_validated_at_load) {
    const std::pair<std::string, std::string> cases[] = {
        {recording(R"("heuristic":[],)"), "rec: problem 1: \"heuristic\" is empty"},
        {recording(R"("heuristic":["cpu.direct"],"fallback":"cpu.nope",)"),
         "rec: problem 1: \"fallback\" names 'cpu.nope', which is not in \"algorithms\""},
        {recording(R"("heuristic":["cpu.direct"],"fixed":"cpu.nope",)"), "rec: problem 1: \"fixed\" names 'cpu.nope'"},
        {recording(R"("heuristic":["cpu.direct"],"fallback":7,)"), "rec: problem 1: \"fallback\" has the wrong type"},
        {recording(R"("heuristic":["cpu.direct"],"db_search_ms":-1,)"),
         "rec: problem 1: \"db_search_ms\" has a negative or non-finite time (got -1.0)"},
        // The sample of the issue: finite, but its totals overflow to inf and print as nan.
        {recording(R"("heuristic":["cpu.direct"],)", "[1e308]"),
         "rec: problem 1, cpu.direct: \"samples_ms\" has a time of 1e9 ms or more (got 1e+308)"},
        {recording(R"("heuristic":["cpu.direct"],)", "[1e9]"),
         "rec: problem 1, cpu.direct: \"samples_ms\" has a time of 1e9 ms or more"},
        {recording(R"("heuristic":["cpu.direct"],)", "[-0.5]"),
         "rec: problem 1, cpu.direct: \"samples_ms\" has a negative"},
    };
    for (const auto& [text, prefix] : cases) {
        const std::string e = load_error(text);
        BOOST_TEST(starts_with(e, prefix), "-> '" << e << "' (expected '" << prefix << "')");
    }
    std::string twice = recording(R"("heuristic":["cpu.direct"],)");
    twice.replace(twice.find(R"({"id":"cpu.im2col_gemm")"), 0, R"({"id":"cpu.direct","notes":[]},)");
    BOOST_TEST(starts_with(load_error(twice), "rec: \"algorithms\": 'cpu.direct' listed twice"), load_error(twice));
    std::string negative = recording(R"("heuristic":["cpu.direct"],)");
    negative.replace(negative.find(R"("samples":2)"), 11, R"("samples":-1)");
    BOOST_TEST(starts_with(load_error(negative), "rec: \"samples\" must be >= 0"), load_error(negative));
}

BOOST_AUTO_TEST_CASE(from_db_reports_the_entries_it_leaves_out) {
    DbSection sec;
    sec.env.backend = "cpu";
    const std::string good = "cpu|c=1,k=1,in=5,ker=3|det=0|tf32=1|policy=convtune";
    const std::string bad = "cpu|c=2,k=2,in=5,ker=3|det=0|tf32=1|policy=convtune";
    sec.entries[good].algorithm = "cpu.direct";
    sec.entries[good].median_ms = 1.0;
    sec.entries[bad].algorithm = "cpu.direct";
    sec.entries[bad].median_ms = -2.0;
    std::vector<std::string> dropped;
    const sim::Recording r = sim::recording_from_db({sec}, "cpu", &dropped);
    BOOST_TEST(r.problems.size() == 1u);
    BOOST_TEST_REQUIRE(dropped.size() == 1u);
    BOOST_TEST(dropped[0] == "entry '" + bad + "': median -2.0 ms is not a time in (0, 1e9) ms");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(options)

BOOST_AUTO_TEST_CASE(flags_refuse_empty_and_duplicate_entries) {
    BOOST_TEST(parse_flags("benchmark=1,deterministic=1").deterministic);
    BOOST_TEST(starts_with(error_of([] { parse_flags("benchmark=1,,deterministic=1"); }), "flags: empty entry"));
    BOOST_TEST(starts_with(error_of([] { parse_flags("benchmark=1,"); }), "flags: empty entry"));
    BOOST_TEST(starts_with(error_of([] { parse_flags(",benchmark=1"); }), "flags: empty entry"));
    BOOST_TEST(error_of([] { parse_flags("benchmark=1,benchmark=0"); }) == "benchmark: given twice");
}

// Number lists (tune --batch, simulate --batches/--scales) refuse what strtoll/strtod would skip
// or drop: a trailing comma, a sign, leading space; as string lists (--dtype f32,) do.
BOOST_AUTO_TEST_CASE(number_lists_refuse_what_strtoll_would_skip) {
    BOOST_TEST((sim::parse_int_list("1,8,32", "batch") == std::vector<int64_t>{1, 8, 32}));
    BOOST_TEST((sim::parse_double_list("0.5,.75,1", "scales") == std::vector<double>{0.5, 0.75, 1}));
    for (const char* bad : {"4,", "+3", " 3", "3 ", "4,,8", ",4", "-1", "0x10"})
        BOOST_TEST(starts_with(error_of([&] { sim::parse_int_list(bad, "batch"); }), "batch: "), bad);
    for (const char* bad : {"0.5,", "+1", " 1", "1,,2"})
        BOOST_TEST(starts_with(error_of([&] { sim::parse_double_list(bad, "scales"); }), "scales: "), bad);
    BOOST_TEST(error_of([] { sim::parse_int_list("4,", "batch"); }) == "batch: empty entry (trailing comma) in '4,'");
    BOOST_TEST(error_of([] { sim::parse_string_list("f32,", "dtype"); }) ==
               "dtype: empty entry (trailing comma) in 'f32,'");
}

// A trace is bounded (issue 32, D17): kMaxTraceLines problem lines and kMaxTraceProblems distinct
// problems; one more of either is refused at the line that crosses it.
BOOST_AUTO_TEST_CASE(traces_are_bounded_in_lines_and_distinct_problems) {
    std::string same, distinct;
    for (int64_t i = 0; i < sim::kMaxTraceLines; ++i) same += "c=1,k=1,in=5,ker=3\n";
    BOOST_TEST(sim::parse_trace(same)[0].size() == static_cast<std::size_t>(sim::kMaxTraceLines));
    same += "c=1,k=1,in=5,ker=3\n";
    BOOST_TEST(error_of([&] { sim::parse_trace(same); }) ==
               "trace line 1000001: more than 1000000 problem lines, the most a trace may hold (docs/simulation.md)");
    for (int64_t i = 1; i <= sim::kMaxTraceProblems; ++i)
        distinct += "c=1,k=1,in=5,ker=3,n=" + std::to_string(i) + "\n";
    BOOST_TEST(sim::parse_trace(distinct)[0].size() == static_cast<std::size_t>(sim::kMaxTraceProblems));
    distinct += "c=1,k=1,in=5,ker=3,n=100001\n";
    BOOST_TEST(error_of([&] { sim::parse_trace(distinct); }) ==
               "trace line 100001: more than 100000 distinct problems, the most a trace may hold (docs/simulation.md)");
}

// What a message echoes of the input: clipped and with control bytes escaped (quote_input), so
// that a NUL cannot cut the message short and a 10 MB line costs a line of stderr, not 20 MB.
BOOST_AUTO_TEST_CASE(echoed_input_is_escaped_and_clipped) {
    const std::string nul("n=1\0,c=1,k=1,in=8,ker=3", 23);
    const std::string m = error_of([&] { ConvProblem::parse(nul); });
    BOOST_TEST(m == "n: '1\\0' is not an integer", m);
    BOOST_TEST(error_of([] { parse_flags("benchmark=\x1b[2J"); }) ==
               "benchmark: '\\x1b[2J' is not a boolean (use 0/1 or true/false)");
    BOOST_TEST(quote_input(std::string(100, 'a')) == "'" + std::string(80, 'a') + "...'");
    BOOST_TEST(quote_input(std::string("a\0\t\n\r\x7f", 6)) == "'a\\0\\t\\n\\r\\x7f'");
    // A 10 MB junk line, as a shape file, a trace and a problem string: one short message each.
    const std::string junk(10'000'000, 'a');
    for (const std::string& msg :
         {error_of([&] { parse_shape_text(junk + "\n"); }), error_of([&] { sim::parse_trace(junk + "\n"); }),
          error_of([&] { ConvProblem::parse_any(junk); }),
          error_of([&] { ConvProblem::parse("n=1,c=1,k=1,in=8,ker=3,pad=" + std::string(10'000'000, '9')); }),
          error_of([&] { ConvProblem::parse(junk + "=1"); }), error_of([&] { sim::parse_int_list(junk, "batch"); })}) {
        BOOST_TEST(msg.size() < 400u, msg.substr(0, 400));
        BOOST_TEST(msg.find("...'") != std::string::npos, msg.substr(0, 400));
    }
}

BOOST_AUTO_TEST_SUITE_END()

// parse writes named lines (the name and repeat as a trailing comment) that parse reads back, for
// every line of every peer shape file: the same problems, in order.
BOOST_AUTO_TEST_CASE(parse_output_reads_back_for_every_peer_shape_file) {
    int files = 0, named = 0;
    for (const auto& entry : std::filesystem::directory_iterator(test::peer_shapes_dir())) {
        if (entry.path().filename().string().rfind("shapes_", 0) != 0) continue;
        const auto original = read_shape_file(entry.path().string());
        std::string written;
        for (const ShapeLine& l : original) {
            written += to_shape_line(l.problem, l.name, l.repeat) + "\n";
            named += !l.name.empty();
        }
        std::vector<ShapeLine> back;
        BOOST_TEST(error_of([&] { back = parse_shape_text(written); }) == "", entry.path());
        BOOST_TEST_REQUIRE(back.size() == original.size(), entry.path());
        for (std::size_t i = 0; i < back.size(); ++i)
            BOOST_TEST((back[i].problem == original[i].problem), back[i].problem.to_string());
        ++files;
    }
    BOOST_TEST(files >= 10, "only " << files << " peer shape files found in " << test::peer_shapes_dir());
    BOOST_TEST(named > 0, "no named line among the peer shape files");
    BOOST_TEST_MESSAGE(files << " files read back, " << named << " named lines");
}
