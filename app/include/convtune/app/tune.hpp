// tune and explain: choose an algorithm per problem under flags and say why.
//
// tune() decides the problems of a request one at a time and hands each result to a sink as it
// is decided; the report keeps only the totals unless asked to keep the results, so the memory a
// run needs does not grow with the number of problems. TuneJsonWriter is the sink behind the one
// JSON form (`convtune tune --json`, convtune.tune()).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "convtune/app/fields.hpp"
#include "convtune/app/report.hpp"
#include "convtune/backend.hpp"
#include "convtune/convtune.hpp"
#include "convtune/decision.hpp"
#include "convtune/flags.hpp"

namespace convtune::app {

// The most problems one tune request may hold (problems x data types x batch sizes, or each
// network's distinct problems at each): checked before anything is decided or allocated for
// them, naming the list that makes the count (docs/reliability.md). A larger catalogue is split
// into several runs into one database.
inline constexpr int64_t kMaxTuneProblems = 1'000'000;
// The most batch sizes one request lists (each network is built once per batch size and type).
inline constexpr int64_t kMaxTuneBatches = 4096;

struct TuneRequest {
    // The problems: exactly one of the three.
    std::vector<std::string> problems;  // problem strings (canonical or benchdnn)
    std::string shapes;                 // a shape file
    std::string workload;               // networks, comma-separated: built-in names (resnet50, ...), shape or
                                        // workload files; each network's distinct problems (app::WorkloadRequest,
                                        // as record reads them), a problem shared by several networks once
    std::string mode;                   // workload only: infer (default: fwd) or train (fwd, bwd_data, bwd_filter)
    std::string shapes_dir;             // workload only: the folder of the built-in names' files ("" = default)
    std::string backend = "cpu";
    std::string replay{};               // a recording: tune on its replay (sim::ReplayBackend) instead of backend
    std::string policy;                 // over benchmark=1: pytorch, pytorch-v7, convtune, adaptive
    std::string flags;                  // "key=value,...", applied after the policy
    std::optional<FlagValues> flag_values;  // when set, the flags as they are (policy and flags unused)
    std::optional<std::string> db;      // tuning database file; nullopt = default_db_path(), "" = none
    double db_flush_s = 1;              // seconds between the database's writes (0 = one per search), and one at
                                        // the end: a write per problem costs a rename and two fsyncs; a killed
                                        // run loses what was decided since the last write (docs/reliability.md)
    // Catalogue lists: every problem once per batch size and data type, comma-separated ("1,8,32",
    // "f32,f16,bf16"; "" = as written). The problems come batch by batch within a data type.
    std::string batch, dtype;
    std::string dir, layout;            // overrides of every problem's fields ("" = as written; dir not with workload)
    ProgressFn progress;
};

// The flags a request tunes under: benchmark=1, then the policy, then the flags text (or
// flag_values). Throws on a bad policy or flag.
FlagValues tune_flags(const TuneRequest& r);

// TuneRequest's field table (fields.hpp). "problems" is the CLI's --problem (one problem there).
template <class V>
void visit_fields(TuneRequest& r, V&& v) {
    v("problems", r.problems);
    v("shapes", r.shapes);
    v("workload", r.workload);
    v("mode", r.mode);
    v("shapes_dir", r.shapes_dir);
    v("backend", r.backend);
    v("replay", r.replay);
    v("policy", r.policy);
    v("flags", FlagsField{r.flags, r.flag_values, [&r] { return tune_flags(r); }});
    v("db", r.db);
    v("db_flush", r.db_flush_s);
    v("batch", r.batch);
    v("dtype", r.dtype);
    v("dir", r.dir);
    v("layout", r.layout);
}

struct TunedProblem {
    std::string problem;  // canonical form
    std::string name;     // the shape file's name for it ("" = none)
    std::shared_ptr<const Decision> decision;
};
// {problem, name (when set), algorithm, source, search_ms, median_ms, key, candidates}
nlohmann::json to_json(const TunedProblem& p);
// The explain table: the choice, where it came from, and every candidate with its state.
std::string to_text(const TunedProblem& p);

// A problem nothing could be decided for (no algorithm can run it under the flags, every
// candidate failed, or, under mpirun, every rank that tried failed): reported by name, the run
// goes on with the next problem.
struct NotTunedProblem {
    int64_t index = 0;    // in the request's order
    std::string problem;  // canonical form
    std::string name;     // the shape file's name for it ("" = none)
    std::string reason;   // the error, or "rank R: ..." per attempt under mpirun
};
// {problem, name (when set), reason}
nlohmann::json to_json(const NotTunedProblem& p);
// "NOT TUNED: <problem>  # <name>: <reason>\n", what the CLI prints on stderr for each
std::string to_text(const NotTunedProblem& p);

struct TuneReport {
    std::string backend, flags;
    std::string db;  // the database used ("" = none)
    int64_t count = 0;
    double total_search_ms = 0;
    int from_database = 0;
    std::vector<TunedProblem> problems;  // only when tune() was asked to keep them
    std::vector<NotTunedProblem> not_tuned;  // in order; the CLI exits 3 when there are any
};

class TuneSink {
public:
    virtual ~TuneSink() = default;
    // Backend, flags and db are known, nothing is decided yet (the request is valid).
    virtual void begin(const TuneReport&) {}
    virtual void problem(const TunedProblem& p) = 0;
    virtual void end(const TuneReport&) {}
};

// A validated request, ready to decide its problems one at a time, in any order: what tune()
// loops over, and what a distributed tune (distributed/) hands out by index. Construction validates the
// whole request (errors name its fields) and opens the database; nothing is decided yet.
class TuneJob {
public:
    explicit TuneJob(const TuneRequest& r);
    ~TuneJob();
    TuneJob(const TuneJob&) = delete;
    TuneJob& operator=(const TuneJob&) = delete;

