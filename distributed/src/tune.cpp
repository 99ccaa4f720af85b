#include "convtune/dist/tune.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmath>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "convtune/app/db.hpp"
#include "convtune/tuning_db.hpp"
#include "dispatcher.hpp"
#include "mpi_util.hpp"
#include "wire.hpp"

namespace convtune::dist {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int tag_result = 17001;  // rank -> 0: a result (or, with i = -1, the first request)
constexpr int tag_assign = 17002;  // 0 -> rank: the next problem index, or -1 = stop
constexpr int tag_heartbeat = 17003;  // rank -> 0: still deciding (rank_timeout_s)

struct Injection {
    int rank = -1;
    int64_t after = 0;
    bool exit = false;
    bool stop = false;
};

// CONVTUNE_DIST_FAIL=RANK:AFTER[:exit|:stop]
Injection injection() {
    const char* v = std::getenv("CONVTUNE_DIST_FAIL");
    if (!v || !*v) return {};
    Injection inj;
    char mode[8] = {0};
    long rank = -1;
    long long after = -1;
    const int n = std::sscanf(v, "%ld:%lld:%7s", &rank, &after, mode);
    if (n < 2 || rank < 0 || after < 0 || (n == 3 && std::string(mode) != "exit" && std::string(mode) != "stop"))
        throw Error("CONVTUNE_DIST_FAIL: expected RANK:AFTER, RANK:AFTER:exit or RANK:AFTER:stop, got " + quote_input(v));
    inj.rank = static_cast<int>(rank);
    inj.after = after;
    inj.exit = n == 3 && std::string(mode) == "exit";
    inj.stop = n == 3 && std::string(mode) == "stop";
    return inj;
}

std::string format_duration(double s) {
    if (s < 60) return fmt::format("{:.0f}s", s);
    if (s < 3600) return fmt::format("{:.0f}m{:02.0f}s", std::floor(s / 60), std::fmod(s, 60));
    return fmt::format("{:.0f}h{:02.0f}m", std::floor(s / 3600), std::floor(std::fmod(s, 3600) / 60));
}

// ---- Private folders: "$TMPDIR/convtune-dist-<host>-<pid>-XXXXXX" -------------------------------

// This host's name as it appears in a folder's name ([A-Za-z0-9._] kept, anything else '_').
std::string host_tag() {
    char h[256] = {0};
    if (::gethostname(h, sizeof h - 1) != 0) return "host";
    std::string out;
    for (const char* c = h; *c; ++c) out += (std::isalnum(static_cast<unsigned char>(*c)) || *c == '.' || *c == '_') ? *c : '_';
    return out.empty() ? "host" : out;
}

// The folders alive in this process, for the signal handler: fixed storage, no allocation there.
constexpr int kMaxDirs = 8;
char g_dirs[kMaxDirs][4096];
std::atomic<bool> g_dir_used[kMaxDirs];
struct sigaction g_old_action[3];
constexpr int kSignals[3] = {SIGTERM, SIGINT, SIGHUP};

struct Dirent64 {
    ino64_t d_ino;
    off64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

// Removes a folder of regular files with async-signal-safe calls only (open, getdents64,
// unlinkat, close, rmdir): what the handler below does for each live folder.
void remove_dir_signal_safe(const char* dir) {
    for (int pass = 0; pass < 4 && ::rmdir(dir) != 0 && errno == ENOTEMPTY; ++pass) {
        const int fd = ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) return;
        alignas(8) char buf[4096];
        long n;
        while ((n = ::syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
            for (long off = 0; off < n;) {
                const auto* d = reinterpret_cast<const Dirent64*>(buf + off);
                if (std::strcmp(d->d_name, ".") != 0 && std::strcmp(d->d_name, "..") != 0) ::unlinkat(fd, d->d_name, 0);
                off += d->d_reclen;
            }
        ::close(fd);
    }
}

extern "C" void remove_dirs_on_signal(int sig) {
    const int saved = errno;
    for (int i = 0; i < kMaxDirs; ++i)
        if (g_dir_used[i].load()) remove_dir_signal_safe(g_dirs[i]);
    errno = saved;
    // Then what the signal would have done: the previous handler, else the default (death).
    for (int k = 0; k < 3; ++k) {
        if (kSignals[k] != sig) continue;
        const struct sigaction& old = g_old_action[k];
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
            old.sa_handler(sig);
            return;
        }
        if (old.sa_handler == SIG_IGN && !(old.sa_flags & SA_SIGINFO)) return;
    }
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(sig, &dfl, nullptr);
    ::raise(sig);
}

// Once per process: the handler for SIGTERM, SIGINT and SIGHUP, and the folders of this host's
// processes that are gone (a rank killed with kill -9 had no chance to remove its own).
void prepare_temp_dirs() {
    static std::once_flag once;
    std::call_once(once, [] {
        for (int k = 0; k < 3; ++k) {
            struct sigaction sa {};
            sa.sa_handler = remove_dirs_on_signal;
            sigemptyset(&sa.sa_mask);
            ::sigaction(kSignals[k], &sa, &g_old_action[k]);
        }
        const std::string prefix = "convtune-dist-" + host_tag() + "-";
        std::error_code ec;
        for (fs::directory_iterator it(fs::temp_directory_path(ec), ec), end; !ec && it != end; it.increment(ec)) {
            const std::string name = it->path().filename().string();
            if (name.rfind(prefix, 0) != 0 || !it->is_directory(ec) || it->is_symlink(ec)) continue;
            char* stop = nullptr;
            const long pid = std::strtol(name.c_str() + prefix.size(), &stop, 10);
            if (pid <= 0 || *stop != '-' || pid == ::getpid()) continue;
            if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
            std::error_code rm;
            fs::remove_all(it->path(), rm);
        }
    });
}

// A private folder, removed with its contents (where it lives: $TMPDIR, else /tmp): by its
// destructor, on SIGTERM/SIGINT/SIGHUP, or by the next run when this process died otherwise.
class TempDir {
public:
    TempDir() {
        prepare_temp_dirs();
        std::string tmpl =
            (fs::temp_directory_path() / ("convtune-dist-" + host_tag() + "-" + std::to_string(::getpid()) + "-XXXXXX")).string();
        if (!::mkdtemp(tmpl.data())) throw Error("cannot create a temporary folder in " + fs::temp_directory_path().string());
        path_ = tmpl;
        static std::mutex slots;  // (the handler only reads: a slot is filled before it is marked used)
        std::lock_guard lk(slots);
        for (int i = 0; i < kMaxDirs && path_.size() < sizeof g_dirs[0]; ++i)
            if (!g_dir_used[i].load()) {
                std::memcpy(g_dirs[i], path_.c_str(), path_.size() + 1);
                g_dir_used[i].store(true);
                slot_ = i;
                break;
            }
    }
    ~TempDir() {
        if (slot_ >= 0) g_dir_used[slot_].store(false);
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string file(const std::string& name) const { return (fs::path(path_) / name).string(); }

private:
    std::string path_;
    int slot_ = -1;
};

// One rank's decisions: its own TuneJob over a private copy of the database as rank 0 read it.
class Worker {
public:
    Worker(app::TuneRequest r, const std::optional<std::string>& db_seed, int rank, Injection inj) : rank_(rank), inj_(inj) {
        r.progress = nullptr;
        if (db_seed) {
            dir_ = std::make_unique<TempDir>();
            r.db = dir_->file("tuning.json");
            if (!db_seed->empty()) {
                std::ofstream f(*r.db, std::ios::binary);
                f << *db_seed;
                if (!f) throw Error("cannot write " + *r.db);
            }
        } else {
            r.db = "";
        }
        job_ = std::make_unique<app::TuneJob>(r);
    }
    ~Worker() { job_.reset(); }  // before its folder goes

