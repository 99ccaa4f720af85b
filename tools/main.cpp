// convtune — see `convtune --help`. Bad input gets a message naming the field and the rule and
// exit code 2; a failed check exit code 1; a failed run exit code 3 (also when standard output
// cannot be written).
#include <fmt/core.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cli.hpp"
#include "convtune/build_info.hpp"
#include "convtune/error.hpp"
#include "convtune/host_data.hpp"

int convtune::cli::print_bad_input(const Error& e) {
    if (const auto* r = dynamic_cast<const InvalidRequest*>(&e))
        fmt::print(stderr, "convtune: error: {}\n", r->message(option_name));
    else fmt::print(stderr, "convtune: error: {}\n", e.what());
    return bad_input;
}

int main(int argc, char** argv) {
    using namespace convtune;
    CLI::App app{"convtune: see, test and beat cudnn.benchmark"};
    app.require_subcommand(1);
    app.set_version_flag(
        "--version",
        [] {
            std::string t = to_text(build_info());
            t.pop_back();  // CLI11 ends the line
            return t;
        },
        "Print the version, the build's instruction sets and its backends");
    app.fallthrough();  // --max-bytes may follow the subcommand
    std::string max_bytes;
    app.add_option(
           "--max-bytes", max_bytes,
           "Memory budget of one problem's host tensors and workspace, e.g. 2G (default: $CONVTUNE_MAX_BYTES, else "
           "min(8G, half the RAM))")
        ->check(cli::non_empty());
    cli::Action action;
    cli::add_list(app, action);
    cli::add_run(app, action);
    cli::add_parse(app, action);
    cli::add_demo(app, action);
    cli::add_simulate(app, action);
    cli::add_record(app, action);
    cli::add_tune(app, action);
    cli::add_explain(app, action);
    cli::add_db(app, action);
    // An unknown first word would otherwise be reported as "A subcommand is required".
    if (argc > 1 && argv[1][0] != '-') {
        bool known = false;
        for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
            known = known || sub->check_name(argv[1]);
        if (!known) {
            std::string names;
            for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
                names += (names.empty() ? "" : ", ") + sub->get_name();
            fmt::print(stderr, "convtune: error: unknown command '{}' (commands: {}; see --help)\n", argv[1], names);
            return cli::bad_input;
        }
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc == 0 ? 0 : cli::bad_input;
    }
    try {
        if (!max_bytes.empty()) set_memory_budget(parse_byte_size(max_bytes, "--max-bytes"));
        const int rc = action ? action() : cli::ok;
        // Output that could not be written (a full disk, a closed pipe, /dev/full) is a failed run,
        // never a silent success.
        errno = 0;
        if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
            fmt::print(stderr, "convtune: error: cannot write to standard output: {}\n",
                       errno ? std::strerror(errno) : "write error");
            return cli::run_failed;
        }
        return rc;
    } catch (const Error& e) {
        return cli::print_bad_input(e);
    } catch (const std::exception& e) {
        if (std::ferror(stdout)) {  // fmt throws when a write to stdout fails
            fmt::print(stderr, "convtune: error: cannot write to standard output: {}\n", e.what());
            return cli::run_failed;
        }
        fmt::print(stderr, "convtune: internal error: {}\n", e.what());
        return cli::run_failed;
    }
}
