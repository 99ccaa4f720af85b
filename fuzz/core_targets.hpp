// Fuzz targets over convtune's core parsers: the canonical problem string, benchdnn descriptors and
// shape files, flag strings, byte sizes, and tuning database files.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/error.hpp"
#include "convtune/flags.hpp"
#include "convtune/host_data.hpp"
#include "convtune/problem.hpp"
#include "convtune/tuning_db.hpp"
#include "harness.hpp"

namespace convtune::fuzz {

// What every accepted problem must satisfy: valid, a positive output, and a canonical string
// that parses back to the same value (and prints the same).
inline void require_sound(const ConvProblem& p, const char* from) {
    const std::string where = std::string(from) + " accepted " + p.to_string();
    CONVTUNE_FUZZ_REQUIRE(!p.check().has_value(), where + " but check() says: " + p.check().value_or(""));
    for (int i = 0; i < p.spatial_dims; ++i) CONVTUNE_FUZZ_REQUIRE(p.out(i) >= 1, where);
    CONVTUNE_FUZZ_REQUIRE(p.x_elements() >= 1 && p.w_elements() >= 1 && p.y_elements() >= 1 && p.macs() >= 1, where);
    ConvProblem q;
    try {
        q = ConvProblem::parse(p.to_string());
    } catch (const Error& e) {
        throw Violation(where + " but its canonical form is rejected: " + e.what());
    }
    CONVTUNE_FUZZ_REQUIRE(q == p, where + " but its canonical form parses to " + q.to_string());
    CONVTUNE_FUZZ_REQUIRE(q.to_string() == p.to_string(), where);
    (void)over_memory_budget(p);  // the byte arithmetic of every accepted problem is defined
    (void)p.reduction_length();
    (void)p.flops();
}

// Canonical problem strings, and the other small text options (flags, byte sizes, names).
inline void problem_text(std::string_view in) {
    try {
        require_sound(ConvProblem::parse(in), "parse");
    } catch (const Error&) {
    }
    try {
        require_sound(ConvProblem::parse_any(in), "parse_any");
    } catch (const Error&) {
    }
    try {
        const FlagValues f = parse_flags(in);
        const FlagValues g = parse_flags(f.to_string());
        CONVTUNE_FUZZ_REQUIRE(g.enabled == f.enabled && g.benchmark == f.benchmark &&
                                  g.benchmark_limit == f.benchmark_limit && g.deterministic == f.deterministic &&
                                  g.allow_tf32 == f.allow_tf32 && g.policy == f.policy,
                              "parse_flags(to_string()) changed " + f.to_string() + " into " + g.to_string());
        CONVTUNE_FUZZ_REQUIRE(f.benchmark_limit >= 0, "parse_flags accepted a negative benchmark_limit");
    } catch (const Error&) {
    }
    try {
        CONVTUNE_FUZZ_REQUIRE(parse_byte_size(in) > 0, "parse_byte_size accepted 0");
    } catch (const Error&) {
    }
    for (auto parse :
         {+[](std::string_view s) { (void)parse_direction(s); }, +[](std::string_view s) { (void)parse_dtype(s); },
          +[](std::string_view s) { (void)parse_policy(s); }}) {
        try {
            parse(in);
        } catch (const Error&) {
        }
    }
}

// benchdnn descriptors and whole shape files.
inline void benchdnn_text(std::string_view in) {
    try {
        std::string name;
        require_sound(ConvProblem::parse_benchdnn(in, &name), "parse_benchdnn");
    } catch (const Error&) {
    }
    try {
        int last = 0;
        for (const ShapeLine& l : parse_shape_text(in)) {
            require_sound(l.problem, "parse_shape_text");
            CONVTUNE_FUZZ_REQUIRE(l.line_number > last && l.repeat >= 1 && l.repeat <= kMaxRepeat,
                                  "parse_shape_text: line numbers or repeat");
            last = l.line_number;
        }
    } catch (const Error&) {
    }
}

// A private folder for files the targets write (in memory when /dev/shm exists: write_file
// fsyncs), removed at exit. Never destroyed, so the exit handler can still read it.
inline const std::string& scratch_dir() {
    static const std::string* dir = [] {
        std::error_code ec;
        const std::filesystem::path base = ::access("/dev/shm", W_OK) == 0 ? std::filesystem::path("/dev/shm")
                                                                           : std::filesystem::temp_directory_path(ec);
        auto* t = new std::string((base / "convtune-fuzz-XXXXXX").string());
        if (!::mkdtemp(t->data())) throw std::runtime_error("cannot create a scratch folder in " + *t);
        std::atexit([] {
            std::error_code e;
            std::filesystem::remove_all(scratch_dir(), e);
        });
        return t;
    }();
    return *dir;
}

// The input as a file that read_file can open: an anonymous memory file when the kernel has them.
inline std::string as_file(std::string_view data) {
    static const int fd = ::memfd_create("convtune-fuzz", MFD_CLOEXEC);
    if (fd >= 0 && ::ftruncate(fd, 0) == 0 &&
        ::pwrite(fd, data.data(), data.size(), 0) == static_cast<ssize_t>(data.size()))
        return "/proc/self/fd/" + std::to_string(fd);
    const std::string path = scratch_dir() + "/input.json";
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(data.data(), static_cast<std::streamsize>(data.size()));
    return path;
}

inline bool same_sections(const std::vector<DbSection>& a, const std::vector<DbSection>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (!(a[i].env == b[i].env) || a[i].entries != b[i].entries) return false;
    return true;
}

// Tuning database files: read_file either rejects with ParseError or returns sections that a
// write and a re-read keep exactly (no entry lost or altered), and that merging with itself keeps.
inline void tuning_db(std::string_view in) {
    const std::string path = as_file(in);
    std::vector<DbSection> s;
    try {
        s = TuningDatabase::read_file(path);
    } catch (const DatabaseVersionError&) {
        // A newer format version: the constructor refuses it too (never read as empty, never replaced).
        bool refused = false;
        try {
            TuningDatabase db(path, [](const std::string&) {});
        } catch (const DatabaseVersionError&) {
            refused = true;
        }
        CONVTUNE_FUZZ_REQUIRE(refused, "the constructor accepted a database of a newer version");
        return;
    } catch (const ParseError&) {
        // What the constructor does with the same file: warn, never throw.
        std::vector<std::string> warnings;
        TuningDatabase db(path, [&](const std::string& w) { warnings.push_back(w); });
        CONVTUNE_FUZZ_REQUIRE(db.sections().empty(), "an unreadable database produced sections");
        return;
    }
    const std::string copy = scratch_dir() + "/copy.json";
    TuningDatabase::write_file(copy, s);
    std::vector<DbSection> back;
    try {
        back = TuningDatabase::read_file(copy);
    } catch (const ParseError& e) {
        throw Violation(std::string("a database convtune read could not be read back after writing it: ") + e.what());
    }
    CONVTUNE_FUZZ_REQUIRE(same_sections(s, back), "write_file + read_file changed the database");
    CONVTUNE_FUZZ_REQUIRE(same_sections(TuningDatabase::merge(s, s), s), "merging a database with itself changed it");
    std::vector<std::string> warnings;
    TuningDatabase db(path, [&](const std::string& w) { warnings.push_back(w); });
    CONVTUNE_FUZZ_REQUIRE(same_sections(db.sections(), s), "the constructor read something else than read_file");
    for (const DbSection& sec : s)
        for (const auto& [key, rec] : sec.entries) {
            const auto found = db.find(sec.env, key);
            CONVTUNE_FUZZ_REQUIRE(found && *found == rec, "find() does not return the stored record of " + key);
            break;  // one key per section is enough
        }
}

}  // namespace convtune::fuzz
