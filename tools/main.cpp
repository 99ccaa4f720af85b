// convtune — see `convtune --help`. Bad input gets a message naming the field and the rule and
// exit code 2; a failed check exit code 1; a failed run exit code 3.
#include <fmt/core.h>

#include "cli.hpp"
#include "convtune/error.hpp"

int main(int argc, char** argv) {
    using namespace convtune;
    CLI::App app{"convtune: see, test and beat cudnn.benchmark"};
    app.require_subcommand(1);
    cli::Action action;
    cli::add_list(app, action);
    cli::add_run(app, action);
    cli::add_parse(app, action);
    cli::add_demo(app, action);
    cli::add_simulate(app, action);
    cli::add_record(app, action);
    cli::add_tune(app, action);
    cli::add_db(app, action);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc == 0 ? 0 : cli::bad_input;
    }
    try {
        return action ? action() : cli::ok;
    } catch (const Error& e) {
        fmt::print(stderr, "convtune: error: {}\n", e.what());
        return cli::bad_input;
    } catch (const std::exception& e) {
        fmt::print(stderr, "convtune: internal error: {}\n", e.what());
        return cli::run_failed;
    }
}
