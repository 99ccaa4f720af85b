// TuningDatabase: the persistent file behind the tuning cache (CONVTUNE_DB / --db).
//
// One JSON file holds sections, one per environment (convtune version, backend, library version,
// device, driver); a process only uses the entries of its own environment and leaves the others
// untouched, warning that they were ignored. Writes never lose data: each store takes an
// exclusive lock (flock on "<file>.lock"), re-reads the file, merges (the newer record of a key
// wins), writes a temporary file in the same folder, fsyncs and renames it over the old one. A
// file that cannot be parsed is reported and ignored; before the next write replaces it, it is
// kept as "<file>.corrupt". A failing write (read-only folder, full disk) leaves the old file as
// it was and is reported; tuning goes on in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "convtune/backend.hpp"

namespace convtune {

struct Environment {
    std::string convtune, backend, library, device, driver;
    bool operator==(const Environment&) const = default;
    std::string describe() const;
};
Environment environment_of(const Backend& b);
std::string convtune_version();

struct DbRecord {
    std::string algorithm;
    double median_ms = 0;
    double spread = 0;
    int samples = 0;
    double search_ms = 0;
    int64_t time = 0;  // unix seconds of the measurement; the newer record wins a merge
    bool operator==(const DbRecord&) const = default;
};

struct DbSection {
    Environment env;
    std::map<std::string, DbRecord> entries;
};

class TuningDatabase {
public:
    using Warn = std::function<void(const std::string&)>;
    // Reads the file if it exists (problems are warned about, never thrown).
    explicit TuningDatabase(std::string path, Warn warn = {});

    const std::string& path() const { return path_; }
    // The record for key in env, if any and if `known(algorithm)` (unknown ids are skipped with
    // one warning each).
    std::optional<DbRecord> find(const Environment& env, const std::string& key,
                                 const std::function<bool(const std::string&)>& known = {});
    // Stores and persists at once. Returns false (after a warning) when the file could not be
    // written; the record is still kept in memory.
    bool store(const Environment& env, const std::string& key, const DbRecord& r);
    std::vector<DbSection> sections() const;

    // File-level helpers (used by `convtune db`). read_file throws ParseError with the reason.
    static std::vector<DbSection> read_file(const std::string& path);
    // Atomic write (temporary file + fsync + rename); throws Error on failure, old file intact.
    static void write_file(const std::string& path, const std::vector<DbSection>& sections);
    // Union of two databases; for a key in both, the newer record wins.
    static std::vector<DbSection> merge(std::vector<DbSection> a, const std::vector<DbSection>& b);

private:
    void warn(const std::string& m);
    std::string path_;
    Warn warn_;
    mutable std::mutex mutex_;
    std::vector<DbSection> sections_;
    std::set<std::string> warned_;
};

}  // namespace convtune
