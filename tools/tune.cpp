// convtune tune (--problem SPEC | --shapes FILE) [--backend B] [--policy P] [--flags ...]
//               [--db PATH] [--json]
// Chooses an algorithm per problem under the given flags (benchmark=1 unless --flags says
// otherwise) and explains each choice: candidates, their state, samples, median and spread,
// workspace, notes, which filter removed which candidate, and where the choice came from.
#include <fmt/core.h>

#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "convtune/convtune.hpp"
#include "convtune/error.hpp"
#include "convtune/registry.hpp"
#include "convtune/progress.hpp"

namespace convtune::cli {

namespace {

struct TuneOptions {
    std::string problem, shapes, backend = "cpu", policy, flags, db;
    int64_t batch = 0;
    bool json = false, progress = false;
    ProblemOverrides over;
};

void print_explain(const ConvProblem& p, const std::string& name, const Decision& d) {
    fmt::print("\n{}{}\n", p.to_string(), name.empty() ? "" : "  # " + name);
    fmt::print("  chosen {} (from {}), search {:.1f} ms{}\n", d.algorithm, to_string(d.source), d.search_ms,
               d.median_ms > 0 ? fmt::format(", median {:.3f} ms", d.median_ms) : "");
    fmt::print("  {:<40} {:<22} {:>9} {:>7} {:>4} {:>11}  {}\n", "candidate", "state", "median ms", "spread", "n", "workspace", "notes / reason");
    for (const Candidate& c : d.candidates) {
        std::string tail = c.notes.to_string();
        if (!c.reason.empty()) tail += (tail.empty() ? "" : "; ") + c.reason;
        fmt::print("  {:<40} {:<22} {:>9} {:>7} {:>4} {:>11}  {}\n", c.id + (c.id == d.algorithm ? " *" : ""), to_string(c.state),
                   c.median_ms > 0 ? fmt::format("{:.3f}", c.median_ms) : "-",
                   c.samples_ms.size() > 1 ? fmt::format("{:.0f}%", 100 * c.spread) : "-", c.samples_ms.size(), c.workspace ? std::to_string(*c.workspace) : "-", tail);
    }
}

int tune(const TuneOptions& o) {
    if (o.problem.empty() == o.shapes.empty()) throw Error("tune: give exactly one of --problem or --shapes");
    FlagValues f = parse_flags("benchmark=1");
    if (!o.policy.empty()) f.policy = parse_policy(o.policy);
    f = parse_flags(o.flags, f);
    Backend& b = find_backend(o.backend);
    if (const Availability av = b.availability(); !av.ok)
        throw Error("backend: '" + std::string(b.name()) + "' is unavailable here: " + av.reason);
    std::vector<ShapeLine> lines;
    if (!o.problem.empty()) lines.push_back({0, "", 1, ConvProblem::parse_any(o.problem)});
    else lines = read_shape_file(o.shapes);
    for (ShapeLine& l : lines) {
        if (o.batch > 0) l.problem.n = o.batch;
        l.problem = o.over.apply(l.problem);
    }
    std::string db_path = o.db;
    if (db_path.empty())
        if (const char* e = std::getenv("CONVTUNE_DB")) db_path = e;
    Context ctx(db_path);
    Selector& sel = ctx.selector(b);
    nlohmann::json out = nlohmann::json::array();
    double total_search = 0;
    int from_db = 0;
    Progress bar("tune", o.progress || ::isatty(2));
    for (std::size_t i = 0; i < lines.size(); ++i) {
        const ShapeLine& l = lines[i];
        bar.update(static_cast<int64_t>(i), static_cast<int64_t>(lines.size()), l.name.empty() ? l.problem.to_string() : l.name);
        const auto d = sel.select(l.problem, f);
        total_search += d->search_ms;
        from_db += d->source == Source::database;
        if (o.json) {
            nlohmann::json j = to_json(*d);
            j["problem"] = l.problem.to_string();
            if (!l.name.empty()) j["name"] = l.name;
            out.push_back(j);
        } else {
            bar.finish();
            print_explain(l.problem, l.name, *d);
        }
    }
    bar.finish();
    if (o.json) {
        fmt::print("{}\n", nlohmann::json{{"backend", b.name()}, {"flags", f.to_string()}, {"problems", out},
                                          {"total_search_ms", total_search}, {"from_database", from_db}}
                               .dump(2));
    } else {
        fmt::print("\n{} problem{}, {} from the database, total search {:.1f} ms (flags {}){}\n", lines.size(), lines.size() == 1 ? "" : "s", from_db, total_search,
                   f.to_string(), db_path.empty() ? "" : ", database " + db_path);
    }
    return ok;
}

}  // namespace

void add_tune(CLI::App& app, Action& action) {
    auto* cmd = app.add_subcommand("tune", "Choose and explain the algorithm for problems under flags (benchmark=1 by default)");
    auto o = std::make_shared<TuneOptions>();
    cmd->add_option("--problem,-p", o->problem, "One problem (canonical or benchdnn)");
    cmd->add_option("--shapes,-s", o->shapes, "A shape file (benchdnn or canonical lines)");
    cmd->add_option("--backend,-b", o->backend, "Backend (default cpu)");
    cmd->add_option("--policy", o->policy, "pytorch, pytorch-v7, convtune (default) or adaptive");
    cmd->add_option("--flags", o->flags, "e.g. benchmark=1,deterministic=1,allow_tf32=0,benchmark_limit=N,enabled=1");
    cmd->add_option("--db", o->db, "Tuning database file (default: $CONVTUNE_DB; none when unset)");
    cmd->add_option("--batch", o->batch, "Override the batch size of every problem")->check(CLI::Range(int64_t{1}, int64_t{1} << 31));
    cmd->add_flag("--json", o->json, "Print one JSON document");
    cmd->add_flag("--progress", o->progress, "Show the progress bar even when stderr is not a terminal");
    o->over.add_to(*cmd);
    cmd->callback([o, &action] { action = [o] { return tune(*o); }; });
}

}  // namespace convtune::cli
