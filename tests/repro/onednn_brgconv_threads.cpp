// oneDNN alone, without convtune: one forward convolution through one named implementation
// (default brgconv:avx512_core), run with several OpenMP thread counts and compared against a
// naive f64 reference. Issue 35 (docs/reliability.md, "brgconv").
//
// Build (Debian's libdnnl-dev):
//   g++ -std=c++20 -O2 -fopenmp tests/repro/onednn_brgconv_threads.cpp -ldnnl -o onednn_brgconv_threads
// Run (OMP_WAIT_POLICY=passive where the thread counts exceed the cores):
//   ./onednn_brgconv_threads n=1,c=96,k=192,g=3,in=19,ker=11,pad=5 threads=1,2
// or with one problem per line on stdin (a sweep, one process):
//   printf 'c=96,k=192,g=3,in=19,ker=11,pad=5\n...' | ./onednn_brgconv_threads - threads=1,2,3,4
//
// Problem keys (1-D unless h/kh given): n, c, k, g, in (width), ker, pad (begin and end, or
// pad_end for the end), stride, dil (1 = none), h, kh, ph (height, its kernel and padding),
// layout=ncw|nwc (the activations' format given to oneDNN; `any` lets it choose).
// Options: threads=LIST (omp_set_num_threads before each primitive is created; the primitive
// cache is off so that each count gets its own primitive), impl=SUBSTRING (default
// brgconv:avx512_core; `first` takes oneDNN's first choice), scratch=user|library, dt=f32|bf16
// (bf16 source and weights, f32 destination; the reference takes the bf16-rounded values).
// Output, one line per problem and thread count: the problem, the thread count, the
// implementation, the largest |y - ref| / sum|x*w| over the outputs and runs, and PASS/FAIL with
// the number of failing runs (FAIL above 1e-5). reps=N (default 5) runs each N times, a fresh
// primitive each time: the failure is a race, a single run may pass.
// Exit status 1 when some run failed, 2 on a usage error.
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using dnnl::memory;
using tag = memory::format_tag;

namespace {

struct Problem {
    int64_t n = 1, c = 96, k = 192, g = 3, in = 19, ker = 11, pad = 5, pad_end = -999, stride = 1, dil = 1;
    int64_t h = 0, kh = 1, ph = 0;  // h = 0: 1-D
    std::string layout = "ncw";
    std::string text;