    const TuneReport& header() const;  // backend, flags, db and count; no totals
    int64_t size() const;
    const FlagValues& flags() const;
    Backend& backend() const;
    Context& context() const;           // the selector's cache and database
    // The shape file's name of problem i, else its canonical form (what progress shows).
    const std::string& label(int64_t i) const;
    TunedProblem problem(int64_t i) const;  // its canonical form and name, no decision yet
    TunedProblem decide(int64_t i);         // throws Error when nothing can run it

private:
    struct State;
    std::unique_ptr<State> s_;
};

// Validates the whole request (errors name the request's fields and are thrown before anything
// is decided), then decides each problem. A problem that cannot be decided (Error from its
// decision) is not an error of the request: it goes to TuneReport::not_tuned and the next one is
// decided, so the sink always sees a whole run.
TuneReport tune(const TuneRequest& r, TuneSink* sink = nullptr, bool keep = false);

// The JSON form, written while tune() runs:
// {"format", "backend", "flags", "problems": [to_json(TunedProblem)...], "total_search_ms",
//  "from_database", "not_tuned": [to_json(NotTunedProblem)...]}
class TuneJsonWriter final : public TuneSink {
public:
    explicit TuneJsonWriter(std::ostream& out) : out_(out) {}
    void begin(const TuneReport& r) override;
    void problem(const TunedProblem& p) override;
    void end(const TuneReport& r) override;

private:
    std::ostream& out_;
    bool first_ = true;
};
// The same text for a report that kept its problems.
void write_json(std::ostream& out, const TuneReport& r);

// explain: one problem's decision.
struct ExplainRequest {
    std::string problem;
    std::string backend = "cpu";
    std::string policy, flags;  // as in TuneRequest, over benchmark=1
    std::optional<std::string> db;
    std::string dir, dtype, layout;
};
struct ExplainReport {
    std::string backend, flags;
    TunedProblem result;
};
ExplainReport explain(const ExplainRequest& r);
// {"format", "backend", "flags", then the fields of to_json(TunedProblem)}
nlohmann::json to_json(const ExplainReport& r);

}  // namespace convtune::app
