// TuningDatabase: the persistent file behind the tuning cache (CONVTUNE_DB / --db).
//
// One JSON file holds sections, one per environment (convtune version, backend, library version,
// device, driver); a process only uses the entries of its own environment and leaves the others
// untouched, warning that they were ignored. Writes never lose data: each store takes an
// exclusive lock (FileLock: flock on "<file>.lock", the lock `convtune db merge` takes too),
// re-reads the file, merges (the newer record of a key wins) and writes it with
// write_file_atomic (file_io.hpp: temporary file, fsync, rename, folder fsync). A file that cannot
// be parsed is reported and ignored; before the next write replaces it, it is kept aside as
// "<file>.corrupt", or "<file>.corrupt.1", ".2", ... when that name is taken (an earlier copy is
// never replaced). A file of a newer format version is refused (DatabaseVersionError), never
// moved or replaced. A path where something other than a regular file stands (directory,
// device, FIFO, ...) is refused by the constructor. A failing write (read-only folder, full disk,
// a newer or oversized file appearing meanwhile) leaves the old file as it was and is reported;
// tuning goes on in memory. Files above kMaxDatabaseBytes (file_io.hpp) are not read.
#pragma once

#include <cstdint>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "convtune/backend.hpp"
#include "convtune/error.hpp"

namespace convtune {

// A database written by a newer convtune (format version above the one this build reads). Not a
// ParseError: such a file is valid, only not for this build, so it is never kept aside or replaced.
class DatabaseVersionError : public Error {
public:
    using Error::Error;
};

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
// A record as the database file holds it under its key (and as the ranks of distributed/ send
// it): {algorithm, median_ms, spread, samples, search_ms, time}. The reader refuses what the
// file may not hold (a missing algorithm, a negative time, a count out of range) with a
// ParseError that begins with `where`; a missing number reads as 0.
nlohmann::json to_json(const DbRecord& r);
DbRecord db_record_from_json(const nlohmann::json& j, const std::string& where);

struct DbSection {
    Environment env;
    std::map<std::string, DbRecord> entries;
};

class TuningDatabase {
public:
    using Warn = std::function<void(const std::string&)>;
    // Reads the file if it exists. An unreadable file is warned about (and kept aside by the next
    // store); throws Error when something other than a regular file stands at `path` and
    // DatabaseVersionError for a file of a newer format version.
    explicit TuningDatabase(std::string path, Warn warn = {});
    ~TuningDatabase();  // writes what is not written yet (flush)
    TuningDatabase(const TuningDatabase&) = delete;
    TuningDatabase& operator=(const TuningDatabase&) = delete;

    const std::string& path() const { return path_; }
    // The record for key in env, if any and if `known(algorithm)` (unknown ids are skipped with
    // one warning each).
    std::optional<DbRecord> find(const Environment& env, const std::string& key,
                                 const std::function<bool(const std::string&)>& known = {});
    // Stores in memory and persists: at once by default; with a flush interval, only when the
    // last write is at least that old (then every record not written yet goes in one
    // read-merge-write: one rename and two fsyncs for the batch, not per record), and at flush()
    // and destruction. Returns false (after a warning) when the file could not be written; the
    // record is still kept in memory (and written by the next write that succeeds).
    bool store(const Environment& env, const std::string& key, const DbRecord& r);
    // Seconds between writes (0 = every store writes, the default). A process killed between two
    // writes loses the records stored since the last one: at most the batch of one interval,
    // plus those stored since the last store that wrote (a store is what triggers a write).
    void set_flush_interval(double seconds);
    // Writes the records not written yet, if any. Returns false (after a warning) on failure.
    bool flush();
    std::vector<DbSection> sections() const;

    // File-level helpers (used by `convtune db`). read_file throws ParseError with the reason,
    // DatabaseVersionError for a newer version, Error for a file it cannot open, that is not a
    // regular file or that is larger than kMaxDatabaseBytes.
    static std::vector<DbSection> read_file(const std::string& path);
    // write_file_atomic (file_io.hpp); throws Error on failure, old file intact. Takes no lock:
    // a caller that reads, merges and writes holds a FileLock on the path around all three.
    static void write_file(const std::string& path, const std::vector<DbSection>& sections);
    // Union of two databases; for a key in both, the newer record wins.
    static std::vector<DbSection> merge(std::vector<DbSection> a, const std::vector<DbSection>& b);

private:
    void warn(const std::string& m);
    bool persist_locked();
    std::string path_;
    double flush_s_ = 0;
    bool dirty_ = false;  // records in memory not in the file yet
    std::chrono::steady_clock::time_point last_write_ = std::chrono::steady_clock::now();
    Warn warn_;
    mutable std::mutex mutex_;
    std::vector<DbSection> sections_;
    std::set<std::string> warned_;
};

}  // namespace convtune
