// The flags and policies on the real CPU backend (test_selector proves the rules on a scripted
// backend; here the same rules meet real algorithms, real timings and real numerics), and the
// CPU's TF32 emulation: allow_tf32 has the numerical effect it has on a GPU.
#define BOOST_TEST_MODULE policies_cpu
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "convtune/numeric.hpp"
#include "convtune/registry.hpp"
#include "convtune/selector.hpp"
#include "convtune/verify/oracle.hpp"

using namespace convtune;

namespace {

Backend& cpu() { return find_backend("cpu"); }
const Algorithm& algo(const std::string& id) { return find_algorithm(id); }
FlagValues flags(const std::string& s) { return parse_flags(s); }

const Candidate& cand(const Decision& d, const std::string& id) {
    for (const Candidate& c : d.candidates)
        if (c.id == id) return c;
    throw std::runtime_error("no candidate " + id);
}

// Every f32 element of `bytes` rounded to TF32 (what the tensor cores see).
void round_to_tf32(std::vector<std::byte>& bytes) {
    for (std::size_t i = 0; i + 4 <= bytes.size(); i += 4) {
        float f;
        std::memcpy(&f, bytes.data() + i, 4);
        f = round_tf32(f);
        std::memcpy(bytes.data() + i, &f, 4);
    }
}

// Error of `a` on `in`, scaled per element by sum|a*b| (see convtune/verify/oracle.hpp).
double scaled_error(const Algorithm& a, const HostTensors& in, const OracleResult& ref) {
    HostTensors t = in;
    const RunResult r = execute(a, t);
    BOOST_REQUIRE_MESSAGE(r.status.ok(), a.id() << ": " << r.status.message);
    const ErrorStats e = compare(t, ref);
    BOOST_REQUIRE(e.finite);
    return e.max_scaled;
}

// Problems with long reductions in each direction, where TF32's 2^-11 input rounding dominates
// f32's 2^-24 accumulation error.
std::vector<ConvProblem> tf32_problems() {
    std::vector<ConvProblem> r;
    for (const char* dir : {"fwd", "bwd_data", "bwd_filter"})
        for (const char* layout : {"nchw", "nhwc"})
            r.push_back(ConvProblem::parse(std::string("dir=") + dir + ",layout=" + layout +
                                           ",n=2,c=32,k=24,in=12x11,ker=3x3,pad=1x1"));
    return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tf32_emulation)

// The .tf32 variant equals "round both operands to TF32, then compute in f32": against an
// oracle of the rounded inputs its error is at f32 level, against the exact inputs it carries the
// TF32 rounding, which is far larger than f32's and within the documented TF32 bound; with
// allow_tf32 off the f32 algorithm's error has no TF32 part.
BOOST_AUTO_TEST_CASE(error_grows_as_expected_and_vanishes_with_the_flag_off) {
    const Algorithm& f32 = algo("cpu.im2col_gemm");
    const Algorithm& tf32 = algo("cpu.im2col_gemm.tf32");
    BOOST_TEST(tf32.notes().has(Note::tensor_core));
    BOOST_TEST(!f32.notes().has(Note::tensor_core));
    for (const ConvProblem& p : tf32_problems()) {
        const HostTensors in = make_host_tensors(p, 5);
        HostTensors rounded = in;
        round_to_tf32(rounded.x);
        round_to_tf32(rounded.w);
        round_to_tf32(rounded.y);
        const OracleResult exact = oracle(in), of_rounded = oracle(rounded);
        const double e_f32 = scaled_error(f32, in, exact);
        const double e_tf32 = scaled_error(tf32, in, exact);
        const double e_tf32_rounded = scaled_error(tf32, in, of_rounded);
        // Per product, rounding two operands to 11 significant bits moves it by < 2 * 2^-11 of
        // its magnitude; the sum of many such errors cancels partly, so the scaled error stays
        // well below 2^-10 but far above f32 accumulation (~L * 2^-24 at worst, much less here).
        BOOST_TEST(e_tf32 <= tf32.error_bound(p), p.to_string());
        BOOST_TEST(e_tf32 < 0x1p-10, p.to_string());
        BOOST_TEST(e_tf32 > 16 * e_f32, p.to_string() << ": tf32 " << e_tf32 << " vs f32 " << e_f32);
        BOOST_TEST(e_tf32 > 0x1p-17, p.to_string() << ": tf32 error " << e_tf32 << " too small to be TF32 rounding");
        BOOST_TEST(e_tf32_rounded <= f32.error_bound(p), p.to_string() << ": " << e_tf32_rounded);
        BOOST_TEST(e_tf32_rounded < e_tf32 / 16, p.to_string() << ": not the rounded inputs' result");
        BOOST_TEST_MESSAGE(p.to_string() << ": scaled error f32 " << e_f32 << ", tf32 " << e_tf32
                                         << ", tf32 vs rounded inputs " << e_tf32_rounded);
    }
}

// Through the selector: allow_tf32=0 removes the TENSOR_CORE candidate for f32 (so nothing chosen
// can carry TF32 error), allow_tf32=1 times it; f16 problems never offer it.
BOOST_AUTO_TEST_CASE(allow_tf32_gates_the_tensor_core_candidate) {
    const ConvProblem p = ConvProblem::parse("n=1,c=16,k=16,in=10x10,ker=3x3,pad=1x1");
    TuningCache cache;
    Selector s(cpu(), cache);
    const auto off = s.select(p, flags("benchmark=1,allow_tf32=0,min_samples=1,max_samples=2"));
    BOOST_TEST((cand(*off, "cpu.im2col_gemm.tf32").state == Candidate::State::filtered));
    BOOST_TEST(!algo(off->algorithm).notes().has(Note::tensor_core));
    const auto on = s.select(p, flags("benchmark=1,allow_tf32=1,min_samples=1,max_samples=2"));
    BOOST_TEST((cand(*on, "cpu.im2col_gemm.tf32").state == Candidate::State::timed));
    ConvProblem h = p;
    h.dtype = DataType::f16;
    BOOST_TEST(!algo("cpu.im2col_gemm.tf32").supports(h));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(policies_on_the_cpu_backend)

const ConvProblem kLayer = ConvProblem::parse("n=2,c=32,k=32,in=14x14,ker=3x3,pad=1x1");

BOOST_AUTO_TEST_CASE(benchmark_off_runs_the_cost_models_first_choice_untimed) {
    TuningCache cache;
    Selector s(cpu(), cache);
    for (const char* policy : {"pytorch", "convtune", "adaptive"}) {
        const auto d = s.select(kLayer, flags(std::string("benchmark=0,policy=") + policy));
        BOOST_TEST((d->source == Source::heuristic), policy);
        BOOST_TEST(d->algorithm == std::string(cpu().heuristic_order(kLayer).front()->id()), policy);
        for (const Candidate& c : d->candidates)
            BOOST_TEST(c.samples_ms.empty(), policy << ": " << c.id << " was timed");
    }
}

BOOST_AUTO_TEST_CASE(convtune_search_picks_the_fastest_timed_and_times_the_heuristic_pick) {
    TuningCache cache;
    Selector s(cpu(), cache);
    const auto d = s.select(kLayer, flags("benchmark=1,min_samples=2,max_samples=4"));
    BOOST_TEST((d->source == Source::search));
    const std::string heuristic(cpu().heuristic_order(kLayer).front()->id());
    BOOST_TEST((cand(*d, heuristic).state == Candidate::State::timed));
    int timed = 0;
    for (const Candidate& c : d->candidates) {
        if (c.samples_ms.empty()) continue;
        ++timed;
        // A candidate the racing dropped was slower than the leader beyond the noise when it was
        // dropped; the leader's median can drift up afterwards on a loaded machine (seen under a
        // parallel ctest), so the contract holds for the candidates that raced to the end.
        if (c.reason.rfind("dropped after", 0) == 0 || c.reason.rfind("stopped early", 0) == 0) continue;
        BOOST_TEST(d->median_ms <= c.median_ms,
                   d->algorithm << " chosen at " << d->median_ms << " ms but " << c.id << " took " << c.median_ms);
    }
    BOOST_TEST(timed >= 3);
    // The naive reference is never timed by convtune's search on a problem others can run.
    BOOST_TEST((cand(*d, "cpu.direct").state == Candidate::State::filtered));
    // Every timed candidate computes the right answer (a search must not pick a wrong fast one).
    HostTensors t = make_host_tensors(kLayer, 3);
    const OracleResult ref = oracle(t);
    BOOST_TEST(scaled_error(algo(d->algorithm), t, ref) <= algo(d->algorithm).error_bound(kLayer));
}

BOOST_AUTO_TEST_CASE(pytorch_times_once_each_until_benchmark_limit) {
    TuningCache cache;
    Selector s(cpu(), cache);
    const auto d = s.select(kLayer, flags("policy=pytorch,benchmark=1,benchmark_limit=2"));
    int timed = 0;
    for (const Candidate& c : d->candidates)
        if (!c.samples_ms.empty()) {
            ++timed;
            BOOST_TEST(c.samples_ms.size() == 1u, c.id);  // one timed run after one warm-up
        }
    BOOST_TEST(timed == 2);
    // Its key has no benchmark: the same flags with benchmark off now hit the searched entry.
    const auto again = s.select(kLayer, flags("policy=pytorch,benchmark=0,benchmark_limit=2"));
    BOOST_TEST(again->algorithm == d->algorithm);
    BOOST_TEST((again->source == Source::memory));  // served from the cache, not the heuristic
}

BOOST_AUTO_TEST_CASE(enabled_off_runs_the_native_fallback) {
    TuningCache cache;
    Selector s(cpu(), cache);
    const auto d = s.select(kLayer, flags("enabled=0,benchmark=1"));
    BOOST_TEST(d->algorithm == "cpu.im2col_gemm");
    BOOST_TEST((d->source == Source::fallback));
}

BOOST_AUTO_TEST_CASE(a_second_selector_reads_the_choice_from_the_database) {
    const std::filesystem::path db =
        std::filesystem::temp_directory_path() / ("convtune-policies-" + std::to_string(::getpid()) + ".json");
    std::filesystem::remove(db);
    std::string first;
    {
        TuningCache cache;
        TuningDatabase file(db.string());
        Selector s(cpu(), cache, &file);
        first = s.select(kLayer, flags("benchmark=1,min_samples=1,max_samples=2"))->algorithm;
    }
    TuningCache cache;
    TuningDatabase file(db.string());
    Selector s(cpu(), cache, &file);
    const auto d = s.select(kLayer, flags("benchmark=1,min_samples=1,max_samples=2"));
    BOOST_TEST((d->source == Source::database));
    BOOST_TEST(d->algorithm == first);
    std::filesystem::remove(db);
}

BOOST_AUTO_TEST_SUITE_END()
