#include "convtune/dist/agree.hpp"

#include <nlohmann/json.hpp>

#include "convtune/decision.hpp"
#include "convtune/error.hpp"
#include "convtune/selector.hpp"
#include "mpi_util.hpp"

namespace convtune::dist {

std::vector<std::shared_ptr<const Decision>> agree(const std::vector<ConvProblem>& problems, const FlagValues& f,
                                                   const Backend& b, Context& ctx, MPI_Comm comm) {
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    std::vector<std::shared_ptr<const Decision>> out;
    std::string text;
    if (rank == 0) {
        nlohmann::json msg;
        try {
            nlohmann::json ds = nlohmann::json::array();
            for (const ConvProblem& p : problems) {
                out.push_back(ctx.selector(b).select(p, f));
                ds.push_back(to_json(*out.back(), DecisionForm::exact));
            }
            msg["decisions"] = std::move(ds);
        } catch (const std::exception& e) {
            msg = {{"error", e.what()}};
        }
        text = msg.dump();
    }
    const nlohmann::json msg = nlohmann::json::parse(detail::broadcast_string(std::move(text), 0, comm));
    if (msg.contains("error")) throw Error("rank 0 could not decide: " + msg["error"].get<std::string>());
    if (rank == 0) return out;
    const nlohmann::json& ds = msg["decisions"];
    if (ds.size() != problems.size())
        throw Error("agree: rank 0 decided " + std::to_string(ds.size()) + " problems, this rank asked for " +
                    std::to_string(problems.size()));
    for (std::size_t i = 0; i < problems.size(); ++i) {
        Decision d = decision_from_json(ds[i]);
        d.key = cache_key(b, problems[i], f);
        ctx.cache().put(d.key, d);
        out.push_back(std::make_shared<const Decision>(std::move(d)));
    }
    return out;
}

}  // namespace convtune::dist
