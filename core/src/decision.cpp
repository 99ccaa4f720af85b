#include "convtune/decision.hpp"

#include <nlohmann/json.hpp>

namespace convtune {

using nlohmann::json;

std::string_view to_string(Source s) {
    switch (s) {
        case Source::memory: return "memory";
        case Source::database: return "database";
        case Source::heuristic: return "heuristic";
        case Source::search: return "search";
        case Source::fixed: return "fixed";
        case Source::fallback: return "fallback";
    }
    return "?";
}

std::string_view to_string(Candidate::State s) {
    switch (s) {
        case Candidate::State::timed: return "timed";
        case Candidate::State::chosen_untimed: return "chosen";
        case Candidate::State::not_timed: return "not timed";
        case Candidate::State::filtered: return "filtered";
        case Candidate::State::unsupported: return "unsupported";
        case Candidate::State::over_workspace: return "over workspace limit";
        case Candidate::State::out_of_memory: return "out of memory";
        case Candidate::State::failed: return "failed";
        case Candidate::State::not_checked: return "not checked";
    }
    return "?";
}

namespace {

Notes notes_from_bits(uint32_t bits) {
    Notes n;
    for (uint32_t b = 0; b < 32; ++b)
        if (bits & (1u << b)) n = n | Notes(static_cast<Note>(1u << b));
    return n;
}

// An enum as the form writes it: its name in the report, its number in the exact form.
template <class E>
json enum_value(E e, DecisionForm form) {
    return form == DecisionForm::exact ? json(static_cast<int>(e)) : json(to_string(e));
}

}  // namespace

nlohmann::json to_json(const Decision& d, DecisionForm form) {
    const bool exact = form == DecisionForm::exact;
    json cands = json::array();
    for (const Candidate& c : d.candidates)
        cands.push_back({{"id", c.id},
                         {"state", enum_value(c.state, form)},
                         {"reason", c.reason},
                         {"notes", exact ? json(c.notes.bits()) : json(c.notes.names())},
                         {"workspace", c.workspace ? json(*c.workspace) : json()},
                         {"first_ms", c.first_ms},
                         {"samples_ms", c.samples_ms},
                         {"median_ms", c.median_ms},
                         {"spread", c.spread},
                         {"suggested", c.suggested}});
    json j = {{"algorithm", d.algorithm}, {"source", enum_value(d.source, form)}, {"search_ms", d.search_ms},
              {"median_ms", d.median_ms}, {"key", d.key},                         {"candidates", cands}};
    if (exact) j["provisional"] = d.provisional;
    return j;
}

Decision decision_from_json(const nlohmann::json& j) {
    Decision d;
    d.key = j.at("key").get<std::string>();
    d.algorithm = j.at("algorithm").get<std::string>();
    d.source = static_cast<Source>(j.at("source").get<int>());
    d.search_ms = j.at("search_ms").get<double>();
    d.median_ms = j.at("median_ms").get<double>();
    d.provisional = j.at("provisional").get<bool>();
    for (const json& x : j.at("candidates")) {
        Candidate c;
        c.id = x.at("id").get<std::string>();
        c.notes = notes_from_bits(x.at("notes").get<uint32_t>());
        c.state = static_cast<Candidate::State>(x.at("state").get<int>());
        c.reason = x.at("reason").get<std::string>();
        if (!x.at("workspace").is_null()) c.workspace = x.at("workspace").get<std::size_t>();
        c.first_ms = x.at("first_ms").get<double>();
        c.samples_ms = x.at("samples_ms").get<std::vector<double>>();
        c.median_ms = x.at("median_ms").get<double>();
        c.spread = x.at("spread").get<double>();
        c.suggested = x.at("suggested").get<bool>();
        d.candidates.push_back(std::move(c));
    }
    return d;
}

}  // namespace convtune
