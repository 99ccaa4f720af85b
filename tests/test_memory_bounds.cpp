// Memory and time bounds measured on the real CLI: each command runs in a child process and its
// peak resident memory (getrusage's ru_maxrss of the child, via wait4) is compared with the
// budget given by --max-bytes. The process's own memory (code, libraries, thread stacks, BLAS
// buffers) is measured first as the peak of the same command on a tiny problem; a command near
// the budget must then stay within budget + that baseline + kSlack (allocator rounding, page
// tables, the libraries' buffers that grow with the problem). docs/reliability.md has the
// figures. A long replay is checked the same way against a short one: its memory must not grow
// with the iteration count.
#define BOOST_TEST_MODULE memory_bounds
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr long kMiB = 1024 * 1024;
constexpr long kSlack = 8 * kMiB;

struct Child {
    int exit_code = -1;  // -1: killed (timeout) or crashed
    long peak_bytes = 0;
    std::string output;  // stdout and stderr together
    double seconds = 0;
};

// A private folder for the inputs and the child's output, removed at exit.
struct WorkDir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("convtune_memory_bounds." + std::to_string(::getpid()));
    WorkDir() { std::filesystem::create_directories(path); }
    ~WorkDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
} g_work;

const std::filesystem::path& work_dir() { return g_work.path; }

std::string write(const std::string& name, const std::string& text) {
    const std::filesystem::path p = work_dir() / name;
    std::ofstream(p) << text;
    return p.string();
}

// Runs the CLI with `args`, killed after `timeout_s` seconds.
Child run_cli(const std::vector<std::string>& args, int timeout_s = 120) {
    const std::string out_path = (work_dir() / "child.out").string();
    std::vector<std::string> argv_s{CONVTUNE_CLI};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    const auto t0 = std::chrono::steady_clock::now();
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            ::dup2(fd, 1);
            ::dup2(fd, 2);
        }
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    Child c;
    BOOST_REQUIRE(pid > 0);
    int status = 0;
    struct rusage ru {};
    for (;;) {
        const pid_t r = ::wait4(pid, &status, WNOHANG, &ru);
        if (r == pid) break;
        if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(timeout_s)) {
            ::kill(pid, SIGKILL);
            ::wait4(pid, &status, 0, &ru);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    c.peak_bytes = ru.ru_maxrss * 1024;  // Linux reports KiB
    std::ifstream f(out_path);
    std::stringstream ss;
    ss << f.rdbuf();
    c.output = ss.str();
    return c;
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// The command on a tiny problem (baseline), then near the budget: peak <= budget + baseline + kSlack.
void check_peak(const std::string& what, const std::string& budget, long budget_bytes,
                const std::vector<std::string>& tiny, const std::vector<std::string>& big) {
    const Child base = run_cli(with({"--max-bytes", budget}, tiny));
    BOOST_TEST_REQUIRE(base.exit_code == 0, what << " (baseline): " << base.output);
    const Child c = run_cli(with({"--max-bytes", budget}, big));
    BOOST_TEST_REQUIRE(c.exit_code == 0, what << ": " << c.output);
    const long limit = budget_bytes + base.peak_bytes + kSlack;
    BOOST_TEST_MESSAGE(what << ": peak " << c.peak_bytes / kMiB << " MiB, baseline " << base.peak_bytes / kMiB
                            << " MiB, budget " << budget_bytes / kMiB << " MiB, limit " << limit / kMiB << " MiB");
    BOOST_TEST(c.peak_bytes <= limit, what << ": peak " << c.peak_bytes / kMiB
                                           << " MiB above budget + baseline + slack = " << limit / kMiB << " MiB");
    // Near the budget: the command used most of it, so the check above means something.
    BOOST_TEST(
        c.peak_bytes - base.peak_bytes >= budget_bytes * 8 / 10,
        what << ": peak " << c.peak_bytes / kMiB << " MiB is not near the budget; the problem is too small to test it");
}

// x and y of this problem: 3500*3500*4 B = 46.7 MiB each; cpu.im2col_gemm needs 64 B of workspace.
const std::string kBig = "n=1,c=1,k=1,in=3500x3500,ker=1x1";
const std::string kTiny = "n=1,c=1,k=1,in=8x8,ker=1x1";

}  // namespace

BOOST_AUTO_TEST_CASE(run_peak_within_budget) {
    // 93.5 MiB of tensors, run on them in place (the backend's copies made it 187 MiB).
    check_peak("run", "100M", 100 * kMiB, {"run", "--algo", "cpu.im2col_gemm", "--problem", kTiny},
               {"run", "--algo", "cpu.im2col_gemm", "--problem", kBig});
}

BOOST_AUTO_TEST_CASE(run_check_peak_within_budget) {
    // 93.5 MiB of tensors + the oracle's value and magnitude, 16 B per output element: 280.4 MiB
    // (the oracle's f64 copies of the inputs made it 467 MiB).
    check_peak("run --check", "290M", 290 * kMiB, {"run", "--check", "--algo", "cpu.im2col_gemm", "--problem", kTiny},
               {"run", "--check", "--algo", "cpu.im2col_gemm", "--problem", kBig});
}

BOOST_AUTO_TEST_CASE(tune_peak_within_budget) {
    // The search's scratch tensors are filled in place; candidates whose workspace does not fit
    // (cpu.direct_blocked, cpu.fft) are skipped as out of memory.
    check_peak("tune", "100M", 100 * kMiB, {"tune", "--problem", kTiny}, {"tune", "--problem", kBig});
}

