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
#include <utility>

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
    for (const char* c = h; *c; ++c)
        out += (std::isalnum(static_cast<unsigned char>(*c)) || *c == '.' || *c == '_') ? *c : '_';
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
            (fs::temp_directory_path() / ("convtune-dist-" + host_tag() + "-" + std::to_string(::getpid()) + "-XXXXXX"))
                .string();
        if (!::mkdtemp(tmpl.data()))
            throw Error("cannot create a temporary folder in " + fs::temp_directory_path().string());
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
    Worker(app::TuneRequest r, const std::optional<std::string>& db_seed, int rank, TuneOptions::BeforeDecision before)
        : rank_(rank), before_(std::move(before)) {
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
            if (before_) before_(rank_, decided_);
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
    TuneOptions::BeforeDecision before_;
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
TuneReport serve(const app::TuneRequest& r, const std::optional<std::string>& seed, int rank, int size,
                 const TuneOptions& o) {
    // While a problem is decided (on a thread of its own), the main thread tells rank 0 it is alive.
    const auto beat = std::chrono::duration<double>(o.rank_timeout_s > 0 ? std::min(1.0, o.rank_timeout_s / 4) : 0);
    TuneReport rep;
    rep.rank = rank;
    rep.ranks = size;
    std::unique_ptr<Worker> w;
    std::string err;
    try {
        w = std::make_unique<Worker>(r, seed, rank, o.before_decision);
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
                while (decided.wait_for(beat) == std::future_status::timeout)
                    detail::send_string("", 0, tag_heartbeat, MPI_COMM_WORLD);
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

// Rank 0 validates the request; the others learn whether it was accepted (PeerFailed when not).
// Rank 0's job, null on the other ranks.
std::unique_ptr<app::TuneJob> accept_request(const app::TuneRequest& r, int rank) {
    std::unique_ptr<app::TuneJob> job;
    if (rank == 0) {
        try {
            job = std::make_unique<app::TuneJob>(r);
        } catch (const std::exception& e) {
            const std::string refused = e.what();
            detail::broadcast_string(refused.empty() ? "?" : refused, 0, MPI_COMM_WORLD);
            throw;
        }
        detail::broadcast_string("", 0, MPI_COMM_WORLD);
    } else {
        const std::string refused = detail::broadcast_string("", 0, MPI_COMM_WORLD);
        if (!refused.empty()) throw PeerFailed("rank 0 refused the request: " + refused);
    }
    return job;
}

// The database as rank 0 reads it now, on every rank, for each rank's private copy: its text
// (empty when the file does not exist yet), or nullopt when the request has no database.
std::optional<std::string> share_database(const app::TuneJob* job, int rank) {
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
    if (s.is_null()) return std::nullopt;
    return s.get<std::string>();
}

// Rank 0: hands problems out to the ranks that ask, decides on a thread of its own unless it only
// coordinates, watches for silent ranks, gives the sink the decisions in the request's order and
// writes new records to the database in batches.
class Coordinator {
public:
    using Clock = std::chrono::steady_clock;

    Coordinator(const app::TuneRequest& r, app::TuneJob& job, std::optional<std::string> seed, int size,
                app::TuneSink* sink, const TuneOptions& o, Clock::time_point t0)
        : r_(r),
          job_(job),
          seed_(std::move(seed)),
          size_(size),
          sink_(sink),
          o_(o),
          t0_(t0),
          n_(job.size()),
          works_(o.rank0_works || size == 1),
          disp_(n_, size, o.max_attempts, o.retire_after),
          out_(job.header().db),
          local_done_(!works_),
          heard_(static_cast<std::size_t>(size), t0) {
        rep_.ranks = size;
        rep_.totals = job.header();
        if (!works_) disp_.exclude(0);
        if (!out_.empty()) batch_dir_ = std::make_unique<TempDir>();
    }

    TuneReport run() {
        if (works_) start_local_worker();
        if (sink_) sink_->begin(rep_.totals);
        rep_.totals.count = n_;
        try {
            serve_ranks();
        } catch (const std::exception& e) {
            abort_job(0, e.what());  // the worker thread is still running: no unwinding past it
        }
        if (local_.joinable()) local_.join();
        emit();
        flush();
        warn_unsaved();
        if (r_.progress) r_.progress(n_, n_, "");
        return report();
    }

private:
    // Rank 0's own decisions, on a thread, through the dispatcher like any rank's.
    void start_local_worker() {
        local_ = std::thread([this] {
            std::unique_ptr<Worker> w;
            std::string err;
            try {
                w = std::make_unique<Worker>(r_, seed_, 0, o_.before_decision);
            } catch (const std::exception& e) {
                err = e.what();
            }
            std::unique_lock lk(mu_);
            local_results_.push_back(hello(err));
            while (w) {
                std::optional<int64_t> i;
                cv_.wait(lk, [&] { return disp_.finished() || disp_.retired(0) || (i = disp_.take(0)).has_value(); });
                if (!i) break;
                lk.unlock();
                json m = w->decide(*i);
                lk.lock();
                local_results_.push_back(std::move(m));
            }
            local_done_ = true;
            cv_.notify_all();
        });
    }

    // Until every problem is decided or given up and every other rank is stopped or lost.
    void serve_ranks() {
        auto pause = std::chrono::microseconds(20);
        while (true) {
            std::vector<json> got;
            if (size_ > 1) {
                receive_results(got);
                receive_heartbeats();
                if (o_.rank_timeout_s > 0) retire_silent_ranks();
            }
            take_local_results(got);
            cv_.notify_all();
            const bool any = !got.empty();
            for (const json& m : got) output(m);
            emit();
            if (std::chrono::duration<double>(Clock::now() - last_flush_).count() >= o_.flush_s) flush();
            if (over(any)) break;
            if (any) {
                pause = std::chrono::microseconds(20);
            } else {
                std::this_thread::sleep_for(pause);
                pause = std::min(pause * 2, std::chrono::microseconds(1000));
            }
        }
    }

    // The other ranks' results and requests that have arrived, each answered at once.
    void receive_results(std::vector<json>& got) {
        while (auto msg = poll(tag_result)) {
            const int from = msg->first;
            json m = json::parse(msg->second);
            heard_[static_cast<std::size_t>(from)] = Clock::now();
            std::lock_guard lk(mu_);
            const bool was_lost = disp_.lost(from);  // its answer came too late: another rank has its problem
            if (!was_lost) account(from, m);
            waiting_.insert(from);
            assign();  // before the slower bookkeeping, so the rank is not kept waiting
            if (!was_lost) got.push_back(std::move(m));
        }
    }

    void receive_heartbeats() {  // only when they came
        while (auto msg = poll(tag_heartbeat)) heard_[static_cast<std::size_t>(msg->first)] = Clock::now();
    }

    // The next message with `tag` that has arrived from any rank, if one has: (sender, text).
    static std::optional<std::pair<int, std::string>> poll(int tag) {
        int flag = 0;
        MPI_Status st;
        detail::check(MPI_Iprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag, &st), "MPI_Iprobe");
        if (!flag) return std::nullopt;
        int from = 0;
        std::string text = detail::recv_string(st.MPI_SOURCE, tag, MPI_COMM_WORLD, &from);
        return std::pair{from, std::move(text)};
    }

    // A rank that holds a problem and has been silent for rank_timeout_s is lost: retired, named,
    // its problem handed to another rank.
    void retire_silent_ranks() {
        const auto now = Clock::now();
        std::lock_guard lk(mu_);
        for (int k = 1; k < size_; ++k) {
            const double silent = std::chrono::duration<double>(now - heard_[static_cast<std::size_t>(k)]).count();
            if (disp_.lost(k) || stopped_.count(k) || !disp_.holds(k) || silent < o_.rank_timeout_s) continue;
            const std::vector<int64_t> back = disp_.lose(k);
            std::string what;
            for (int64_t i : back) what += (what.empty() ? "" : ", ") + job_.problem(i).problem;
            lost_why_.push_back(
                fmt::format("rank {}: no word from it for {:.0f} s (--rank-timeout) while it decided {}; "
                            "retired (stopped, hung or gone), its problem handed to another rank",
                            k, silent, what.empty() ? "a problem" : what));
            std::fprintf(stderr, "convtune: %s\n", lost_why_.back().c_str());
            std::fflush(stderr);
        }
        assign();
    }

    void take_local_results(std::vector<json>& got) {
        std::lock_guard lk(mu_);
        while (!local_results_.empty()) {
            account(0, local_results_.front());
            got.push_back(std::move(local_results_.front()));
            local_results_.pop_front();
        }
        assign();
    }

    // Under mu_: record what m says in the dispatcher.
    void account(int from, const json& m) {
        const int64_t i = m["i"].get<int64_t>();
        if (i < 0) {
            if (!m["ok"].get<bool>()) {
                startup_.push_back(fmt::format("rank {}: {}", from, m["err"].get<std::string>()));
                disp_.exclude(from);
            }
        } else if (m["ok"].get<bool>()) {
            disp_.done(from, i);
        } else {
            disp_.failed(from, i, m["err"].get<std::string>());
        }
    }

    // Under mu_: hand work to the ranks waiting for it; stop them when there is none left for them.
    void assign() {
        for (auto it = waiting_.begin(); it != waiting_.end();) {
            std::optional<int64_t> i;
            if (disp_.finished() || disp_.retired(*it)) {
                detail::send_string("-1", *it, tag_assign, MPI_COMM_WORLD);
                stopped_.insert(*it);
            } else if ((i = disp_.take(*it))) {
                detail::send_string(std::to_string(*i), *it, tag_assign, MPI_COMM_WORLD);
            } else {
                ++it;
                continue;
            }
            it = waiting_.erase(it);
        }
    }

    // Outside mu_: keep a decision and its record for the next batch.
    void output(const json& m) {
        const int64_t i = m["i"].get<int64_t>();
        if (i < 0 || !m["ok"].get<bool>()) return;
        app::TunedProblem t = job_.problem(i);
        t.decision = std::make_shared<const Decision>(decision_from_json(m["d"]));
        rep_.totals.total_search_ms += t.decision->search_ms;
        rep_.totals.from_database += t.decision->source == Source::database;
        if (batch_dir_ && m.contains("rec")) {
            const Environment env = environment_from_wire(m["env"]);
            auto sec = std::find_if(batch_.begin(), batch_.end(), [&](const DbSection& x) { return x.env == env; });
            if (sec == batch_.end()) sec = batch_.insert(batch_.end(), DbSection{env, {}});
            sec->entries[t.decision->key] = db_record_from_json(m["rec"], "record from a rank");
        }
        ready_.emplace(i, std::move(t));
    }

    // Gives the sink what is now in order.
    void emit() {
        while (next_ < n_) {
            auto it = ready_.find(next_);
            if (it != ready_.end()) {
                if (sink_) sink_->problem(it->second);
                ready_.erase(it);
            } else {
                std::lock_guard lk(mu_);
                if (!disp_.is_given_up(next_)) break;
            }
            ++next_;
        }
    }

    // New records, written to the database in batches with app::db_merge (the database's lock
    // and merge rule: the newer record of a key wins) every o.flush_s seconds and at the end:
    // one rewrite of the file per batch, where a store per record rewrote it per problem.
    void flush() {
        last_flush_ = Clock::now();
        if (batch_.empty()) return;
        try {
            const std::string file = batch_dir_->file("batch.json");
            TuningDatabase::write_file(file, batch_);
            app::db_merge({out_, {file}});
            batch_.clear();
        } catch (const Error& e) {  // kept for the next flush, as a store keeps it in memory
            if (!warned_) std::fprintf(stderr, "convtune: warning: tuning results not saved yet: %s\n", e.what());
            warned_ = true;
        }
    }

    void warn_unsaved() const {
        if (batch_.empty()) return;
        int64_t lost = 0;
        for (const DbSection& x : batch_) lost += static_cast<int64_t>(x.entries.size());
        std::fprintf(stderr, "convtune: warning: %lld tuning results could not be saved to %s\n",
                     static_cast<long long>(lost), out_.c_str());
    }

    // Whether the job is over; shows the progress when results came (`any`).
    bool over(bool any) {
        bool finished;
        int64_t done, given_up;
        {
            std::lock_guard lk(mu_);
            int ended = 0;  // ranks told to stop, or lost and silent since
            for (int k = 1; k < size_; ++k) ended += stopped_.count(k) || disp_.lost(k);
            finished = disp_.finished() && local_done_ && ended == size_ - 1;
            done = disp_.done();
            given_up = static_cast<int64_t>(disp_.given_up().size());
        }
        if (r_.progress && any) {
            const double el = std::chrono::duration<double>(Clock::now() - t0_).count();
            const double rate = el > 0 ? static_cast<double>(done) / el : 0;
            const int64_t left = n_ - done - given_up;
            r_.progress(done + given_up, n_,
                        fmt::format("{} rank{}, {:.1f} problems/s, {}", size_, size_ == 1 ? "" : "s", rate,
                                    rate > 0 ? "~" + format_duration(static_cast<double>(left) / rate) + " left"
                                             : "estimating"));
        }
        return finished;
    }

    TuneReport report() {
        rep_.decided = disp_.decided();
        rep_.retired = disp_.retired_ranks();
        rep_.retried = disp_.retried();
        for (const auto& [i, why] : disp_.given_up()) {
            const app::TunedProblem t = job_.problem(i);
            rep_.failed.push_back({i, t.problem, t.name, why});
            rep_.totals.not_tuned.push_back({i, t.problem, t.name, fmt::format("{}", fmt::join(why, "; "))});
        }
        rep_.not_started = startup_;
        rep_.lost = lost_why_;
        for (int k = 1; k < size_; ++k) rep_.abandoned = rep_.abandoned || (disp_.lost(k) && !stopped_.count(k));
        if (sink_) sink_->end(rep_.totals);
        rep_.wall_s = std::chrono::duration<double>(Clock::now() - t0_).count();
        return rep_;
    }

    const app::TuneRequest& r_;
    app::TuneJob& job_;
    const std::optional<std::string> seed_;
    const int size_;
    app::TuneSink* sink_;
    const TuneOptions& o_;
    const Clock::time_point t0_;
    const int64_t n_;
    const bool works_;
    TuneReport rep_;

    std::mutex mu_;  // guards disp_, local_results_, local_done_, waiting_, stopped_, startup_ with the local worker
    std::condition_variable cv_;
    Dispatcher disp_;
    std::deque<json> local_results_;
    std::thread local_;

    const std::string out_;  // the database, "" when none
    std::vector<DbSection> batch_;
    std::unique_ptr<TempDir> batch_dir_;
    Clock::time_point last_flush_ = Clock::now();
    bool warned_ = false;

    bool local_done_;
    std::set<int> waiting_;  // ranks that asked for work and got none yet
    std::set<int> stopped_;  // ranks told to stop
    // When each rank was last heard from (a result, a request or a heartbeat): one that holds a
    // problem and is silent for rank_timeout_s is lost (Dispatcher::lose).
    std::vector<Clock::time_point> heard_;
    std::vector<std::string> lost_why_;
    std::map<int64_t, app::TunedProblem> ready_;  // decided, not yet given to the sink
    int64_t next_ = 0;
    std::vector<std::string> startup_;  // ranks that could not start
};

}  // namespace

TuneReport tune(const app::TuneRequest& r, app::TuneSink* sink, const TuneOptions& o) {
    Session session;
    const int rank = session.rank(), size = session.size();
    const auto t0 = std::chrono::steady_clock::now();
    const std::unique_ptr<app::TuneJob> job = accept_request(r, rank);
    std::optional<std::string> seed = share_database(job.get(), rank);
    if (rank != 0) {
        TuneReport rep = serve(r, seed, rank, size, o);
        rep.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return rep;
    }
    return Coordinator(r, *job, std::move(seed), size, sink, o, t0).run();
}

void end_job(int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
}

std::string to_text(const TuneReport& r) {
    std::string s = fmt::format("distributed over {} rank{} in {:.2f} s; decided per rank:", r.ranks,
                                r.ranks == 1 ? "" : "s", r.wall_s);
    for (std::size_t i = 0; i < r.decided.size(); ++i) s += fmt::format(" {}={}", i, r.decided[i]);
    s += fmt::format("; {} retried after a failure\n", r.retried);
    for (int k : r.retired) s += fmt::format("rank {} retired: it failed problems that other ranks decided\n", k);
    for (const std::string& n : r.not_started) s += fmt::format("{} (could not start; the others took its share)\n", n);
    for (const std::string& n : r.lost) s += n + "\n";
    for (const app::NotTunedProblem& f : r.totals.not_tuned) s += app::to_text(f);
    return s;
}

}  // namespace convtune::dist
