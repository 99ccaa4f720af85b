#include "convtune/sim/measured.hpp"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "convtune/error.hpp"
#include "convtune/file_io.hpp"
#include "convtune/problem.hpp"
#include "convtune/stats.hpp"
#include "convtune/sim/recording.hpp"

namespace convtune::sim {

namespace {

constexpr double kMaxMs = 1e7;  // about three hours: no single call takes longer

double time_field(const nlohmann::json& j, const char* name, const std::string& where) {
    const auto it = j.find(name);
    if (it == j.end() || !it->is_number()) throw Error(where + ": \"" + name + "\" must be a number");
    const double v = it->get<double>();
    if (!std::isfinite(v) || v < 0 || v > kMaxMs)
        throw Error(where + ": \"" + name + "\" must be a finite time in [0, 1e7] ms (got " + std::to_string(v) + ")");
    return v;
}

}  // namespace

PyTorchMeasurements PyTorchMeasurements::load(const std::string& path) {
    const std::string text = read_data_file(path, kMaxMeasurementBytes, "PyTorch measurement grid");
    nlohmann::json doc;
    try {
        doc = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw ParseError(path + ": not JSON: " + e.what());
    }
    if (!doc.is_object() || doc.value("format", "") != "convtune-pytorch-measurement-grid")
        throw Error(
            path +
            ": not a PyTorch measurement grid (format convtune-pytorch-measurement-grid, from pytorch_measure.py grid)");
    if (doc.value("version", 0) != 1) throw Error(path + ": unsupported version (this convtune reads version 1)");
    const auto ms = doc.find("measurements");
    if (ms == doc.end() || !ms->is_array() || ms->empty())
        throw Error(path + ": \"measurements\" must be a non-empty array");
    PyTorchMeasurements r;
    r.path = path;
    try {
    for (std::size_t i = 0; i < ms->size(); ++i) {
        const nlohmann::json& m = (*ms)[i];
        const std::string w = path + ": measurements[" + std::to_string(i) + "]";
        if (!m.is_object()) throw Error(w + ": must be an object");
        MeasuredRun run;
        const auto& setting = m.value("setting", nlohmann::json::object());
        if (!setting.is_object() || !setting.contains("benchmark") || !setting["benchmark"].is_number_integer())
            throw Error(w + ": \"setting\" must hold the integer \"benchmark\"");
        const int bm = setting["benchmark"].get<int>();
        if (bm != 0 && bm != 1) throw Error(w + ": setting.benchmark must be 0 or 1");
        if (setting.value("deterministic", 0) != 0)
            throw Error(w + ": deterministic measurements are not replayed (the rows replay deterministic=0)");
        run.setting = bm ? "bm1" : "bm0";
        run.cache = m.value("cache", "");
        if (run.cache != "cold" && run.cache != "warm") throw Error(w + ": \"cache\" must be \"cold\" or \"warm\"");
        run.startup_ms = time_field(m, "startup_ms", w);
        const int tf32 = setting.value("allow_tf32", 1);
        const auto& env = m.value("environment", nlohmann::json::object());
        // environment: strings, and cuDNN's version number or null (PyTorch on the CPU).
        auto text = [&](const char* k) {
            return env.is_object() && env.contains(k) && env[k].is_string() ? env[k].get<std::string>() : "";
        };
        if (i == 0) {
            r.allow_tf32 = tf32;
            r.device = text("device");
            r.torch = text("torch");
            r.cudnn = env.is_object() && env.contains("cudnn") && env["cudnn"].is_number_integer()
                          ? env["cudnn"].get<int>()
                          : 0;
        } else if (tf32 != r.allow_tf32 || text("device") != r.device) {
            throw Error(w + ": every measurement of a file must have the same device and allow_tf32");
        }
        const auto ps = m.find("problems");
        if (ps == m.end() || !ps->is_array()) throw Error(w + ": \"problems\" must be an array");
        for (std::size_t j = 0; j < ps->size(); ++j) {
            const nlohmann::json& p = (*ps)[j];
            const std::string wp = w + ".problems[" + std::to_string(j) + "]";
            if (!p.is_object() || !p.contains("key") || !p["key"].is_string())
                throw Error(wp + ": \"key\" must be a string");
            const std::string key = p["key"].get<std::string>();
            ConvProblem parsed;
            try {
                parsed = ConvProblem::parse(key);
            } catch (const Error& e) {
                throw Error(wp + ": key is not a problem: " + e.what());
            }
            MeasuredRun::Problem t{time_field(p, "first_ms", wp), time_field(p, "steady_ms", wp)};
            run.problems[parsed.to_string()] = t;
        }
        const auto folder = m.find("kernel_cache_folder");
        if (run.cache == "cold" && (folder == m.end() || !folder->is_string() || folder->get<std::string>().empty()))
            ++r.unverified_cold;
        else r.runs.push_back(std::move(run));
    }
    } catch (const nlohmann::json::exception& e) {  // a field of the wrong type
        throw Error(path + ": a field has the wrong type: " + e.what());
    }
    // One start-up per cache state, the benchmark-off probes' (MeasuredRun::startup_ms says why).
    for (const char* cache : {"cold", "warm"}) {
        std::vector<double> off;
        for (const MeasuredRun* run : r.select("bm0", cache)) off.push_back(run->startup_ms);
        if (off.empty()) continue;
        const double m = median(std::move(off));
        for (MeasuredRun& run : r.runs)
            if (run.cache == cache) run.startup_ms = m;
    }
    return r;
}

std::vector<const MeasuredRun*> PyTorchMeasurements::select(const std::string& setting,
                                                            const std::string& cache) const {
    std::vector<const MeasuredRun*> out;
    for (const MeasuredRun& r : runs)
        if (r.setting == setting && r.cache == cache) out.push_back(&r);
    return out;
}

}  // namespace convtune::sim
