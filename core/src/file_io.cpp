#include "convtune/file_io.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fmt/core.h>
#include <mutex>

#include "convtune/error.hpp"

namespace convtune {

namespace fs = std::filesystem;

namespace {

std::string sys_error(int e) { return std::strerror(e); }

// "a directory", "a character device", ... for what stands at a path that is not a regular file.
std::string kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISLNK(m)) return "a symbolic link";
    return "something other than a regular file";
}

std::string limit_text(std::uint64_t bytes) {
    if (bytes >= (1u << 20)) return fmt::format("{:.1f} MiB ({} B)", static_cast<double>(bytes) / (1u << 20), bytes);
    return fmt::format("{} B", bytes);
}

// The folder and the file name of a path ("." for a bare name).
std::pair<fs::path, std::string> split(const std::string& path) {
    const fs::path p(path);
    return {p.has_parent_path() ? p.parent_path() : fs::path("."), p.filename().string()};
}

void close_keeping_errno(int fd) {
    const int e = errno;
    ::close(fd);
    errno = e;
}

// One writer at a time in this process: the temporary name carries only the process id.
std::mutex& write_mutex() {
    static std::mutex m;
    return m;
}

// The path to write for `path`: itself, or the regular file a symbolic link there points to.
std::string resolve_output(const std::string& path) {
    check_output_path(path);
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
        std::error_code ec;
        const fs::path real = fs::canonical(path, ec);
        if (ec) throw Error(path + ": cannot follow the symbolic link: " + ec.message());
        return real.string();
    }
    return path;
}

}  // namespace

std::string read_file_bounded(const std::string& path, std::uint64_t max_bytes, std::string_view what) {
    const std::string w(what);
    // stat first: nothing but a regular file is ever opened (opening a FIFO would block, a
    // device may act on open).
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw Error(path + ": cannot open " + w + ": " + sys_error(errno));
    if (!S_ISREG(st.st_mode))
        throw Error(path + ": " + w + " must be a regular file, but " + kind_of(st.st_mode) + " stands there");
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) throw Error(path + ": cannot open " + w + ": " + sys_error(errno));
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(path + ": " + w + " must be a regular file, but it changed while being opened");
    }
    const auto too_large = [&](const std::string& size) {
        return Error(path + ": " + w + " of " + size + ", above the limit of " + limit_text(max_bytes) + " for a " + w);
    };
    if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
        ::close(fd);
        throw too_large(std::to_string(st.st_size) + " B");
    }
    std::string text;
    text.resize(static_cast<std::size_t>(st.st_size) + 1);  // one more byte: a file that grew is noticed
    std::size_t done = 0;
    for (;;) {
        if (done == text.size()) {
            if (done > max_bytes) break;
            text.resize(std::min<std::uint64_t>(std::max<std::size_t>(2 * text.size(), 4096), max_bytes + 1));
        }
        const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            const int e = errno;
            ::close(fd);
            throw Error(path + ": cannot read " + w + ": " + sys_error(e));
        }
        if (n == 0) break;
        done += static_cast<std::size_t>(n);
    }
    ::close(fd);
    if (done > max_bytes) throw too_large("more than " + std::to_string(max_bytes) + " B (it grew while being read)");
    text.resize(done);
    return text;
}

void check_output_path(const std::string& path) {
    if (path.empty()) throw Error("output path: empty");
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return;  // nothing there (or unreachable: the write will say why)
    if (S_ISREG(st.st_mode)) return;
    if (S_ISLNK(st.st_mode)) {
        struct stat target {};
        if (::stat(path.c_str(), &target) != 0)
            throw Error(path + ": cannot write here: a symbolic link to nothing stands there (" + sys_error(errno) +
                        "); convtune writes only regular files");
        if (S_ISREG(target.st_mode)) return;
        throw Error(path + ": cannot write here: a symbolic link to " + kind_of(target.st_mode) +
                    " stands there; convtune writes only regular files");
    }
    throw Error(path + ": cannot write here: " + kind_of(st.st_mode) +
                " stands there; convtune writes only regular files");
}

