// convtune tune (--problem SPEC | --shapes FILE | --workload NAMES [--mode train|infer])
//               [--batch N,...] [--dtype T,...] [--backend B | --replay REC] [--policy P] [--flags ...]
//               [--db PATH] [--json]
// convtune explain --problem SPEC [--backend B] [--policy P] [--flags ...] [--db PATH] [--json]
// Chooses an algorithm per problem under the given flags (benchmark=1 unless --flags says
// otherwise) and explains each choice: candidates, their state, samples, median and spread,
// workspace, notes, which filter removed which candidate, and where the choice came from.
// The work is convtune::app::tune / explain; this file fills the request and prints the report.
// Started by mpirun (or srun), tune shares the problems out over the ranks through
// convtune::dist::tune (docs/distributed.md): rank 0 prints the report, its database is the
// merge of every rank's decisions, and problems that could not be tuned exit 3.
#include <fmt/core.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>

#include <iostream>
#include <memory>

#include "cli.hpp"
#include "convtune/app/tune.hpp"
#include "convtune/dist/launch.hpp"
#include "convtune/dist/tune.hpp"
#include "convtune/policy.hpp"
#include "convtune/sim/report.hpp"

namespace convtune::cli {

namespace {

struct TuneOptions {
    app::TuneRequest r;
    std::string problem, db;
    bool json = false, progress = false, coordinator_only = false;
    double db_flush_s = 1;
    double rank_timeout_s = dist::TuneOptions{}.rank_timeout_s;
    ProblemOverrides over;
};

// --policy's help: every registered policy, the default marked.
std::string policy_help() {
    std::string h;
    for (Policy p : all_policies()) {
        if (!h.empty()) h += ", ";
        h += to_string(p);
        if (p == FlagValues{}.policy) h += " (default)";
    }
    return h;
}

// How many problems there are, on stderr before the first is decided (a catalogue can take hours);
// nothing for a single problem.
void announce(const app::TuneReport& r) {
    if (r.count < 2) return;
    fmt::print(stderr, "tune: {} problem{} on backend {}\n", r.count, r.count == 1 ? "" : "s", r.backend);
    std::fflush(stderr);
}

// The JSON form, announced.
class JsonSink final : public app::TuneSink {
public:
    void begin(const app::TuneReport& r) override {
        announce(r);
        w_.begin(r);
    }
    void problem(const app::TunedProblem& p) override { w_.problem(p); }
    void end(const app::TuneReport& r) override { w_.end(r); }

private:
    app::TuneJsonWriter w_{std::cout};
};

// The text form: the count, each problem's explain table as it is decided, then the totals.
class TextSink final : public app::TuneSink {
public:
    explicit TextSink(sim::Progress& bar) : bar_(bar) {}
    void begin(const app::TuneReport& r) override { announce(r); }
    void problem(const app::TunedProblem& p) override {
        bar_.finish();
        fmt::print("{}", app::to_text(p));
    }
    void end(const app::TuneReport& r) override {
        bar_.finish();
        fmt::print("\n{} problem{}, {} from the database, total search {:.1f} ms (flags {}){}\n", r.count,
                   r.count == 1 ? "" : "s", r.from_database, r.total_search_ms, r.flags,
                   r.db.empty() ? "" : ", database " + r.db);
    }

private:
    sim::Progress& bar_;
};

// CONVTUNE_DIST_FAIL=RANK:AFTER makes rank RANK fail every problem after its first AFTER
// (RANK:AFTER:exit: the process exits mid-problem; RANK:AFTER:stop: it stops itself with SIGSTOP,
// as kill -STOP does): the failures tests/mpi/dist_tune.py injects, through
// dist::TuneOptions::before_decision. Empty when the variable is not set.
dist::TuneOptions::BeforeDecision injected_failure() {
    const char* v = std::getenv("CONVTUNE_DIST_FAIL");
    if (!v || !*v) return {};
    char mode[8] = {0};
    long rank = -1;
    long long after = -1;
    const int n = std::sscanf(v, "%ld:%lld:%7s", &rank, &after, mode);
    if (n < 2 || rank < 0 || after < 0 || (n == 3 && std::string(mode) != "exit" && std::string(mode) != "stop"))
        throw Error("CONVTUNE_DIST_FAIL: expected RANK:AFTER, RANK:AFTER:exit or RANK:AFTER:stop, got " +
                    quote_input(v));
    const bool exit = n == 3 && std::string(mode) == "exit", stop = n == 3 && std::string(mode) == "stop";
    return [fail_rank = static_cast<int>(rank), after = static_cast<int64_t>(after), exit, stop](int rank,
                                                                                                 int64_t decided) {
        if (rank != fail_rank || decided < after) return;
        if (exit) {
            std::fprintf(stderr, "convtune: rank %d exits (CONVTUNE_DIST_FAIL)\n", rank);
            std::fflush(stderr);
            std::_Exit(1);
        }
        if (stop) {
            std::fprintf(stderr, "convtune: rank %d stops itself (CONVTUNE_DIST_FAIL)\n", rank);
            std::fflush(stderr);
            std::raise(SIGSTOP);  // as kill -STOP: every thread stops until SIGCONT
        }
        throw Error("injected failure (CONVTUNE_DIST_FAIL)");
    };
}

int tune(TuneOptions& o) {
    app::TuneRequest r = o.r;
    if (!o.problem.empty()) r.problems = {o.problem};
    if (!o.db.empty()) r.db = o.db;
    r.db_flush_s = o.db_flush_s;
    r.dir = o.over.dir;
    r.dtype = o.over.dtype;
    r.layout = o.over.layout;
    const int ranks = dist::launched_ranks();
    if (ranks > 1 || (ranks == 1 && dist::mpi_built())) {
        dist::bind_gpu_to_local_rank();  // before any backend initialises
        sim::Progress bar("tune", o.progress || ::isatty(2));
        r.progress = [&bar](int64_t d, int64_t t, const std::string& w) { bar.update(d, t, w); };
        dist::TuneOptions dopt;
        dopt.rank0_works = !o.coordinator_only;
        dopt.flush_s = o.db_flush_s;
        dopt.rank_timeout_s = o.rank_timeout_s;
        std::unique_ptr<app::TuneSink> sink;
        if (o.json) sink = std::make_unique<JsonSink>();
        else sink = std::make_unique<TextSink>(bar);
        // MPI until this function returns, so that rank 0 says why it refused a request before
        // any rank leaves MPI_Finalize: mpirun ends the job, rank 0 and its message with it, as
        // soon as one rank has exited with code 2.
        const dist::Session session;
        dist::TuneReport rep;
        try {
            dopt.before_decision = injected_failure();
            rep = dist::tune(r, sink.get(), dopt);
        } catch (const dist::PeerFailed&) {
            return bad_input;  // rank 0 says why
        } catch (const Error& e) {
            return print_bad_input(e);
        }
        if (rep.rank != 0) return ok;
        bar.finish();
        fmt::print(stderr, "{}", dist::to_text(rep));
        // A rank retired for silence may never answer again, and MPI cannot finish without it.
        if (rep.abandoned) dist::end_job(run_failed);
        return rep.failed.empty() && rep.lost.empty() ? ok : run_failed;
    }
    sim::Progress bar("tune", o.progress || ::isatty(2));
    r.progress = [&bar](int64_t d, int64_t t, const std::string& w) { bar.update(d, t, w); };
    app::TuneReport rep;
    if (o.json) {
        JsonSink w;
        rep = app::tune(r, &w);
    } else {
        TextSink text(bar);
        rep = app::tune(r, &text);
    }
    // As under mpirun: each problem that could not be tuned named on stderr, exit 3.
    bar.finish();
    for (const app::NotTunedProblem& p : rep.not_tuned) fmt::print(stderr, "{}", app::to_text(p));
    return rep.not_tuned.empty() ? ok : run_failed;
}

struct ExplainOptions {
    app::ExplainRequest r;
    std::string db;
    bool json = false;
    ProblemOverrides over;
};

int explain(ExplainOptions& o) {
    app::ExplainRequest r = o.r;
    if (!o.db.empty()) r.db = o.db;
    r.dir = o.over.dir;
    r.dtype = o.over.dtype;
    r.layout = o.over.layout;
    const app::ExplainReport rep = app::explain(r);
    if (o.json) fmt::print("{}", app::json_text(app::to_json(rep)));
    else fmt::print("{}\nbackend {}, flags {}\n", app::to_text(rep.result), rep.backend, rep.flags);
    return ok;
}

}  // namespace

void add_tune(CLI::App& app, Action& action) {
    auto* cmd = app.add_subcommand(
        "tune", "Choose and explain the algorithm for problems under flags (benchmark=1 by default)");
    auto o = std::make_shared<TuneOptions>();
    cmd->add_option("--problem,-p", o->problem, "One problem (canonical or benchdnn)")->check(non_empty());
    cmd->add_option("--shapes,-s", o->r.shapes, "A shape file (benchdnn or canonical lines)")->check(non_empty());
    cmd->add_option(
           "--workload,-w", o->r.workload,
           "Networks, comma-separated: built-in names (resnet50, vgg11, ...), shape or workload files; their distinct "
           "problems")
        ->check(non_empty());
    cmd->add_option("--mode", o->r.mode,
                    "With --workload: infer (fwd, the default) or train (fwd, bwd_data, bwd_filter)")
        ->check(non_empty());
    cmd->add_option("--shapes-dir", o->r.shapes_dir,
                    "With --workload: the folder of the benchdnn files behind the built-in names")
        ->check(non_empty());
    cmd->add_option("--backend,-b", o->r.backend, "Backend (default cpu)")->check(non_empty());
    cmd->add_option("--replay", o->r.replay, "Tune on a recording's replay (convtune record) instead of a live backend")
        ->check(non_empty());
    cmd->add_option("--policy", o->r.policy, policy_help())->check(non_empty());
    cmd->add_option("--flags", o->r.flags, "e.g. benchmark=1,deterministic=1,allow_tf32=0,benchmark_limit=N,enabled=1")
        ->check(non_empty());
    cmd->add_option("--db", o->db, "Tuning database file (default: $CONVTUNE_DB; none when unset)")->check(non_empty());
    cmd->add_option("--batch", o->r.batch, "Batch sizes, comma-separated: every problem at each (default: as written)")
        ->check(non_empty());
    cmd->add_flag("--json", o->json, "Print one JSON document");
    cmd->add_flag("--progress", o->progress, "Show the progress bar even when stderr is not a terminal");
    cmd->add_flag("--coordinator-only", o->coordinator_only,
                  "Under mpirun: rank 0 hands out problems and merges, but decides none");
    cmd->add_option(
           "--rank-timeout", o->rank_timeout_s,
           "Under mpirun: seconds a rank deciding a problem may go without a heartbeat before it is retired and its "
           "problem handed to another rank (default 60; 0 = wait forever)")
        ->check(CLI::Range(0.0, 86400.0));
    cmd->add_option(
           "--db-flush", o->db_flush_s,
           "Seconds between the database's writes (default 1; 0 = every result), and one at the end; a killed run "
           "loses what was decided since the last write (under mpirun: rank 0's merges)")
        ->check(CLI::Range(0.0, 3600.0));
    o->over.add_to(*cmd);
    cmd->get_option("--dtype")->description(
        "Data types, comma-separated (f32, f16, bf16): every problem in each (default: as written)");
    cmd->callback([o, &action] { action = [o] { return tune(*o); }; });
}

void add_explain(CLI::App& app, Action& action) {
    auto* cmd = app.add_subcommand(
        "explain", "Choose the algorithm for one problem and explain the choice (tune for one problem)");
    auto o = std::make_shared<ExplainOptions>();
    cmd->add_option("--problem,-p", o->r.problem, "The problem (canonical or benchdnn)")
        ->required()
        ->check(non_empty());
    cmd->add_option("--backend,-b", o->r.backend, "Backend (default cpu)")->check(non_empty());
    cmd->add_option("--policy", o->r.policy, policy_help())->check(non_empty());
    cmd->add_option("--flags", o->r.flags, "e.g. benchmark=0,deterministic=1")->check(non_empty());
    cmd->add_option("--db", o->db, "Tuning database file (default: $CONVTUNE_DB; none when unset)")->check(non_empty());
    cmd->add_flag("--json", o->json, "Print one JSON document");
    o->over.add_to(*cmd);
    cmd->callback([o, &action] { action = [o] { return explain(*o); }; });
}

}  // namespace convtune::cli
