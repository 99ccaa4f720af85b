#include "convtune/sim/recording.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <type_traits>
#include <utility>
#include <zlib.h>

#include "convtune/cache_key.hpp"
#include "convtune/device_tensors.hpp"
#include "convtune/error.hpp"
#include "convtune/file_io.hpp"
#include "convtune/host_data.hpp"
#include "convtune/policy.hpp"
#include "convtune/selector.hpp"
#include "convtune/stats.hpp"

namespace convtune::sim {

using json = nlohmann::json;

namespace {

constexpr const char* kFormat = "convtune-recording";
constexpr int kVersion = 1;

Notes parse_notes(const json& names, const std::string& where) {
    Notes n;
    if (!names.is_array()) throw ParseError(where + ": \"notes\" must be an array");
    for (const json& v : names) {
        if (!v.is_string()) throw ParseError(where + ": notes must be strings");
        bool found = false;
        for (uint32_t bit = 0; bit < 32 && !found; ++bit) {
            const Notes one = Notes(static_cast<Note>(1u << bit));
            if (one.to_string() == v.get<std::string>()) n = n | one, found = true;
        }
        if (!found) throw ParseError(where + ": unknown note " + quote_input(v.get<std::string>()));
    }
    return n;
}

Status::Code parse_code(const std::string& s, const std::string& where) {
    if (s == "ok") return Status::Code::ok;
    if (s == "failed") return Status::Code::failed;
    if (s == "out_of_memory") return Status::Code::out_of_memory;
    if (s == "unsupported") return Status::Code::unsupported;
    throw ParseError(where + ": unknown status " + quote_input(s));
}

template <class T>
T get(const json& j, const char* key, const std::string& where) {
    if (!j.contains(key)) throw ParseError(where + ": missing \"" + key + "\"");
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        // nlohmann converts a float to an integer with a plain cast (undefined behaviour out of
        // range: found by fuzz_recording) and narrows wide integers: only integers in T's range.
        const json& v = j.at(key);
        const bool in_range = v.is_number_unsigned()  ? std::in_range<T>(v.get<uint64_t>())
                              : v.is_number_integer() ? std::in_range<T>(v.get<int64_t>())
                                                      : false;
        if (!in_range)
            throw ParseError(where + ": \"" + key + "\" must be an integer in [" +
                             std::to_string(std::numeric_limits<T>::min()) + ", " +
                             std::to_string(std::numeric_limits<T>::max()) + "]");
    }
    try {
        return j.at(key).get<T>();
    } catch (const json::exception&) {
        throw ParseError(where + ": \"" + key + "\" has the wrong type");
    }
}

// Every recorded time (samples, first calls, search times) is a finite number of milliseconds in
// [0, kMaxRecordedMs): a replay's totals stay finite whatever the workload and iterations.
constexpr double kMaxRecordedMs = 1e9;

double checked_time(double x, const char* key, const std::string& where) {
    if (!(x >= 0))
        throw ParseError(where + ": \"" + key + "\" has a negative or non-finite time (got " + json(x).dump() + ")");
    if (!(x < kMaxRecordedMs))
        throw ParseError(where + ": \"" + key + "\" has a time of 1e9 ms or more (got " + json(x).dump() + ")");
    return x;
}

std::vector<double> get_times(const json& j, const char* key, const std::string& where) {
    std::vector<double> v = j.contains(key) ? get<std::vector<double>>(j, key, where) : std::vector<double>{};
    for (double x : v) checked_time(x, key, where);
    return v;
}

}  // namespace

const AlgorithmRecord* ProblemRecord::find(std::string_view id) const {
    for (const AlgorithmRecord& a : algorithms)
        if (a.id == id) return &a;
    return nullptr;
}

const ProblemRecord* Recording::find(const ConvProblem& p) const {
    for (const ProblemRecord& r : problems)
        if (r.problem == p) return &r;
    return nullptr;
}

