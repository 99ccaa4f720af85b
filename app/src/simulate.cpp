#include "convtune/app/simulate.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "convtune/error.hpp"
#include "convtune/file_io.hpp"
#include "convtune/registry.hpp"
#include "convtune/sim/measured.hpp"
#include "convtune/sim/recording.hpp"
#include "convtune/sim/replay_backend.hpp"

namespace convtune::app {

namespace {

// "batches 1 2 4; scales 0.5 1 (per spatial dim); stream seed 1; " for the streams that draw.
std::string stream_details(const sim::StreamSpec& sp) {
    std::string d;
    if (sp.kind == sim::StreamKind::batch || sp.kind == sim::StreamKind::mixed) {
        d += "batches";
        for (int64_t b : sp.batches) d += fmt::format(" {}", b);
        d += "; ";
    }
    if (sp.kind == sim::StreamKind::resolution || sp.kind == sim::StreamKind::mixed) {
        d += "scales";
        for (double s : sp.scales) d += fmt::format(" {:g}", s);
        d += " (per spatial dim); ";
    }
    if (sp.kind != sim::StreamKind::fixed && sp.kind != sim::StreamKind::trace)
        d += "stream seed " + std::to_string(sp.seed) + "; ";
    return d;
}

}  // namespace

bool SimulateReport::failed() const {
    for (const sim::ScenarioResult& s : result.scenarios)
        if (!s.failure.empty()) return true;
    return false;
}

// `--replay auto`: the library of this machine's GPU, as the cuDNN backend names it.
static std::string library_of_this_gpu() {
    const Backend* cudnn = nullptr;
    for (const Backend* b : backends())
        if (b->name() == "cudnn") cudnn = b;
    // What a refusal adds: the names there are (the library is read only when refusing).
    const auto refused = [](const std::string& why) {
        std::string names;
        for (const sim::LibraryEntry& e : sim::recording_library()) names += (names.empty() ? "" : ", ") + e.name;
        return InvalidRequest("replay", "auto: " + why + "; name one instead (" +
                                            (names.empty() ? std::string("the library is empty") : names) + ")");
    };
    if (!cudnn) throw refused("this convtune has no cuDNN backend to name the GPU");
    if (const Availability a = cudnn->availability(); !a.ok) throw refused("no usable GPU here (" + a.reason + ")");
    const std::string device = cudnn->identity().device;
    const std::optional<sim::LibraryEntry> e = sim::library_for_device(device);
    if (!e) throw refused("the recording library has no entry for " + quote_input(device));
    return e->name;
}

SimulateReport simulate(const SimulateRequest& r) {
    if (r.replay == "auto") {
        SimulateRequest named = r;
        named.replay = library_of_this_gpu();
        return simulate(named);
    }
    // Everything is validated before anything runs or is written.
    if (r.iterations < 0) throw InvalidRequest("iterations", "must be >= 1 (got " + std::to_string(r.iterations) + ")");
    if (r.repeats < 0) throw InvalidRequest("repeats", "must be >= 1 (got " + std::to_string(r.repeats) + ")");
    if (!(r.min_saving >= 0 && r.min_saving <= 1)) throw InvalidRequest("min_saving", "must be in [0, 1]");
    const sim::Stream stream = r.workload.make_stream();
    // A trace is the user's run: by default, as long as it is.
    const int iterations = r.iterations > 0 ? r.iterations : stream.trace_length() > 0 ? stream.trace_length() : 100;
    std::vector<sim::Setting> settings;
    for (const std::string& f : r.flags) settings.push_back(sim::parse_setting(f));
    if (r.compare || settings.empty()) {
        std::vector<sim::Setting> all = sim::standard_settings();
        for (sim::Setting& s : settings) all.push_back(s);
        settings = all;
    }
    for (std::size_t i = 0; i < settings.size(); ++i)
        for (std::size_t j = 0; j < i; ++j)
            if (settings[i].name == settings[j].name)
                throw InvalidRequest("flags", "setting '" + settings[i].name + "' given twice");
    if (!r.plot.empty()) {
        check_output_path(r.plot);
        const std::filesystem::path dir = std::filesystem::path(r.plot).parent_path();
        if (::access(dir.empty() ? "." : dir.c_str(), W_OK) != 0)
            throw InvalidRequest("plot", "cannot write in the folder of '" + r.plot + "'");
    }

    if (!r.kernel_cache.empty() && r.kernel_cache != "cold" && r.kernel_cache != "warm")
        throw InvalidRequest("kernel_cache", "'" + r.kernel_cache + "' is neither cold nor warm");
    // PyTorch's own measurements: a file given, else the measured library of a --replay name.
    std::optional<sim::PyTorchMeasurements> measured;
    std::optional<sim::LibraryEntry> entry;
    std::vector<ConvProblem> library_problems;  // the stream's distinct problems, where a library measured them
    if (r.measured.empty() && !r.replay.empty() && !sim::names_recording_file(r.replay))
        entry = sim::library_entry(r.replay);
    if (!r.measured.empty()) {
        measured = sim::PyTorchMeasurements::load(r.measured);
    } else if (entry && !entry->pytorch_dir.empty()) {
        const sim::PyTorchLibrary lib = sim::PyTorchLibrary::load_dir(entry->pytorch_dir, entry->name);
        // cuDNN's allow_tf32 the measured rows stand for: the `off` setting's (else `pytorch`'s),
        // over the trace's flags where it records them; PyTorch's default (True) otherwise.
        bool tf32 = stream.trace_flags().empty() || stream.trace_flags().front().allow_tf32;
        for (const char* name : {"pytorch", "off"})
            for (const sim::Setting& st : settings)
                if (st.name == name)
                    tf32 = (stream.trace_flags().empty() ? st : sim::over(st, stream.trace_flags().front()))
                               .flags.allow_tf32;
        library_problems = sim::distinct_problems(stream, iterations);
        measured = lib.for_problems(library_problems, tf32);
    }
    if (!r.kernel_cache.empty() && !measured)
        throw InvalidRequest(
            "kernel_cache",
            "applies where PyTorch's measurements back it: with {pytorch_measured}, or a {replay} name whose library "
            "holds them (`convtune list recordings`); a recording holds the one state it was made in");
    if (r.kernel_cache == "cold" && measured && measured->select("bm0", "cold").empty() &&
        measured->unverified_cold > 0)
        throw InvalidRequest(
            "kernel_cache",
            fmt::format("cold: the {} cold kernel-cache measurements of {} were made before each measuring process "
                        "recorded its own kernel-cache folder (kernel_cache_folder), when a cold process could reuse "
                        "kernels an earlier one had compiled: they are not replayed. Measure the cold state again "
                        "(`pytorch_measure.py grid --caches cold`) or simulate a warm kernel cache",
                        measured->unverified_cold,
                        measured->library.empty() ? measured->path : "'" + measured->library + "'"));
    bool measured_only = measured && (r.replay.empty() || (entry && entry->files.empty())) && r.backend.empty();
    if (measured_only && r.repeats > 0)
        throw InvalidRequest("repeats",
                             "PyTorch's measurements carry their own runs; {repeats} applies to a backend or a replay");

    std::unique_ptr<sim::ReplayBackend> replay;
    Backend* backend = nullptr;  // live
    if (!r.replay.empty() && !measured_only) {
        sim::Recording rec = sim::load_replay(r.replay);  // a file, or a name in the recording library
        if (!r.backend.empty() && r.backend != rec.environment.backend)
            throw InvalidRequest("backend", "'" + r.backend + "' does not match the recording's backend '" +
                                                rec.environment.backend + "'");
        replay = std::make_unique<sim::ReplayBackend>(
            std::move(rec), r.workload.seed,
            r.strict ? sim::ReplayBackend::Estimation::none : sim::ReplayBackend::Estimation::any);
    } else if (!measured_only) {
        backend = &find_backend(r.backend.empty() ? "cpu" : r.backend);
    }
    // A library name whose recording cannot time every problem of the stream (an inference
    // recording under a training stream, say) still has PyTorch's measured rows: those are
    // simulated alone, saying why, instead of the whole replay being refused. (With `entry` and
    // `measured`, the measured rows are that name's library's: `library_problems` is filled.)
    std::string left_out;
    if (replay && entry && measured && r.backend.empty() && r.repeats == 0 && !r.strict) {
        std::size_t unserved = 0;
        std::string example;
        for (const ConvProblem& p : library_problems) {
            if (replay->is_recorded(p)) continue;
            if (const sim::ReplayBackend::Estimate* e = replay->estimate(p); e && e->record) continue;
            if (unserved++ == 0) example = p.to_string();
        }
        if (unserved > 0) {
            left_out = fmt::format(
                "the settings other than off and pytorch are left out: the recordings of '{}' cannot time {} of the "
                "stream's {} problems (e.g. {}; record them with `convtune record`)",
                r.replay, unserved, library_problems.size(), example);
            replay.reset();
            backend = nullptr;
            measured_only = true;
        }
    }

    sim::SimulationOptions so;
    so.iterations = iterations;
    so.repeats = r.repeats;
    so.settings = settings;
    so.seed = r.workload.seed;
    so.min_saving = r.min_saving;
    if (measured) so.measured = &*measured;
    so.kernel_cache = r.kernel_cache.empty() ? "warm" : r.kernel_cache;
    so.progress = r.progress;
    SimulateReport rep;
    rep.result = measured_only ? sim::simulate_measured(stream, so)
                 : replay      ? sim::simulate(*replay, stream, so)
                               : sim::simulate(*backend, stream, so);
    rep.context.title = r.workload.describe(stream) + ", " + std::to_string(iterations) + " iterations";
    rep.context.details = stream_details(stream.spec()) + rep.result.engine +
                          (replay ? " of " + r.replay : std::string()) + " on backend " + rep.result.backend + " (" +
                          rep.result.environment + ")";
    if (measured && !measured->library.empty())
        rep.context.details += fmt::format(
            "; off and pytorch from PyTorch's measured library '{}' ({} kernel cache), {} of {} problems predicted by "
            "its model",
            measured->library, so.kernel_cache, measured->estimated.size(), library_problems.size());
    if (measured && !measured->library.empty())
        rep.pytorch_library = {measured->library, so.kernel_cache, measured->estimated, library_problems.size()};
    if (!left_out.empty()) rep.context.details += "; " + left_out;
    if (!r.plot.empty()) write_file_atomic(r.plot, sim::to_svg(rep.result, rep.context));
    return rep;
}

nlohmann::json to_json(const SimulateReport& r) {
    nlohmann::json j = sim::to_json(r.result, r.context);
    j["format"] = report_format;
    if (!r.pytorch_library.name.empty())
        j["pytorch_library"] = {{"name", r.pytorch_library.name},
                                {"kernel_cache", r.pytorch_library.kernel_cache},
                                {"problems", r.pytorch_library.problems},
                                {"predicted", r.pytorch_library.predicted}};
    return j;
}

RecordReport record(const RecordRequest& r) {
    if (r.out.empty()) throw InvalidRequest("out", "required");
    check_output_path(r.out);  // refused before anything is recorded
    if (r.iterations < 1) throw InvalidRequest("iterations", "must be >= 1 (got " + std::to_string(r.iterations) + ")");
    if (r.samples < 0) throw InvalidRequest("samples", "must be >= 0 (got " + std::to_string(r.samples) + ")");
    if (!(r.max_ms >= 0)) throw InvalidRequest("max_ms", "must be >= 0");
    std::optional<FlagValues> search_flags;
    if (r.search_flags != "none") {
        try {
            search_flags = parse_flags(r.search_flags);
        } catch (const Error& e) {
            throw InvalidRequest("search_flags", std::string(e.what()) + " (or \"none\")");
        }
    }
    sim::Recording rec;
    std::vector<std::string> dropped;
    if (!r.from_db.empty()) {
        const Backend* local = nullptr;  // this build's backend of that name, if it has one
        for (Backend* b : backends())
            if (b->name() == r.backend) local = b;
        rec = sim::recording_from_db(TuningDatabase::read_file(r.from_db), r.backend, &dropped, local);
    } else {
        const sim::Stream stream = r.workload.make_stream();
        const std::vector<ConvProblem> problems = sim::distinct_problems(stream, r.iterations);
        const Backend& b = find_backend(r.backend);
        sim::RecordOptions ro;
        ro.samples = r.samples;
        ro.max_ms_per_algorithm = r.max_ms;
        ro.progress = r.progress;
        ro.search_flags = search_flags;
        rec = sim::record(b, problems, ro);
    }
    rec.save(r.out);
    return {r.out,
            rec.source,
            rec.environment.backend,
            rec.environment.describe(),
            static_cast<int64_t>(rec.problems.size()),
            static_cast<int64_t>(rec.algorithms.size()),
            dropped};
}

nlohmann::json to_json(const RecordReport& r) {
    return {
        {"format", report_format},      {"out", r.out},           {"source", r.source},         {"backend", r.backend},
        {"environment", r.environment}, {"problems", r.problems}, {"algorithms", r.algorithms}, {"dropped", r.dropped}};
}

}  // namespace convtune::app
