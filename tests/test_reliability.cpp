// Reliability: bad input through the API, corrupted and unwritable tuning databases, concurrent
// writers, non-finite data, memory budgets, and the replay of every fuzz corpus input.
// (test_problem.cpp covers the validation messages of each problem field; test_selector.cpp the
// database's basic fallbacks; this file adds what those leave out.) See docs/reliability.md.
#define BOOST_TEST_MODULE reliability
#include <boost/test/unit_test.hpp>

#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "convtune/convtune.hpp"
#include "convtune/error.hpp"
#include "convtune/host_data.hpp"
#include "convtune/numeric.hpp"
#include "convtune/registry.hpp"
#include "convtune/selector.hpp"
#include "cpu/cpu_backend.hpp"
#include "convtune/verify/oracle.hpp"
#include "sim_targets.hpp"
#include "support/fake_backend.hpp"
#include "support/check.hpp"

using namespace convtune;
using test::error_of;
using test::starts_with;
using test::FakeBackend;
using test::FakeSpec;
namespace fs = std::filesystem;

namespace {

const ConvProblem kP = ConvProblem::parse("n=2,c=4,k=4,in=6x6,ker=3x3,pad=1x1");

FlagValues flags(const std::string& s) { return parse_flags(s); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct TempDir {
    fs::path path;
    TempDir() {
        std::string t = (fs::temp_directory_path() / "convtune-reliability-XXXXXX").string();
        BOOST_REQUIRE(::mkdtemp(t.data()) != nullptr);
        path = t;
    }
    ~TempDir() {
        std::error_code ec;
        fs::permissions(path, fs::perms::owner_all, ec);
        fs::remove_all(path, ec);
    }
    std::string file(const std::string& n) const { return (path / n).string(); }
};

std::string read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}
void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Restores the memory budget (and CONVTUNE_MAX_BYTES) a test changed.
struct BudgetGuard {
    ~BudgetGuard() {
        set_memory_budget(0);
        ::unsetenv("CONVTUNE_MAX_BYTES");
    }
};

// A small valid database: two environments, three entries.
std::vector<DbSection> sample_sections(const Backend& b) {
    Environment other = environment_of(b);
    other.library = "another library 0.9";
    const std::string k1 = cache_key(b, kP, flags("benchmark=1")),
                      k2 = cache_key(b, kP, flags("benchmark=1,deterministic=1"));
    return {{environment_of(b),
             {{k1, {"h4", 1.25, 0.01, 5, 12.5, 1700000000}}, {k2, {"h2", 2.5, 0.2, 3, 7.0, 1700000001}}}},
            {other, {{k1, {"h1", 0.5, 0, 1, 1, 1600000000}}}}};
}
std::vector<FakeSpec> five() { return {{"h1", {5}}, {"h2", {4}}, {"h3", {6}}, {"h4", {1}}, {"h5", {2}}}; }

bool same_sections(const std::vector<DbSection>& a, const std::vector<DbSection>& b) {
    return fuzz::same_sections(a, b);
}

// Runs fn in a forked child (a private mount namespace or another user id must not leak into the
// test process). The child's int is its exit code; its message comes back through a pipe.
struct ChildResult {
    int code = -1;
    std::string message;
};
ChildResult in_child(const std::function<int(std::string&)>& fn) {
    int pipefd[2];
    BOOST_REQUIRE(::pipe(pipefd) == 0);
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(pipefd[0]);
        std::string msg;
        int rc = 100;
        try {
            rc = fn(msg);
        } catch (const std::exception& e) {
            msg += std::string("exception: ") + e.what();
        }
        if (!msg.empty() && ::write(pipefd[1], msg.data(), msg.size()) < 0) rc = 101;
        ::_exit(rc);
    }
    ::close(pipefd[1]);
    ChildResult r;
    char buf[4096];
    for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) > 0;) r.message.append(buf, static_cast<std::size_t>(n));
    ::close(pipefd[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
}

// A private tmpfs at `dir` for this (child) process only. False when the system does not allow it.
bool private_tmpfs(const std::string& dir, const char* options) {
    if (::unshare(CLONE_NEWNS) != 0) return false;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
    return ::mount("tmpfs", dir.c_str(), "tmpfs", 0, options) == 0;
}

std::set<std::string> files_in(const std::string& dir) {
    std::set<std::string> r;
    for (const auto& e : fs::directory_iterator(dir)) r.insert(e.path().filename().string());
    return r;
}

// The write-failure scenario, run inside a child whose `dir` already fails writes: the old file
// must stay byte-identical, the failure must be reported, tuning must go on, no temporary left.
int expect_failed_store(const std::string& dir, const std::string& old_bytes, const std::string& reason,
                        std::string& msg) {
    const std::string path = dir + "/tune.json";
    const auto before = files_in(dir);
    FakeBackend b("fake", five());
    std::vector<std::string> warnings;
    TuningDatabase db(path, [&](const std::string& w) { warnings.push_back(w); });
    TuningCache cache;
    Selector s(b, cache, &db);
    // A shape the file does not have: searched, then the store fails.
    const ConvProblem q = ConvProblem::parse("n=1,c=3,k=5,in=7x7,ker=3x3");
    const auto d = s.select(q, flags("benchmark=1"));
    if (d->algorithm != "h4" || d->source != Source::search) return msg = "tuning did not go on: " + d->algorithm, 2;
    if (read_bytes(path) != old_bytes) return msg = "the old file changed", 3;
    bool reported = false;
    for (const std::string& w : warnings) reported = reported || (contains(w, "not saved") && contains(w, reason));
    if (!reported) {
        msg = "no warning naming '" + reason + "':";
        for (const std::string& w : warnings) msg += "\n  " + w;
        return 4;
    }
    auto after = files_in(dir);
    after.erase("tune.json.lock");  // the lock file may or may not have been created
    auto expected = before;
    expected.erase("tune.json.lock");
    if (after != expected) return msg = "files were left behind in the folder", 5;
    // The record is kept in memory: the same process finds it without searching again.
    const auto again = db.find(environment_of(b), d->key);
    if (!again || again->algorithm != "h4") return msg = "the record was not kept in memory", 6;
    // Entries of the old file are still used.
    const auto old = s.select(kP, flags("benchmark=1"));
    if (old->source != Source::database) return msg = "the old file's entry was not used", 7;
    msg = warnings.front();
    return 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
BOOST_AUTO_TEST_SUITE(bad_input)

BOOST_AUTO_TEST_CASE(fields_test_problem_leaves_out) {
    // Rules of check() that test_problem.cpp does not reach, each through the struct (the API
    // path, no parser in front of it).
    struct Bad {
        const char* prefix;
        std::function<void(ConvProblem&)> edit;
    };
    const Bad cases[] = {
        {"spatial_dims: must be 1, 2 or 3 (got 0)", [](ConvProblem& p) { p.spatial_dims = 0; }},
        {"spatial_dims: must be 1, 2 or 3 (got 4)", [](ConvProblem& p) { p.spatial_dims = 4; }},
        {"k: must be below 2^31", [](ConvProblem& p) { p.k = int64_t{1} << 32; }},
        {"c: must be below 2^31", [](ConvProblem& p) { p.groups = p.c = p.k = int64_t{1} << 31; }},
        {"ker[h]: magnitude must be below 2^31", [](ConvProblem& p) { p.kernel[0] = int64_t{1} << 40; }},
        {"stride[w]: magnitude must be below 2^31", [](ConvProblem& p) { p.stride[1] = int64_t{1} << 31; }},
        {"dil[h]: magnitude must be below 2^31", [](ConvProblem& p) { p.dilation[0] = int64_t{1} << 31; }},
        {"pad[w]: magnitude must be below 2^31", [](ConvProblem& p) { p.pad_begin[1] = int64_t{1} << 31; }},
        {"pad_end[h]: magnitude must be below 2^31", [](ConvProblem& p) { p.pad_end[0] = int64_t{1} << 31; }},
        {"pad_end[h]: magnitude must be below 2^31", [](ConvProblem& p) { p.pad_end[0] = -(int64_t{1} << 31); }},
        {"pad_end[h]: magnitude must be below 2^31",
         [](ConvProblem& p) { p.pad_end[0] = std::numeric_limits<int64_t>::min(); }},
        {"in[h]: input size must be >= 1", [](ConvProblem& p) { p.in[0] = std::numeric_limits<int64_t>::min(); }},
        {"w: element count overflows",
         [](ConvProblem& p) {
             p.c = p.k = 2000000000, p.kernel = {3, 3, 1}, p.in = {3, 3, 1};
         }},
        {"y: element count overflows",
         [](ConvProblem& p) {
             p.n = p.k = 2000000000, p.in = {3, 3, 1};
         }},
        {"n: operation count overflows",
         [](ConvProblem& p) {
             p = ConvProblem{}, p.spatial_dims = 1, p.c = p.k = 1 << 20, p.in = {1 << 25, 1, 1};
         }},
        {"dir: unknown direction value 7", [](ConvProblem& p) { p.direction = static_cast<Direction>(7); }},
        {"dtype: unknown data type value -1", [](ConvProblem& p) { p.dtype = static_cast<DataType>(-1); }},
        {"layout: unknown layout value 2", [](ConvProblem& p) { p.layout = static_cast<Layout>(2); }},
    };
    for (const Bad& b : cases) {
        ConvProblem p = kP;
        b.edit(p);
        const std::string e = error_of([&] { p.validate(); });
        BOOST_TEST(starts_with(e, b.prefix), "'" << e << "' (expected '" << b.prefix << "...')");
        // Every entry point that takes a problem refuses it the same way, before touching memory.
        BOOST_TEST(starts_with(error_of([&] { make_host_tensors(p); }), b.prefix));
        BOOST_TEST(starts_with(error_of([&] { check_memory_budget(p); }), b.prefix));
        FakeBackend fb("fake", five());
        TuningCache cache;
        Selector s(fb, cache);
        BOOST_TEST(starts_with(error_of([&] { s.select(p, flags("benchmark=1")); }), b.prefix));
        BOOST_TEST(fb.clock_ms() == 0.0);
    }
}

BOOST_AUTO_TEST_CASE(malformed_problem_strings) {
    // Each is refused with a message that starts with the offending key (or "problem:").
    const std::pair<std::string, std::string> cases[] = {
        {"   \t\r\n", "problem: empty string"},
        {"c=1,k=1,in=5,ker=3,", "problem: empty entry"},
        {",c=1,k=1,in=5,ker=3", "problem: empty entry"},
        {"c=1,k=1,in=5,ker=3,=4", "problem: unknown key ''"},
        {"c=,k=1,in=5,ker=3", "c: empty value"},
        {"c=1,k=1,in=5x,ker=3", "in: '' is not an integer"},
        {"c=1,k=1,in=x5,ker=3", "in: '' is not an integer"},
        {"c=1,k=1,in=5,ker=3,stride=1.5", "stride: '1.5' is not an integer"},
        {"c=1,k=1,in=5,ker=3,n=0x10", "n: '0x10' is not an integer"},
        {"c=1,k=1,in=5,ker=3,n=--1", "n: '--1' is not an integer"},
        {"c=1,k=1,in=5,ker=3,n=1e3", "n: '1e3' is not an integer"},
        {std::string("c=1,k=1,in=5,ker=3,n=1\0", 23) + "2", "n: '1"},
        {"c=1,k=1,in=5,ker=3,n=" + std::string(100000, '9'), "n: value '99"},
        {"c=1,k=1,in=5,ker=3,pad_end=-9223372036854775808", "pad_end[w]: magnitude must be below 2^31"},
        {"c=1,k=1,in=5,ker=3,pad=9223372036854775807", "pad[w]: magnitude must be below 2^31"},
        {"c=1,k=1,in=5,ker=3,layout=NCHW", "layout: unknown layout 'NCHW'"},
        {"c=1,k=1,in=5,ker=3,dtype=F32", "dtype: unknown data type"},
        {"c=1;k=1;in=5;ker=3", "c: '1;k=1;in=5;ker=3' is not an integer"},
        {"c=1,k=1,in=5,ker=3,stride", "problem: entry 'stride' is not key=value"},
        {"c=1,k=1,in=5,ker=3 stride=2", "ker: '3 stride=2' is not an integer"},
        {"c=1,k=1,in=5,ker=3,C=1", "problem: unknown key 'C'"},
        {"c=1,k=1,in=5,ker=3,dir=fwd,dir=fwd", "dir: given twice"},
        {"c=1,k=1,in=5x5,ker=3x3,pad=1x1x1", "pad: has 3 dims but in has 2"},
        {"c=1,k=1,in=5,ker=3,pad_end=1x1", "pad_end: has 2 dims but in has 1"},
        {"c=1,k=1,ker=3", "in: missing"},
        {"c=1,k=1,in=5", "ker: missing"},
        {"c=1,in=5,ker=3", "k: missing"},
    };
    for (const auto& [spec, prefix] : cases) {
        const std::string e = error_of([&] { ConvProblem::parse(spec); });
        BOOST_TEST(starts_with(e, prefix),
                   "'" << spec.substr(0, 60) << "' -> '" << e.substr(0, 120) << "' (expected '" << prefix << "')");
        // parse_any routes text with '=' to the same parser.
        if (spec.find('=') != std::string::npos) BOOST_TEST(error_of([&] { ConvProblem::parse_any(spec); }) == e);
    }
}

BOOST_AUTO_TEST_CASE(malformed_benchdnn_and_shape_text) {
    const std::pair<std::string, std::string> cases[] = {
        {"", "ic: missing"},
        {"___", "ic: missing"},
        {"ic-4ih5oc4kh3", "ic: must not be negative"},
        {"mb0ic4ih5oc4kh3", "n: batch size must be >= 1"},
        {"ic4ih5oc4kh3ph-1", "ph: must not be negative"},
        {"ic4ih0oc4kh1", "ih: missing or 0"},
        {"ic4ih5oc4kh0", "kh: missing or 0"},
        {"ic99999999999999999999ih5oc4kh3", "entry 'ic' has no valid number"},
        {"ic4ih2147483648oc4kh1", "entry 'ih': magnitude must be below 2^31"},
        {"ic4ih5oc4kh2147483647dh2147483647", "oh: deduced output size -"},
        {"ic4ih5oc4kh2147483647dh2147483646oh2147483647sh2147483647", "pad[h]: magnitude must be below 2^31"},
        {"ic4ih5oc4kh3ph-9223372036854775808", "entry 'ph': magnitude must be below 2^31"},
        {"ic4ih5oc4kh3ph9223372036854775807", "entry 'ph': magnitude must be below 2^31"},
        {"ic4ih5oc4kh3sh9223372036854775807", "entry 'sh': magnitude must be below 2^31"},
        {"ic4ih5oc4kh3dh9223372036854775807", "entry 'dh': magnitude must be below 2^31"},
        {"ic4ih5oc4kh3oh-9223372036854775808", "entry 'oh': magnitude must be below 2^31"},
        {"ic4 ih5 oc4 kh3 \x01", "unexpected character"},
        {"ic4ih5oc4kh3\xc3\xa9", "unexpected character"},
        {"IC4ih5oc4kh3", "unknown entry 'IC'"},
    };
    for (const auto& [spec, prefix] : cases) {
        const std::string e = error_of([&] { ConvProblem::parse_benchdnn(spec); });
        BOOST_TEST(starts_with(e, prefix), "'" << spec << "' -> '" << e << "' (expected '" << prefix << "')");
    }
    // Shape files: the first bad line is named, whatever came before (CRLF, tabs, comments).
    const std::pair<std::string, std::string> files[] = {
        {"ic3ih8oc4kh3\r\n\r\nic3ih8oc4kh9\r\n", "line 3: oh: deduced output size"},
        {"# header\n\t  # indented comment\nic3ih8oc4kh3 trailing junk\n", "line 3: unknown entry 'trailing'"},
        {"c=1,k=1,in=5,ker=3\nc=1,k=1,in=5,ker=9\n", "line 2: ker[w]: dilated kernel"},
        {std::string("ic3ih8oc4kh3\n\0\n", 15), "line 2: unexpected character"},
    };
    for (const auto& [text, prefix] : files) {
        const std::string e = error_of([&] { parse_shape_text(text); });
        BOOST_TEST(starts_with(e, prefix), "-> '" << e << "' (expected '" << prefix << "')");
    }
    BOOST_TEST(parse_shape_text("").empty());
    BOOST_TEST(parse_shape_text("# only comments\n\n").empty());
    BOOST_TEST(starts_with(error_of([] { read_shape_file("/nonexistent/convtune/shapes"); }),
                           "/nonexistent/convtune/shapes: cannot open"));
}

BOOST_AUTO_TEST_CASE(unknown_backend_and_algorithm_ids) {
    const std::string e = error_of([] { find_backend("cuda"); });
    BOOST_TEST(starts_with(e, "backend: unknown backend 'cuda' (compiled in: cpu"), e);
    BOOST_TEST(starts_with(error_of([] { find_backend(""); }), "backend: unknown backend ''"));
    BOOST_TEST(starts_with(error_of([] { find_algorithm("cpu.nonexistent"); }),
                           "algo: unknown algorithm id 'cpu.nonexistent'"));
    BOOST_TEST(starts_with(error_of([] { find_algorithm("CPU.DIRECT"); }), "algo: unknown algorithm id"));
    BOOST_TEST(cpu_backend().find("onednn.auto") == nullptr);
    HostTensors t = make_host_tensors(kP);
    BOOST_TEST(starts_with(error_of([&] { convolution(kP, t.views(), "gpu"); }), "backend: unknown backend 'gpu'"));
    BOOST_CHECK_THROW(parse_policy("PyTorch"), ParseError);
    BOOST_CHECK_THROW(parse_direction("forward"), ParseError);
    BOOST_CHECK_THROW(parse_dtype("fp32"), ParseError);
}

BOOST_AUTO_TEST_CASE(algorithm_asked_for_a_problem_it_does_not_support) {
    // The API's answer: run() (and execute()) return Status unsupported and write nothing; the
    // output keeps its NaN fill. Every host algorithm, on problems some of them refuse.
    const char* specs[] = {
        "dtype=f64,n=1,c=3,k=4,in=6x6,ker=3x3,pad=1x1",             // f64: only cpu.direct
        "n=1,c=3,k=4,in=9x9,ker=3x3,stride=2x2,pad=1x1",            // stride 2: no Winograd
        "n=1,c=3,k=4,in=9x9,ker=5x5,pad=2x2",                       // 5x5: no 3x3 Winograd
        "n=1,c=4,k=4,g=2,in=7x7x7,ker=3x3x3,pad=1x1x1",             // 3-D grouped
        "dir=bwd_filter,n=2,c=2,k=2,in=9,ker=3,dil=3,pad=3",        // 1-D dilated backward filter
        "dtype=bf16,layout=nhwc,n=1,c=3,k=5,in=11x4,ker=1x4,stride=3x1",
    };
    std::map<std::string, int> refused;
    int runs = 0;
    for (const char* spec : specs) {
        const ConvProblem p = ConvProblem::parse(spec);
        for (Backend* b : backends()) {
            if (b->name() == "cudnn" || !b->availability().ok) continue;
            for (const Algorithm* a : b->algorithms()) {
                const Support s = a->supports(p);
                if (s) continue;
                BOOST_TEST(!s.reason.empty(), a->id());
                HostTensors t = make_host_tensors(p, 5);
                const std::vector<std::byte> before = output_of(t);
                const RunResult r = execute(*a, t);
                ++runs;
                BOOST_TEST(!r.status.ok(), a->id() << " ran " << spec);
                BOOST_TEST((r.status.code == Status::Code::unsupported || r.status.code == Status::Code::failed),
                           a->id());
                BOOST_TEST(!r.status.message.empty(), a->id());
                BOOST_TEST((output_of(t) == before), a->id() << " wrote its output on " << spec);
                ++refused[std::string(a->id())];
            }
        }
    }
    BOOST_TEST_MESSAGE(runs << " unsupported (algorithm, problem) pairs run, by " << refused.size() << " algorithms");
    BOOST_TEST(refused.size() >= 3u);  // f64 alone is refused by every fast CPU algorithm
}

BOOST_AUTO_TEST_CASE(buffers_of_the_wrong_size) {
    FakeBackend fb("fake", five());
    TuningCache cache;
    Selector s(fb, cache);
    HostTensors t = make_host_tensors(kP);
    const std::vector<std::byte> x0 = t.x, w0 = t.w, y0 = t.y;
    struct Edit {
        const char* expect;
        std::function<void(ConvTensors&)> edit;
    };
    const Edit edits[] = {
        {"tensor x: buffer holds", [](ConvTensors& v) { v.x.bytes -= 1; }},
        {"tensor w: buffer holds 0 bytes", [](ConvTensors& v) { v.w.bytes = 0; }},
        {"tensor y: buffer holds", [](ConvTensors& v) { v.y.bytes /= 2; }},
        {"tensor x: buffer is null", [](ConvTensors& v) { v.x.data = nullptr; }},
        {"tensor y: buffer is null", [](ConvTensors& v) { v.y = {}; }},
    };
    for (const Edit& e : edits) {
        ConvTensors v = t.views();
        e.edit(v);
        BOOST_TEST(starts_with(error_of([&] { s.run(kP, v, flags("benchmark=1")); }), e.expect));
        BOOST_TEST(starts_with(error_of([&] { convolution(kP, v); }), e.expect));
        BOOST_TEST(starts_with(error_of([&] { check_tensors(kP, v); }), e.expect));
    }
    BOOST_TEST(fb.clock_ms() == 0.0);  // nothing was selected or run
    BOOST_TEST((t.x == x0 && t.w == w0 && t.y == y0));
    // Larger buffers are fine (a view into a bigger allocation).
    ConvTensors big = t.views();
    big.y.bytes += 64;
    BOOST_CHECK_NO_THROW(check_tensors(kP, big));
    // execute() checks host tensors built by hand too.
    HostTensors shrunk = make_host_tensors(kP);
    shrunk.w.resize(shrunk.w.size() - 4);
    BOOST_TEST(starts_with(error_of([&] { execute(cpu_direct(), shrunk); }), "tensor w: buffer holds"));
    // A buffer checked against another problem than it was made for.
    ConvProblem bigger = kP;
    bigger.n = 3;
    BOOST_TEST(starts_with(error_of([&] { convolution(bigger, t.views()); }), "tensor x: buffer holds"));
}

BOOST_AUTO_TEST_CASE(memory_budget_is_checked_before_allocating) {
    BudgetGuard restore;
    const std::size_t def = memory_budget();
    BOOST_TEST(def > 0u);
    BOOST_TEST(def <= std::size_t{8} << 30);
    // x of this problem: 1*64*128*128 f32 = 4 MiB; w 64*64*9*4 = 144 KiB; y 4 MiB.
    const ConvProblem p = ConvProblem::parse("n=1,c=64,k=64,in=128x128,ker=3x3,pad=1x1");
    set_memory_budget(std::size_t{1} << 20);
    const std::string e = error_of([&] { make_host_tensors(p); });
    BOOST_TEST(
        starts_with(
            e,
            "memory budget: tensor x needs 4.0 MiB, w 144.0 KiB, y 4.0 MiB (peak 8.1 MiB), above the budget of 1.0 "
            "MiB (1048576 B"),
        e);
    BOOST_TEST(contains(e, "CONVTUNE_MAX_BYTES"));
    // The selector's search refuses before allocating anything on the backend.
    FakeBackend fb("fake", five());
    fb.memory_limit = 1;  // an allocation attempt would fail differently ("cannot allocate")
    TuningCache cache;
    Selector s(fb, cache);
    BOOST_TEST(
        starts_with(error_of([&] { s.select(p, flags("benchmark=1")); }), "memory budget: tensor x needs 4.0 MiB"));
    // Benchmark off allocates nothing and is not refused.
    BOOST_TEST(s.select(p, flags("benchmark=0"))->algorithm == "h1");
    // A candidate whose workspace does not fit is skipped as out of memory, with the reason.
    set_memory_budget(0);
    FakeBackend ws("fake", {{"huge", {1}, {}, std::size_t{1} << 40}, {"small", {2}}});
    TuningCache c2;
    Selector s2(ws, c2);
    const auto d = s2.select(kP, flags("benchmark=1"));
    BOOST_TEST(d->algorithm == "small");
    for (const Candidate& c : d->candidates)
        if (c.id == "huge") {
            BOOST_TEST((c.state == Candidate::State::out_of_memory));
            BOOST_TEST(contains(c.reason, "workspace 1.0 TiB"), c.reason);
        }
    // The environment variable, with units; a bad value names the variable.
    ::setenv("CONVTUNE_MAX_BYTES", "3M", 1);
    BOOST_TEST(memory_budget() == std::size_t{3} << 20);
    BOOST_TEST(starts_with(error_of([&] { make_host_tensors(p); }), "memory budget: tensor x needs 4.0 MiB"));
    ::setenv("CONVTUNE_MAX_BYTES", "9M", 1);
    BOOST_CHECK_NO_THROW(make_host_tensors(p));
    ::setenv("CONVTUNE_MAX_BYTES", "lots", 1);
    BOOST_TEST(starts_with(error_of([&] { make_host_tensors(p); }), "CONVTUNE_MAX_BYTES: 'lots' is not a byte count"));
    set_memory_budget(4096);  // the API's value wins over the environment's
    BOOST_TEST(memory_budget() == 4096u);
    // parse_byte_size
    BOOST_TEST(parse_byte_size("4096") == 4096u);
    BOOST_TEST(parse_byte_size("512K") == 512u << 10);
    BOOST_TEST(parse_byte_size("2GiB") == std::size_t{2} << 30);
    BOOST_TEST(parse_byte_size("1t") == std::size_t{1} << 40);
    BOOST_TEST(parse_byte_size("7MB") == std::size_t{7} << 20);
    for (const char* bad : {"", "0", "-1", "1.5G", "G", "1X", "1 G", "16E", "99999999999999999999", "1GiBs"})
        BOOST_CHECK_THROW(parse_byte_size(bad, "--max-bytes"), ParseError);
    BOOST_TEST(
        starts_with(error_of([] { parse_byte_size("16E", "--max-bytes"); }), "--max-bytes: '16E' is out of range"));
    // A problem whose bytes overflow 64 bits never gets that far: validation names the tensor.
    const ConvProblem huge = [] {
        ConvProblem q;
        q.n = q.c = 2000000000;
        q.in = {2000000000, 1, 1};
        q.spatial_dims = 1;
        return q;
    }();
    BOOST_TEST(starts_with(error_of([&] { make_host_tensors(huge); }), "x: element count overflows"));
}

BOOST_AUTO_TEST_CASE(workspace_limit_zero) {
    // Real CPU backend: the choice needs no workspace, with and without benchmark; candidates
    // that need one are reported as over the limit and never run.
    const ConvProblem p = ConvProblem::parse("n=1,c=8,k=8,in=10x10,ker=3x3,pad=1x1");
    for (const char* f : {"workspace_limit=0,benchmark=0", "workspace_limit=0,benchmark=1,min_samples=1,max_samples=2",
                          "workspace_limit=0,policy=pytorch,benchmark=1"}) {
        TuningCache cache;
        Selector s(cpu_backend(), cache);
        const auto d = s.select(p, flags(f));
        const Algorithm* a = cpu_backend().find(d->algorithm);
        BOOST_REQUIRE(a);
        BOOST_TEST(a->workspace_size(p) == 0u, f << ": " << d->algorithm);
        int over = 0;
        for (const Candidate& c : d->candidates) {
            if (c.workspace > 0 && c.state != Candidate::State::unsupported && c.state != Candidate::State::filtered) {
                BOOST_TEST((c.state == Candidate::State::over_workspace), c.id);
                BOOST_TEST(c.samples_ms.empty());
                ++over;
            }
        }
        BOOST_TEST_MESSAGE(f << ": chose " << d->algorithm << ", " << over << " candidates over the limit");
        HostTensors t = make_host_tensors(p, 3);
        BOOST_TEST(s.run(p, t.views(), flags(f)).ok());
    }
    // When every algorithm needs workspace: a clear error listing each one.
    FakeBackend fb("fake", {{"a", {1}, {}, 16}, {"b", {1}, {}, 32}});
    TuningCache cache;
    Selector s(fb, cache);
    const std::string e = error_of([&] { s.select(kP, flags("workspace_limit=0,benchmark=1")); });
    BOOST_TEST(contains(e, "no algorithm of backend 'fake' can run"), e);
    BOOST_TEST(contains(e, "a: over workspace limit: workspace 16 B > limit 0 B"), e);
    BOOST_TEST(contains(e, "b: over workspace limit: workspace 32 B > limit 0 B"), e);
    HostTensors t = make_host_tensors(kP);
    BOOST_CHECK_THROW(s.run(kP, t.views(), flags("workspace_limit=0,benchmark=1")), Error);
    BOOST_TEST(fb.runs("a") + fb.runs("b") == 0);
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------------------------------------
BOOST_AUTO_TEST_SUITE(non_finite_data)

// NaN or Inf planted in one input element must reach every output the exact convolution says it
// reaches (the f64 oracle's non-finite outputs), in every algorithm, direction, dtype and layout;
// nothing may crash. The reference algorithm must not make any other output non-finite;
// transform-domain (Winograd, FFT) and GEMM-with-zero-padding algorithms may spread it further,
// which is counted and reported.
BOOST_AUTO_TEST_CASE(nan_and_inf_propagate) {
    const char* specs[] = {
        "n=2,c=4,k=4,in=8x8,ker=3x3,pad=1x1",
        "n=1,c=3,k=5,in=9x7,ker=3x3,stride=2x2,pad=1x1",
        "n=1,c=4,k=4,in=6,ker=3,pad=1",
        "n=1,c=2,k=2,in=4x5x4,ker=3x3x3,pad=1x1x1",
        "n=1,c=16,k=16,in=12x12,ker=3x3,pad=1x1",
        "n=1,c=6,k=6,g=3,in=7x7,ker=5x5,pad=2x2",
    };
    std::map<std::string, int> ran, spread;
    int cases = 0;
    for (const char* spec : specs)
        for (Direction dir : {Direction::fwd, Direction::bwd_data, Direction::bwd_filter})
            for (DataType dt : {DataType::f32, DataType::f16, DataType::bf16})
                for (Layout lay : {Layout::nchw, Layout::nhwc})
                    for (int which = 0; which < 2;
                         ++which) {  // 0: NaN in the first input, 1: +Inf and -Inf in the second
                        ConvProblem p = ConvProblem::parse(spec);
                        p.direction = dir;
                        p.dtype = dt;
                        p.layout = lay;
                        HostTensors in = make_host_tensors(p, 11);
                        // The direction's two inputs: fwd x,w; bwd_data y,w; bwd_filter x,y.
                        std::vector<std::byte>* a = dir == Direction::bwd_data ? &in.y : &in.x;
                        std::vector<std::byte>* b = dir == Direction::bwd_filter ? &in.y : &in.w;
                        const std::size_t es = size_of(dt);
                        if (which == 0) {
                            store_from_double(a->data(), dt, a->size() / es / 2, std::nan(""));
                        } else {
                            store_from_double(b->data(), dt, b->size() / es / 3, INFINITY);
                            store_from_double(b->data(), dt, b->size() / es - 1, -INFINITY);
                        }
                        const OracleResult ref = oracle(in);
                        std::size_t expected = 0;
                        for (double v : ref.value) expected += !std::isfinite(v);
                        BOOST_REQUIRE(expected > 0u);
                        ++cases;
                        for (Backend* be : backends()) {
                            if (be->name() == "cudnn" || !be->availability().ok) continue;
                            for (const Algorithm* alg : be->algorithms()) {
                                if (!alg->supports(p)) continue;
                                HostTensors t = in;
                                const RunResult r = execute(*alg, t);
                                BOOST_TEST(r.status.ok(), alg->id()
                                                              << " " << p.to_string() << ": " << r.status.message);
                                if (!r.status.ok()) continue;
                                const std::vector<std::byte>& out = output_of(t);
                                std::size_t missing = 0, extra = 0;
                                for (std::size_t i = 0; i < ref.value.size(); ++i) {
                                    const bool fin = std::isfinite(load_as_double(out.data(), dt, i));
                                    if (!std::isfinite(ref.value[i]) && fin) ++missing;
                                    if (std::isfinite(ref.value[i]) && !fin) ++extra;
                                }
                                BOOST_TEST(missing == 0u, alg->id() << " lost " << missing << " of " << expected
                                                                    << " non-finite outputs on " << p.to_string()
                                                                    << (which ? " (Inf)" : " (NaN)"));
                                if (alg->notes().has(Note::reference))
                                    BOOST_TEST(extra == 0u, alg->id()
                                                                << " made " << extra << " finite outputs non-finite on "
                                                                << p.to_string());
                                ++ran[std::string(alg->id())];
                                spread[std::string(alg->id())] += extra > 0;
                            }
                        }
                    }
    for (const auto& [id, n] : ran)
        BOOST_TEST_MESSAGE(id << ": " << n << " runs, " << spread[id]
                              << " spread non-finite values further than the exact result");
    BOOST_TEST_MESSAGE(cases << " problems with NaN/Inf inputs");
    // Every CPU algorithm took part.
    for (const Algorithm* alg : cpu_backend().algorithms())
        BOOST_TEST(ran[std::string(alg->id())] > 0, alg->id() << " never ran");
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------------------------------------
BOOST_AUTO_TEST_SUITE(database_faults)

BOOST_AUTO_TEST_CASE(every_truncation_is_reported_and_kept) {
    TempDir dir;
    FakeBackend b("fake", five());
    const std::string good = dir.file("good.json");
    TuningDatabase::write_file(good, sample_sections(b));
    const std::string bytes = read_bytes(good);
    int rejected = 0, stored = 0;
    for (std::size_t len = 0; len < bytes.size(); ++len) {
        const std::string path = dir.file("cut.json");
        write_bytes(path, bytes.substr(0, len));
        // The whole file minus its trailing newline is still the same database.
        if (len == bytes.size() - 1) {
            BOOST_TEST(same_sections(TuningDatabase::read_file(path), sample_sections(b)));
            continue;
        }
        BOOST_CHECK_THROW(TuningDatabase::read_file(path), ParseError);
        std::vector<std::string> warnings;
        TuningDatabase db(path, [&](const std::string& w) { warnings.push_back(w); });
        BOOST_TEST(db.sections().empty());
        BOOST_TEST((len == 0 || (!warnings.empty() && contains(warnings[0], "tuning database ignored"))), len);
        ++rejected;
        if (len % 37 == 0) {  // a store over the cut file: the cut bytes are kept, a valid file written
            fs::remove(path + ".corrupt");
            BOOST_TEST(db.store(environment_of(b), "k", {"h1", 1, 0, 1, 0, 1}));
            BOOST_TEST(read_bytes(path + ".corrupt") == bytes.substr(0, len), len);
            BOOST_TEST(TuningDatabase::read_file(path).size() == 1u);
            ++stored;
        }
    }
    BOOST_TEST_MESSAGE(rejected << " truncations rejected, " << stored << " of them overwritten with their bytes kept");
}

BOOST_AUTO_TEST_CASE(random_bytes_and_bit_flips) {
    TempDir dir;
    FakeBackend b("fake", five());
    const std::string path = dir.file("noise.json");
    TuningDatabase::write_file(path, sample_sections(b));
    const std::string good = read_bytes(path);
    std::mt19937_64 rng(20261130);
    int noise = 0, flips = 0, flips_read = 0;
    for (int i = 0; i < 300; ++i) {
        std::string s(std::uniform_int_distribution<std::size_t>(1, 600)(rng), '\0');
        for (char& c : s) c = static_cast<char>(rng());
        if (i % 3 == 0) s = "{\"format\":\"convtune-tuning-db\",\"version\":1," + s;  // get past the header
        write_bytes(path, s);
        BOOST_CHECK_THROW(TuningDatabase::read_file(path), ParseError);
        ++noise;
    }
    for (int i = 0; i < 1500; ++i) {
        std::string s = good;
        const std::size_t at = std::uniform_int_distribution<std::size_t>(0, s.size() - 1)(rng);
        s[at] = static_cast<char>(s[at] ^ (1 << (rng() % 8)));
        write_bytes(path, s);
        ++flips;
        try {
            const auto sec = TuningDatabase::read_file(path);
            ++flips_read;
            // A flip that still reads gives a database that survives its own write exactly.
            const std::string copy = dir.file("copy.json");
            TuningDatabase::write_file(copy, sec);
            BOOST_TEST(same_sections(TuningDatabase::read_file(copy), sec), "flip at " << at);
        } catch (const ParseError&) {
        } catch (const DatabaseVersionError& e) {  // "version": 1 flipped to a higher digit: refused as newer
            BOOST_TEST(s.find("\"version\": 1") == std::string::npos, e.what());
        }
    }
    BOOST_TEST_MESSAGE(noise << " random files rejected; " << flips << " single-bit flips, " << flips_read
                             << " of which still read as a valid database (no checksum: see docs/reliability.md)");
}

BOOST_AUTO_TEST_CASE(valid_json_with_wrong_types_or_values) {
    TempDir dir;
    const std::string path = dir.file("typed.json");
    const std::string env =
        R"("convtune":"0.1.0","backend":"fake","library":"fake 1.0","device":"virtual device","driver":"")";
    auto doc = [&](const std::string& entry) {
        return R"({"format":"convtune-tuning-db","version":1,"environments":[{)" + env + R"(,"entries":{"k":)" + entry +
               "}}]}";
    };
    const std::pair<std::string, std::string> cases[] = {
        {"[]", "top level must be an object"},
        {"null", "top level must be an object"},
        {R"({"format":"convtune-recording","version":1,"environments":[]})", "not a convtune tuning database"},
        {R"({"version":1,"environments":[]})", "not a convtune tuning database"},
        {R"({"format":"convtune-tuning-db","version":0,"environments":[]})", "unsupported database version"},
        {R"({"format":"convtune-tuning-db","version":"1","environments":[]})", "unsupported database version"},
        {R"({"format":"convtune-tuning-db","version":1.0,"environments":[]})", "unsupported database version"},
        {R"({"format":"convtune-tuning-db","version":1,"environments":{}})", "\"environments\" must be an array"},
        {R"({"format":"convtune-tuning-db","version":1,"environments":[7]})", "environment 0 must be an object"},
        {R"({"format":"convtune-tuning-db","version":1,"environments":[{"convtune":"0.1.0"}]})", "missing \"backend\""},
        {R"({"format":"convtune-tuning-db","version":1,"environments":[{)" + env + R"(,"entries":[]}]})",
         "\"entries\" must be an object"},
        {R"({"format":"convtune-tuning-db","version":1,"environments":[{)" + env + R"(}]})",
         "\"entries\" must be an object"},
        {doc("[]"), "entry 'k' must be an object"},
        {doc(R"({})"), "missing \"algorithm\""},
        {doc(R"({"algorithm":null})"), "\"algorithm\" must be a string"},
        {doc(R"({"algorithm":"h1","median_ms":"fast"})"), "\"median_ms\" must be a number"},
        {doc(R"({"algorithm":"h1","median_ms":1e400})"),
         "not valid JSON ([json.exception.out_of_range.406] number overflow"},
        {doc(R"({"algorithm":"h1","median_ms":-1e400})"),
         "not valid JSON ([json.exception.out_of_range.406] number overflow"},
        {doc(R"({"algorithm":"h1","samples":"3"})"), "\"samples\" must be a number"},
        {doc(R"({"algorithm":"h1","samples":1e300})"), "\"samples\" is out of range"},
        {doc(R"({"algorithm":"h1","samples":-2147483649})"), "\"samples\" is out of range"},
        {doc(R"({"algorithm":"h1","time":true})"), "\"time\" must be a number"},
        {doc(R"({"algorithm":"h1","time":-1e300})"), "\"time\" is out of range"},
        {doc(R"({"algorithm":"h1","time":18446744073709551615})"), "\"time\" is out of range"},
    };
    int n = 0;
    FakeBackend b("fake", five());
    for (const auto& [text, reason] : cases) {
        write_bytes(path, text);
        const std::string e = error_of([&] { TuningDatabase::read_file(path); });
        BOOST_TEST(starts_with(e, path + ": "), e);
        BOOST_TEST(contains(e, reason), "'" << text << "' -> '" << e << "' (expected '" << reason << "')");
        std::vector<std::string> warnings;
        TuningDatabase db(path, [&](const std::string& w) { warnings.push_back(w); });
        BOOST_TEST(warnings.size() == 1u);
        // Tuning goes on and the unreadable file is kept byte for byte.
        TuningCache cache;
        Selector s(b, cache, &db);
        BOOST_TEST(s.select(kP, flags("benchmark=1"))->algorithm == "h4");
        BOOST_TEST(read_bytes(path + ".corrupt") == text);
        fs::remove(path + ".corrupt");
        ++n;
    }
    BOOST_TEST_MESSAGE(n << " wrongly typed databases rejected");
    // Integral values written as floats are still accepted.
    write_bytes(path, doc(R"({"algorithm":"h1","median_ms":1,"samples":3.0,"time":1700000000.0})"));
    BOOST_TEST(TuningDatabase::read_file(path)[0].entries.at("k").samples == 3);
}

BOOST_AUTO_TEST_CASE(another_environment_is_left_untouched) {
    TempDir dir;
    const std::string path = dir.file("tune.json");
    FakeBackend b("fake", five());
    // Only sections of other environments: another convtune version, another device.
    std::vector<DbSection> others = sample_sections(b);
    others[0].env.convtune = "0.0.9";
    others[1].env.device = "another device";
    TuningDatabase::write_file(path, others);
    std::vector<std::string> warnings;
    TuningDatabase db(path, [&](const std::string& w) { warnings.push_back(w); });
    TuningCache cache;
    Selector s(b, cache, &db);
    const auto d = s.select(kP, flags("benchmark=1"));
    BOOST_TEST((d->source == Source::search));
    BOOST_REQUIRE(!warnings.empty());
    BOOST_TEST(contains(warnings[0], "come from another environment"), warnings[0]);
    BOOST_TEST(contains(warnings[0], "convtune 0.0.9"), warnings[0]);
    // Our section was added; theirs are exactly as they were.
    const auto after = TuningDatabase::read_file(path);
    BOOST_TEST(after.size() == 3u);
    for (const DbSection& o : others) {
        bool same = false;
        for (const DbSection& a : after) same = same || (a.env == o.env && a.entries == o.entries);
        BOOST_TEST(same, o.env.describe());
    }
}

BOOST_AUTO_TEST_CASE(entries_naming_removed_or_ineligible_algorithms) {
    TempDir dir;
    const std::string path = dir.file("tune.json");
    FakeBackend b("fake", {{"nondet", {1}, Note::nondeterministic}, {"h2", {4}}, {"h4", {2}}});
    const Environment env = environment_of(b);
    const std::string k_removed = cache_key(b, kP, flags("benchmark=1"));
    const std::string k_det = cache_key(b, kP, flags("benchmark=1,deterministic=1"));
    const ConvProblem other = ConvProblem::parse("n=1,c=2,k=2,in=5x5,ker=1x1");
    const std::string k_other = cache_key(b, other, flags("benchmark=1"));
    TuningDatabase::write_file(
        path, {{env,
                {{k_removed, {"removed.algo", 1, 0, 1, 0, 1}},
                 {k_det, {"nondet", 0.1, 0, 1, 0, 1}},  // known, but not eligible under deterministic=1
                 {k_other, {"gone.too", 1, 0, 1, 0, 1}}}}});
    std::vector<std::string> warnings;
    TuningDatabase db(path, [&](const std::string& w) { warnings.push_back(w); });
    TuningCache cache;
    Selector s(b, cache, &db);
    const auto det = s.select(kP, flags("benchmark=1,deterministic=1"));
    BOOST_TEST((det->source == Source::search));  // the ineligible record is not used
    BOOST_TEST(det->algorithm == "h4");
    const auto d = s.select(kP, flags("benchmark=1"));
    BOOST_TEST((d->source == Source::search));
    // The stores replaced the two keys that were re-tuned; the entry for the shape nobody asked
    // for survives, even though it names an algorithm this build lacks (no entry is dropped).
    const auto sec = TuningDatabase::read_file(path);
    BOOST_REQUIRE(sec.size() == 1u);
    BOOST_TEST(sec[0].entries.at(k_det).algorithm == "h4");
    BOOST_TEST(sec[0].entries.at(k_removed).algorithm == d->algorithm);
    BOOST_TEST(sec[0].entries.at(k_other).algorithm == "gone.too");
}

BOOST_AUTO_TEST_CASE(read_only_location) {
    TempDir dir;
    FakeBackend b("fake", five());
    const std::string sub = dir.file("ro");
    fs::create_directory(sub);
    // The child makes `sub` read-only: a read-only tmpfs where mounts are allowed, else a 0555
    // folder (as another user when running as root, since root ignores permission bits).
    const ChildResult r = in_child([&](std::string& msg) {
        const std::string path = sub + "/tune.json";
        std::string method, reason;
        if (private_tmpfs(sub, "size=1m")) {
            TuningDatabase::write_file(path, sample_sections(b));
            if (::mount(nullptr, sub.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) != 0)
                return msg = "remount failed", 20;
            method = "read-only tmpfs";
            reason = "Read-only file system";
        } else {
            TuningDatabase::write_file(path, sample_sections(b));
            ::chmod(sub.c_str(), 0555);
            if (::geteuid() == 0) {
                ::chmod(dir.path.c_str(), 0755);
                if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0)
                    return msg = "setresuid failed", 21;
            }
            method = "0555 folder";
            reason = "Permission denied";
        }
        const std::string old = read_bytes(path);
        const int rc = expect_failed_store(sub, old, reason, msg);
        msg = method + ": " + msg;
        return rc;
    });
    BOOST_TEST(r.code == 0, r.message);
    BOOST_TEST_MESSAGE("read-only location, " << r.message);
}

// The precondition of full_disk_enospc: a private tmpfs can be mounted (as root, usually; not in
// an unprivileged container). When it cannot, the case is skipped, which Boost.Test counts and
// reports as skipped with this reason (and its own ctest entry, test_reliability_enospc, shows
// as Skipped), never as passed.
struct TmpfsMountable {
    boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const {
        TempDir dir;
        const std::string sub = dir.file("probe");
        fs::create_directory(sub);
        const ChildResult r = in_child([&](std::string& msg) {
            if (private_tmpfs(sub, "size=64k")) return 0;
            msg = std::string("cannot mount a private tmpfs here (") + std::strerror(errno) + ")";
            return 77;
        });
        if (r.code == 0) return true;
        std::cout << "skipped: full disk (ENOSPC): " << r.message << std::endl;
        boost::test_tools::assertion_result res(false);
        res.message() << r.message;
        return res;
    }
};

BOOST_AUTO_TEST_CASE(full_disk_enospc, *boost::unit_test::precondition(TmpfsMountable{})) {
    TempDir dir;
    FakeBackend b("fake", five());
    // A tiny tmpfs, filled up: write() fails with ENOSPC.
    const std::string sub = dir.file("full");
    fs::create_directory(sub);
    const ChildResult full = in_child([&](std::string& msg) {
        if (!private_tmpfs(sub, "size=64k")) return msg = "cannot mount a tmpfs here", 77;
        const std::string path = sub + "/tune.json";
        TuningDatabase::write_file(path, sample_sections(b));
        {
            std::ofstream filler(sub + "/filler", std::ios::binary);
            const std::string block(4096, 'x');
            while (filler.write(block.data(), static_cast<std::streamsize>(block.size())) && filler.flush()) {
            }
        }
        return expect_failed_store(sub, read_bytes(path), "No space left on device", msg);
    });
    BOOST_TEST(full.code == 0, full.message);
    BOOST_TEST_MESSAGE("full disk (ENOSPC): " << full.message);
}

BOOST_AUTO_TEST_CASE(file_size_limit_efbig) {
    TempDir dir;
    FakeBackend b("fake", five());
    // A file size limit (RLIMIT_FSIZE): write() fails with EFBIG. Works without privileges.
    const std::string sub2 = dir.file("limited");
    fs::create_directory(sub2);
    const std::string path2 = sub2 + "/tune.json";
    TuningDatabase::write_file(path2, sample_sections(b));
    const std::string old = read_bytes(path2);
    const ChildResult limited = in_child([&](std::string& msg) {
        ::signal(SIGXFSZ, SIG_IGN);
        const rlimit lim{64, 64};
        if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return msg = "setrlimit failed", 30;
        return expect_failed_store(sub2, old, "File too large", msg);
    });
    BOOST_TEST(limited.code == 0, limited.message);
    BOOST_TEST(read_bytes(path2) == old);
    BOOST_TEST_MESSAGE("file size limit (EFBIG): " << limited.message);
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------------------------------------
// Threads sharing a cache, a selector and a database (also run under ThreadSanitizer: the tsan
// preset runs this suite alone as test_reliability_concurrency).
BOOST_AUTO_TEST_SUITE(concurrency)

namespace {

// Algorithms that do a little real work and count their runs atomically: thread-safe, unlike a
// virtual clock.
class CountingAlgorithm final : public Algorithm {
public:
    CountingAlgorithm(const Backend& b, std::string id, int spin) : backend_(b), id_(std::move(id)), spin_(spin) {}
    std::string_view id() const override { return id_; }
    const Backend& backend() const override { return backend_; }
    Notes notes() const override { return {}; }
    Support supports(const ConvProblem&) const override { return Support::yes(); }
    std::size_t workspace_size(const ConvProblem&) const override { return 0; }
    Status run(const ConvProblem&, const ConvTensors& t, Workspace) const override {
        runs_.fetch_add(1);
        volatile double acc = 0;
        for (int i = 0; i < spin_; ++i) acc = acc + static_cast<const float*>(t.x.data)[0];
        return Status::success();
    }
    mutable std::atomic<int> runs_{0};

private:
    const Backend& backend_;
    std::string id_;
    int spin_;
};

class CountingBackend final : public HostBackend {
public:
    CountingBackend() {
        owned_.push_back(std::make_unique<CountingAlgorithm>(*this, "slow", 4000));
        owned_.push_back(std::make_unique<CountingAlgorithm>(*this, "fast", 10));
        for (auto& a : owned_) list_.push_back(a.get());
    }
    std::string_view name() const override { return "counting"; }
    Availability availability() const override { return {}; }
    BackendIdentity identity() const override { return {"counting 1", "host", ""}; }
    std::span<const Algorithm* const> algorithms() const override { return list_; }

private:
    std::vector<std::unique_ptr<CountingAlgorithm>> owned_;
    std::vector<const Algorithm*> list_;
};

std::vector<ConvProblem> shapes(int n) {
    std::vector<ConvProblem> r;
    for (int i = 0; i < n; ++i)
        r.push_back(ConvProblem::parse("n=1,c=" + std::to_string(1 + i % 5) + ",k=2,in=" + std::to_string(3 + i) +
                                       "x4,ker=1x1"));
    return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(threads_share_one_selector_and_database) {
    TempDir dir;
    const std::string path = dir.file("tune.json");
    CountingBackend b;
    std::mutex warn_mutex;
    std::vector<std::string> warnings;
    TuningDatabase db(path, [&](const std::string& w) {
        std::lock_guard lock(warn_mutex);
        warnings.push_back(w);
    });
    TuningCache cache;
    Selector s(b, cache, &db);
    const auto problems = shapes(12);
    const FlagValues f = flags("benchmark=1,max_samples=2,min_samples=1");
    constexpr int kThreads = 8;
    std::vector<std::vector<std::string>> chosen(kThreads);
    std::atomic<int> searches{0}, errors{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            for (int round = 0; round < 3; ++round)
                for (std::size_t i = 0; i < problems.size(); ++i) {
                    const ConvProblem& p = problems[(i + static_cast<std::size_t>(t)) % problems.size()];
                    try {
                        const auto d = s.select(p, f);
                        if (d->source == Source::search) searches.fetch_add(1);
                        if (round == 2)
                            chosen[static_cast<std::size_t>(t)].push_back(p.to_string() + "=" + d->algorithm);
                        HostTensors h = make_host_tensors(p, static_cast<uint64_t>(t));
                        if (!s.run(p, h.views(), f).ok()) errors.fetch_add(1);
                    } catch (const std::exception&) {
                        errors.fetch_add(1);
                    }
                }
        });
    for (auto& th : threads) th.join();
    BOOST_TEST(errors.load() == 0);
    BOOST_TEST(searches.load() == static_cast<int>(problems.size()));  // single flight: one search per key
    for (int t = 1; t < kThreads; ++t) {
        auto a = chosen[0], c = chosen[static_cast<std::size_t>(t)];
        std::sort(a.begin(), a.end());
        std::sort(c.begin(), c.end());
        BOOST_TEST((a == c), "thread " << t << " saw other choices");
    }
    const auto sec = TuningDatabase::read_file(path);
    BOOST_REQUIRE(sec.size() == 1u);
    BOOST_TEST(sec[0].entries.size() == problems.size());
    BOOST_TEST(warnings.empty(), (warnings.empty() ? "" : warnings[0]));
}

BOOST_AUTO_TEST_CASE(two_database_objects_one_file_with_a_reader) {
    // Two TuningDatabase objects on one path behave like two processes (flock is per open file
    // description); a reader checks that the file is whole at every moment.
    TempDir dir;
    const std::string path = dir.file("tune.json");
    TuningDatabase a(path), c(path);
    CountingBackend b;
    const Environment env = environment_of(b);
    std::atomic<bool> done{false};
    std::atomic<int> reads{0}, bad_reads{0};
    std::thread reader([&] {
        while (!done.load()) {
            std::error_code ec;
            if (!fs::exists(path, ec)) continue;
            try {
                (void)TuningDatabase::read_file(path);
                reads.fetch_add(1);
            } catch (const ParseError&) {
                bad_reads.fetch_add(1);
            }
        }
    });
    constexpr int kPerWriter = 25;
    std::vector<std::thread> writers;
    std::atomic<int> failed{0};
    for (int w = 0; w < 4; ++w)
        writers.emplace_back([&, w] {
            TuningDatabase& db = w % 2 ? a : c;
            for (int i = 0; i < kPerWriter; ++i)
                if (!db.store(env, "w" + std::to_string(w) + "-" + std::to_string(i),
                              {"fast", 1.0 * i, 0, 1, 0, 1700000000 + i}))
                    failed.fetch_add(1);
        });
    for (auto& t : writers) t.join();
    done = true;
    reader.join();
    BOOST_TEST(failed.load() == 0);
    BOOST_TEST(bad_reads.load() == 0, bad_reads.load()
                                          << " of " << reads.load() + bad_reads.load() << " reads saw a partial file");
    const auto sec = TuningDatabase::read_file(path);
    BOOST_REQUIRE(sec.size() == 1u);
    BOOST_TEST(sec[0].entries.size() == 4u * kPerWriter);
    BOOST_TEST_MESSAGE(4 * kPerWriter << " stores by 4 threads through 2 objects, " << reads.load()
                                      << " concurrent reads, all whole");
}

BOOST_AUTO_TEST_CASE(convolution_from_many_threads_with_their_own_flags) {
    // The process-wide context (one cache, one selector per backend) used from threads that each
    // set their own flags.
    const ConvProblem p = ConvProblem::parse("n=1,c=3,k=4,in=6x6,ker=3x3,pad=1x1");
    HostTensors ref = make_host_tensors(p, 9);
    BOOST_REQUIRE(execute(cpu_direct(), ref).status.ok());
    std::vector<std::thread> threads;
    std::atomic<int> wrong{0};
    for (int t = 0; t < 6; ++t)
        threads.emplace_back([&, t] {
            // allow_tf32=0: its default (1, as in PyTorch) lets a search pick cpu.im2col_gemm.tf32,
            // whose TF32 rounding is far above the 1e-4 compared here.
            FlagsGuard g(flags(t % 3 == 0   ? "benchmark=0,allow_tf32=0"
                               : t % 3 == 1 ? "benchmark=1,allow_tf32=0,min_samples=1,max_samples=1"
                                            : "benchmark=1,allow_tf32=0,deterministic=1,min_samples=1,max_samples=1"));
            for (int i = 0; i < 3; ++i) {
                HostTensors h = make_host_tensors(p, 9);
                if (!convolution(p, h.views()).ok()) wrong.fetch_add(1);
                const auto& o = output_of(h);
                const auto& r = output_of(ref);
                for (std::size_t e = 0; e < o.size() / 4; ++e)
                    if (std::abs(load_as_double(o.data(), DataType::f32, e) -
                                 load_as_double(r.data(), DataType::f32, e)) > 1e-4) {
                        wrong.fetch_add(1);
                        break;
                    }
            }
        });
    for (auto& t : threads) t.join();
    BOOST_TEST(wrong.load() == 0);
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------------------------------------
// Every seed and every regression input of the fuzz corpus, replayed through the same checks the
// libFuzzer harnesses make; then a few thousand deterministic mutations of them, so the
// properties are exercised in every build (GCC, ASan) and not only in the clang fuzz build.
BOOST_AUTO_TEST_SUITE(fuzz_corpus)

namespace {

struct NamedTarget {
    const char* name;
    fuzz::Target fn;
};
const NamedTarget kTargets[] = {{"problem", fuzz::problem_text}, {"benchdnn", fuzz::benchdnn_text},
                                {"tuning_db", fuzz::tuning_db},  {"workload", fuzz::workload_text},
                                {"trace", fuzz::trace_text},     {"recording", fuzz::recording_json}};

std::vector<fs::path> inputs_of(const fs::path& d) {
    std::vector<fs::path> r;
    std::error_code ec;
    if (fs::is_directory(d, ec))
        for (const auto& e : fs::directory_iterator(d))
            if (e.is_regular_file()) r.push_back(e.path());
    std::sort(r.begin(), r.end());
    return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(seeds_and_regressions_replay_clean) {
    const fs::path root = CONVTUNE_FUZZ_CORPUS_DIR;
    int seeds = 0, regressions = 0;
    for (const NamedTarget& t : kTargets) {
        const auto s = inputs_of(root / t.name), r = inputs_of(root / "regressions" / t.name);
        BOOST_TEST(!s.empty(), "no seeds for " << t.name);
        for (const auto& list : {s, r})
            for (const fs::path& f : list) {
                const std::string bad = fuzz::check(t.fn, read_bytes(f.string()));
                BOOST_TEST(bad.empty(), t.name << ": " << f.filename().string() << ": " << bad);
            }
        seeds += static_cast<int>(s.size());
        regressions += static_cast<int>(r.size());
    }
    BOOST_TEST_MESSAGE(seeds << " seeds and " << regressions << " regression inputs replayed");
}

BOOST_AUTO_TEST_CASE(deterministic_mutations) {
    const fs::path root = CONVTUNE_FUZZ_CORPUS_DIR;
    const char* tokens[] = {"=",
                            ",",
                            "x",
                            "-",
                            "0",
                            "1",
                            "9223372036854775807",
                            "-9223372036854775808",
                            "2147483648",
                            "\n",
                            "#",
                            "\"",
                            "{",
                            "}",
                            "[",
                            "]",
                            ":",
                            "1e400",
                            "null",
                            "ic",
                            "oh",
                            "kh",
                            "ph",
                            "dh",
                            "n\"",
                            "*",
                            "layer",
                            "x0"};
    std::mt19937_64 rng(7);
    int total = 0;
    for (const NamedTarget& t : kTargets) {
        std::vector<std::string> pool;
        for (const auto& list : {inputs_of(root / t.name), inputs_of(root / "regressions" / t.name)})
            for (const fs::path& f : list) pool.push_back(read_bytes(f.string()));
        BOOST_REQUIRE(!pool.empty());
        const int n = std::string_view(t.name) == "tuning_db" || std::string_view(t.name) == "recording" ? 600 : 1500;
        for (int i = 0; i < n; ++i) {
            std::string s = pool[rng() % pool.size()];
            for (int m = 1 + static_cast<int>(rng() % 4); m > 0; --m) {
                const std::size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
                switch (rng() % 5) {
                    case 0: if (!s.empty() && at < s.size()) s[at] = static_cast<char>(rng()); break;
                    case 1: s.insert(at, tokens[rng() % std::size(tokens)]); break;
                    case 2: if (at < s.size()) s.erase(at, 1 + rng() % 8); break;
                    case 3: s.resize(at); break;
                    case 4: if (!s.empty()) s.insert(at, s.substr(rng() % s.size(), 1 + rng() % 16)); break;
                }
            }
            const std::string bad = fuzz::check(t.fn, s);
            BOOST_TEST(bad.empty(), t.name << " mutation " << i << ": " << bad << "\ninput: " << s);
            ++total;
        }
    }
    BOOST_TEST_MESSAGE(total << " mutated inputs checked");
}

BOOST_AUTO_TEST_SUITE_END()