BOOST_AUTO_TEST_CASE(simulate_live_peak_within_budget) {
    const std::string tiny = write("tiny.workload", "convtune-workload 1\nname tiny\nlayer a x1 " + kTiny + "\n");
    const std::string big = write("big.workload", "convtune-workload 1\nname big\nlayer a x1 " + kBig + "\n");
    const std::vector<std::string> opts{"--backend", "cpu", "--iterations", "2", "--flags", "on", "--flags", "off"};
    check_peak("simulate (live, cpu)", "100M", 100 * kMiB, with({"simulate", "--workload", tiny}, opts),
               with({"simulate", "--workload", big}, opts));
}

BOOST_AUTO_TEST_CASE(over_the_budget_refused_naming_the_peak) {
    // --check of kBig needs 280.4 MiB: refused up front (exit 2), nothing allocated.
    const Child c = run_cli({"--max-bytes", "200M", "run", "--check", "--problem", kBig});
    BOOST_TEST(c.exit_code == 2, c.output);
    BOOST_TEST(
        c.output.find("the f64 oracle 186.9 MiB (peak 280.4 MiB), above the budget of 200.0 MiB") != std::string::npos,
        c.output);
    BOOST_TEST(c.peak_bytes < 64 * kMiB, "refused after allocating: peak " << c.peak_bytes / kMiB << " MiB");
}

namespace {
// A recording of one problem and one algorithm: the smallest replay.
std::string tiny_replay() {
    const std::string p =
        "dir=fwd,dtype=f32,layout=nchw,n=1,c=1,k=1,g=1,in=8x8,ker=1x1,stride=1x1,dil=1x1,pad=0x0,pad_end=0x0";
    return write(
        "tiny.rec.json",
        "{\"format\":\"convtune-recording\",\"version\":1,\"source\":\"measured\",\"samples\":1,"
        "\"environment\":{\"convtune\":\"0.1.0\",\"backend\":\"cpu\",\"library\":\"l\",\"device\":\"d\",\"driver\":\"\"},"
        "\"algorithms\":[{\"id\":\"cpu.direct\",\"notes\":[]}],"
        "\"problems\":[{\"problem\":\"" +
            p +
            "\",\"heuristic\":[\"cpu.direct\"],\"fallback\":\"cpu.direct\","
            "\"algorithms\":{\"cpu.direct\":{\"samples_ms\":[1]}}}]}");
}
}  // namespace

BOOST_AUTO_TEST_CASE(long_replay_memory_does_not_grow_with_iterations) {
    const std::string w = write("one.workload", "convtune-workload 1\nname one\nlayer a x1 " + kTiny + "\n");
    const std::string rec = tiny_replay();
    auto sim = [&](const std::string& n) {
        return run_cli({"simulate", "--workload", w, "--replay", rec, "--flags", "off", "--iterations", n, "--json"},
                       60);
    };
    // 10^4 iterations already hold as many per-iteration records (4096) as any longer run.
    const Child short_run = sim("10000");
    BOOST_TEST_REQUIRE(short_run.exit_code == 0, short_run.output);
    const Child long_run = sim("1000000");
    BOOST_TEST_REQUIRE(long_run.exit_code == 0, long_run.output.substr(0, 2000));
    BOOST_TEST_MESSAGE("replay: 10^4 iterations peak " << short_run.peak_bytes / kMiB << " MiB in " << short_run.seconds
                                                       << " s, 10^6 iterations peak " << long_run.peak_bytes / kMiB
                                                       << " MiB in " << long_run.seconds << " s");
    BOOST_TEST(long_run.peak_bytes <= short_run.peak_bytes + 8 * kMiB,
               "10^6 iterations peak at " << long_run.peak_bytes / kMiB << " MiB, 10^4 at "
                                          << short_run.peak_bytes / kMiB << " MiB");
    // Exact totals over every iteration; a bounded number of per-iteration records.
    BOOST_TEST(long_run.output.find("\"calls\": 1000000") != std::string::npos);
    std::size_t records = 0;
    for (std::size_t at = long_run.output.find("\"iteration\":"); at != std::string::npos;
         at = long_run.output.find("\"iteration\":", at + 1))
        ++records;
    BOOST_TEST(records <= 4097u);
    BOOST_TEST(records >= 2048u);
    BOOST_TEST(long_run.output.find("\"iteration\": 1000000") != std::string::npos);  // the last one is kept
}

BOOST_AUTO_TEST_CASE(a_simulation_of_hours_is_refused_up_front) {
    // A trace of 60 calls per iteration, 10^7 iterations (the accepted maximum) under the 5
    // standard settings: 3e9 calls, hours of bookkeeping. Refused before anything runs, naming
    // the limit.
    std::string trace;
    for (int i = 0; i < 60; ++i) trace += kTiny + "\n";
    const std::string t = write("long.trace", trace);
    const Child c = run_cli({"simulate", "--stream", "trace:" + t, "--iterations", "10000000"}, 20);
    BOOST_TEST(c.exit_code == 2, c.output.substr(0, 2000));
    BOOST_TEST(c.output.find(
                   "--iterations: 10000000 iterations of this stream make 600000000 convolution calls per setting") !=
                   std::string::npos,
               c.output.substr(0, 2000));
    BOOST_TEST(c.output.find("above the limit of 100000000 calls") != std::string::npos);
    BOOST_TEST(c.seconds < 10);
}
