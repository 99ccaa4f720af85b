#include "convtune/cache_key.hpp"

#include <charconv>
#include <vector>

#include "convtune/backend.hpp"
#include "convtune/error.hpp"
#include "convtune/policy.hpp"

namespace convtune {

CacheKey CacheKey::of(const Backend& b, const ConvProblem& p, const FlagValues& f) {
    CacheKey k;
    k.backend = std::string(b.name());
    k.problem = p;
    k.deterministic = f.deterministic;
    k.allow_tf32 = f.allow_tf32;
    // PyTorch's key has no `benchmark` (its quirk); convtune's has (SelectionPolicy::keys_benchmark).
    if (f.policy->keys_benchmark()) k.benchmark = f.benchmark;
    if (f.workspace_limit != FlagValues{}.workspace_limit) k.workspace_limit = f.workspace_limit;
    k.policy = f.policy;
    return k;
}

std::string CacheKey::to_string() const {
    // Built on every framework call (the in-memory cache's key): appends, no temporaries.
    std::string k;
    k.reserve(224);
    k += backend;
    k += '|';
    problem.append_to(k);
    k += deterministic ? "|det=1" : "|det=0";
    k += allow_tf32 ? "|tf32=1" : "|tf32=0";
    if (benchmark) k += *benchmark ? "|bench=1" : "|bench=0";
    if (workspace_limit) k += "|ws=" + std::to_string(*workspace_limit);
    k += "|policy=";
    k += convtune::to_string(policy);
    return k;
}

namespace {

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

bool parse_bit(std::string_view field, std::string_view prefix, std::string_view text) {
    if (field.substr(0, prefix.size()) != prefix)
        throw ParseError("cache key " + quoted(text) + ": expected " + std::string(prefix) + "0|1, found " +
                         quoted(field));
    const std::string_view v = field.substr(prefix.size());
    if (v != "0" && v != "1")
        throw ParseError("cache key " + quoted(text) + ": " + std::string(prefix) + " must be 0 or 1");
    return v == "1";
}

}  // namespace

CacheKey CacheKey::parse(std::string_view text) {
    std::vector<std::string_view> parts;
    for (std::size_t start = 0;;) {
        const std::size_t bar = text.find('|', start);
        parts.push_back(text.substr(start, bar == std::string_view::npos ? std::string_view::npos : bar - start));
        if (bar == std::string_view::npos) break;
        start = bar + 1;
    }
    if (parts.size() < 5 || parts.size() > 7)
        throw ParseError("cache key " + quoted(text) +
                         ": expected backend|problem|det=..|tf32=..[|bench=..][|ws=..]|policy=..");
    CacheKey k;
    if (parts[0].empty()) throw ParseError("cache key " + quoted(text) + ": the backend is empty");
    k.backend = std::string(parts[0]);
    try {
        k.problem = ConvProblem::parse(parts[1]);
    } catch (const Error& e) {
        throw ParseError("cache key " + quoted(text) + ": problem: " + e.what());
    }
    k.deterministic = parse_bit(parts[2], "det=", text);
    k.allow_tf32 = parse_bit(parts[3], "tf32=", text);
    std::size_t i = 4;
    if (i + 1 < parts.size() && parts[i].substr(0, 6) == "bench=") k.benchmark = parse_bit(parts[i++], "bench=", text);
    if (i + 1 < parts.size() && parts[i].substr(0, 3) == "ws=") {
        const std::string_view v = parts[i++].substr(3);
        std::size_t ws = 0;
        const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), ws);
        if (ec != std::errc() || ptr != v.data() + v.size() || v.empty())
            throw ParseError("cache key " + quoted(text) + ": ws must be a byte count");
        k.workspace_limit = ws;
    }
    if (i + 1 != parts.size() || parts[i].substr(0, 7) != "policy=")
        throw ParseError("cache key " + quoted(text) +
                         ": expected |policy=NAME last, after the optional bench= and ws=");
    try {
        k.policy = parse_policy(parts[i].substr(7));
    } catch (const Error& e) {
        throw ParseError("cache key " + quoted(text) + ": policy: " + e.what());
    }
    return k;
}

}  // namespace convtune
