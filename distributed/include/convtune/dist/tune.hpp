// A tune shared out over the ranks of an MPI job, its decisions merged into one database.
//
// Every rank calls tune() with the same request (mpirun starts the same command on each). Rank 0
// reads the database, hands problem indices out on request (a rank that finishes one asks for
// the next, so slow problems hold no static share back) and, by default, decides problems too on
// a thread of its own; every other rank decides the problems it is given. Each rank decides
// through app::TuneJob with a private copy of the database as it was at the start (what was
// tuned before comes from the database, on every rank); the records of new searches travel to
// rank 0, which stores them in the database with TuningDatabase's rules (file lock, newer record
// wins, atomic write) as they arrive, so an interrupted job keeps what it finished. The sink gets
// the problems in the request's order on rank 0.
//
// Failures: a problem whose decision throws on a rank is given to a rank that has not failed it;
// after max_attempts ranks failed it, or when no such rank is left, it is given up and reported
// by name (DistTuneReport::failed). A rank that fails retire_after problems that another rank
// then decided is retired (a broken device). A rank that dies takes the job with it (MPI); the
// database keeps what was stored, and the same command run again resumes from it.
//
// TuneOptions::before_decision is how a caller makes a rank fail, exit or stop before a decision
// (the CLI's CONVTUNE_DIST_FAIL, which the tests use: tools/tune.cpp).
//
// Each rank's private copy of the database lives in "$TMPDIR/convtune-dist-<host>-<pid>-XXXXXX"
// (else /tmp), removed when the rank ends, also on SIGTERM, SIGINT and SIGHUP (what mpirun sends
// its ranks when it is interrupted or one rank dies); those of processes that died without
// either (kill -9) are removed by the next distributed tune on the host.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "convtune/app/tune.hpp"
#include "convtune/error.hpp"

namespace convtune::dist {

struct TuneOptions {
    bool rank0_works = true;  // false: rank 0 only coordinates (and with one rank, decides alone)
    int max_attempts = 2;     // distinct ranks that may fail a problem before it is given up
    int retire_after = 3;     // a rank's failures, of problems another rank then decided, before it is retired
    double flush_s = 1;       // rank 0 writes new records to the database at most this often (0 = each at once)
    // A rank deciding a problem sends rank 0 a heartbeat every min(1 s, rank_timeout_s / 4). One
    // silent for rank_timeout_s while it holds a problem (stopped with kill -STOP, hung, its
    // host gone) is retired and named, and its problem handed to another rank; the job then ends
    // with exit 3 after the report (MPI cannot finish with a rank that does not answer). 0 = wait
    // for every rank forever.
    double rank_timeout_s = 60;
    // Called on each rank (rank 0's deciding thread included) before it decides a problem, with
    // the rank and how many problems it has decided so far. What it throws fails that problem on
    // that rank, as a broken device would; it may also end or stop the process. Empty: nothing.
    using BeforeDecision = std::function<void(int rank, int64_t decided)>;
    BeforeDecision before_decision;
};

struct FailedProblem {
    int64_t index = 0;
    std::string problem, name;
    std::vector<std::string> reasons;  // "rank R: message", one per attempt
};

struct TuneReport {
    app::TuneReport totals;       // over every rank (rank 0; other ranks: their own share)
    int ranks = 1;
    int rank = 0;                 // this process's rank
    std::vector<int64_t> decided; // rank 0: problems each rank decided
    std::vector<int> retired;     // rank 0: ranks retired for failing
    int64_t retried = 0;          // rank 0: problems decided after a failure elsewhere
    std::vector<FailedProblem> failed;  // rank 0: problems given up, in order
    std::vector<std::string> not_started;  // rank 0: "rank R: why" for ranks that could not start
    std::vector<std::string> lost;         // rank 0: "rank R: ..." for ranks retired for silence (rank_timeout_s)
    bool abandoned = false;                // rank 0: a lost rank never answered again: end the job (end_job)
    double wall_s = 0;
};

// Collective over MPI_COMM_WORLD. When MPI is not initialised yet, tune() initialises it and
// finalises it before returning (see Session), which MPI allows once per process: a program that
// calls tune() more than once, or uses MPI itself, initialises MPI first. `sink` and
// r.progress are used on rank 0 only; progress names the ranks, the rate and the time left.
// Errors in the request throw on every rank.
TuneReport tune(const app::TuneRequest& r, app::TuneSink* sink = nullptr, const TuneOptions& o = {});

// Rank 0's summary: ranks, what each decided, retries, retired ranks, each problem given up.
std::string to_text(const TuneReport& r);

// Ends the whole job now with `code` (MPI_Abort), after flushing stdout and stderr: what rank 0
// does when a rank it retired for silence still holds the job (TuneReport::abandoned).
[[noreturn]] void end_job(int code);

// Thrown on the other ranks when rank 0 refused the request (rank 0 throws and prints the reason).
class PeerFailed : public Error {
public:
    using Error::Error;
};

// MPI for the lifetime of the object: initialised (threads: funneled) unless it already is, and
// finalised by the one that initialised it.
class Session {
public:
    Session();
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
    int rank() const;
    int size() const;

private:
    bool owner_ = false;
};

}  // namespace convtune::dist
