#include "convtune/sim/report.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/core.h>

#include "convtune/error.hpp"
#include "convtune/sim/perf_model.hpp"
#include "convtune/stats.hpp"

namespace convtune::sim {

using json = nlohmann::json;

namespace {

std::string ms_text(double ms) {
    if (ms == 0) return "0";
    if (ms < 1) return fmt::format("{:.3f} ms", ms);
    if (ms < 1000) return fmt::format("{:.1f} ms", ms);
    return fmt::format("{:.2f} s", ms / 1000);
}

std::string break_even_text(const SimulationResult& r, std::size_t i) {
    if (static_cast<int>(i) == r.baseline) return "baseline";
    const Comparison& c = r.comparisons[i];
    if (!r.scenarios[i].failure.empty()) return "-";
    if (c.break_even) return fmt::format("it. {}", *c.break_even);
    if (c.projected_break_even) return fmt::format("~{:.0f} (proj.)", std::ceil(*c.projected_break_even));
    return "never";
}

std::string xml_escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        switch (c) {
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '&': o += "&amp;"; break;
            case '"': o += "&quot;"; break;
            case '\'': o += "&apos;"; break;
            default:
                if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t') o += c;
        }
    }
    return o;
}

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string o = "\"";
    for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
    return o + "\"";
}

// 1, 2 or 5 times a power of ten, giving about `ticks` intervals over [0, hi].
double nice_step(double hi, int ticks) {
    if (!(hi > 0)) return 1;
    const double raw = hi / ticks;
    const double p = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * p >= raw) return m * p;
    return 10 * p;
}

std::string num(double v) { return fmt::format("{:.2f}", v); }

// Greedy word wrap at `width` characters.
std::vector<std::string> wrap(const std::string& text, std::size_t width) {
    std::vector<std::string> lines;
    std::string cur;
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t end = text.find(' ', pos);
        if (end == std::string::npos) end = text.size();
        const std::string word = text.substr(pos, end - pos);
        if (!cur.empty() && cur.size() + 1 + word.size() > width) {
            lines.push_back(cur);
            cur.clear();
        }
        cur += (cur.empty() ? "" : " ") + word;
        pos = end + 1;
    }
    if (!cur.empty()) lines.push_back(cur);
    return lines;
}

// The flags a trace records: PyTorch's (a trace has no policy).
std::string trace_flags_text(const FlagValues& f) {
    return fmt::format("enabled={:d},benchmark={:d},benchmark_limit={},deterministic={:d},allow_tf32={:d}", f.enabled,
                       f.benchmark, f.benchmark_limit, f.deterministic, f.allow_tf32);
}

// What the run covered besides the settings: the trace's use, its flags, repeats, step time.
std::vector<std::string> notes(const SimulationResult& r) {
    std::vector<std::string> n;
    if (r.trace_iterations > 0) {
        if (r.iterations > r.trace_iterations)
            n.push_back(
                fmt::format("the trace's {} iterations are cycled: iterations past its end repeat it from its start",
                            r.trace_iterations));
        else if (r.iterations < r.trace_iterations)
            n.push_back(fmt::format("the trace is cut: only its first {} of {} iterations are simulated", r.iterations,
                                    r.trace_iterations));
    }
    if (r.trace_flag_sets > 0)
        n.push_back(fmt::format(
            "baseline flags as the trace recorded them: {}{}; each setting changes only the flags it names",
            trace_flags_text(r.trace_flags),
            r.trace_flag_sets > 1 ? fmt::format(" (first of {} sets; each call keeps its own)", r.trace_flag_sets)
                                  : std::string()));
    if (r.repeats > 1)
        n.push_back(fmt::format(
            "each setting ran {} times, a fresh start each, in rotated order; its row is the run with the median total",
            r.repeats));
    n.push_back(r.step.describe());
    if (!r.builds_missing.empty()) {
        std::string names;
        for (const std::string& s : r.builds_missing) names += (names.empty() ? "'" : ", '") + s + "'";
        n.push_back(fmt::format(
            "warning: {} emulate{} PyTorch's search in TF32 or fp16, which builds a plan (compiling runtime-compiled "
            "kernels) for every configuration cuDNN lists, but this recording's support decisions do not include plan "
            "builds: the search is charged too little (10-15x in TF32 on the H200, docs/simulation.md); give PyTorch's "
            "own measurement (--pytorch-measured) or a recording made since",
            names, r.builds_missing.size() == 1 ? "s" : ""));
    }
    return n;
}

}  // namespace