std::string Recording::to_json() const {
    json head;
    head["format"] = kFormat;
    head["version"] = kVersion;
    head["source"] = source;
    head["samples"] = samples;
    head["environment"] = {{"convtune", environment.convtune},
                           {"backend", environment.backend},
                           {"library", environment.library},
                           {"device", environment.device},
                           {"driver", environment.driver}};
    json algos = json::array();
    for (const AlgorithmInfo& a : algorithms) algos.push_back({{"id", a.id}, {"notes", a.notes.names()}});
    head["algorithms"] = algos;
    if (startup_ms) head["startup_ms"] = *startup_ms;
    if (sequence_factor) head["sequence_factor"] = *sequence_factor;
    if (!search_flags.empty()) head["search_flags"] = search_flags;
    if (support_includes_plan_builds) head["support_includes_plan_builds"] = true;
    std::string out = head.dump();
    out.pop_back();  // the closing brace: problems follow, one per line
    out += ",\"problems\":[";
    for (std::size_t i = 0; i < problems.size(); ++i) {
        const ProblemRecord& r = problems[i];
        json jp;
        jp["problem"] = r.problem.to_string();
        jp["heuristic"] = r.heuristic;
        if (!r.unsuggested.empty()) jp["unsuggested"] = r.unsuggested;
        if (!r.listings.empty()) jp["listings"] = r.listings;
        if (!r.fallback.empty()) jp["fallback"] = r.fallback;
        if (!r.fixed.empty()) jp["fixed"] = r.fixed;
        if (r.db_search_ms > 0) jp["db_search_ms"] = r.db_search_ms;
        if (r.ranking_ms) jp["ranking_ms"] = *r.ranking_ms;
        if (r.startup_ms) jp["startup_ms"] = *r.startup_ms;
        if (r.sequence_factor) jp["sequence_factor"] = *r.sequence_factor;
        json ja = json::object();
        for (const AlgorithmRecord& a : r.algorithms) {
            json x;
            if (a.support_ms) x["support_ms"] = *a.support_ms;
            if (!a.supported) {
                x["unsupported"] = a.reason;
            } else {
                if (a.workspace) x["workspace"] = a.workspace;
                if (a.status != Status::Code::ok) {
                    x["status"] = std::string(Status{a.status, ""}.code_name());
                    x["message"] = a.message;
                }
                if (a.first_ms) x["first_ms"] = *a.first_ms;
                x["samples_ms"] = a.samples_ms;
                if (a.notes) x["notes"] = a.notes->names();
            }
            ja[a.id] = x;
        }
        jp["algorithms"] = ja;
        out += (i ? ",\n" : "\n") + jp.dump();
    }
    out += "\n]}\n";
    return out;
}

namespace {
Recording parse_recording(std::string_view text, const std::string& where);
}

Recording Recording::from_json(std::string_view text, const std::string& where) {
    try {
        return parse_recording(text, where);
    } catch (const json::exception& e) {
        // A field of the wrong JSON type (a number where a string belongs, ...).
        throw ParseError(where + ": malformed recording: " + e.what());
    }
}

