#include "convtune/flags.hpp"

#include <algorithm>
#include <charconv>
#include <mutex>
#include <string>
#include <sstream>
#include <type_traits>
#include <variant>
#include <vector>

#include "convtune/error.hpp"

namespace convtune {

std::string FlagValues::to_string() const {
    std::ostringstream o;
    o << "enabled=" << enabled << ",benchmark=" << benchmark << ",benchmark_limit=" << benchmark_limit
      << ",deterministic=" << deterministic << ",allow_tf32=" << allow_tf32
      << ",policy=" << convtune::to_string(policy);
    return o.str();
}

namespace {

bool parse_bool(const std::string& key, std::string_view v) {
    if (v == "1" || v == "true" || v == "True" || v == "on") return true;
    if (v == "0" || v == "false" || v == "False" || v == "off") return false;
    throw ParseError(key + ": " + quote_input(v) + " is not a boolean (use 0/1 or true/false)");
}

template <class T>
T parse_number(const std::string& key, std::string_view v, T lo) {
    T r{};
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), r);
    if (ec != std::errc() || p != v.data() + v.size())
        throw ParseError(key + ": " + quote_input(v) + " is not a number");
    if (!(r >= lo)) {
        std::ostringstream m;
        m << key << ": must be >= " << lo << " (got " << v << ")";
        throw ParseError(m.str());
    }
    return r;
}

constexpr NumericFlag kNumericFlags[] = {
    {"benchmark_limit", 0, &FlagValues::benchmark_limit},   {"workspace_limit", 0, &FlagValues::workspace_limit},
    {"search_budget_ms", 0, &FlagValues::search_budget_ms}, {"min_samples", 1, &FlagValues::min_samples},
    {"max_samples", 1, &FlagValues::max_samples},           {"stable_rel", 0, &FlagValues::stable_rel},
    {"explore_slots", 0, &FlagValues::explore_slots},       {"adaptive_after", 0, &FlagValues::adaptive_after},
};

constexpr BoolFlag kBoolFlags[] = {
    {"enabled", &FlagValues::enabled},
    {"benchmark", &FlagValues::benchmark},
    {"deterministic", &FlagValues::deterministic},
    {"allow_tf32", &FlagValues::allow_tf32},
};

constexpr const char* kFlagNames[] = {"enabled",  "benchmark",       "benchmark_limit",  "deterministic", "allow_tf32",
                                      "policy",   "workspace_limit", "search_budget_ms", "min_samples",   "max_samples",
                                      "stable_rel", "explore_slots", "adaptive_after"};

std::mutex g_mutex;
FlagValues g_flags;
thread_local std::optional<FlagValues> t_override;  // set_thread_flags / FlagsGuard

}  // namespace

std::span<const NumericFlag> numeric_flags() { return kNumericFlags; }

const NumericFlag* find_numeric_flag(std::string_view key) {
    for (const NumericFlag& n : kNumericFlags)
        if (key == n.key) return &n;
    return nullptr;
}

std::span<const BoolFlag> bool_flags() { return kBoolFlags; }

const BoolFlag* find_bool_flag(std::string_view key) {
    for (const BoolFlag& b : kBoolFlags)
        if (key == b.key) return &b;
    return nullptr;
}

std::span<const char* const> flag_names() { return kFlagNames; }

FlagValues parse_flags(std::string_view text, FlagValues f) {
    std::vector<std::string> seen;
    while (!text.empty()) {
        const auto comma = text.find(',');
        std::string_view item = text.substr(0, comma);
        const bool last = comma == std::string_view::npos;
        text = last ? std::string_view{} : text.substr(comma + 1);
        if (item.empty() || (!last && text.empty()))
            throw ParseError("flags: empty entry (two commas in a row, or a comma at an end?)");
        const auto eq = item.find('=');
        if (eq == std::string_view::npos) throw ParseError("flags: entry " + quote_input(item) + " is not key=value");
        const std::string key(item.substr(0, eq));
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) throw ParseError(key + ": given twice");
        seen.push_back(key);
        const std::string_view v = item.substr(eq + 1);
        if (const BoolFlag* b = find_bool_flag(key)) f.*(b->field) = parse_bool(key, v);
        else if (key == "policy") f.policy = parse_policy(v);
        else if (const NumericFlag* n = find_numeric_flag(key))
            std::visit(
                [&](auto field) {
                    f.*field = parse_number(key, v, static_cast<std::remove_reference_t<decltype(f.*field)>>(n->lo));
                },
                n->field);
        else {
            std::string known;
            for (const char* name : flag_names()) known += (known.empty() ? "" : ", ") + std::string(name);
            throw ParseError("flags: unknown flag '" + key + "' (known: " + known + ")");
        }
    }
    if (f.max_samples < f.min_samples) throw ParseError("max_samples: must be >= min_samples");
    return f;
}

FlagValues current_flags() {
    if (t_override) return *t_override;
    return global_flags();
}

FlagValues global_flags() {
    std::lock_guard lock(g_mutex);
    return g_flags;
}

void set_global_flags(const FlagValues& v) {
    std::lock_guard lock(g_mutex);
    g_flags = v;
}

std::optional<FlagValues> thread_flags() { return t_override; }
void set_thread_flags(const std::optional<FlagValues>& v) { t_override = v; }

FlagsGuard::FlagsGuard(const FlagValues& v) : previous_(t_override) { t_override = v; }
FlagsGuard::~FlagsGuard() { t_override = previous_; }

}  // namespace convtune
