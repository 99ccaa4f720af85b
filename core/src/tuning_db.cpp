#include "convtune/tuning_db.hpp"

#include <cmath>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "convtune/error.hpp"
#include "convtune/file_io.hpp"

namespace convtune {

namespace fs = std::filesystem;
using nlohmann::json;

// project(convtune VERSION ...) in the top-level CMakeLists.txt, the one place the version is
// written (the Python wheel's metadata reads it there too).
std::string convtune_version() { return CONVTUNE_VERSION; }

std::string Environment::describe() const {
    return "convtune " + convtune + ", backend " + backend + ", " + library + (device.empty() ? "" : ", " + device) +
           (driver.empty() ? "" : ", driver " + driver);
}

Environment environment_of(const Backend& b) {
    const BackendIdentity id = b.identity();
    return {convtune_version(), std::string(b.name()), id.library, id.device, id.driver};
}

namespace {

constexpr const char* kFormat = "convtune-tuning-db";
constexpr int kVersion = 1;

std::string get_string(const json& j, const char* key, const std::string& where) {
    if (!j.contains(key)) throw ParseError(where + ": missing \"" + key + "\"");
    if (!j[key].is_string()) throw ParseError(where + ": \"" + key + "\" must be a string");
    return j[key].get<std::string>();
}
double get_number(const json& j, const char* key, const std::string& where) {
    if (!j.contains(key)) return 0;
    if (!j[key].is_number()) throw ParseError(where + ": \"" + key + "\" must be a number");
    return j[key].get<double>();
}
// A time, spread or count: a finite number >= 0 (0 when missing). A negative one is refused at
// load, naming the entry, rather than read as written (a median of -1 ms would win every search).
double get_non_negative(const json& j, const char* key, const std::string& where) {
    const double v = get_number(j, key, where);
    if (!(v >= 0)) throw ParseError(where + ": \"" + key + "\" must be >= 0 (got " + j[key].dump() + ")");
    return v;
}
// An integer in [lo, hi] (integral floats such as 3.0 included); anything else is refused rather
// than converted with undefined behaviour.
int64_t get_integer(const json& j, const char* key, const std::string& where, double lo, double hi) {
    if (!j.contains(key)) return 0;
    const double v = get_number(j, key, where);
    if (!(v >= lo && v <= hi) || v != std::floor(v))
        throw ParseError(where + ": \"" + key + "\" is out of range or not an integer");
    return j[key].is_number_integer() ? j[key].get<int64_t>() : static_cast<int64_t>(v);
}

}  // namespace

json to_json(const DbRecord& r) {
    return {{"algorithm", r.algorithm}, {"median_ms", r.median_ms}, {"spread", r.spread},
            {"samples", r.samples},     {"search_ms", r.search_ms}, {"time", r.time}};
}

DbRecord db_record_from_json(const json& j, const std::string& where) {
    if (!j.is_object()) throw ParseError(where + " must be an object");
    DbRecord rec;
    rec.algorithm = get_string(j, "algorithm", where);
    rec.median_ms = get_non_negative(j, "median_ms", where);
    rec.spread = get_non_negative(j, "spread", where);
    rec.samples = static_cast<int>(get_integer(j, "samples", where, -2147483648.0, 2147483647.0));
    if (rec.samples < 0) get_non_negative(j, "samples", where);  // refuses it, naming the entry
    rec.search_ms = get_non_negative(j, "search_ms", where);
    rec.time = get_integer(j, "time", where, -0x1p53, 0x1p53);
    return rec;
}

namespace {

json to_json(const std::vector<DbSection>& sections) {
    json envs = json::array();
    for (const DbSection& s : sections) {
        json entries = json::object();
        for (const auto& [k, r] : s.entries) entries[k] = to_json(r);
        envs.push_back({{"convtune", s.env.convtune}, {"backend", s.env.backend}, {"library", s.env.library},
                        {"device", s.env.device}, {"driver", s.env.driver}, {"entries", entries}});
    }
    return {{"format", kFormat}, {"version", kVersion}, {"environments", envs}};
}

DbSection* find_section(std::vector<DbSection>& v, const Environment& e) {
    for (DbSection& s : v)
        if (s.env == e) return &s;
    return nullptr;
}

}  // namespace

std::vector<DbSection> TuningDatabase::read_file(const std::string& path) {
    const std::string text = read_file_bounded(path, kMaxDatabaseBytes, "tuning database");
    if (text.empty()) throw ParseError(path + ": empty file");
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {
        throw ParseError(path + ": not valid JSON (" + std::string(e.what()) + ")");
    }
    if (!j.is_object()) throw ParseError(path + ": top level must be an object");
    if (!j.contains("format") || j["format"] != kFormat)
        throw ParseError(path + ": not a convtune tuning database (\"format\" is missing or wrong)");
    if (j.contains("version") && j["version"].is_number_integer() && j["version"] > kVersion)
        throw DatabaseVersionError(path + ": written by a newer convtune (database format version " +
                                   j["version"].dump() + "; this convtune reads version " + std::to_string(kVersion) +
                                   "); refused, the file is left as it is");
    if (!j.contains("version") || !j["version"].is_number_integer() || j["version"] != kVersion)
        throw ParseError(path + ": unsupported database version (this convtune reads version " +
                         std::to_string(kVersion) + ")");
    if (!j.contains("environments") || !j["environments"].is_array())
        throw ParseError(path + ": \"environments\" must be an array");
    std::vector<DbSection> out;
    int index = 0;
    for (const json& e : j["environments"]) {
        const std::string where = path + ": environment " + std::to_string(index++);
        if (!e.is_object()) throw ParseError(where + " must be an object");
        DbSection s;
        s.env = {get_string(e, "convtune", where), get_string(e, "backend", where), get_string(e, "library", where),
                 get_string(e, "device", where), get_string(e, "driver", where)};
        if (!e.contains("entries") || !e["entries"].is_object())
            throw ParseError(where + ": \"entries\" must be an object");
        for (const auto& [key, r] : e["entries"].items()) {
            s.entries[key] = db_record_from_json(r, where + ", entry " + quote_input(key));
        }
        if (DbSection* existing = find_section(out, s.env)) {
            for (auto& [k, r] : s.entries) existing->entries[k] = r;
        } else {
            out.push_back(std::move(s));
        }
    }
    return out;
}

void TuningDatabase::write_file(const std::string& path, const std::vector<DbSection>& sections) {
    write_file_atomic(path, to_json(sections).dump(1) + "\n");
}

std::vector<DbSection> TuningDatabase::merge(std::vector<DbSection> a, const std::vector<DbSection>& b) {
    for (const DbSection& s : b) {
        DbSection* t = find_section(a, s.env);
        if (!t) {
            a.push_back(s);
            continue;
        }
        for (const auto& [k, r] : s.entries) {
            auto it = t->entries.find(k);
            if (it == t->entries.end() || r.time >= it->second.time) t->entries[k] = r;
        }
    }
    return a;
}

TuningDatabase::TuningDatabase(std::string path, Warn warn) : path_(std::move(path)), warn_(std::move(warn)) {
    check_output_path(path_);  // a directory, device, FIFO, ... is refused before anything is read
    std::error_code ec;
    if (!fs::exists(path_, ec)) return;
    try {
        sections_ = read_file(path_);
    } catch (const DatabaseVersionError&) {
        throw;
    } catch (const Error& e) {
        this->warn(std::string("tuning database ignored: ") + e.what() + "; tuning starts afresh");
    }
}

void TuningDatabase::warn(const std::string& m) {
    if (!warned_.insert(m).second) return;
    if (warn_) warn_(m);
    else std::cerr << "convtune: warning: " << m << "\n";
}

std::optional<DbRecord> TuningDatabase::find(const Environment& env, const std::string& key,
                                             const std::function<bool(const std::string&)>& known) {
    std::lock_guard lock(mutex_);
    DbSection* s = find_section(sections_, env);
    if (!s) {
        for (const DbSection& o : sections_)
            if (o.env.backend == env.backend && !o.entries.empty())
                warn("tuning database " + path_ + ": " + std::to_string(o.entries.size()) + " entries for backend " +
                     env.backend + " come from another environment (" + o.env.describe() + "; this is " +
                     env.describe() + ") and are ignored");
        return std::nullopt;
    }
    auto it = s->entries.find(key);
    if (it == s->entries.end()) return std::nullopt;
    if (known && !known(it->second.algorithm)) {
        warn("tuning database " + path_ + ": algorithm '" + it->second.algorithm +
             "' is not in this build; its entries are skipped");
        return std::nullopt;
    }
    return it->second;
}

TuningDatabase::~TuningDatabase() {
    try {
        flush();
    } catch (...) {  // (a destructor throws nothing; flush has warned about an Error already)
    }
}

void TuningDatabase::set_flush_interval(double seconds) {
    std::lock_guard lock(mutex_);
    flush_s_ = seconds > 0 ? seconds : 0;
}

bool TuningDatabase::flush() {
    std::lock_guard lock(mutex_);
    return !dirty_ || persist_locked();
}

bool TuningDatabase::store(const Environment& env, const std::string& key, const DbRecord& r) {
    std::lock_guard lock(mutex_);
    DbSection* s = find_section(sections_, env);
    if (!s) {
        sections_.push_back({env, {}});
        s = &sections_.back();
    }
    s->entries[key] = r;
    dirty_ = true;
    if (flush_s_ > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - last_write_).count() < flush_s_)
        return true;
    return persist_locked();
}

// Under mutex_: one read-merge-write of everything in memory.
bool TuningDatabase::persist_locked() {
    last_write_ = std::chrono::steady_clock::now();
    try {
        FileLock file_lock(path_);
        std::vector<DbSection> on_disk;
        std::error_code ec;
        if (fs::exists(path_, ec)) {
            try {
                on_disk = read_file(path_);
            } catch (const ParseError& e) {
                // Unreadable: kept aside under a name that never replaces an earlier copy. A file
                // of a newer version, or one that is not a regular file or too large, is an Error
                // but not a ParseError: never moved, the store fails below and leaves it as it is.
                const std::string keep = keep_aside(path_);
                warn(std::string("tuning database was unreadable (") + e.what() + "); kept as " + keep +
                     " and replaced");
            }
        }
        sections_ = merge(std::move(on_disk), sections_);
        write_file(path_, sections_);
        dirty_ = false;
        return true;
    } catch (const Error& e) {
        warn(std::string("tuning results not saved: ") + e.what() + "; tuning continues in memory");
        return false;
    }
}

std::vector<DbSection> TuningDatabase::sections() const {
    std::lock_guard lock(mutex_);
    return sections_;
}

}  // namespace convtune
