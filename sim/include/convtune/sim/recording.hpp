// Recording: measured timings of every algorithm of a backend on a list of problems — what the
// replay backend needs to simulate that backend without running it.
//
// Only numbers are kept: per problem the backend's heuristic order, its native fallback and fixed
// default, and per algorithm whether it supports the problem (and why not), its workspace, the
// time of its first (cold) call and N timed samples after it. The file is JSON
// (format "convtune-recording", version 1; docs/simulation.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/backend.hpp"
#include "convtune/flags.hpp"
#include "convtune/tuning_db.hpp"

namespace convtune::sim {

// The ranking's named lists whose listings a recording keeps, together (ProblemRecord::listings):
// PyTorch's two sources, which the pytorch policy draws from. A replay's ranking answers them as
// its heuristic list (its fallback list is empty), so a search drawing from both sees what it
// saw live; one drawing from either alone sees both.
inline constexpr ListName kRecordedLists[] = {ListName::heuristic, ListName::fallback};

struct AlgorithmRecord {
    std::string id;
    bool supported = true;
    std::string reason;            // why not, when !supported
    Status::Code status = Status::Code::ok;  // failed / out_of_memory: every run of it fails so
    std::string message;           // the failure's message
    std::size_t workspace = 0;
    std::optional<double> first_ms;  // the first call of the algorithm on the problem (cold)
    std::vector<double> samples_ms;  // timed calls after it
    // The notes the algorithm reports for this problem (Algorithm::notes_for) where they are
    // fewer than its listed notes (cuDNN graph engines); nullopt = the listed notes.
    std::optional<Notes> notes;
    // The wall time of the algorithm's first support decision on the problem (Algorithm::supports;
    // on cuDNN's graph engines, building its execution plan, a runtime compile included), kept for
    // supported and unsupported ones alike; nullopt in recordings made before it was measured.
    std::optional<double> support_ms;
};

struct ProblemRecord {
    ConvProblem problem;
    std::vector<std::string> heuristic;  // ids that support it, best first (benchmark off's order)
    // The ids of `heuristic` the backend's heuristics do not suggest (Ranking::suggested; cuDNN:
    // engines no heuristics mode lists): the convtune policy's search keeps explore_slots for them.
    std::vector<std::string> unsuggested;
    // How many times the lists kRecordedLists hold each id of `heuristic` (Ranking::in_lists),
    // where it is not the default (1 when suggested, else 0): e.g. 2 for a cuDNN configuration
    // both mode A and the fallback list name.
    std::map<std::string, int> listings;
    std::string fallback, fixed;         // native_fallback / fixed_default ids ("" = none)
    std::vector<AlgorithmRecord> algorithms;  // the backend's fixed order
    double db_search_ms = 0;             // recordings built from a tuning database: its search time
    // The wall time the backend's ranking took to list the problem's algorithms (Ranking::next,
    // without the support decisions: on cuDNN, its heuristics queries); nullopt where not measured.
    std::optional<double> ranking_ms;
    // A merged recording (merge_recordings): the start-up and sequence factor of the recording this
    // problem came from, where they differ between the parts; nullopt = the recording's own.
    std::optional<double> startup_ms, sequence_factor;
    const AlgorithmRecord* find(std::string_view id) const;
};

struct AlgorithmInfo {
    std::string id;
    Notes notes;
};

struct Recording {
    Environment environment;  // environment_of(backend) where it was measured
    std::string source = "measured";  // or "tuning-db"
    int samples = 0;                  // samples per algorithm asked for
    std::vector<AlgorithmInfo> algorithms;  // the backend's fixed order
    std::vector<ProblemRecord> problems;
    // Process start-up: how much longer the first call of a fresh process took than the same
    // call warm (library loading, first kernel launches). A replayed scenario is a fresh process
    // and pays it once, at its first call.
    std::optional<double> startup_ms;
    // Execution in sequence: the time of the problems run one after another as a workload does
    // (the heuristic's pick of each), divided by the sum of their isolated sample medians.
    // Isolated samples run back to back on warm caches; a replay scales every execution call
    // (not the selector's timed samples, which are isolated live too) by this factor.
    std::optional<double> sequence_factor;
    // The flags whose search the first calls were measured in (RecordOptions::search_flags, as
    // FlagValues::to_string writes them); empty: only the heuristic picks' first calls are cold.
    std::string search_flags;
    // Whether each support decision's support_ms includes the plan build it defers (cuDNN's
    // runtime-compiled engines compile their kernel there): true for recordings made since the
    // recorder asks the workspace inside the timed decision. Without it, a replay charges a
    // PyTorch emulation none of the builds PyTorch makes in TF32 and fp16 (docs/simulation.md).
    bool support_includes_plan_builds = false;