namespace {
Recording parse_recording(std::string_view text, const std::string& where) {
    json doc;
    try {
        doc = json::parse(text);
    } catch (const json::exception& e) {
        throw ParseError(where + ": not JSON: " + e.what());
    }
    if (!doc.is_object() || doc.value("format", "") != kFormat)
        throw ParseError(where + ": not a convtune recording (\"format\" is not \"" + kFormat + "\")");
    if (get<int>(doc, "version", where) != kVersion)
        throw ParseError(where + ": recording version " + std::to_string(get<int>(doc, "version", where)) +
                         " is not supported (expected 1)");
    Recording r;
    r.source = get<std::string>(doc, "source", where);
    r.samples = get<int>(doc, "samples", where);
    if (r.samples < 0) throw ParseError(where + ": \"samples\" must be >= 0 (got " + std::to_string(r.samples) + ")");
    const json env = doc.contains("environment") ? doc["environment"] : json();
    if (!env.is_object()) throw ParseError(where + ": missing \"environment\"");
    r.environment = {get<std::string>(env, "convtune", where), get<std::string>(env, "backend", where),
                     get<std::string>(env, "library", where), get<std::string>(env, "device", where),
                     get<std::string>(env, "driver", where)};
    if (r.environment.backend.empty()) throw ParseError(where + ": empty backend name");
    if (doc.contains("support_includes_plan_builds"))
        r.support_includes_plan_builds = get<bool>(doc, "support_includes_plan_builds", where);
    if (doc.contains("startup_ms")) {
        r.startup_ms = get<double>(doc, "startup_ms", where);
        if (!(*r.startup_ms >= 0 && *r.startup_ms < 1e9))
            throw ParseError(where + ": \"startup_ms\" must be in [0, 1e9)");
    }
    if (doc.contains("sequence_factor")) {
        r.sequence_factor = get<double>(doc, "sequence_factor", where);
        if (!(*r.sequence_factor > 0 && *r.sequence_factor < 100))
            throw ParseError(where + ": \"sequence_factor\" must be in (0, 100)");
    }
    if (doc.contains("search_flags")) {
        r.search_flags = get<std::string>(doc, "search_flags", where);
        try {
            parse_flags(r.search_flags);
        } catch (const Error& e) {
            throw ParseError(where + ": \"search_flags\": " + e.what());
        }
    }
    const json algos = doc.contains("algorithms") ? doc["algorithms"] : json();
    if (!algos.is_array()) throw ParseError(where + ": missing \"algorithms\"");
    auto known = [&](const std::string& id) {
        return std::any_of(r.algorithms.begin(), r.algorithms.end(),
                           [&](const AlgorithmInfo& a) { return a.id == id; });
    };
    for (const json& a : algos) {
        if (!a.is_object()) throw ParseError(where + ": \"algorithms\": each entry must be an object with an \"id\"");
        const std::string id = get<std::string>(a, "id", where);
        if (id.empty()) throw ParseError(where + ": \"algorithms\": empty id");
        if (known(id)) throw ParseError(where + ": \"algorithms\": '" + id + "' listed twice");
        r.algorithms.push_back({id, parse_notes(a.contains("notes") ? a["notes"] : json::array(), where)});
    }
    const json probs = doc.contains("problems") ? doc["problems"] : json();
    if (!probs.is_array()) throw ParseError(where + ": missing \"problems\"");
    for (std::size_t i = 0; i < probs.size(); ++i) {
        const json& jp = probs[i];
        const std::string w = where + ": problem " + std::to_string(i + 1);
        ProblemRecord pr;
        try {
            pr.problem = ConvProblem::parse(get<std::string>(jp, "problem", w));
        } catch (const ParseError&) {
            throw;
        } catch (const Error& e) {
            throw ParseError(w + ": " + e.what());
        }
        pr.heuristic = get<std::vector<std::string>>(jp, "heuristic", w);
        if (jp.contains("unsuggested")) pr.unsuggested = get<std::vector<std::string>>(jp, "unsuggested", w);
        if (jp.contains("listings")) pr.listings = get<std::map<std::string, int>>(jp, "listings", w);
        if (jp.contains("fallback")) pr.fallback = get<std::string>(jp, "fallback", w);
        if (jp.contains("fixed")) pr.fixed = get<std::string>(jp, "fixed", w);
        if (jp.contains("db_search_ms"))
            pr.db_search_ms = checked_time(get<double>(jp, "db_search_ms", w), "db_search_ms", w);
        if (jp.contains("startup_ms")) pr.startup_ms = checked_time(get<double>(jp, "startup_ms", w), "startup_ms", w);
        if (jp.contains("ranking_ms")) pr.ranking_ms = checked_time(get<double>(jp, "ranking_ms", w), "ranking_ms", w);
        if (jp.contains("sequence_factor")) {
            pr.sequence_factor = get<double>(jp, "sequence_factor", w);
            if (!(*pr.sequence_factor > 0 && *pr.sequence_factor < 100))
                throw ParseError(w + ": \"sequence_factor\" must be in (0, 100)");
        }
        if (!jp.contains("algorithms") || !jp["algorithms"].is_object())
            throw ParseError(w + ": missing \"algorithms\"");
        // Keep the recording's fixed order.
        for (const AlgorithmInfo& info : r.algorithms) {
            if (!jp["algorithms"].contains(info.id)) continue;
            const json& x = jp["algorithms"][info.id];
            const std::string wa = w + ", " + info.id;
            AlgorithmRecord a;
            a.id = info.id;
            if (x.contains("support_ms"))
                a.support_ms = checked_time(get<double>(x, "support_ms", wa), "support_ms", wa);
            if (x.contains("unsupported")) {
                a.supported = false;
                a.reason = get<std::string>(x, "unsupported", wa);
            } else {
                if (x.contains("workspace")) a.workspace = get<std::size_t>(x, "workspace", wa);
                a.status = parse_code(x.value("status", "ok"), wa);
                a.message = x.value("message", "");
                if (x.contains("first_ms")) {
                    a.first_ms = checked_time(get<double>(x, "first_ms", wa), "first_ms", wa);
                }
                a.samples_ms = get_times(x, "samples_ms", wa);
                if (x.contains("notes")) a.notes = parse_notes(x["notes"], wa);
                if (a.status == Status::Code::ok && a.samples_ms.empty()) throw ParseError(wa + ": no samples");
            }
            pr.algorithms.push_back(std::move(a));
        }
        for (auto it = jp["algorithms"].begin(); it != jp["algorithms"].end(); ++it)
            if (!known(it.key())) throw ParseError(w + ": algorithm '" + it.key() + "' is not in \"algorithms\"");
        // A replay runs the heuristic's order (each a supported record of this problem), the native
        // fallback and the fixed default (each an algorithm of the recording).
        if (pr.heuristic.empty())
            throw ParseError(w + ": \"heuristic\" is empty (it lists the supporting algorithms, best first)");
        for (const std::string& id : pr.heuristic) {
            const AlgorithmRecord* a = pr.find(id);
            if (!a || !a->supported)
                throw ParseError(w + ": heuristic lists '" + id + "', which has no supported record");
        }
        for (const auto& [key, id] :
             {std::pair<const char*, const std::string&>{"fallback", pr.fallback}, {"fixed", pr.fixed}})
            if (!id.empty() && !known(id))
                throw ParseError(w + ": \"" + key + "\" names '" + id + "', which is not in \"algorithms\"");
        for (const auto& [id, n] : pr.listings) {
            if (std::find(pr.heuristic.begin(), pr.heuristic.end(), id) == pr.heuristic.end())
                throw ParseError(w + ": listings names '" + id + "', which is not in \"heuristic\"");
            if (n < 0 || n > 16)
                throw ParseError(w + ": listings of '" + id + "' must be in [0, 16] (got " + std::to_string(n) + ")");
        }
        for (const std::string& id : pr.unsuggested)
            if (std::find(pr.heuristic.begin(), pr.heuristic.end(), id) == pr.heuristic.end())
                throw ParseError(w + ": unsuggested lists '" + id + "', which is not in \"heuristic\"");
        r.problems.push_back(std::move(pr));
    }
    return r;
}
}  // namespace

