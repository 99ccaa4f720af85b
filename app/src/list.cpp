#include "convtune/app/list.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "convtune/error.hpp"
#include "convtune/registry.hpp"
#include "convtune/sim/measured.hpp"
#include "convtune/sim/recording.hpp"
#include "cpu/isa.hpp"

namespace convtune::app {

CpuLevels cpu_levels() {
    const cpu::IsaLevels& l = cpu::isa_levels();
    return {l.compiled, l.active, l.note};
}

std::string to_text(const CpuLevels& l) {
    std::string s = fmt::format("cpu algorithms run at {} (compiled for: {}", l.active, fmt::join(l.compiled, " "));
    s += l.compiled.size() > 1 ? "; CONVTUNE_CPU_ISA picks a lower one)" : ")";
    return l.note.empty() ? s : s + "; " + l.note;
}

std::vector<BackendListing> list_backends(bool notes) {
    std::vector<BackendListing> out;
    for (Backend* b : backends()) {
        const Availability av = b->availability();
        const BackendIdentity id = b->identity();
        BackendListing l{.name = std::string(b->name()),
                         .available = av.ok,
                         .reason = av.ok ? "" : av.reason,
                         .library = id.library,
                         .device = id.device,
                         .driver = id.driver,
                         .cpu_levels = {},
                         .algorithms = {}};
        if (l.name == "cpu") l.cpu_levels = cpu_levels();
        for (const Algorithm* a : b->algorithms()) {
            BackendListing::Algo algo{.id = std::string(a->id()), .notes = {}, .notes_text = {}};
            if (notes) {  // cuDNN's graph engines: a note probe each (engine builds on small graphs)
                algo.notes_text = a->notes().to_string();
                for (std::string_view n : a->notes().names()) algo.notes.emplace_back(n);
            }
            l.algorithms.push_back(std::move(algo));
        }
        out.push_back(std::move(l));
    }
    return out;
}

namespace {

std::vector<LibraryListing> list_recordings(const std::string& dir) {
    std::vector<LibraryListing> out;
    for (const sim::LibraryEntry& e : sim::recording_library(dir)) {
        LibraryListing l{.name = e.name, .recordings = {}, .pytorch = {}};
        for (const std::string& f : e.files) {
            const sim::Recording r = sim::Recording::load(f);
            l.recordings.push_back({f, r.environment.describe(), r.problems.size(), sim::coverage(r)});
        }
        if (!e.pytorch_dir.empty()) {
            const sim::PyTorchLibrary pl = sim::PyTorchLibrary::load_dir(e.pytorch_dir, e.name);
            l.pytorch = LibraryListing::PyTorch{e.pytorch_dir, pl.describe(), pl.files.size()};
        }
        out.push_back(std::move(l));
    }
    return out;
}

}  // namespace

ListReport list(const ListRequest& r) {
    ListReport rep{.what = r.what, .backends = {}, .folder = {}, .recordings = {}};
    if (r.what == "backends") {
        rep.backends = list_backends(true);
    } else if (r.what == "recordings") {
        rep.folder = sim::recordings_dir();
        rep.recordings = list_recordings(rep.folder);
    } else {
        throw InvalidRequest("what", quote_input(r.what) + " is neither backends nor recordings");
    }
    return rep;
}

nlohmann::json to_json(const ListReport& r) {
    nlohmann::json doc{{"format", report_format}};
    if (r.what == "recordings") {
        nlohmann::json lib = nlohmann::json::array();
        for (const LibraryListing& l : r.recordings) {
            nlohmann::json files = nlohmann::json::array();
            for (const LibraryListing::File& f : l.recordings)
                files.push_back(
                    {{"file", f.file}, {"environment", f.environment}, {"problems", f.problems}, {"covers", f.covers}});
            nlohmann::json entry{{"name", l.name}, {"recordings", files}};
            if (l.pytorch)
                entry["pytorch"] = {
                    {"folder", l.pytorch->folder}, {"files", l.pytorch->files}, {"covers", l.pytorch->covers}};
            lib.push_back(entry);
        }
        doc["folder"] = r.folder;
        doc["recordings"] = lib;
        return doc;
    }
    nlohmann::json list = nlohmann::json::array();
    for (const BackendListing& b : r.backends) {
        nlohmann::json jb{{"name", b.name},
                          {"available", b.available},
                          {"library", b.library},
                          {"device", b.device},
                          {"driver", b.driver}};
        if (!b.available) jb["reason"] = b.reason;
        if (b.cpu_levels) jb["isa_levels"] = {{"compiled", b.cpu_levels->compiled}, {"active", b.cpu_levels->active}};
        nlohmann::json algos = nlohmann::json::array();
        for (const BackendListing::Algo& a : b.algorithms) algos.push_back({{"id", a.id}, {"notes", a.notes}});
        jb["algorithms"] = algos;
        list.push_back(jb);
    }
    doc["backends"] = list;
    return doc;
}

std::string to_text(const ListReport& r) {
    std::string s;
    if (r.what == "recordings") {
        s += fmt::format("recording library: {} (set CONVTUNE_RECORDINGS_DIR for another){}\n", r.folder,
                         r.recordings.empty() ? ": empty" : "");
        for (const LibraryListing& l : r.recordings) {
            s += fmt::format("{}  (--replay {})\n", l.name, l.name);
            for (const LibraryListing::File& f : l.recordings) {
                s += fmt::format("  {}: {}\n", f.file, f.environment);
                for (const std::string& c : f.covers) s += fmt::format("    {}\n", c);
            }
            if (l.pytorch)
                s += fmt::format("  {}: PyTorch's own measurements (off and pytorch settings): {}\n", l.pytorch->folder,
                                 l.pytorch->covers);
        }
        return s;
    }
    for (const BackendListing& b : r.backends) {
        s += fmt::format("{} — {}{}\n", b.name, b.library,
                         b.available ? "" : fmt::format(" (unavailable: {})", b.reason));
        if (!b.device.empty()) s += fmt::format("  device: {}\n", b.device);
        if (b.cpu_levels) s += fmt::format("  {}\n", to_text(*b.cpu_levels));
        if (b.algorithms.empty()) s += "  (no algorithms)\n";
        for (const BackendListing::Algo& a : b.algorithms) s += fmt::format("  {:<40} {}\n", a.id, a.notes_text);
    }
    return s;
}

}  // namespace convtune::app
