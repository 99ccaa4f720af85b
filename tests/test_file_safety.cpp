// File safety: convtune never destroys a user's file and never reads without a bound.
// Outputs only where a regular file (or nothing) stands, the temporary file never opened through a
// planted link, orphaned temporaries removed, unreadable databases kept aside under fresh names,
// newer database versions refused, and every input reader refusing special and oversized files.
// See docs/reliability.md ("Files").
#define BOOST_TEST_MODULE file_safety
#include <boost/test/unit_test.hpp>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "convtune/error.hpp"
#include "convtune/file_io.hpp"
#include "convtune/problem.hpp"
#include "convtune/sim/recording.hpp"
#include "convtune/sim/stream.hpp"
#include "convtune/sim/workload.hpp"
#include "convtune/tuning_db.hpp"
#include "support/check.hpp"

using namespace convtune;
using test::error_of;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    fs::path path;
    TempDir() {
        std::string t = (fs::temp_directory_path() / "convtune-file-safety-XXXXXX").string();
        BOOST_REQUIRE(::mkdtemp(t.data()) != nullptr);
        path = t;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string file(const std::string& n) const { return (path / n).string(); }
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}
void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

mode_t lstat_type(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & S_IFMT) : 0;
}

// Every name in the folder that looks like a temporary file.
std::vector<std::string> temporaries(const fs::path& dir) {
    std::vector<std::string> r;
    for (const auto& e : fs::directory_iterator(dir))
        if (contains(e.path().filename().string(), ".tmp.")) r.push_back(e.path().filename().string());
    return r;
}