namespace {

bool gzipped(const std::string& path) { return path.ends_with(".gz"); }

// A gzip file's content, at most kMaxRecordingBytes of it (zlib's inflate, gzip header).
std::string gunzip(const std::string& bytes, const std::string& path) {
    z_stream z{};
    if (inflateInit2(&z, 15 + 16) != Z_OK) throw ParseError(path + ": cannot start gzip decompression");
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    z.avail_in = static_cast<uInt>(bytes.size());
    std::string out;
    char buf[1 << 16];
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
        z.next_out = reinterpret_cast<Bytef*>(buf);
        z.avail_out = sizeof buf;
        rc = inflate(&z, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END) {
            const std::string why = z.msg ? z.msg : "truncated or not gzip data";
            inflateEnd(&z);
            throw ParseError(path + ": not a readable gzip file (" + why + ")");
        }
        out.append(buf, sizeof buf - z.avail_out);
        if (out.size() > kMaxRecordingBytes) {
            inflateEnd(&z);
            throw ParseError(path + ": more than " + std::to_string(kMaxRecordingBytes >> 20) +
                             " MiB once decompressed");
        }
        if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
            inflateEnd(&z);
            throw ParseError(path + ": not a readable gzip file (truncated)");
        }
    }
    inflateEnd(&z);
    return out;
}

std::string gzip(std::string_view text) {
    z_stream z{};
    if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK)
        throw Error("gzip: cannot start compression");
    std::string out(deflateBound(&z, static_cast<uLong>(text.size())), '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
    z.avail_in = static_cast<uInt>(text.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    const int rc = deflate(&z, Z_FINISH);
    out.resize(out.size() - z.avail_out);
    deflateEnd(&z);
    if (rc != Z_STREAM_END) throw Error("gzip: compression failed");
    return out;
}

}  // namespace

std::string read_data_file(const std::string& path, std::uint64_t max_bytes, std::string_view what) {
    const std::string text = read_file_bounded(path, max_bytes, what);
    return gzipped(path) ? gunzip(text, path) : text;
}

Recording Recording::load(const std::string& path) {
    std::string text;
    try {
        text = read_file_bounded(path, kMaxRecordingBytes, "recording");
    } catch (const Error& e) {
        throw InvalidRequest("replay", e.what());
    }
    if (gzipped(path)) text = gunzip(text, path);
    return from_json(text, path);
}

void Recording::save(const std::string& path) const {
    write_file_atomic(path, gzipped(path) ? gzip(to_json()) : to_json());
}

Recording merge_recordings(std::vector<Recording> parts, const std::string& where) {
    if (parts.empty()) throw ParseError(where + ": no recordings to merge");
    if (parts.size() == 1) return std::move(parts.front());
    Recording out;
    out.environment = parts.front().environment;
    out.source = parts.front().source;
    std::set<std::string> seen;
    const bool same_startup = std::all_of(parts.begin(), parts.end(),
                                          [&](const Recording& r) { return r.startup_ms == parts.front().startup_ms; });
    const bool same_factor = std::all_of(parts.begin(), parts.end(), [&](const Recording& r) {
        return r.sequence_factor == parts.front().sequence_factor;
    });
    if (same_startup) out.startup_ms = parts.front().startup_ms;
    if (same_factor) out.sequence_factor = parts.front().sequence_factor;
    out.support_includes_plan_builds =
        std::all_of(parts.begin(), parts.end(), [](const Recording& r) { return r.support_includes_plan_builds; });
    for (Recording& part : parts) {
        if (part.environment.backend != out.environment.backend || part.environment.device != out.environment.device)
            throw ParseError(where + ": recordings of different backends or devices cannot be merged ('" +
                             out.environment.describe() + "' and '" + part.environment.describe() + "')");
        if (part.source != out.source)
            throw ParseError(where + ": a measured recording cannot be merged with one from a tuning database");
        out.samples = std::max(out.samples, part.samples);
        for (const AlgorithmInfo& a : part.algorithms)
            if (std::none_of(out.algorithms.begin(), out.algorithms.end(),
                             [&](const AlgorithmInfo& b) { return b.id == a.id; }))
                out.algorithms.push_back(a);
        for (ProblemRecord& pr : part.problems) {
            if (!seen.insert(pr.problem.to_string()).second)
                throw ParseError(where + ": problem " + pr.problem.to_string() + " is recorded twice");
            if (!same_startup && !pr.startup_ms) pr.startup_ms = part.startup_ms;
            if (!same_factor && !pr.sequence_factor) pr.sequence_factor = part.sequence_factor;
            out.problems.push_back(std::move(pr));
        }
    }
    return out;
}

#ifndef CONVTUNE_DEFAULT_RECORDINGS_DIR
#define CONVTUNE_DEFAULT_RECORDINGS_DIR ""
#endif
#ifndef CONVTUNE_INSTALLED_RECORDINGS_DIR
#define CONVTUNE_INSTALLED_RECORDINGS_DIR ""
#endif