std::string format_table(const SimulationResult& r, const ReportContext& c) {
    std::string o = "convtune simulate: " + c.title + "\n";
    if (!c.details.empty()) o += c.details + "\n";
    o += "\n";
    o += fmt::format("{:<11} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>7} {:>8} {:>6} {:>8}  {}\n",
                     "setting", "total", "search", "execution", "other", "first it", "median it", "max it", "hits",
                     "misses", "searches", "shapes", "vs base", "break-even");
    for (std::size_t i = 0; i < r.scenarios.size(); ++i) {
        const ScenarioResult& s = r.scenarios[i];
        const IterationStats sum = s.sum();
        std::vector<double> it;
        for (const IterationStats& x : s.iterations) it.push_back(x.total_ms());
        const double first = s.first_ms(), mx = s.max_ms();
        std::string vs = "-";
        if (static_cast<int>(i) != r.baseline && s.failure.empty() && r.baseline >= 0)
            vs = fmt::format("{:+.1f}%", -100 * r.comparisons[i].saving);
        o += fmt::format("{:<11} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>7} {:>8} {:>6} {:>8}  {}\n",
                         s.setting.name, ms_text(sum.total_ms()), ms_text(sum.search_ms), ms_text(sum.exec_ms),
                         r.step.known ? ms_text(sum.other_ms) : "-", ms_text(first), ms_text(median(it)), ms_text(mx),
                         sum.hits, sum.misses, sum.searches, sum.new_shapes, vs, break_even_text(r, i));
        if (!s.failure.empty()) o += "            failed: " + s.failure + "\n";
        if (s.source == "measured" && s.failure.empty())
            o += fmt::format("            measured: PyTorch itself, {} to {} over the measured runs\n",
                             ms_text(s.range_lo_ms), ms_text(s.range_hi_ms));
        if (s.repeat_totals_ms.size() >= 2 && s.failure.empty())
            o += fmt::format("            {} runs: {} to {} (median absolute deviation {}){}\n",
                             s.repeat_totals_ms.size(), ms_text(s.range_lo_ms), ms_text(s.range_hi_ms),
                             ms_text(median_abs_deviation(s.repeat_totals_ms)),
                             r.comparisons[i].within_noise ? "; inside the baseline's noise" : "");
        if (s.failure.empty() && s.estimate_hi_ms > s.estimate_lo_ms)
            o += fmt::format(
                "           estimated: {} to {} with every estimated problem at the low or high end of its range\n",
                ms_text(s.estimate_lo_ms), ms_text(s.estimate_hi_ms));
    }
    o += "\nflags:\n";
    for (const ScenarioResult& s : r.scenarios)
        o += fmt::format("  {:<11} {}\n", s.setting.name, s.setting.flags.to_string());
    o += "\n'vs base': change of the total against '" +
         (r.baseline >= 0 ? r.scenarios[static_cast<std::size_t>(r.baseline)].setting.name : std::string("-")) +
         "' (negative = faster); 'break-even': first iteration from which the cumulative time stays at or below it.\n";
    for (const std::string& n : notes(r)) o += n + ".\n";
    if (r.engine == "live") {
        double wall = 0, timed = 0;
        for (const ScenarioResult& s : r.scenarios) wall += s.sum().wall_ms, timed += s.sum().conv_ms();
        o += fmt::format(
            "live run: times are on the backend's clock; the host wall clock of the calls was {} for {} timed (the "
            "rest is the selector's bookkeeping and scratch data).\n",
            ms_text(wall), ms_text(timed));
    }
    if (r.estimated_problems > 0) {
        o += fmt::format(
            "estimated: {} problems were not in the recording; their times come from the performance model fitted on "
            "it (docs/simulation.md), up to {:.1f}x the multiply-adds of the nearest recorded problem, with a range of "
            "+-{:g} standard deviations.\n",
            r.estimated_problems, r.max_extrapolation, PerfModel::kSigmas);
        if (r.assumed_problems > 0)
            o += fmt::format(
                "assumed: for {} of them the recording has no problem of the same layer; which algorithms run them and "
                "their workspace are assumed from the nearest recorded problem of the same direction.\n",
                r.assumed_problems);
        if (r.floored_problems > 0)
            o += fmt::format(
                "warning: for {} of them an algorithm's estimate fell below the fastest time the recording measured on "
                "the device (its launch floor) and was raised to it.\n",
                r.floored_problems);
    }
    o += "\nrecommendation: " + r.recommendation.text + "\n";
    return o;
}