// A unix socket bound at `path` (kept open by the returned descriptor).
int bind_socket(const std::string& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    BOOST_REQUIRE(fd >= 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    BOOST_REQUIRE(path.size() < sizeof a.sun_path);
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    return fd;
}

// The id of a process that has exited (and been reaped): its temporaries are orphans.
pid_t gone_pid() {
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    BOOST_REQUIRE(child > 0);
    int status = 0;
    ::waitpid(child, &status, 0);
    return child;
}

// A character device to write over in tests: a node made in `dir` where mknod is permitted, else
// /dev/null where this process cannot replace it (its folder is not writable); "" otherwise.
std::string char_device(const TempDir& dir) {
    const std::string path = dir.file("chardev");
    if (::mknod(path.c_str(), S_IFCHR | 0644, ::makedev(1, 3)) == 0) return path;
    if (::access("/dev", W_OK) != 0) return "/dev/null";
    return "";
}

// Every writer refuses `path`, where `kind` stands, naming both, and leaves it as it was.
void expect_refused_by_every_writer(const std::string& path, const std::string& kind) {
    const mode_t before = lstat_type(path);
    const std::string e1 = error_of([&] { write_file_atomic(path, "x"); });
    BOOST_TEST(contains(e1, path + ": cannot write here: " + kind + " stands there"), e1);
    const std::string e2 = error_of([&] { TuningDatabase::write_file(path, {}); });
    BOOST_TEST(contains(e2, kind + " stands there"), e2);
    const std::string e3 = error_of([&] { TuningDatabase db(path); });
    BOOST_TEST(contains(e3, kind + " stands there"), e3);
    const std::string e4 = error_of([&] { check_output_path(path); });
    BOOST_TEST(contains(e4, kind + " stands there"), e4);
    BOOST_TEST(lstat_type(path) == before, path);
}

const Environment kEnv{"0.1.0", "fake", "lib", "dev", ""};

std::string valid_db_text() {
    return R"({"format":"convtune-tuning-db","version":1,"environments":[{"convtune":"0.1.0","backend":"fake","library":"lib","device":"dev","driver":"","entries":{"k0":{"algorithm":"a","median_ms":1,"time":1}}}]})";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(outputs)

// A directory, a FIFO, a socket, a link to a directory and a link to nothing (a character
// device: below): every writer refuses, naming the path and what stands there, and leaves it as it was.
BOOST_AUTO_TEST_CASE(only_regular_files_are_replaced) {
    TempDir dir;
    const std::string d = dir.file("a_dir"), fifo = dir.file("a_fifo"), sock = dir.file("a_socket"),
                      to_dir = dir.file("link_to_dir"), dangling = dir.file("link_to_nothing");
    fs::create_directory(d);
    write_bytes(d + "/inside", "user data");
    BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
    const int sfd = bind_socket(sock);
    fs::create_directory_symlink(d, to_dir);
    fs::create_symlink(dir.file("nothing_here"), dangling);
    struct Case {
        std::string path, kind;
    };
    const std::vector<Case> cases = {{d, "a directory"},
                                     {fifo, "a FIFO"},
                                     {sock, "a socket"},
                                     {to_dir, "a symbolic link to a directory"},
                                     {dangling, "a symbolic link to nothing"}};
    for (const Case& c : cases) expect_refused_by_every_writer(c.path, c.kind);
    BOOST_TEST(read_bytes(d + "/inside") == "user data");
    BOOST_TEST(!fs::exists(dir.file("nothing_here")));
    BOOST_TEST(!fs::exists(d + ".corrupt"));
    BOOST_TEST(temporaries(dir.path).empty());
    ::close(sfd);
}

// A character device of our own (the numbers of /dev/null), so that a regression never replaces
// the system's /dev/null; /dev/null itself only where this process cannot replace it. Skipped
// (and reported as skipped) where neither is possible.
BOOST_AUTO_TEST_CASE(character_device_is_not_replaced,
                     *boost::unit_test::precondition([](boost::unit_test::test_unit_id) {
                         TempDir probe;
                         return boost::test_tools::assertion_result(!char_device(probe).empty());
                     })) {
    TempDir dir;
    const std::string dev = char_device(dir);
    expect_refused_by_every_writer(dev, "a character device");
    BOOST_TEST(temporaries(dir.path).empty());
}

// A link to a regular file is followed: the file it points to gets the bytes, the link stays.
BOOST_AUTO_TEST_CASE(link_to_a_regular_file_is_followed) {
    TempDir dir;
    const std::string real = dir.file("real.svg"), link = dir.file("link.svg");
    write_bytes(real, "old");
    fs::create_symlink(real, link);
    write_file_atomic(link, "new");
    BOOST_TEST(lstat_type(link) == S_IFLNK);
    BOOST_TEST(read_bytes(real) == "new");
    BOOST_TEST(temporaries(dir.path).empty());
}

// The replaced file keeps its permission bits.
BOOST_AUTO_TEST_CASE(permissions_are_kept) {
    TempDir dir;
    const std::string f = dir.file("private.db");
    write_bytes(f, "old");
    fs::permissions(f, fs::perms::owner_read | fs::perms::owner_write);
    write_file_atomic(f, "new");
    BOOST_TEST(read_bytes(f) == "new");
    struct stat st {};
    BOOST_REQUIRE(::stat(f.c_str(), &st) == 0);
    BOOST_TEST((st.st_mode & 07777) == 0600u);
}

// A link planted at the temporary name is never written through: the file it points to keeps
// its bytes, for a plain write and for a database store.
BOOST_AUTO_TEST_CASE(planted_link_at_the_temporary_name) {
    TempDir dir;
    const std::string victim = dir.file("victim"), out = dir.file("out.json"), db = dir.file("x.db");
    write_bytes(victim, "precious");
    fs::create_symlink(victim, out + ".tmp." + std::to_string(::getpid()));
    write_file_atomic(out, "output");
    BOOST_TEST(read_bytes(victim) == "precious");
    BOOST_TEST(read_bytes(out) == "output");

    fs::create_symlink(victim, db + ".tmp." + std::to_string(::getpid()));
    TuningDatabase d(db, [](const std::string&) {});
    BOOST_TEST(d.store(kEnv, "k", {"a", 1, 0, 1, 0, 1}));
    BOOST_TEST(read_bytes(victim) == "precious");
    BOOST_TEST(TuningDatabase::read_file(db).size() == 1u);
    BOOST_TEST(temporaries(dir.path).empty());
}

// A link planted at the lock file's name is refused (O_NOFOLLOW): the store fails with a
// warning, its target is untouched.
BOOST_AUTO_TEST_CASE(planted_link_at_the_lock_name) {
    TempDir dir;
    const std::string victim = dir.file("victim"), db = dir.file("x.db");
    write_bytes(victim, "precious");
    fs::create_symlink(victim, db + ".lock");
    std::vector<std::string> warnings;
    TuningDatabase d(db, [&](const std::string& w) { warnings.push_back(w); });
    BOOST_TEST(!d.store(kEnv, "k", {"a", 1, 0, 1, 0, 1}));
    BOOST_TEST(read_bytes(victim) == "precious");
    BOOST_TEST(!fs::exists(db));
    BOOST_REQUIRE(warnings.size() == 1u);
    BOOST_TEST(contains(warnings[0], "lock file " + db + ".lock: a symbolic link stands there"), warnings[0]);
    BOOST_CHECK_THROW(FileLock{db}, Error);
}

// Temporaries of the same target left by a process that is gone are removed; those of a live
// process, of another target, and anything that is not a regular file are left alone.
BOOST_AUTO_TEST_CASE(orphaned_temporaries_are_removed) {
    TempDir dir;
    const std::string out = dir.file("out.json");
    const std::string gone = std::to_string(gone_pid()), alive = std::to_string(::getppid());
    const std::vector<std::string> orphans = {"out.json.tmp." + gone, ".out.json.tmp." + gone};
    const std::vector<std::string> kept = {"out.json.tmp." + alive, "other.json.tmp." + gone,
                                           "out.json.tmp." + gone + "x", "out.json.tmp.dir"};
    for (const std::string& n : orphans) write_bytes(dir.file(n), "half written");
    for (const std::string& n : kept) write_bytes(dir.file(n), "not an orphan of out.json");
    const std::string gone2 = std::to_string(gone_pid());
    fs::create_directory(dir.file("out.json.tmp." + gone2));                        // not a regular file
    fs::create_symlink(dir.file("victim"), dir.file(".out.json.tmp." + gone2));   // not a regular file
    write_file_atomic(out, "output");
    for (const std::string& n : orphans) BOOST_TEST(!fs::exists(dir.file(n)), n);
    for (const std::string& n : kept) BOOST_TEST(fs::exists(dir.file(n)), n);
    BOOST_TEST(fs::is_directory(dir.file("out.json.tmp." + gone2)));
    BOOST_TEST(lstat_type(dir.file(".out.json.tmp." + gone2)) == S_IFLNK);
    BOOST_TEST(read_bytes(out) == "output");
    // The database's writer cleans up too.
    write_bytes(dir.file("x.db.tmp." + gone), "killed during a store");
    TuningDatabase d(dir.file("x.db"), [](const std::string&) {});
    BOOST_TEST(d.store(kEnv, "k", {"a", 1, 0, 1, 0, 1}));
    BOOST_TEST(!fs::exists(dir.file("x.db.tmp." + gone)));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(databases)

// Three unreadable databases in a row: each is kept, none replaces an earlier copy.
BOOST_AUTO_TEST_CASE(corrupt_copies_never_overwrite_each_other) {
    TempDir dir;
    const std::string db = dir.file("x.db");
    const std::vector<std::string> texts = {"first garbage", "{\"second\": ", ""};
    const std::vector<std::string> kept_as = {db + ".corrupt", db + ".corrupt.1", db + ".corrupt.2"};
    for (std::size_t i = 0; i < texts.size(); ++i) {
        write_bytes(db, texts[i]);
        std::vector<std::string> warnings;
        TuningDatabase d(db, [&](const std::string& w) { warnings.push_back(w); });
        BOOST_TEST(d.store(kEnv, "k" + std::to_string(i), {"a", 1, 0, 1, 0, 1}));
        BOOST_TEST(contains(warnings.back(), "kept as " + kept_as[i] + " and replaced"), warnings.back());
        BOOST_TEST(TuningDatabase::read_file(db).size() == 1u);
    }
    for (std::size_t i = 0; i < texts.size(); ++i) BOOST_TEST(read_bytes(kept_as[i]) == texts[i], kept_as[i]);
    BOOST_TEST(!fs::exists(db + ".corrupt.3"));
    // keep_aside itself: the next free name, the file moved byte for byte.
    write_bytes(db, "fourth");
    BOOST_TEST(keep_aside(db) == db + ".corrupt.3");
    BOOST_TEST(read_bytes(db + ".corrupt.3") == "fourth");
    BOOST_TEST(!fs::exists(db));
}

// A database of a newer format version is refused, never moved aside or replaced.
BOOST_AUTO_TEST_CASE(newer_version_is_refused_and_untouched) {
    TempDir dir;
    const std::string db = dir.file("new.db");
    std::string text = valid_db_text();
    text.replace(text.find("\"version\":1"), 11, "\"version\":2");
    write_bytes(db, text);
    const std::string e = error_of([&] { TuningDatabase::read_file(db); });
    BOOST_TEST(contains(e, db + ": written by a newer convtune (database format version 2"), e);
    BOOST_CHECK_THROW(TuningDatabase::read_file(db), DatabaseVersionError);
    BOOST_CHECK_THROW(TuningDatabase{db}, DatabaseVersionError);
    // A newer file that appears after the database was opened: the store fails, the file stays.
    const std::string db2 = dir.file("later.db");
    std::vector<std::string> warnings;
    TuningDatabase d(db2, [&](const std::string& w) { warnings.push_back(w); });
    write_bytes(db2, text);
    BOOST_TEST(!d.store(kEnv, "k", {"a", 1, 0, 1, 0, 1}));
    BOOST_TEST(read_bytes(db2) == text);
    BOOST_TEST(read_bytes(db) == text);
    for (const auto& e : fs::directory_iterator(dir.path))
        BOOST_TEST(!contains(e.path().string(), ".corrupt"), e.path());
    BOOST_TEST(temporaries(dir.path).empty());
    BOOST_REQUIRE(!warnings.empty());
    BOOST_TEST(contains(warnings.back(), "written by a newer convtune"), warnings.back());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(inputs)

// Every reader of a file, on /dev/zero, a FIFO with no writer, a directory: refused at once,
// naming the path and what stands there (a FIFO would block, /dev/zero would never end).
BOOST_AUTO_TEST_CASE(special_files_are_refused_quickly) {
    TempDir dir;
    const std::string fifo = dir.file("fifo"), d = dir.file("folder");
    BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
    fs::create_directory(d);
    const std::vector<std::pair<std::string, std::function<void(const std::string&)>>> readers = {
        {"shape file", [](const std::string& p) { read_shape_file(p); }},
        {"tuning database", [](const std::string& p) { TuningDatabase::read_file(p); }},
        {"trace file", [](const std::string& p) { sim::read_trace(p); }},
        {"recording", [](const std::string& p) { sim::Recording::load(p); }},
        {"bounded", [](const std::string& p) { read_file_bounded(p, 1 << 20, "bounded"); }},
    };
    const std::vector<std::pair<std::string, std::string>> files = {
        {"/dev/zero", "a character device"}, {fifo, "a FIFO"}, {d, "a directory"}};
    for (const auto& [what, read] : readers)
        for (const auto& [path, kind] : files) {
            const auto t0 = std::chrono::steady_clock::now();
            const std::string e = error_of([&] { read(path); });
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            BOOST_TEST(contains(e, path + ": " + what + " must be a regular file, but " + kind + " stands there"),
                       what << ": " << e);
            BOOST_TEST(s < 1.0, what << " on " << path << " took " << s << " s");
        }
    // A workload given as a special file is not taken as a file at all.
    const std::string e = error_of([&] { sim::load_workload(fifo); });
    // (The library names the request field; the CLI prints it as --workload.)
    BOOST_TEST(contains(e, "workload: '" + fifo + "' is neither a file nor a built-in workload"), e);
}

// Above the limit: refused without reading, the limit named. At the limit: read.
BOOST_AUTO_TEST_CASE(files_above_the_limit_are_refused) {
    TempDir dir;
    const std::string f = dir.file("f");
    write_bytes(f, std::string(100, 'a'));
    BOOST_TEST(read_file_bounded(f, 100, "test file").size() == 100u);
    const std::string e = error_of([&] { read_file_bounded(f, 99, "test file"); });
    BOOST_TEST(contains(e, f + ": test file of 100 B, above the limit of 99 B for a test file"), e);
    // The real limits, on sparse files one byte above them (no disk space used).
    const std::vector<std::tuple<std::string, std::uint64_t, std::function<void(const std::string&)>>> readers = {
        {"shape file", kMaxShapeFileBytes, [](const std::string& p) { read_shape_file(p); }},
        {"tuning database", kMaxDatabaseBytes, [](const std::string& p) { TuningDatabase::read_file(p); }},
        {"trace file", kMaxTraceBytes, [](const std::string& p) { sim::read_trace(p); }},
        {"recording", kMaxRecordingBytes, [](const std::string& p) { sim::Recording::load(p); }},
    };
    for (const auto& [what, limit, read] : readers) {
        const std::string big = dir.file("big");
        write_bytes(big, "");
        fs::resize_file(big, limit + 1);
        const auto t0 = std::chrono::steady_clock::now();
        const std::string m = error_of([&] { read(big); });
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        BOOST_TEST(
            contains(m, big + ": " + what + " of " + std::to_string(limit + 1) + " B, above the limit of " +
                            std::to_string(limit >> 20) + ".0 MiB (" + std::to_string(limit) + " B) for a " + what),
            m);
        BOOST_TEST(s < 1.0, what << " took " << s << " s");
    }
    // A database over the limit is never moved aside or replaced by a store.
    const std::string db = dir.file("big.db");
    write_bytes(db, "");
    fs::resize_file(db, kMaxDatabaseBytes + 1);
    TuningDatabase d(db, [](const std::string&) {});
    BOOST_TEST(!d.store(kEnv, "k", {"a", 1, 0, 1, 0, 1}));
    BOOST_TEST(fs::file_size(db) == kMaxDatabaseBytes + 1);
    BOOST_TEST(!fs::exists(db + ".corrupt"));
}

// A missing file names the path and the system's reason.
BOOST_AUTO_TEST_CASE(missing_files_are_named) {
    const std::string e = error_of([] { read_shape_file("/nonexistent/convtune/shapes.txt"); });
    BOOST_TEST(contains(e, "/nonexistent/convtune/shapes.txt: cannot open shape file: No such file or directory"), e);
}

BOOST_AUTO_TEST_SUITE_END()