    json decide(int64_t i) {
        json m{{"i", i}};
        try {
            if (rank_ == inj_.rank && decided_ >= inj_.after) {
                if (inj_.exit) {
                    std::fprintf(stderr, "convtune: rank %d exits (CONVTUNE_DIST_FAIL)\n", rank_);
                    std::fflush(stderr);
                    std::_Exit(1);
                }
                if (inj_.stop) {
                    std::fprintf(stderr, "convtune: rank %d stops itself (CONVTUNE_DIST_FAIL)\n", rank_);
                    std::fflush(stderr);
                    ::raise(SIGSTOP);  // as kill -STOP: every thread stops until SIGCONT
                }
                throw Error("injected failure (CONVTUNE_DIST_FAIL)");
            }
            const app::TunedProblem t = job_->decide(i);
            ++decided_;
            m["ok"] = true;
            m["d"] = to_json(*t.decision, DecisionForm::exact);
            TuningDatabase* db = job_->context().database();
            if (db && t.decision->source == Source::search) {
                const Environment env = environment_of(job_->backend());
                if (auto rec = db->find(env, t.decision->key)) {
                    m["env"] = to_wire(env);
                    m["rec"] = to_json(*rec);
                }
            }
        } catch (const std::exception& e) {
            m["ok"] = false;
            m["err"] = e.what();
        }
        return m;
    }

private:
    int rank_;
    Injection inj_;
    std::unique_ptr<TempDir> dir_;
    std::unique_ptr<app::TuneJob> job_;
    int64_t decided_ = 0;
};

// Rank 0's coordination or a rank's serving loop failed outside a decision (an MPI error, a
// message it cannot read): the other ranks would wait for it forever, so the job ends.
[[noreturn]] void abort_job(int rank, const char* what) {
    std::fprintf(stderr, "convtune: rank %d: %s; ending the job\n", rank, what);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
    std::_Exit(3);
}

json hello(const std::string& err) {
    json m{{"i", -1}, {"ok", err.empty()}};
    if (!err.empty()) m["err"] = err;
    return m;
}

// Ranks other than 0: ask, decide, send, until told to stop.
TuneReport serve(const app::TuneRequest& r, const std::optional<std::string>& seed, int rank, int size, Injection inj,
               const TuneOptions& o) {
    // While a problem is decided (on a thread of its own), the main thread tells rank 0 it is alive.
    const auto beat = std::chrono::duration<double>(o.rank_timeout_s > 0 ? std::min(1.0, o.rank_timeout_s / 4) : 0);
    TuneReport rep;
    rep.rank = rank;
    rep.ranks = size;
    std::unique_ptr<Worker> w;
    std::string err;
    try {
        w = std::make_unique<Worker>(r, seed, rank, inj);
    } catch (const std::exception& e) {
        err = e.what();
    }
    try {
        detail::send_string(hello(err).dump(), 0, tag_result, MPI_COMM_WORLD);
        while (true) {
            const int64_t i = std::stoll(detail::recv_string(0, tag_assign, MPI_COMM_WORLD));
            if (i < 0) break;
            json m;
            if (beat.count() > 0) {
                auto decided = std::async(std::launch::async, [&w, i] { return w->decide(i); });
                while (decided.wait_for(beat) == std::future_status::timeout) detail::send_string("", 0, tag_heartbeat, MPI_COMM_WORLD);
                m = decided.get();
            } else {
                m = w->decide(i);
            }
            if (m["ok"].get<bool>()) {
                ++rep.totals.count;
                rep.totals.total_search_ms += m["d"]["search_ms"].get<double>();
            }
            detail::send_string(m.dump(), 0, tag_result, MPI_COMM_WORLD);
        }
    } catch (const std::exception& e) {
        abort_job(rank, e.what());
    }
    return rep;
}

}  // namespace

TuneReport tune(const app::TuneRequest& r, app::TuneSink* sink, const TuneOptions& o) {
    Session session;
    const int rank = session.rank(), size = session.size();
    const auto t0 = std::chrono::steady_clock::now();
    const Injection inj = injection();

    // Rank 0 validates the request; the others learn whether it was accepted.
    std::unique_ptr<app::TuneJob> job;
    std::string refused;
    if (rank == 0) {
        try {
            job = std::make_unique<app::TuneJob>(r);
        } catch (const std::exception& e) {
            refused = e.what();
            detail::broadcast_string(refused.empty() ? "?" : refused, 0, MPI_COMM_WORLD);
            throw;
        }
        detail::broadcast_string("", 0, MPI_COMM_WORLD);
    } else {
        refused = detail::broadcast_string("", 0, MPI_COMM_WORLD);
        if (!refused.empty()) throw PeerFailed("rank 0 refused the request: " + refused);
    }

    // The database as it is now, for every rank's private copy (json null: no database).
    std::optional<std::string> seed;
    std::string seed_msg;
    if (rank == 0) {
        json s;
        if (!job->header().db.empty()) {
            std::ifstream f(job->header().db, std::ios::binary);
            std::stringstream text;
            if (f) text << f.rdbuf();
            s = text.str();
        }
        seed_msg = s.dump();
    }
    const json s = json::parse(detail::broadcast_string(seed_msg, 0, MPI_COMM_WORLD));
    if (!s.is_null()) seed = s.get<std::string>();

    if (rank != 0) {
        TuneReport rep = serve(r, seed, rank, size, inj, o);
        rep.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return rep;
    }

    // Rank 0: coordinate, and decide on a thread of its own unless it only coordinates.
    TuneReport rep;
    rep.ranks = size;
    rep.totals = job->header();
    const int64_t n = job->size();
    const bool works = o.rank0_works || size == 1;
    Dispatcher disp(n, size, o.max_attempts, o.retire_after);
    if (!works) disp.exclude(0);
    // New records, written to the database in batches with app::db_merge (the database's lock
    // and merge rule: the newer record of a key wins) every o.flush_s seconds and at the end:
    // one rewrite of the file per batch, where a store per record rewrote it per problem.
    const std::string out = job->header().db;
    std::vector<DbSection> batch;
    std::unique_ptr<TempDir> batch_dir;
    if (!out.empty()) batch_dir = std::make_unique<TempDir>();
    auto last_flush = std::chrono::steady_clock::now();
    bool warned = false;
    auto flush = [&] {
        last_flush = std::chrono::steady_clock::now();
        if (batch.empty()) return;
        try {
            const std::string file = batch_dir->file("batch.json");
            TuningDatabase::write_file(file, batch);
            app::db_merge({out, {file}});
            batch.clear();
        } catch (const Error& e) {  // kept for the next flush, as a store keeps it in memory
            if (!warned) std::fprintf(stderr, "convtune: warning: tuning results not saved yet: %s\n", e.what());
            warned = true;
        }
    };

    std::mutex mu;
    std::condition_variable cv;
    std::deque<json> local_results;
    bool local_done = !works;
    std::thread local;
    if (works)
        local = std::thread([&] {
            std::unique_ptr<Worker> w;
            std::string err;
            try {
                w = std::make_unique<Worker>(r, seed, 0, inj);
            } catch (const std::exception& e) {
                err = e.what();
            }
            std::unique_lock lk(mu);
            local_results.push_back(hello(err));
            while (w) {
                std::optional<int64_t> i;
                cv.wait(lk, [&] { return disp.finished() || disp.retired(0) || (i = disp.take(0)).has_value(); });
                if (!i) break;
                lk.unlock();
                json m = w->decide(*i);
                lk.lock();
                local_results.push_back(std::move(m));
            }
            local_done = true;
            cv.notify_all();
        });

    std::set<int> waiting;  // ranks that asked for work and got none yet
    std::set<int> stopped;  // ranks told to stop
    // When each rank was last heard from (a result, a request or a heartbeat): one that holds a
    // problem and is silent for rank_timeout_s is lost (Dispatcher::lose).
    std::vector<std::chrono::steady_clock::time_point> heard(static_cast<std::size_t>(size), t0);
    std::vector<std::string> lost_why;
    std::map<int64_t, app::TunedProblem> ready;  // decided, not yet given to the sink
    int64_t next = 0;
    std::vector<std::string> startup;  // ranks that could not start
    if (sink) sink->begin(rep.totals);
    rep.totals.count = n;

    // Under mu: record what m says in the dispatcher.
    auto account = [&](int from, const json& m) {
        const int64_t i = m["i"].get<int64_t>();
        if (i < 0) {
            if (!m["ok"].get<bool>()) {
                startup.push_back(fmt::format("rank {}: {}", from, m["err"].get<std::string>()));
                disp.exclude(from);
            }
        } else if (m["ok"].get<bool>()) {
            disp.done(from, i);
        } else {
            disp.failed(from, i, m["err"].get<std::string>());
        }
    };
    // Under mu: hand work to the ranks waiting for it; stop them when there is none left for them.
    auto assign = [&] {
        for (auto it = waiting.begin(); it != waiting.end();) {
            std::optional<int64_t> i;
            if (disp.finished() || disp.retired(*it)) {
                detail::send_string("-1", *it, tag_assign, MPI_COMM_WORLD);
                stopped.insert(*it);
            } else if ((i = disp.take(*it))) {
                detail::send_string(std::to_string(*i), *it, tag_assign, MPI_COMM_WORLD);
            } else {
                ++it;
                continue;
            }
            it = waiting.erase(it);
        }
    };
    // Outside mu: keep a decision, store its record, give the sink what is now in order.
    auto output = [&](const json& m) {
        const int64_t i = m["i"].get<int64_t>();
        if (i < 0 || !m["ok"].get<bool>()) return;
        app::TunedProblem t = job->problem(i);
        t.decision = std::make_shared<const Decision>(decision_from_json(m["d"]));
        rep.totals.total_search_ms += t.decision->search_ms;
        rep.totals.from_database += t.decision->source == Source::database;
        if (batch_dir && m.contains("rec")) {
            const Environment env = environment_from_wire(m["env"]);
            auto sec = std::find_if(batch.begin(), batch.end(), [&](const DbSection& x) { return x.env == env; });
            if (sec == batch.end()) sec = batch.insert(batch.end(), DbSection{env, {}});
            sec->entries[t.decision->key] = db_record_from_json(m["rec"], "record from a rank");
        }
        ready.emplace(i, std::move(t));
    };
    auto emit = [&] {
        while (next < n) {
            auto it = ready.find(next);
            if (it != ready.end()) {
                if (sink) sink->problem(it->second);
                ready.erase(it);
            } else {
                std::lock_guard lk(mu);
                if (!disp.is_given_up(next)) break;
            }
            ++next;
        }
    };

    auto pause = std::chrono::microseconds(20);
    try {
        while (true) {
            bool any = false;
            std::vector<json> got;
            if (size > 1) {
                while (true) {
                    int flag = 0;
                    MPI_Status st;
                    detail::check(MPI_Iprobe(MPI_ANY_SOURCE, tag_result, MPI_COMM_WORLD, &flag, &st), "MPI_Iprobe");
                    if (!flag) break;
                    int from = 0;
                    json m = json::parse(detail::recv_string(st.MPI_SOURCE, tag_result, MPI_COMM_WORLD, &from));
                    heard[static_cast<std::size_t>(from)] = std::chrono::steady_clock::now();
                    std::lock_guard lk(mu);
                    const bool was_lost = disp.lost(from);  // its answer came too late: another rank has its problem
                    if (!was_lost) account(from, m);
                    waiting.insert(from);
                    assign();  // before the slower bookkeeping, so the rank is not kept waiting
                    if (!was_lost) got.push_back(std::move(m));
                }
                while (true) {  // heartbeats: only when they came
                    int flag = 0;
                    MPI_Status st;
                    detail::check(MPI_Iprobe(MPI_ANY_SOURCE, tag_heartbeat, MPI_COMM_WORLD, &flag, &st), "MPI_Iprobe");
                    if (!flag) break;
                    int from = 0;
                    detail::recv_string(st.MPI_SOURCE, tag_heartbeat, MPI_COMM_WORLD, &from);
                    heard[static_cast<std::size_t>(from)] = std::chrono::steady_clock::now();
                }
                if (o.rank_timeout_s > 0) {
                    const auto now = std::chrono::steady_clock::now();
                    std::lock_guard lk(mu);
                    for (int k = 1; k < size; ++k) {
                        const double silent = std::chrono::duration<double>(now - heard[static_cast<std::size_t>(k)]).count();
                        if (disp.lost(k) || stopped.count(k) || !disp.holds(k) || silent < o.rank_timeout_s) continue;
                        const std::vector<int64_t> back = disp.lose(k);
                        std::string what;
                        for (int64_t i : back) what += (what.empty() ? "" : ", ") + job->problem(i).problem;
                        lost_why.push_back(fmt::format("rank {}: no word from it for {:.0f} s (--rank-timeout) while it decided {}; "
                                                       "retired (stopped, hung or gone), its problem handed to another rank",
                                                       k, silent, what.empty() ? "a problem" : what));
                        std::fprintf(stderr, "convtune: %s\n", lost_why.back().c_str());
                        std::fflush(stderr);
                    }
                    assign();
                }
            }
            {
                std::lock_guard lk(mu);
                while (!local_results.empty()) {
                    account(0, local_results.front());
                    got.push_back(std::move(local_results.front()));
                    local_results.pop_front();
                }
                assign();
            }
            cv.notify_all();
            any = !got.empty();
            for (const json& m : got) output(m);
            emit();
            if (std::chrono::duration<double>(std::chrono::steady_clock::now() - last_flush).count() >= o.flush_s) flush();
            bool finished;
            int64_t done, given_up;
            {
                std::lock_guard lk(mu);
                int ended = 0;  // ranks told to stop, or lost and silent since
                for (int k = 1; k < size; ++k) ended += stopped.count(k) || disp.lost(k);
                finished = disp.finished() && local_done && ended == size - 1;
                done = disp.done();
                given_up = static_cast<int64_t>(disp.given_up().size());
            }
            if (r.progress && any) {
                const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                const double rate = el > 0 ? static_cast<double>(done) / el : 0;
                const int64_t left = n - done - given_up;
                r.progress(done + given_up, n,
                           fmt::format("{} rank{}, {:.1f} problems/s, {}", size, size == 1 ? "" : "s", rate,
                                       rate > 0 ? "~" + format_duration(static_cast<double>(left) / rate) + " left" : "estimating"));
            }
            if (finished) break;
            if (any) {
                pause = std::chrono::microseconds(20);
            } else {
                std::this_thread::sleep_for(pause);
                pause = std::min(pause * 2, std::chrono::microseconds(1000));
            }
        }
    } catch (const std::exception& e) {
        abort_job(0, e.what());  // the worker thread is still running: no unwinding past it
    }
    if (local.joinable()) local.join();
    emit();
    flush();
    if (!batch.empty()) {
        int64_t lost = 0;
        for (const DbSection& x : batch) lost += static_cast<int64_t>(x.entries.size());
        std::fprintf(stderr, "convtune: warning: %lld tuning results could not be saved to %s\n", static_cast<long long>(lost), out.c_str());
    }
    if (r.progress) r.progress(n, n, "");

    rep.decided = disp.decided();
    rep.retired = disp.retired_ranks();
    rep.retried = disp.retried();
    for (const auto& [i, why] : disp.given_up()) {
        const app::TunedProblem t = job->problem(i);
        rep.failed.push_back({i, t.problem, t.name, why});
        rep.totals.not_tuned.push_back({i, t.problem, t.name, fmt::format("{}", fmt::join(why, "; "))});
    }
    rep.not_started = startup;
    rep.lost = lost_why;
    for (int k = 1; k < size; ++k) rep.abandoned = rep.abandoned || (disp.lost(k) && !stopped.count(k));
    if (sink) sink->end(rep.totals);
    rep.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return rep;
}

void end_job(int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
}

std::string to_text(const TuneReport& r) {
    std::string s = fmt::format("distributed over {} rank{} in {:.2f} s; decided per rank:", r.ranks, r.ranks == 1 ? "" : "s", r.wall_s);
    for (std::size_t i = 0; i < r.decided.size(); ++i) s += fmt::format(" {}={}", i, r.decided[i]);
    s += fmt::format("; {} retried after a failure\n", r.retried);
    for (int k : r.retired) s += fmt::format("rank {} retired: it failed problems that other ranks decided\n", k);
    for (const std::string& n : r.not_started) s += fmt::format("{} (could not start; the others took its share)\n", n);
    for (const std::string& n : r.lost) s += n + "\n";
    for (const app::NotTunedProblem& f : r.totals.not_tuned) s += app::to_text(f);
    return s;
}

}  // namespace convtune::dist