std::string recordings_dir() {
    if (const char* e = std::getenv("CONVTUNE_RECORDINGS_DIR"); e && *e) return e;
    std::error_code ec;
    // An installed program: its own copy, next to its bin/, whatever prefix it was installed under.
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const std::filesystem::path beside = exe.parent_path().parent_path() / "share" / "convtune" / "recordings";
        if (std::filesystem::is_directory(beside, ec)) return beside.string();
    }
    if (std::filesystem::is_directory(CONVTUNE_DEFAULT_RECORDINGS_DIR, ec)) return CONVTUNE_DEFAULT_RECORDINGS_DIR;
    return CONVTUNE_INSTALLED_RECORDINGS_DIR;
}

std::vector<std::string> json_files(const std::filesystem::path& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(dir, ec))
        if (const std::string n = f.path().filename().string();
            f.is_regular_file(ec) && (n.ends_with(".json") || n.ends_with(".json.gz")))
            out.push_back(f.path().string());
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<LibraryEntry> recording_library(const std::string& dir) {
    const std::string root = dir.empty() ? recordings_dir() : dir;
    std::vector<LibraryEntry> out;
    std::error_code ec;
    if (root.empty() || !std::filesystem::is_directory(root, ec)) return out;
    for (const auto& d : std::filesystem::directory_iterator(root, ec)) {
        if (!d.is_directory(ec)) continue;
        LibraryEntry e{d.path().filename().string(), json_files(d.path()), {}};
        if (!json_files(d.path() / "pytorch").empty()) e.pytorch_dir = (d.path() / "pytorch").string();
        if (!e.files.empty() || !e.pytorch_dir.empty()) out.push_back(std::move(e));
    }
    std::sort(out.begin(), out.end(), [](const LibraryEntry& a, const LibraryEntry& b) { return a.name < b.name; });
    return out;
}

std::optional<LibraryEntry> library_entry(const std::string& name, const std::string& dir) {
    for (LibraryEntry& e : recording_library(dir))
        if (e.name == name) return std::move(e);
    return std::nullopt;
}

std::optional<LibraryEntry> library_for_device(std::string_view device, const std::string& dir) {
    const auto lower = [](unsigned char c) { return static_cast<char>(std::tolower(c)); };
    std::set<std::string> words;  // the device name's alphanumeric runs, in lower case
    std::string w;
    for (char c : std::string(device) + ' ') {
        if (std::isalnum(static_cast<unsigned char>(c))) {
            w += lower(static_cast<unsigned char>(c));
        } else if (!w.empty()) {
            words.insert(std::move(w));
            w.clear();
        }
    }
    std::optional<LibraryEntry> found;
    for (LibraryEntry& e : recording_library(dir)) {
        std::string name;
        for (char c : e.name) name += lower(static_cast<unsigned char>(c));
        if (!words.contains(name)) continue;
        if (found) return std::nullopt;  // two names fit: none is chosen
        found = std::move(e);
    }
    return found;
}

std::vector<std::string> coverage(const Recording& r) {
    std::map<std::string, std::pair<std::set<int64_t>, int>> groups;  // "fwd f16 nhwc" -> (batches, problems)
    for (const ProblemRecord& pr : r.problems) {
        const ConvProblem& p = pr.problem;
        auto& g = groups[std::string(to_string(p.direction)) + " " + std::string(to_string(p.dtype)) + " " +
                         layout_name(p.layout, 2)];
        g.first.insert(p.n);
        ++g.second;
    }
    std::vector<std::string> out;
    for (const auto& [k, g] : groups) {
        std::string b;
        for (int64_t n : g.first) {
            if (!b.empty()) b += ',';
            b += std::to_string(n);
        }
        out.push_back(k + ", batch " + b + ": " + std::to_string(g.second) + " problems");
    }
    return out;
}

bool names_recording_file(const std::string& value) {
    std::error_code ec;
    return value.find('/') != std::string::npos || value.ends_with(".json") || value.ends_with(".json.gz") ||
           std::filesystem::exists(value, ec);
}

Recording load_replay(const std::string& value, const std::string& dir) {
    if (names_recording_file(value)) return Recording::load(value);
    const std::vector<LibraryEntry> lib = recording_library(dir);
    for (const LibraryEntry& e : lib) {
        if (e.name != value) continue;
        if (e.files.empty())
            throw InvalidRequest("replay",
                                 quote_input(value) + " holds PyTorch's measurements only (" + e.pytorch_dir +
                                     "), no recording of convtune's algorithms: its off and pytorch settings can be "
                                     "simulated, the others need a recording");
        std::vector<Recording> parts;
        for (const std::string& f : e.files) parts.push_back(Recording::load(f));
        return merge_recordings(std::move(parts), "recording library '" + value + "'");
    }
    std::string names;
    for (const LibraryEntry& e : lib) {
        if (!names.empty()) names += ", ";
        names += e.name;
    }
    const std::string root = dir.empty() ? recordings_dir() : dir;
    throw InvalidRequest("replay", quote_input(value) +
                                       " is neither a recording file nor a name in the recording library (" +
                                       (names.empty() ? "which is empty or missing: " + root : "names: " + names) +
                                       "; `convtune list recordings` shows them)");
}

