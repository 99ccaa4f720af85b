// The one way convtune reads and writes files.
//
// Outputs (tuning databases, recordings, plots, `db merge`, Python's capture -o) go through
// write_file_atomic: it writes only where a regular file, or nothing, stands (a symbolic link to
// a regular file is followed and the file it points to is replaced, the link kept); a directory,
// device, FIFO, socket or a link to one of those, or to nothing, is refused with an Error naming
// the path and what stands there. The bytes go to "<name>.tmp.<pid>" in the same folder, created
// with O_CREAT|O_EXCL|O_NOFOLLOW (never opened through a planted link), then fsync, rename over
// the target, fsync of the folder. A failure leaves the old file byte-identical and no temporary
// file behind. Before writing, temporaries "<name>.tmp.<pid>" of the same target left by a
// process that is gone (a killed run) are removed: regular files only, matched by that exact name.
//
// Inputs (shape files, workloads, traces, tuning databases, recordings) go through
// read_file_bounded: a regular file (or a link to one) of at most max_bytes; a directory, FIFO,
// device or socket is refused without reading (a FIFO is opened non-blocking, so it never
// hangs), and a larger file is refused with the limit named. The limits are below.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace convtune {

// Largest input files, by kind (docs/reliability.md, "Limits").
inline constexpr std::uint64_t kMaxShapeFileBytes = std::uint64_t{64} << 20;  // parse, --shapes, workload files
inline constexpr std::uint64_t kMaxTraceBytes = std::uint64_t{256} << 20;     // trace:FILE
inline constexpr std::uint64_t kMaxDatabaseBytes = std::uint64_t{256} << 20;  // --db, db show/check/merge, --from-db
inline constexpr std::uint64_t kMaxRecordingBytes = std::uint64_t{256} << 20; // --replay, recordings
inline constexpr std::uint64_t kMaxMeasurementBytes = std::uint64_t{256} << 20; // simulate --pytorch-measured

// The whole content of `path`. Throws Error "<path>: <what> ..." when it cannot be opened, is not
// a regular file, or holds more than max_bytes (the limit is named). `what` names the kind of
// file ("shape file", "tuning database", ...).
std::string read_file_bounded(const std::string& path, std::uint64_t max_bytes, std::string_view what);

// Throws Error "<path>: ..." unless a regular file, a link to one, or nothing stands at `path`
// and its folder exists. What write_file_atomic checks first; a command calls it before long
// work so that a bad output path is refused up front.
void check_output_path(const std::string& path);

// Writes `bytes` to `path` atomically as described above. Throws Error naming the path and the
// reason; on any failure the old file is unchanged.
void write_file_atomic(const std::string& path, std::string_view bytes);

// Removes "<name>.tmp.<pid>" files next to `path` whose process is gone (see above). Returns how
// many were removed. write_file_atomic calls it; exposed for tests.
int remove_orphaned_temporaries(const std::string& path);

// Moves an unreadable file aside without ever replacing an earlier copy: to "<path>.corrupt",
// or "<path>.corrupt.1", ".2", ... whichever is free first. Returns the name it was kept as;
// throws Error when it cannot be moved (the file is then left where it was).
std::string keep_aside(const std::string& path);

// An exclusive lock (flock) on "<path>.lock" for the duration of a read-merge-write of `path`.
// The lock file is opened with O_NOFOLLOW and must be a regular file. Every writer of a tuning
// database takes it: TuningDatabase::store and `convtune db merge`.
class FileLock {
public:
    explicit FileLock(const std::string& path);
    ~FileLock();
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;

private:
    int fd_ = -1;
};

}  // namespace convtune