    const ProblemRecord* find(const ConvProblem& p) const;
    std::string to_json() const;  // compact: one line per problem
    static Recording from_json(std::string_view text, const std::string& where);
    // A path ending in ".gz" is read and written gzip-compressed (the recording library ships so).
    static Recording load(const std::string& path);  // throws ParseError "<path>: ..."
    void save(const std::string& path) const;        // atomic (temporary file + rename)
};

struct RecordOptions {
    int samples = 5;
    // Stop sampling one algorithm on one problem once its calls (the cold one included) took
    // this long; when the cold call alone did, it doubles as the only sample.
    double max_ms_per_algorithm = 3000;
    uint64_t seed = 1;  // input data
    // First calls in a search's order. A kernel's first call in a process loads it (the CUDA
    // driver loads kernels lazily, at their first launch), and a search meets most kernels for the
    // first time; timing every algorithm of the first problem would load them all and hide that
    // cost from every later problem. So, after the heuristic picks' cold calls and before the
    // sweep, each problem in turn runs once the candidates a search under these flags times (the
    // eligible algorithms the heuristics suggest, in ranking order, up to benchmark_limit), and
    // those calls become their first_ms. nullopt: no such pass (only the picks' calls are cold).
    std::optional<FlagValues> search_flags;
    // Called after each (problem, algorithm): done, total, what.
    std::function<void(int64_t, int64_t, const std::string&)> progress;
};

// Runs every supported algorithm of `b` on every problem: one cold call, then up to
// options.samples timed calls, each on the backend's clock.
Recording record(const Backend& b, const std::vector<ConvProblem>& problems, const RecordOptions& options = {});

// A recording from a tuning database where that is all there is: per problem only the winner,
// with its median as the one sample. Benchmark off and on then run the same algorithm, so such
// a recording shows totals but cannot judge benchmark mode. Picks the section of `backend` with
// the most entries. Throws Error when there is none. Entries it cannot use (a key it cannot read,
// no algorithm, a median that is not a time in (0, 1e9) ms) are left out and, when `dropped` is
// given, each is described there ("entry '<key>': <why>"). `local`, when given, is this build's
// backend of that name (the caller finds it: the simulator does not walk the registry): its
// algorithms' notes and, where they support the problem, workspace sizes go into the recording.
Recording recording_from_db(const std::vector<DbSection>& sections, const std::string& backend,
                            std::vector<std::string>* dropped = nullptr, const Backend* local = nullptr);

// One recording from several of the same backend, device and source (a library's files): the
// algorithms united (in first-seen order), the problems concatenated (a problem in two parts is
// an error), the start-up and sequence factor kept per problem where the parts differ. Throws
// ParseError naming `where`.
Recording merge_recordings(std::vector<Recording> parts, const std::string& where);

// The recording library: data/recordings/<name>/*.json, installed with convtune. Its folder is
// $CONVTUNE_RECORDINGS_DIR (an installed Python package sets it to its own copy), else
// share/convtune/recordings beside the running program's bin/ when it exists (an installed CLI),
// else the folder configured at build time (the source tree's) when it exists, else the one of
// the configured install prefix.
std::string recordings_dir();
struct LibraryEntry {
    std::string name;
    std::vector<std::string> files;  // recordings: paths, sorted
    // The folder of PyTorch's own measurements on that GPU (<name>/pytorch/, measured.hpp's
    // PyTorchLibrary), when it holds a .json or .json.gz file; empty otherwise.
    std::string pytorch_dir;
};
// The library's names (its folders holding at least one recording or a pytorch/ folder of
// measurements), sorted; empty when the folder does not exist.
std::vector<LibraryEntry> recording_library(const std::string& dir = "");
// The .json and .json.gz files of a folder, sorted; none where it does not exist.
std::vector<std::string> json_files(const std::filesystem::path& dir);
// The entry named `name`, or nullopt.
std::optional<LibraryEntry> library_entry(const std::string& name, const std::string& dir = "");
// The entry of the GPU a device name describes: the one whose name is a word of `device`, case
// ignored ("h100" for "NVIDIA H100 80GB HBM3"); nullopt when none is, or more than one is.
std::optional<LibraryEntry> library_for_device(std::string_view device, const std::string& dir = "");
// What a recording covers, one line per direction, type and layout: "fwd f16 nhwc, batch 32: 23 problems".
std::vector<std::string> coverage(const Recording& r);

// A data file's text: read_file_bounded, then decompressed when its name ends in .gz (at most
// kMaxRecordingBytes once decompressed). Throws Error / ParseError naming the file.
std::string read_data_file(const std::string& path, std::uint64_t max_bytes, std::string_view what);

// Whether a --replay value names a file (it has a '/', ends in .json or .json.gz, or exists)
// rather than a library name.
bool names_recording_file(const std::string& value);

// A --replay value: an existing file is loaded (Recording::load); anything else is a library
// name, whose recordings are merged (an entry with PyTorch's measurements only is refused here:
// it has no recording to replay). Throws InvalidRequest("replay", ...) for a missing file (a
// value with '/' or ending in .json) or an unknown name, listing the library's names.
Recording load_replay(const std::string& file_or_name, const std::string& dir = "");

}  // namespace convtune::sim