namespace {

// Tensors of one problem on the backend, filled from `seed`.
std::unique_ptr<DeviceTensors> tensors_on(const Backend& b, const ConvProblem& p, uint64_t seed) {
    auto t = std::make_unique<DeviceTensors>(b, p, seed);
    t->require("on backend " + std::string(b.name()));
    return t;
}

// The first algorithm of p's heuristic order with tensors and workspace ready; run() times one
// call of it (nullopt when it fails).
// One algorithm (the heuristic's pick when `algorithm` is null) run on its own tensors and
// workspace, on the backend's clock.
struct OneAlgorithm {
    const Backend& b;
    const ConvProblem& p;
    const Algorithm* a = nullptr;
    std::unique_ptr<DeviceTensors> t;
    DeviceBuffer ws;
    std::size_t wsb = 0;

    OneAlgorithm(const Backend& backend, const ConvProblem& problem, uint64_t seed,
                 const Algorithm* algorithm = nullptr)
        : b(backend), p(problem) {
        if (!algorithm) {
            const auto order = b.heuristic_order(p);
            if (order.empty()) return;
            algorithm = order.front();
        }
        t = tensors_on(b, p, seed);
        wsb = algorithm->workspace_size(p);
        ws = wsb ? b.allocate(wsb) : DeviceBuffer{};
        if (!wsb || ws) a = algorithm;
    }
    std::optional<double> run() const {
        if (!a) return std::nullopt;
        Status st;
        const double ms = b.time_ms([&] { st = a->run(p, t->views(), {ws.data(), wsb}); });
        return st.ok() ? std::optional<double>(ms) : std::nullopt;
    }
};

// The candidates a search under `f` times on p, in its order (RecordOptions::search_flags): the
// supporting (`supports`), eligible algorithms of the lists its policy draws from
// (SelectionPolicy::draws_from; of `all`, those the backend's heuristics suggest), up to
// f.benchmark_limit.
template <class Supports>
std::vector<const Algorithm*> search_candidates(const Backend& b, const ConvProblem& p, const FlagValues& f,
                                                Supports&& supports) {
    std::vector<const Algorithm*> out;
    const std::size_t limit = f.benchmark_limit > 0 ? static_cast<std::size_t>(f.benchmark_limit) : SIZE_MAX;
    const std::span<const ListName> from = f.policy->draws_from();
    const bool everything = std::find(from.begin(), from.end(), ListName::all) != from.end();
    const auto ranking = b.ranking(p);
    while (out.size() < limit) {
        const Algorithm* a = ranking->next();
        if (!a) break;
        const bool seen = everything ? ranking->suggested(*a) : ranking->in_lists(*a, from) > 0;
        if (seen && supports(a) && flag_filter_reason(a->notes_for(p), p, f).empty()) out.push_back(a);
    }
    return out;
}

// The first call of the process (the heuristic's pick of the first problem) against the same
// call warm; nullopt when that cannot run.
std::optional<double> measure_startup(const Backend& b, const ConvProblem& p, uint64_t seed) {
    const OneAlgorithm pick(b, p, seed);
    const auto cold = pick.run();
    if (!cold) return std::nullopt;
    std::vector<double> warm;
    for (int i = 0; i < 5; ++i) {
        const auto ms = pick.run();
        if (!ms) return std::nullopt;
        warm.push_back(*ms);
    }
    return std::max(0.0, *cold - median(warm));
}

// Runs every recorded problem's heuristic pick one after another (one warm-up pass, then five
// timed passes) and divides a pass's median time by the sum of those picks' isolated sample
// medians. nullopt when the problems' tensors together would exceed 2 GiB or a pick cannot run.
std::optional<double> measure_sequence_factor(const Backend& b, const Recording& r, uint64_t seed) {
    struct Step {
        const Algorithm* a;
        const ConvProblem* p;
        std::unique_ptr<DeviceTensors> t;
        DeviceBuffer ws;
        std::size_t wsb;
    };
    std::vector<Step> steps;
    std::size_t bytes = 0;
    double isolated = 0;
    for (const ProblemRecord& pr : r.problems) {
        if (pr.heuristic.empty()) continue;
        const AlgorithmRecord* rec = pr.find(pr.heuristic.front());
        const Algorithm* a = b.find(pr.heuristic.front());
        if (!a || !rec || rec->samples_ms.empty() || rec->status != Status::Code::ok) return std::nullopt;
        const std::size_t es = size_of(pr.problem.dtype);
        bytes +=
            static_cast<std::size_t>(pr.problem.x_elements() + pr.problem.w_elements() + pr.problem.y_elements()) * es +
            rec->workspace;
        if (bytes > (std::size_t{1} << 31)) return std::nullopt;
        isolated += median(rec->samples_ms);
        steps.push_back({a, &pr.problem, nullptr, {}, rec->workspace});
    }
    if (steps.empty() || isolated <= 0) return std::nullopt;
    for (Step& s : steps) {
        s.t = tensors_on(b, *s.p, seed);
        s.ws = s.wsb ? b.allocate(s.wsb) : DeviceBuffer{};
        if (s.wsb && !s.ws) return std::nullopt;
    }
    std::vector<double> passes;
    for (int pass = 0; pass < 6; ++pass) {
        double total = 0;
        for (Step& s : steps) {
            Status st;
            total += b.time_ms([&] { st = s.a->run(*s.p, s.t->views(), {s.ws.data(), s.wsb}); });
            if (!st.ok()) return std::nullopt;
        }
        if (pass > 0) passes.push_back(total);
    }
    return median(passes) / isolated;
}

}  // namespace