    bool two_d() const { return h > 0; }
    int64_t pe() const { return pad_end == -999 ? pad : pad_end; }
    int64_t ow() const { return (in + pad + pe() - ((ker - 1) * dil + 1)) / stride + 1; }
    int64_t oh() const { return two_d() ? (h + 2 * ph - kh) + 1 : 1; }
    int64_t ih() const { return two_d() ? h : 1; }
};

bool parse_problem(const std::string& s, Problem& p) {
    p.text = s;
    std::stringstream ss(s);
    std::string kv;
    std::map<std::string, int64_t*> ints{
        {"n", &p.n},           {"c", &p.c},     {"k", &p.k},     {"g", &p.g},
        {"in", &p.in},         {"ker", &p.ker}, {"pad", &p.pad}, {"pad_end", &p.pad_end},
        {"stride", &p.stride}, {"dil", &p.dil}, {"h", &p.h},     {"kh", &p.kh},
        {"ph", &p.ph}};
    while (std::getline(ss, kv, ',')) {
        const auto eq = kv.find('=');
        if (eq == std::string::npos) return false;
        const std::string key = kv.substr(0, eq), val = kv.substr(eq + 1);
        if (key == "layout") {
            p.layout = val;
            continue;
        }
        auto it = ints.find(key);
        if (it == ints.end()) return false;
        *it->second = std::stoll(val);
    }
    return p.c % p.g == 0 && p.k % p.g == 0 && p.ow() >= 1;
}

// f32 rounding of these sums stays near 1e-7 of sum|x*w|; the wrong values seen are 1e-6 to 1e30.
constexpr double kBound = 1e-5;

struct Options {
    std::vector<int> threads{1, 2};
    std::string impl = "brgconv:avx512_core";
    bool user_scratch = false;
    int reps = 5;
    bool bf16 = false;  // bf16 source and weights (f32 destination)
};

// Logical (n, c, [h,] w) tensors in f64; values are f32-exact.
std::vector<double> random_values(std::size_t count, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    std::vector<double> v(count);
    for (auto& x : v) x = static_cast<double>(d(gen));
    return v;
}

struct Result {
    std::string impl;  // empty: not offered
    double worst = 0;
};

Result run(const Problem& p, const Options& o, int threads) {
    omp_set_num_threads(threads);
    const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    const int64_t cg = p.c / p.g, kg = p.k / p.g, ow = p.ow(), oh = p.oh(), ih = p.ih();
    const bool d2 = p.two_d();
    const memory::dims xd = d2 ? memory::dims{p.n, p.c, ih, p.in} : memory::dims{p.n, p.c, p.in};
    const memory::dims yd = d2 ? memory::dims{p.n, p.k, oh, ow} : memory::dims{p.n, p.k, ow};
    const memory::dims wd = d2 ? memory::dims{p.g, kg, cg, p.kh, p.ker} : memory::dims{p.g, kg, cg, p.ker};
    const memory::dims st = d2 ? memory::dims{1, p.stride} : memory::dims{p.stride};
    const memory::dims di = d2 ? memory::dims{0, p.dil - 1} : memory::dims{p.dil - 1};
    const memory::dims pl = d2 ? memory::dims{p.ph, p.pad} : memory::dims{p.pad};
    const memory::dims pr = d2 ? memory::dims{p.ph, p.pe()} : memory::dims{p.pe()};
    const tag plain = d2 ? tag::nchw : tag::ncw;  // the logical order the data is generated in
    tag act = tag::any;
    if (p.layout == "ncw") act = plain;
    if (p.layout == "nwc") act = d2 ? tag::nhwc : tag::nwc;
    const auto in_dt = o.bf16 ? memory::data_type::bf16 : memory::data_type::f32;
    const memory::desc x_md(xd, in_dt, act), y_md(yd, memory::data_type::f32, act);
    const memory::desc w_md(wd, in_dt, tag::any);
    dnnl::primitive_attr attr;
    if (o.user_scratch) attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::convolution_forward::primitive_desc pd;
    try {
        const dnnl::convolution_forward::desc desc(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, x_md, w_md, y_md, st, di, pl, pr);
        pd = dnnl::convolution_forward::primitive_desc(desc, attr, eng, true);
    } catch (const dnnl::error&) {
        return {};
    }
    if (!pd) return {};
    bool found = o.impl == "first";
    while (!found) {
        found = std::string(pd.impl_info_str()).find(o.impl) == 0;
        if (!found && !pd.next_impl()) return {};
    }
    Result r;
    r.impl = pd.impl_info_str();

    const std::size_t xs = static_cast<std::size_t>(p.n * p.c * ih * p.in),
                      ws = static_cast<std::size_t>(p.g * kg * cg * p.kh * p.ker),
                      ys = static_cast<std::size_t>(p.n * p.k * oh * ow);
    std::vector<double> x = random_values(xs, 1), w = random_values(ws, 2);
    std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()), yf(ys, std::nanf(""));
    const tag wplain = d2 ? tag::goihw : tag::goiw;
    memory xu({xd, memory::data_type::f32, plain}, eng, xf.data()),
        wu({wd, memory::data_type::f32, wplain}, eng, wf.data()),
        yu({yd, memory::data_type::f32, plain}, eng, yf.data());
    memory xi(pd.src_desc(), eng), wi(pd.weights_desc(), eng), yi(pd.dst_desc(), eng);
    // Poison the implementation's output buffer: an output left unwritten shows as NaN.
    {
        auto* b = static_cast<unsigned char*>(yi.get_data_handle());
        std::fill(b, b + pd.dst_desc().get_size(), 0xA5);
    }
    dnnl::reorder(xu, xi).execute(strm, xu, xi);
    dnnl::reorder(wu, wi).execute(strm, wu, wi);
    if (o.bf16) {  // the reference takes the values rounded to bf16
        dnnl::reorder(xi, xu).execute(strm, xi, xu);
        dnnl::reorder(wi, wu).execute(strm, wi, wu);
        strm.wait();
        x.assign(xf.begin(), xf.end());
        w.assign(wf.begin(), wf.end());
    }
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, xi}, {DNNL_ARG_WEIGHTS, wi}, {DNNL_ARG_DST, yi}};
    std::vector<unsigned char> scratch;
    if (o.user_scratch) {
        scratch.assign(pd.scratchpad_desc().get_size() + 64, 0xA5);
        args.emplace(DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), eng, scratch.data()));
    }
    dnnl::convolution_forward(pd).execute(strm, args);
    dnnl::reorder(yi, yu).execute(strm, yi, yu);
    strm.wait();

    for (int64_t b = 0; b < p.n; ++b)
        for (int64_t gi = 0; gi < p.g; ++gi)
            for (int64_t ko = 0; ko < kg; ++ko)
                for (int64_t oy = 0; oy < oh; ++oy)
                    for (int64_t ox = 0; ox < ow; ++ox) {
                        double sum = 0, mag = 0;
                        for (int64_t ci = 0; ci < cg; ++ci)
                            for (int64_t ty = 0; ty < p.kh; ++ty)
                                for (int64_t tx = 0; tx < p.ker; ++tx) {
                                    const int64_t iy = oy - (d2 ? p.ph : 0) + ty,
                                                  ix = ox * p.stride - p.pad + tx * p.dil;
                                    if (iy < 0 || iy >= ih || ix < 0 || ix >= p.in) continue;
                                    const int64_t cch = gi * cg + ci;
                                    const double a =
                                        x[static_cast<std::size_t>(((b * p.c + cch) * ih + iy) * p.in + ix)];
                                    const double wv = w[static_cast<std::size_t>(
                                        (((gi * kg + ko) * cg + ci) * p.kh + ty) * p.ker + tx)];
                                    sum += a * wv;
                                    mag += std::fabs(a * wv);
                                }
                        const double got = yf[static_cast<std::size_t>(((b * p.k + gi * kg + ko) * oh + oy) * ow + ox)];
                        const double err = std::isfinite(got) ? std::fabs(got - sum) / std::max(mag, 1e-30) : INFINITY;
                        r.worst = std::max(r.worst, err);
                    }
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    std::vector<std::string> problems;
    bool from_stdin = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-") from_stdin = true;
        else if (a.rfind("threads=", 0) == 0) {
            o.threads.clear();
            std::stringstream ss(a.substr(8));
            std::string t;
            while (std::getline(ss, t, ',')) o.threads.push_back(std::stoi(t));
        } else if (a.rfind("impl=", 0) == 0) o.impl = a.substr(5);
        else if (a == "dt=bf16") o.bf16 = true;
        else if (a == "dt=f32") o.bf16 = false;
        else if (a.rfind("reps=", 0) == 0) o.reps = std::stoi(a.substr(5));
        else if (a == "scratch=user") o.user_scratch = true;
        else if (a == "scratch=library") o.user_scratch = false;
        else problems.push_back(a);
    }
    if (from_stdin)
        for (std::string line; std::getline(std::cin, line);)
            if (!line.empty() && line[0] != '#') problems.push_back(line);
    if (problems.empty()) {
        std::fprintf(stderr,
                     "usage: %s PROBLEM... | - [threads=1,2] [impl=brgconv:avx512_core] [scratch=user|library]\n",
                     argv[0]);
        return 2;
    }
    dnnl::set_primitive_cache_capacity(0);
    const dnnl_version_t* v = dnnl_version();
    std::printf("# oneDNN %d.%d.%d (%s), effective ISA %d, omp_get_max_threads %d\n", v->major, v->minor, v->patch,
                v->hash, static_cast<int>(dnnl::get_effective_cpu_isa()), omp_get_max_threads());
    bool failed = false;
    for (const std::string& s : problems) {
        Problem p;
        if (!parse_problem(s, p)) {
            std::fprintf(stderr, "bad problem: %s\n", s.c_str());
            return 2;
        }
        for (int t : o.threads) {
            Result r;
            int bad_runs = 0;
            for (int i = 0; i < o.reps; ++i) {
                const Result one = run(p, o, t);
                if (one.impl.empty()) break;
                r.impl = one.impl;
                r.worst = std::max(r.worst, std::isnan(one.worst) ? INFINITY : one.worst);
                bad_runs += one.worst <= kBound ? 0 : 1;
            }
            if (r.impl.empty()) {
                std::printf("%s threads=%d not-offered\n", s.c_str(), t);
                continue;
            }
            failed |= bad_runs > 0;
            std::printf("%s threads=%d %s err=%.3g %s %d/%d\n", s.c_str(), t, r.impl.c_str(), r.worst,
                        bad_runs > 0 ? "FAIL" : "PASS", bad_runs, o.reps);
        }
        std::fflush(stdout);
    }
    return failed ? 1 : 0;
}