json to_json(const SimulationResult& r, const ReportContext& c) {
    json doc;
    doc["title"] = c.title;
    doc["details"] = c.details;
    doc["engine"] = r.engine;
    doc["backend"] = r.backend;
    doc["environment"] = r.environment;
    doc["iterations"] = r.iterations;
    doc["estimated_problems"] = r.estimated_problems;
    doc["estimates"] = {{"problems", r.estimated_problems},
                        {"assumed_support", r.assumed_problems},
                        {"floored", r.floored_problems},
                        {"max_extrapolation", r.max_extrapolation},
                        {"sigmas", PerfModel::kSigmas}};
    doc["repeats"] = r.repeats;
    doc["plan_builds_missing"] = r.builds_missing;  // settings whose emulated search lacks plan builds (notes)
    doc["trace_iterations"] = r.trace_iterations > 0 ? json(r.trace_iterations) : json(nullptr);
    doc["trace_flags"] = r.trace_flag_sets > 0 ? json(trace_flags_text(r.trace_flags)) : json(nullptr);
    doc["trace_flag_sets"] = r.trace_flag_sets;
    // What the totals cover: "step" (convolutions plus each step's time outside them, from the
    // trace's wall times) or "convolutions".
    json step{{"totals", r.step.known ? "step" : "convolutions"}, {"text", r.step.describe()}};
    if (r.step.known) {
        step["other_ms"] = r.step.other_ms;
        step["steady_other_ms"] = r.step.steady_other_ms;
        step["recorded"] = r.step.recorded;
        step["clamped"] = r.step.clamped;
        // How the wall times were taken: "plain" (a plain run), "capture" (under the capture, an
        // upper bound) or "unknown" (a trace without a `# timing` line).
        const TraceTiming& t = r.step.timing;
        step["timing"] = t.source == TraceTiming::Source::plain     ? "plain"
                         : t.source == TraceTiming::Source::capture ? "capture"
                                                                    : "unknown";
        if (t.benchmark) step["timing_benchmark"] = *t.benchmark ? 1 : 0;
        if (!t.kernel_cache.empty()) step["timing_kernel_cache"] = t.kernel_cache;
    }
    doc["step_time"] = step;
    doc["notes"] = notes(r);
    doc["baseline"] =
        r.baseline >= 0 ? json(r.scenarios[static_cast<std::size_t>(r.baseline)].setting.name) : json(nullptr);
    json settings = json::array();
    for (std::size_t i = 0; i < r.scenarios.size(); ++i) {
        const ScenarioResult& s = r.scenarios[i];
        const Comparison& cmp = r.comparisons[i];
        const IterationStats sum = s.sum();
        std::vector<double> it;
        for (const IterationStats& x : s.iterations) it.push_back(x.total_ms());
        json js{{"name", s.setting.name},
                {"flags", s.setting.flags.to_string()},
                {"total_ms", sum.total_ms()},
                {"search_ms", sum.search_ms},
                {"exec_ms", sum.exec_ms},
                {"other_ms", sum.other_ms},
                {"wall_ms", sum.wall_ms},
                {"calls", sum.calls},
                {"hits", sum.hits},
                {"misses", sum.misses},
                {"searches", sum.searches},
                {"distinct_shapes", sum.new_shapes},
                {"first_iteration_ms", s.first_ms()},
                {"median_iteration_ms", median(it)},
                {"max_iteration_ms", s.max_ms()},
                {"saving_vs_baseline", cmp.saving},
                {"break_even", cmp.break_even ? json(*cmp.break_even) : json(nullptr)},
                {"projected_break_even", cmp.projected_break_even ? json(*cmp.projected_break_even) : json(nullptr)},
                {"steady_gain_ms", cmp.steady_gain_ms},
                {"within_noise", cmp.within_noise}};
        if (!s.failure.empty()) js["failure"] = s.failure;
        if (!s.source.empty()) js["source"] = s.source;
        if (!s.source.empty() || s.repeat_totals_ms.size() >= 2) js["range_ms"] = {s.range_lo_ms, s.range_hi_ms};
        if (s.repeat_totals_ms.size() >= 2) {
            js["repeat_totals_ms"] = s.repeat_totals_ms;
            js["median_total_ms"] = median(s.repeat_totals_ms);
            js["mad_total_ms"] = median_abs_deviation(s.repeat_totals_ms);
        }
        if (s.estimate_hi_ms > s.estimate_lo_ms) js["estimate_range_ms"] = {s.estimate_lo_ms, s.estimate_hi_ms};
        json per = json::array();
        for (std::size_t k = 0; k < s.iterations.size(); ++k) {
            const IterationStats& x = s.iterations[k];
            per.push_back({{"iteration", s.number(k)},
                           {"search_ms", x.search_ms},
                           {"exec_ms", x.exec_ms},
                           {"other_ms", x.other_ms},
                           {"calls", x.calls},
                           {"hits", x.hits},
                           {"misses", x.misses},
                           {"searches", x.searches},
                           {"new_shapes", x.new_shapes}});
        }
        js["per_iteration"] = per;
        settings.push_back(js);
    }
    doc["settings"] = settings;
    doc["recommendation"] = {
        {"setting", r.recommendation.setting}, {"text", r.recommendation.text}, {"saving", r.recommendation.saving}};
    return doc;
}