int remove_orphaned_temporaries(const std::string& path) {
    const auto [dir, name] = split(path);
    if (name.empty()) return 0;
    // "<name>.tmp.<pid>", and ".<name>.tmp.<pid>" which earlier versions used for plots and recordings.
    const std::string prefixes[] = {name + ".tmp.", "." + name + ".tmp."};
    int removed = 0;
    std::error_code ec;
    fs::directory_iterator it(dir, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
        const std::string entry = it->path().filename().string();
        for (const std::string& prefix : prefixes) {
            if (entry.size() <= prefix.size() || entry.compare(0, prefix.size(), prefix) != 0) continue;
            const std::string digits = entry.substr(prefix.size());
            if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
            const pid_t pid = static_cast<pid_t>(std::stol(digits));
            if (pid <= 0 || pid == ::getpid()) continue;
            if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
            struct stat st {};
            if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
            if (::unlink(it->path().c_str()) == 0) ++removed;
        }
    }
    return removed;
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
    const std::string target = resolve_output(path);
    const auto [dir, name] = split(target);
    if (name.empty() || name == "." || name == "..") throw Error(path + ": cannot write here: not a file name");
    std::lock_guard lock(write_mutex());
    remove_orphaned_temporaries(target);
    const std::string tmp = (dir / (name + ".tmp." + std::to_string(::getpid()))).string();

    // Keep the permission bits of the file being replaced.
    mode_t mode = 0644;
    struct stat old {};
    const bool replacing = ::stat(target.c_str(), &old) == 0 && S_ISREG(old.st_mode);
    if (replacing) mode = old.st_mode & 07777;

    const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = ::open(tmp.c_str(), flags, 0644);
    if (fd < 0 && errno == EEXIST) {
        // Not one of ours (this process writes one file at a time): a leftover of an earlier
        // process with the same id, or something planted. A file or a link is removed (a link's
        // target is never touched), anything else is left and the write refused.
        struct stat st {};
        if (::lstat(tmp.c_str(), &st) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) &&
            ::unlink(tmp.c_str()) == 0)
            fd = ::open(tmp.c_str(), flags, 0644);
        else
            errno = EEXIST;
    }
    if (fd < 0)
        throw Error(path + ": cannot write: cannot create " + tmp + ": " + sys_error(errno) +
                    " (the old file is unchanged)");
    const auto fail = [&](const std::string& what) {
        const std::string m =
            path + ": cannot write: " + what + ": " + sys_error(errno) + " (the old file is unchanged)";
        ::unlink(tmp.c_str());
        return Error(m);
    };
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            close_keeping_errno(fd);
            throw fail("write");
        }
        done += static_cast<std::size_t>(n);
    }
    if (replacing && ::fchmod(fd, mode) != 0) {
        close_keeping_errno(fd);
        throw fail("fchmod");
    }
    if (::fsync(fd) != 0) {
        close_keeping_errno(fd);
        throw fail("fsync");
    }
    if (::close(fd) != 0) throw fail("close");
    // What stands at the target may have changed while writing: check again right before.
    try {
        check_output_path(target);
    } catch (const Error&) {
        ::unlink(tmp.c_str());
        throw;
    }
    if (::rename(tmp.c_str(), target.c_str()) != 0) throw fail("rename");
    // The rename itself is made durable by syncing the folder. Filesystems that cannot sync a
    // folder (EINVAL) are accepted; an I/O error is reported.
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        const int r = ::fsync(dfd);
        const int e = errno;
        ::close(dfd);
        if (r != 0 && e == EIO) throw Error(path + ": written, but syncing its folder failed: " + sys_error(e));
    }
}

std::string keep_aside(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) throw Error(path + ": cannot keep it aside: " + sys_error(errno));
    if (!S_ISREG(st.st_mode))
        throw Error(path + ": cannot keep it aside: " + kind_of(st.st_mode) + " stands there, not a regular file");
    for (int i = 0; i < 10000; ++i) {
        std::string keep = path + ".corrupt";
        if (i) keep += '.' + std::to_string(i);  // (not `"." + to_string(i)`: GCC 12 warns -Wrestrict on that)
        if (::renameat2(AT_FDCWD, path.c_str(), AT_FDCWD, keep.c_str(), RENAME_NOREPLACE) == 0) return keep;
        if (errno == EEXIST) continue;
        if (errno != EINVAL && errno != ENOSYS)
            throw Error(path + ": cannot keep it aside as " + keep + ": " + sys_error(errno));
        // No RENAME_NOREPLACE on this filesystem: a hard link never replaces either.
        if (::link(path.c_str(), keep.c_str()) == 0) {
            if (::unlink(path.c_str()) != 0) {
                const int e = errno;
                ::unlink(keep.c_str());
                throw Error(path + ": cannot keep it aside as " + keep + ": " + sys_error(e));
            }
            return keep;
        }
        if (errno == EEXIST) continue;
        throw Error(path + ": cannot keep it aside as " + keep + ": " + sys_error(errno));
    }
    throw Error(path + ": cannot keep it aside: " + path + ".corrupt to .corrupt.9999 all exist");
}

FileLock::FileLock(const std::string& path) {
    const std::string lock = path + ".lock";
    fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
    if (fd_ < 0) {
        const int e = errno;
        throw Error("cannot create lock file " + lock + ": " +
                    (e == ELOOP ? std::string("a symbolic link stands there") : sys_error(e)));
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd_);
        throw Error("cannot use lock file " + lock + ": " + kind_of(st.st_mode) + " stands there, not a regular file");
    }
    while (::flock(fd_, LOCK_EX) != 0) {
        if (errno != EINTR) {
            const int e = errno;
            ::close(fd_);
            throw Error("cannot lock " + lock + ": " + sys_error(e));
        }
    }
}

FileLock::~FileLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
}

}  // namespace convtune
