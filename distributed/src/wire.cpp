#include "wire.hpp"

namespace convtune::dist {

namespace {

Notes notes_from_bits(uint32_t bits) {
    Notes n;
    for (uint32_t b = 0; b < 32; ++b)
        if (bits & (1u << b)) n = n | Notes(static_cast<Note>(1u << b));
    return n;
}

}  // namespace

nlohmann::json to_wire(const Decision& d) {
    nlohmann::json cands = nlohmann::json::array();
    for (const Candidate& c : d.candidates)
        cands.push_back({{"id", c.id},
                         {"notes", c.notes.bits()},
                         {"state", static_cast<int>(c.state)},
                         {"reason", c.reason},
                         {"workspace", c.workspace ? nlohmann::json(*c.workspace) : nlohmann::json()},
                         {"first_ms", c.first_ms},
                         {"samples_ms", c.samples_ms},
                         {"median_ms", c.median_ms},
                         {"spread", c.spread},
                         {"suggested", c.suggested}});
    return {{"key", d.key},           {"algorithm", d.algorithm}, {"source", static_cast<int>(d.source)},
            {"search_ms", d.search_ms}, {"median_ms", d.median_ms}, {"provisional", d.provisional},
            {"candidates", cands}};
}

Decision decision_from_wire(const nlohmann::json& j) {
    Decision d;
    d.key = j.at("key").get<std::string>();
    d.algorithm = j.at("algorithm").get<std::string>();
    d.source = static_cast<Source>(j.at("source").get<int>());
    d.search_ms = j.at("search_ms").get<double>();
    d.median_ms = j.at("median_ms").get<double>();
    d.provisional = j.at("provisional").get<bool>();
    for (const nlohmann::json& x : j.at("candidates")) {
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

nlohmann::json to_wire(const DbRecord& r) {
    return {{"algorithm", r.algorithm}, {"median_ms", r.median_ms}, {"spread", r.spread},
            {"samples", r.samples},     {"search_ms", r.search_ms}, {"time", r.time}};
}

DbRecord record_from_wire(const nlohmann::json& j) {
    return {j.at("algorithm").get<std::string>(), j.at("median_ms").get<double>(), j.at("spread").get<double>(),
            j.at("samples").get<int>(),           j.at("search_ms").get<double>(), j.at("time").get<int64_t>()};
}

nlohmann::json to_wire(const Environment& e) { return nlohmann::json::array({e.convtune, e.backend, e.library, e.device, e.driver}); }

Environment environment_from_wire(const nlohmann::json& j) {
    return {j.at(0).get<std::string>(), j.at(1).get<std::string>(), j.at(2).get<std::string>(), j.at(3).get<std::string>(),
            j.at(4).get<std::string>()};
}

}  // namespace convtune::dist
