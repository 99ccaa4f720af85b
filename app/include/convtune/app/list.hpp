// list: what this build offers: its backends (availability, identity, algorithms with their
// numerical notes, the CPU algorithms' instruction-set level), or the recording library behind
// `--replay NAME` and what each of its recordings covers.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "convtune/app/fields.hpp"
#include "convtune/app/report.hpp"

namespace convtune::app {

struct ListRequest {
    std::string what = "backends";  // backends or recordings
};

// ListRequest's field table (fields.hpp).
template <class V>
void visit_fields(ListRequest& r, V&& v) {
    v("what", r.what);
}

// The instruction-set levels the CPU algorithms are compiled for and the one they run at.
struct CpuLevels {
    std::vector<std::string> compiled;  // lowest first
    std::string active;
    std::string note;  // why active is not CONVTUNE_CPU_ISA's level, where it is not
};
CpuLevels cpu_levels();  // throws on a CONVTUNE_CPU_ISA that names no level
// "cpu algorithms run at x86-64-v4 (compiled for: baseline x86-64-v3 x86-64-v4; CONVTUNE_CPU_ISA
// picks a lower one)", plus the note where there is one (what list and demo print).
std::string to_text(const CpuLevels& l);

struct BackendListing {
    std::string name;
    bool available = false;
    std::string reason;  // why not, when unavailable
    std::string library, device, driver;
    std::optional<CpuLevels> cpu_levels;  // the cpu backend's
    struct Algo {
        std::string id;
        std::vector<std::string> notes;  // Notes::names()
        std::string notes_text;          // Notes::to_string()
    };
    std::vector<Algo> algorithms;
};

struct LibraryListing {
    std::string name;  // what --replay takes
    struct File {
        std::string file, environment;
        std::size_t problems = 0;
        std::vector<std::string> covers;  // sim::coverage
    };
    std::vector<File> recordings;
    // PyTorch's own measurements (the off and pytorch settings), when the name has them.
    struct PyTorch {
        std::string folder, covers;
        std::size_t files = 0;
    };
    std::optional<PyTorch> pytorch;
};

struct ListReport {
    std::string what;                      // backends or recordings
    std::vector<BackendListing> backends;  // what == backends: every backend compiled in
    std::string folder;                    // what == recordings: the library's folder
    std::vector<LibraryListing> recordings;
};

// Errors name the request's fields (an unknown `what`); a recording that cannot be read throws.
ListReport list(const ListRequest& r);
// list()'s backends; without `notes` the algorithms' notes stay empty, which saves cuDNN's note
// probes (an engine build on each of its small probe graphs per graph engine, about 0.2 s in all on
// an H100): what a caller that only needs names, availability and ids (convtune.torch.enable) asks.
std::vector<BackendListing> list_backends(bool notes);
// {"format", "backends": [{"name", "available", "library", "device", "driver", "reason" (when
//  unavailable), "isa_levels": {"compiled", "active"} (cpu), "algorithms": [{"id", "notes"}]}]}, or
// {"format", "folder", "recordings": [{"name", "recordings": [{"file", "environment", "problems",
//  "covers"}], "pytorch": {"folder", "files", "covers"} (when there)}]}
nlohmann::json to_json(const ListReport& r);
// What `convtune list` prints.
std::string to_text(const ListReport& r);

}  // namespace convtune::app