Recording record(const Backend& b, const std::vector<ConvProblem>& problems, const RecordOptions& o) {
    require_available(b);
    Recording r;
    r.environment = environment_of(b);
    r.samples = o.samples;
    r.support_includes_plan_builds = true;  // decide() asks the workspace inside the timed decision
    for (const Algorithm* a : b.algorithms()) r.algorithms.push_back({std::string(a->id()), a->notes()});
    const int64_t total = static_cast<int64_t>(problems.size() * b.algorithms().size());
    int64_t done = 0;
    if (!problems.empty()) r.startup_ms = measure_startup(b, problems.front(), o.seed);
    // Cold first calls: every problem's heuristic pick once, in the given order, before any
    // other algorithm runs. A process that runs only heuristic picks (benchmark off) loads each
    // pick's kernels on its first call; timing every algorithm first would load them and hide
    // that cost, so these become the picks' first_ms.
    std::map<std::string, double> cold_first;
    for (const ConvProblem& p : problems)
        if (!cold_first.count(p.to_string()))
            if (const auto ms = OneAlgorithm(b, p, o.seed).run()) cold_first[p.to_string()] = *ms;
    // Then the first calls of each problem's search, in the search's order (RecordOptions).
    std::map<std::pair<std::string, std::string>, double> search_first;  // (problem, algorithm) -> ms
    // Each algorithm's first support decision on a problem, timed where it is made (that search
    // pass, the ranking's loop below or, for those neither reaches, the sweep): later ones are
    // answered from the backend's cache.
    // decide(p, ps, a): a's support on p (ps = p.to_string()) and the time its first decision took.
    std::map<std::string, std::map<const Algorithm*, std::pair<Support, double>>> supports;  // problem ->
    auto decide = [&](const ConvProblem& p, const std::string& ps,
                      const Algorithm* a) -> const std::pair<Support, double>& {
        auto& support = supports[ps];
        auto it = support.find(a);
        if (it == support.end()) {
            // Deciding support includes building what the first call needs: asking the workspace
            // builds a plan the backend deferred (cuDNN's runtime-compiled engines compile their
            // kernel there), which PyTorch pays for every configuration its lists name, timed
            // or not. Left out, that compile was charged nowhere (the sweep asks the workspace
            // before its timed calls).
            const auto t0 = std::chrono::steady_clock::now();
            Support s = a->supports(p);
            if (s) a->workspace_size(p);
            it = support.emplace(a, std::pair{std::move(s), ms_since(t0)}).first;
        }
        return it->second;
    };
    if (o.search_flags) {
        r.search_flags = o.search_flags->to_string();
        std::set<std::string> searched;
        for (const ConvProblem& p : problems) {
            const std::string ps = p.to_string();
            if (!searched.insert(ps).second) continue;
            for (const Algorithm* a : search_candidates(
                     b, p, *o.search_flags, [&](const Algorithm* c) { return bool(decide(p, ps, c).first); }))
                if (const auto ms = OneAlgorithm(b, p, o.seed, a).run()) search_first[{ps, std::string(a->id())}] = *ms;
        }
    }
    for (const ConvProblem& p : problems) {
        const std::string ps = p.to_string();
        ProblemRecord pr;
        pr.problem = p;
        // The supporting algorithms in ranking order (heuristic_order), and which of them the
        // heuristics do not suggest. The ranking's own time (heuristics queries) is kept apart from
        // the support decisions.
        const auto ranking = b.ranking(p);
        double ranking_ms = 0;
        for (;;) {
            const auto t0 = std::chrono::steady_clock::now();
            const Algorithm* a = ranking->next();
            ranking_ms += ms_since(t0);
            if (!a) break;
            if (!decide(p, ps, a).first) continue;
            pr.heuristic.push_back(std::string(a->id()));
            if (!ranking->suggested(*a)) pr.unsuggested.push_back(std::string(a->id()));
        }
        // The listings are known once the ranking has ended.
        for (const std::string& id : pr.heuristic) {
            const Algorithm* a = b.find(id);
            const int n = ranking->in_lists(*a, kRecordedLists), by_default = ranking->suggested(*a) ? 1 : 0;
            if (n != by_default) pr.listings[id] = n;
        }
        pr.ranking_ms = ranking_ms;
        if (const Algorithm* a = b.native_fallback(p)) pr.fallback = std::string(a->id());
        if (const Algorithm* a = b.fixed_default(p)) pr.fixed = std::string(a->id());
        const auto tensors = tensors_on(b, p, o.seed);
        const ConvTensors t = tensors->views();
        for (const Algorithm* a : b.algorithms()) {
            AlgorithmRecord ar;
            ar.id = std::string(a->id());
            if (o.progress) o.progress(done, total, ar.id + " on " + ps);
            ++done;
            const auto& [support, support_ms] = decide(p, ps, a);
            ar.support_ms = support_ms;
            if (!support) {
                ar.supported = false;
                ar.reason = support.reason;
                pr.algorithms.push_back(std::move(ar));
                continue;
            }
            if (const Notes n = a->notes_for(p); n != a->notes()) ar.notes = n;
            ar.workspace = a->workspace_size(p);
            DeviceBuffer ws = ar.workspace ? b.allocate(ar.workspace) : DeviceBuffer{};
            if (ar.workspace && !ws) {
                ar.status = Status::Code::out_of_memory;
                ar.message = "cannot allocate " + std::to_string(ar.workspace) + " B of workspace";
                pr.algorithms.push_back(std::move(ar));
                continue;
            }
            Status st;
            auto once = [&] { st = a->run(p, t, {ws.data(), ar.workspace}); };
            const double first = b.time_ms(once);
            double spent = first;
            if (st.ok()) {
                const auto cold = cold_first.find(ps);
                const auto searched = search_first.find({ps, ar.id});
                if (cold != cold_first.end() && !pr.heuristic.empty() && pr.heuristic.front() == ar.id)
                    ar.first_ms = cold->second;
                else if (searched != search_first.end()) ar.first_ms = searched->second;
                else ar.first_ms = first;
                for (int s = 0; s < o.samples && spent <= o.max_ms_per_algorithm; ++s) {
                    const double ms = b.time_ms(once);
                    if (!st.ok()) break;
                    ar.samples_ms.push_back(ms);
                    spent += ms;
                }
                // An algorithm whose cold call alone took --max-ms (a naive reference, say), or
                // --samples 0: the cold call is the only sample there is.
                if (ar.samples_ms.empty() && st.ok()) ar.samples_ms.push_back(first);
            }
            if (!st.ok()) {
                ar.status = st.code == Status::Code::out_of_memory ? Status::Code::out_of_memory : Status::Code::failed;
                ar.message = st.message;
                ar.first_ms.reset();
                ar.samples_ms.clear();
            }
            pr.algorithms.push_back(std::move(ar));
        }
        // An algorithm that fails every time is not something the heuristic order may offer
        // as supported in the file's rules: keep it in the order (the selector falls through).
        r.problems.push_back(std::move(pr));
    }
    r.sequence_factor = measure_sequence_factor(b, r, o.seed);
    if (o.progress) o.progress(total, total, "done");
    return r;
}