std::string to_csv(const SimulationResult& r) {
    std::string o =
        "setting,iteration,search_ms,exec_ms,total_ms,cumulative_ms,calls,hits,misses,searches,new_shapes,other_ms\n";
    for (const ScenarioResult& s : r.scenarios) {
        const std::vector<double> cum = s.cumulative_ms();
        for (std::size_t i = 0; i < s.iterations.size(); ++i) {
            const IterationStats& x = s.iterations[i];
            o += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(s.setting.name), s.number(i),
                             x.search_ms, x.exec_ms, x.total_ms(), cum[i], x.calls, x.hits, x.misses, x.searches,
                             x.new_shapes, x.other_ms);
        }
    }
    return o;
}

std::string to_svg(const SimulationResult& r, const ReportContext& c) {
    const std::vector<std::string> title = wrap("Cumulative time: " + c.title, 80),
                                   details = wrap(c.details + "; " + r.step.describe(), 115),
                                   rec = wrap("recommendation: " + r.recommendation.text, 135);
    const double W = 900, left = 80, right = 200, ph = 400;
    const double top = 24 + 18 * static_cast<double>(title.size()) + 15 * static_cast<double>(details.size());
    const double bottom = 46 + 14 * static_cast<double>(rec.size());
    const double H = top + ph + bottom, pw = W - left - right;
    double ymax = 0;
    int n = 0;
    for (const ScenarioResult& s : r.scenarios) {
        const auto cum = s.cumulative_ms();
        if (!cum.empty()) ymax = std::max(ymax, cum.back());
        n = std::max(n, s.count());
    }
    const bool in_s = ymax >= 2000;
    const double unit = in_s ? 1000 : 1;
    const double ytop_u = ymax / unit;
    const double ystep = nice_step(ytop_u, 6);
    const double yaxis = std::max(ystep, std::ceil(ytop_u / ystep) * ystep);
    const double xstep = std::max(1.0, nice_step(n, 8));
    const double xaxis = std::max(1.0, std::ceil(n / xstep) * xstep);
    auto X = [&](double it) { return left + pw * it / xaxis; };
    auto Y = [&](double ms) { return top + ph - ph * (ms / unit) / yaxis; };
    static const char* colors[] = {"#555555", "#1f77b4", "#9467bd", "#2ca02c", "#d62728",
                                   "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22"};

    std::string o;
    o += fmt::format(
        R"(<?xml version="1.0" encoding="UTF-8"?>)"
        "\n"
        R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" font-family="sans-serif" font-size="12">)"
        "\n",
        W, H);
    o += fmt::format(R"(<rect x="0" y="0" width="{}" height="{}" fill="white"/>)"
                     "\n",
                     W, H);
    double ty = 22;
    for (const std::string& l : title) {
        o += fmt::format(R"(<text x="{}" y="{}" font-size="15" font-weight="bold">{}</text>)"
                         "\n",
                         num(left), num(ty), xml_escape(l));
        ty += 18;
    }
    for (const std::string& l : details) {
        o += fmt::format(R"(<text x="{}" y="{}" fill="#444">{}</text>)"
                         "\n",
                         num(left), num(ty), xml_escape(l));
        ty += 15;
    }
    // Grid and axes.
    for (double v = 0; v <= yaxis + 1e-9; v += ystep) {
        const double y = top + ph - ph * v / yaxis;
        o += fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#e0e0e0"/>)"
                         "\n",
                         num(left), num(y), num(left + pw), num(y));
        o += fmt::format(R"(<text x="{}" y="{}" text-anchor="end">{}</text>)"
                         "\n",
                         num(left - 6), num(y + 4), fmt::format("{:g}", v));
    }
    for (double v = 0; v <= xaxis + 1e-9; v += xstep) {
        const double x = left + pw * v / xaxis;
        o += fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#e0e0e0"/>)"
                         "\n",
                         num(x), num(top), num(x), num(top + ph));
        o += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">{}</text>)"
                         "\n",
                         num(x), num(top + ph + 16), fmt::format("{:g}", v));
    }
    o += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#333"/>)"
                     "\n",
                     left, top, pw, ph);
    o += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">iteration</text>)"
                     "\n",
                     num(left + pw / 2), num(top + ph + 34));
    o += fmt::format(R"~(<text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {})">{}</text>)~"
                     "\n",
                     num(top + ph / 2), num(top + ph / 2), in_s ? "cumulative time (s)" : "cumulative time (ms)");
    // One line per setting, break-even marked.
    for (std::size_t i = 0; i < r.scenarios.size(); ++i) {
        const ScenarioResult& s = r.scenarios[i];
        const auto cum = s.cumulative_ms();
        const char* color = colors[i % (sizeof colors / sizeof *colors)];
        // At most ~1500 points per line: enough for any screen.
        const std::size_t stride = std::max<std::size_t>(1, cum.size() / 1500);
        std::string pts = fmt::format("{:.2f},{:.2f}", X(0), Y(0));
        for (std::size_t k = 0; k < cum.size(); ++k)
            if (k % stride == 0 || k + 1 == cum.size())
                pts += fmt::format(" {:.2f},{:.2f}", X(static_cast<double>(s.number(k))), Y(cum[k]));
        // Every other line dashed, so that settings with equal results stay visible.
        const char* dash = i % 2 == 0 && i > 0 ? R"( stroke-dasharray="7 4")" : "";
        o += fmt::format(
            R"(<polyline fill="none" stroke="{}" stroke-width="2"{} points="{}"><title>{}</title></polyline>)"
            "\n",
            color, dash, pts, xml_escape(s.setting.name + ": " + s.setting.flags.to_string()));
        const double ly = top + 14 + 50 * static_cast<double>(i);
        o += fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="3"{}/>)"
                         "\n",
                         num(left + pw + 14), num(ly), num(left + pw + 38), num(ly), color, dash);
        o += fmt::format(R"(<text x="{}" y="{}">{}</text>)"
                         "\n",
                         num(left + pw + 44), num(ly + 4), xml_escape(s.setting.name));
        const double total = cum.empty() ? 0 : cum.back();
        std::string sub = ms_text(total);
        if (static_cast<int>(i) != r.baseline && r.baseline >= 0 && s.failure.empty())
            sub += fmt::format(" ({:+.1f}%)", -100 * r.comparisons[i].saving);
        if (!s.failure.empty()) sub = "failed";
        o += fmt::format(R"(<text x="{}" y="{}" fill="#555" font-size="11">{}</text>)"
                         "\n",
                         num(left + pw + 44), num(ly + 18), xml_escape(sub));
        if (static_cast<int>(i) != r.baseline && r.comparisons[i].break_even && s.failure.empty()) {
            const int be = *r.comparisons[i].break_even;
            std::size_t kb = 0;  // the kept record of that iteration
            while (kb + 1 < cum.size() && s.number(kb) < be) ++kb;
            const double bx = X(be), by = Y(cum[kb]);
            o += fmt::format(
                R"(<circle cx="{}" cy="{}" r="5" fill="white" stroke="{}" stroke-width="2"><title>{}</title></circle>)"
                "\n",
                num(bx), num(by), color, xml_escape(fmt::format("{} breaks even at iteration {}", s.setting.name, be)));
            // The iteration is written in the legend: labels next to close points would collide.
            o += fmt::format(R"(<text x="{}" y="{}" fill="{}" font-size="11">{}</text>)"
                             "\n",
                             num(left + pw + 44), num(ly + 31), color,
                             xml_escape(fmt::format("breaks even: it. {}", be)));
        }
    }
    double ry = top + ph + 56;
    for (const std::string& l : rec) {
        o += fmt::format(R"(<text x="{}" y="{}" fill="#222" font-size="11">{}</text>)"
                         "\n",
                         num(20), num(ry), xml_escape(l));
        ry += 14;
    }
    o += "</svg>\n";
    return o;
}

}  // namespace convtune::sim
