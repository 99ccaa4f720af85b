// convtune list [backends|recordings] [--json]: backends, their availability and identity, algorithms
// with notes; or the recording library (`--replay NAME`) and what each of its recordings covers.
#include <fmt/core.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "convtune/registry.hpp"
#include "convtune/sim/measured.hpp"
#include "convtune/sim/recording.hpp"
#include "cpu/isa.hpp"

namespace convtune::cli {

std::string cpu_level_line() {
    const cpu::IsaLevels& L = cpu::isa_levels();
    std::string s = fmt::format("cpu algorithms run at {} (compiled for: {}", L.active, fmt::join(L.compiled, " "));
    s += L.compiled.size() > 1 ? "; CONVTUNE_CPU_ISA picks a lower one)" : ")";
    return L.note.empty() ? s : s + "; " + L.note;
}

void add_list(CLI::App& app, Action& action) {
    auto* cmd = app.add_subcommand("list", "List backends and their algorithms with numerical notes");
    auto json = std::make_shared<bool>(false);
    auto what = std::make_shared<std::string>("backends");
    cmd->add_option("what", *what, "backends (the default) or recordings (the recording library behind --replay NAME)")
        ->check(CLI::IsMember({"backends", "recordings"}));
    cmd->add_flag("--json", *json, "Print one JSON document");
    cmd->callback([json, what, &action] {
        if (*what == "recordings") {
            action = [json] {
                nlohmann::json doc = nlohmann::json::array();
                const std::string dir = sim::recordings_dir();
                const auto lib = sim::recording_library(dir);
                if (!*json) fmt::print("recording library: {} (set CONVTUNE_RECORDINGS_DIR for another){}\n", dir, lib.empty() ? ": empty" : "");
                for (const sim::LibraryEntry& e : lib) {
                    nlohmann::json files = nlohmann::json::array();
                    if (!*json) fmt::print("{}  (--replay {})\n", e.name, e.name);
                    for (const std::string& f : e.files) {
                        const sim::Recording r = sim::Recording::load(f);
                        const auto cov = sim::coverage(r);
                        files.push_back({{"file", f}, {"environment", r.environment.describe()}, {"problems", r.problems.size()}, {"covers", cov}});
                        if (*json) continue;
                        fmt::print("  {}: {}\n", f, r.environment.describe());
                        for (const std::string& c : cov) fmt::print("    {}\n", c);
                    }
                    nlohmann::json entry{{"name", e.name}, {"recordings", files}};
                    if (!e.pytorch_dir.empty()) {
                        const sim::PyTorchLibrary pl = sim::PyTorchLibrary::load_dir(e.pytorch_dir, e.name);
                        entry["pytorch"] = {{"folder", e.pytorch_dir}, {"files", pl.files.size()}, {"covers", pl.describe()}};
                        if (!*json) fmt::print("  {}: PyTorch's own measurements (off and pytorch settings): {}\n", e.pytorch_dir, pl.describe());
                    }
                    doc.push_back(entry);
                }
                if (*json) fmt::print("{}\n", doc.dump(2));
                return ok;
            };
            return;
        }
        action = [json] {
            nlohmann::json doc = nlohmann::json::array();
            for (Backend* b : backends()) {
                const Availability av = b->availability();
                const BackendIdentity id = b->identity();
                nlohmann::json jb{{"name", b->name()}, {"available", av.ok}, {"library", id.library}, {"device", id.device}};
                if (!av.ok) jb["reason"] = av.reason;
                const bool cpu = b->name() == "cpu";
                if (cpu) jb["isa_levels"] = {{"compiled", cpu::isa_levels().compiled}, {"active", cpu::isa_levels().active}};
                nlohmann::json algos = nlohmann::json::array();
                for (const Algorithm* a : b->algorithms()) algos.push_back({{"id", a->id()}, {"notes", a->notes().names()}});
                jb["algorithms"] = algos;
                doc.push_back(jb);
                if (*json) continue;
                fmt::print("{} — {}{}\n", b->name(), id.library, av.ok ? "" : fmt::format(" (unavailable: {})", av.reason));
                if (!id.device.empty()) fmt::print("  device: {}\n", id.device);
                if (cpu) fmt::print("  {}\n", cpu_level_line());
                if (b->algorithms().empty()) fmt::print("  (no algorithms)\n");
                for (const Algorithm* a : b->algorithms()) fmt::print("  {:<40} {}\n", a->id(), a->notes().to_string());
            }
            if (*json) fmt::print("{}\n", doc.dump(2));
            return ok;
        };
    });
}

}  // namespace convtune::cli
