// convtune list [--json]: backends, their availability and identity, algorithms with notes.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "convtune/registry.hpp"

namespace convtune::cli {

void add_list(CLI::App& app, Action& action) {
    auto* cmd = app.add_subcommand("list", "List backends and their algorithms with numerical notes");
    auto json = std::make_shared<bool>(false);
    cmd->add_flag("--json", *json, "Print one JSON document");
    cmd->callback([json, &action] {
        action = [json] {
            nlohmann::json doc = nlohmann::json::array();
            for (Backend* b : backends()) {
                const Availability av = b->availability();
                const BackendIdentity id = b->identity();
                nlohmann::json jb{{"name", b->name()}, {"available", av.ok}, {"library", id.library}, {"device", id.device}};
                if (!av.ok) jb["reason"] = av.reason;
                nlohmann::json algos = nlohmann::json::array();
                for (const Algorithm* a : b->algorithms()) algos.push_back({{"id", a->id()}, {"notes", a->notes().names()}});
                jb["algorithms"] = algos;
                doc.push_back(jb);
                if (*json) continue;
                fmt::print("{} — {}{}\n", b->name(), id.library, av.ok ? "" : fmt::format(" (unavailable: {})", av.reason));
                if (!id.device.empty()) fmt::print("  device: {}\n", id.device);
                if (b->algorithms().empty()) fmt::print("  (no algorithms)\n");
                for (const Algorithm* a : b->algorithms()) fmt::print("  {:<40} {}\n", a->id(), a->notes().to_string());
            }
            if (*json) fmt::print("{}\n", doc.dump(2));
            return ok;
        };
    });
}

}  // namespace convtune::cli
