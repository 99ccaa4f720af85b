#include "convtune/app/tune.hpp"

#include <fmt/core.h>

#include <ostream>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "convtune/convtune.hpp"
#include "convtune/error.hpp"
#include "convtune/memory_budget.hpp"
#include "convtune/registry.hpp"
#include "convtune/tuning_db.hpp"
#include "convtune/app/workload.hpp"
#include "convtune/sim/replay_backend.hpp"
#include "convtune/sim/stream.hpp"

namespace convtune::app {

namespace {

// The flags of tune and explain: benchmark=1, the policy, the flags text.
FlagValues flags_of(const std::string& policy, const std::string& text) {
    FlagValues f = parse_flags("benchmark=1");
    if (!policy.empty()) f.policy = parse_policy(policy);
    return parse_flags(text, f);
}

// A JSON value written inside an object at nesting depth 1 (four spaces before its lines).
std::string nested(const nlohmann::json& j) {
    std::string s = j.dump(2), out;
    out.reserve(s.size() + s.size() / 8);
    for (char c : s) {
        out += c;
        if (c == '\n') out += "    ";
    }
    return out;
}

std::string scalar(const nlohmann::json& j) { return j.dump(); }

}  // namespace

FlagValues tune_flags(const TuneRequest& r) { return r.flag_values ? *r.flag_values : flags_of(r.policy, r.flags); }

nlohmann::json to_json(const TunedProblem& p) {
    nlohmann::json j = to_json(*p.decision);
    j["problem"] = p.problem;
    if (!p.name.empty()) j["name"] = p.name;
    return j;
}

nlohmann::json to_json(const NotTunedProblem& p) {
    nlohmann::json j{{"problem", p.problem}};
    if (!p.name.empty()) j["name"] = p.name;
    j["reason"] = p.reason;
    return j;
}

std::string to_text(const NotTunedProblem& p) {
    return fmt::format("NOT TUNED: {}{}: {}\n", p.problem, p.name.empty() ? "" : "  # " + p.name, p.reason);
}

std::string to_text(const TunedProblem& p) {
    const Decision& d = *p.decision;
    std::string s = fmt::format("\n{}{}\n", p.problem, p.name.empty() ? "" : "  # " + p.name);
    s += fmt::format("  chosen {} (from {}), search {:.1f} ms{}\n", d.algorithm, to_string(d.source), d.search_ms,
                     d.median_ms > 0 ? fmt::format(", median {:.3f} ms", d.median_ms) : "");
    s += fmt::format("  {:<40} {:<22} {:>9} {:>7} {:>4} {:>11}  {}\n", "candidate", "state", "median ms", "spread", "n",
                     "workspace", "notes / reason");
    for (const Candidate& c : d.candidates) {
        std::string tail = c.notes.to_string();
        if (!c.reason.empty()) tail += (tail.empty() ? "" : "; ") + c.reason;
        s += fmt::format("  {:<40} {:<22} {:>9} {:>7} {:>4} {:>11}  {}\n", c.id + (c.id == d.algorithm ? " *" : ""),
                         to_string(c.state), c.median_ms > 0 ? fmt::format("{:.3f}", c.median_ms) : "-",
                         c.samples_ms.size() > 1 ? fmt::format("{:.0f}%", 100 * c.spread) : "-", c.samples_ms.size(),
                         c.workspace ? std::to_string(*c.workspace) : "-", tail);
    }
    return s;
}

struct TuneJob::State {
    FlagValues flags;
    std::unique_ptr<sim::ReplayBackend> replay;
    Backend* backend = nullptr;
    std::vector<ShapeLine> lines;
    std::vector<std::string> labels;
    TuneReport header;
    std::unique_ptr<Context> ctx;
    Selector* selector = nullptr;
};

namespace {

// Refuses a request of more than kMaxTuneProblems problems (at least `n`), naming the list that
// multiplies them.
void check_count(uint64_t n, const TuneRequest& r) {
    if (n <= static_cast<uint64_t>(kMaxTuneProblems)) return;
    const char* field = !r.batch.empty()      ? "batch"
                        : !r.dtype.empty()    ? "dtype"
                        : !r.workload.empty() ? "workload"
                        : !r.shapes.empty()   ? "shapes"
                                              : "problems";
    throw InvalidRequest(
        field,
        fmt::format("the request makes {} problems or more, above the limit of {} for one tune (split the catalogue "
                    "into several runs into one database)",
                    n, kMaxTuneProblems));
}

// The problems of a request, each expanded over the catalogue's data types and batch sizes:
// network by network (or the problems or shape file as one block), then data type, then batch.
std::vector<ShapeLine> request_lines(const TuneRequest& r) {
    if (r.workload.empty()) {
        if (!r.mode.empty())
            throw InvalidRequest("mode",
                                 "applies to {workload} only (it chooses the directions of a network's problems)");
        if (!r.shapes_dir.empty())
            throw InvalidRequest("shapes_dir", "applies to {workload} only (the folder of the built-in networks)");
    } else if (!r.dir.empty()) {
        throw InvalidRequest(
            "dir", "with {workload} the directions come from {mode} (infer: fwd; train: fwd, bwd_data, bwd_filter)");
    }
    const std::vector<std::string> dtypes =
        r.dtype.empty() ? std::vector<std::string>{""} : sim::parse_string_list(r.dtype, "dtype");
    const std::vector<int64_t> batches =
        r.batch.empty() ? std::vector<int64_t>{0} : sim::parse_int_list(r.batch, "batch");
    if (static_cast<int64_t>(batches.size()) > kMaxTuneBatches)
        throw InvalidRequest("batch", fmt::format("{} batch sizes, above the limit of {} for one tune", batches.size(),
                                                  kMaxTuneBatches));
    if (std::set<int64_t>(batches.begin(), batches.end()).size() != batches.size())
        throw InvalidRequest("batch", "a batch size is listed twice in " + quote_input(r.batch));
    std::vector<ShapeLine> lines;
    if (r.workload.empty()) {
        std::vector<ShapeLine> base;
        if (!r.problems.empty())
            for (const std::string& s : r.problems) base.push_back({0, "", 1, ConvProblem::parse_any(s)});
        else base = read_shape_file(r.shapes);
        check_count(static_cast<uint64_t>(base.size()) * dtypes.size() * batches.size(), r);
        for (const std::string& dtype : dtypes)
            for (int64_t b : batches)
                for (ShapeLine l : base) {
                    if (b > 0) l.problem.n = b;
                    l.problem = with_overrides(l.problem, r.dir, dtype, r.layout);
                    lines.push_back(std::move(l));
                }
        return lines;
    }
    // A network's problems are what record measures for it: its stream's distinct problems.
    std::set<std::string> seen;
    const std::vector<std::string> networks = sim::parse_string_list(r.workload, "workload");
    check_count(static_cast<uint64_t>(networks.size()) * dtypes.size() * batches.size(),
                r);  // each at least one problem
    for (const std::string& name : networks)
        for (const std::string& dtype : dtypes)
            for (int64_t b : batches) {
                WorkloadRequest w;
                w.workload = name;
                w.shapes_dir = r.shapes_dir;
                w.mode = r.mode;
                w.dtype = dtype;
                w.layout = r.layout;
                w.batch = b;
                const sim::Stream stream = w.make_stream();
                for (const ConvProblem& p : sim::distinct_problems(stream, 1))
                    if (seen.insert(p.to_string()).second) lines.push_back({0, stream.workload().name, 1, p});
                check_count(lines.size(), r);
            }
    return lines;
}

}  // namespace

TuneJob::TuneJob(const TuneRequest& r) : s_(std::make_unique<State>()) {
    // Everything is validated before anything is decided.
    if (!r.problems.empty() + !r.shapes.empty() + !r.workload.empty() != 1)
        throw InvalidRequest("problems", "give exactly one of {problems}, {shapes} or {workload}");
    if (!(r.db_flush_s >= 0 && r.db_flush_s <= 3600))
        throw InvalidRequest("db_flush", fmt::format("{} is not a number of seconds in [0, 3600]", r.db_flush_s));
    s_->flags = tune_flags(r);
    if (!r.replay.empty()) {
        s_->replay = std::make_unique<sim::ReplayBackend>(sim::load_replay(r.replay));  // a file, or a library name
        s_->backend = s_->replay.get();
    } else {
        s_->backend = &find_backend(r.backend);
        require_available(*s_->backend);
    }
    s_->lines = request_lines(r);
    // A problem over the memory budget is bad input, refused before anything is decided (not a
    // problem that could not be tuned).
    if (s_->backend->memory() == Memory::host)
        for (const ShapeLine& l : s_->lines) check_memory_budget(l.problem);
    for (const ShapeLine& l : s_->lines) s_->labels.push_back(l.name.empty() ? l.problem.to_string() : l.name);

    TuneReport& rep = s_->header;
    rep.backend = std::string(s_->backend->name());
    rep.flags = s_->flags.to_string();
    rep.db = r.db ? *r.db : default_db_path();
    rep.count = static_cast<int64_t>(s_->lines.size());
    s_->ctx = std::make_unique<Context>(rep.db);
    if (TuningDatabase* db = s_->ctx->database()) db->set_flush_interval(r.db_flush_s);
    s_->selector = &s_->ctx->selector(*s_->backend);
}

TuneJob::~TuneJob() = default;
const TuneReport& TuneJob::header() const { return s_->header; }
int64_t TuneJob::size() const { return s_->header.count; }
const FlagValues& TuneJob::flags() const { return s_->flags; }
Backend& TuneJob::backend() const { return *s_->backend; }
Context& TuneJob::context() const { return *s_->ctx; }
const std::string& TuneJob::label(int64_t i) const { return s_->labels.at(static_cast<std::size_t>(i)); }

TunedProblem TuneJob::problem(int64_t i) const {
    const ShapeLine& l = s_->lines.at(static_cast<std::size_t>(i));
    return {l.problem.to_string(), l.name, nullptr};
}

TunedProblem TuneJob::decide(int64_t i) {
    TunedProblem t = problem(i);
    t.decision = s_->selector->select(s_->lines[static_cast<std::size_t>(i)].problem, s_->flags);
    return t;
}

TuneReport tune(const TuneRequest& r, TuneSink* sink, bool keep) {
    TuneJob job(r);
    TuneReport rep = job.header();
    if (sink) sink->begin(rep);
    for (int64_t i = 0; i < rep.count; ++i) {
        if (r.progress) r.progress(i, rep.count, job.label(i));
        TunedProblem t;
        try {
            t = job.decide(i);
        } catch (const Error& e) {
            const TunedProblem p = job.problem(i);
            rep.not_tuned.push_back({i, p.problem, p.name, e.what()});
            continue;
        }
        rep.total_search_ms += t.decision->search_ms;
        rep.from_database += t.decision->source == Source::database;
        if (sink) sink->problem(t);
        if (keep) rep.problems.push_back(std::move(t));
    }
    if (r.progress) r.progress(rep.count, rep.count, "");
    if (TuningDatabase* db = job.context().database()) db->flush();  // the last batch, before the report ends
    if (sink) sink->end(rep);
    return rep;
}

void TuneJsonWriter::begin(const TuneReport& r) {
    out_ << "{\n  \"format\": " << report_format << ",\n  \"backend\": " << scalar(r.backend)
         << ",\n  \"flags\": " << scalar(r.flags) << ",\n  \"problems\": [";
    first_ = true;
}

void TuneJsonWriter::problem(const TunedProblem& p) {
    out_ << (first_ ? "\n    " : ",\n    ") << nested(to_json(p));
    first_ = false;
}

void TuneJsonWriter::end(const TuneReport& r) {
    out_ << (first_ ? "]" : "\n  ]") << ",\n  \"total_search_ms\": " << scalar(r.total_search_ms)
         << ",\n  \"from_database\": " << scalar(r.from_database) << ",\n  \"not_tuned\": [";
    for (std::size_t i = 0; i < r.not_tuned.size(); ++i)
        out_ << (i ? ",\n    " : "\n    ") << nested(to_json(r.not_tuned[i]));
    out_ << (r.not_tuned.empty() ? "]" : "\n  ]") << "\n}\n";
    out_.flush();
}

void write_json(std::ostream& out, const TuneReport& r) {
    TuneJsonWriter w(out);
    w.begin(r);
    for (const TunedProblem& p : r.problems) w.problem(p);
    w.end(r);
}

ExplainReport explain(const ExplainRequest& r) {
    TuneRequest t;
    t.problems = {r.problem};
    if (r.problem.empty()) throw InvalidRequest("problem", "required");
    if (r.dtype.find(',') != std::string::npos)
        throw InvalidRequest("dtype", "explain takes one data type (got '" + r.dtype + "')");
    t.backend = r.backend;
    t.policy = r.policy;
    t.flags = r.flags;
    t.db = r.db;
    t.dir = r.dir;
    t.dtype = r.dtype;
    t.layout = r.layout;
    TuneReport rep = tune(t, nullptr, true);
    if (!rep.not_tuned.empty()) throw Error(rep.not_tuned.front().reason);  // explain's one problem: an error
    return {rep.backend, rep.flags, std::move(rep.problems.front())};
}

nlohmann::json to_json(const ExplainReport& r) {
    nlohmann::json j = to_json(r.result);
    j["format"] = report_format;
    j["backend"] = r.backend;
    j["flags"] = r.flags;
    return j;
}

}  // namespace convtune::app