Recording recording_from_db(const std::vector<DbSection>& sections, const std::string& backend,
                            std::vector<std::string>* dropped, const Backend* local) {
    auto drop = [&](const std::string& key, const std::string& why) {
        if (dropped) dropped->push_back("entry '" + key + "': " + why);
    };
    const DbSection* best = nullptr;
    for (const DbSection& s : sections)
        if (s.env.backend == backend && (!best || s.entries.size() > best->entries.size())) best = &s;
    if (!best) throw InvalidRequest("from_db", "the tuning database has no entries for backend '" + backend + "'");
    Recording r;
    r.environment = best->env;
    r.source = "tuning-db";
    r.samples = 1;
    std::map<std::string, std::size_t> index;  // problem string -> position
    for (const auto& [key, rec] : best->entries) {
        CacheKey k;
        try {
            k = CacheKey::parse(key);
        } catch (const Error& e) {
            drop(key, std::string("not a readable key: ") + e.what());
            continue;
        }
        const ConvProblem& p = k.problem;
        if (rec.algorithm.empty()) {
            drop(key, "no algorithm");
            continue;
        }
        if (!(rec.median_ms > 0 && rec.median_ms < 1e9)) {
            drop(key, "median " + json(rec.median_ms).dump() + " ms is not a time in (0, 1e9) ms");
            continue;
        }
        // Prefer what a benchmark search under convtune's rules found.
        const bool preferred = k.benchmark == true && to_string(k.policy) == "convtune";
        const std::string ps = p.to_string();
        auto it = index.find(ps);
        if (it != index.end() && !preferred) continue;
        ProblemRecord pr;
        pr.problem = p;
        pr.heuristic = {rec.algorithm};
        pr.db_search_ms = rec.search_ms;
        AlgorithmRecord ar;
        ar.id = rec.algorithm;
        ar.samples_ms = {rec.median_ms};
        if (local)
            if (const Algorithm* la = local->find(rec.algorithm); la && la->supports(p))
                ar.workspace = la->workspace_size(p);
        pr.algorithms.push_back(ar);
        if (std::none_of(r.algorithms.begin(), r.algorithms.end(),
                         [&id = rec.algorithm](const AlgorithmInfo& i) { return i.id == id; })) {
            const Algorithm* la = local ? local->find(rec.algorithm) : nullptr;
            r.algorithms.push_back({rec.algorithm, la ? la->notes() : Notes{}});
        }
        if (it != index.end()) {
            r.problems[it->second] = std::move(pr);
        } else {
            index[ps] = r.problems.size();
            r.problems.push_back(std::move(pr));
        }
    }
    if (r.problems.empty()) throw InvalidRequest("from_db", "no usable entries for backend '" + backend + "'");
    return r;
}

}  // namespace convtune::sim
