// Shared pieces of the convtune CLI. Each subcommand lives in its own file and registers
// itself on the app through an add_* function called from main.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "convtune/error.hpp"
#include "convtune/problem.hpp"

namespace convtune::cli {

// Exit codes shared by every subcommand.
enum Exit : int { ok = 0, check_failed = 1, bad_input = 2, run_failed = 3 };

// Options that override a problem's direction, dtype and layout (benchdnn descriptors carry none).
struct ProblemOverrides {
    std::string dir, dtype, layout;
    void add_to(CLI::App& app);
    ConvProblem apply(ConvProblem p) const;  // throws convtune::Error on a bad value
};

// The option that sets a request field ("shapes_dir" -> "--shapes-dir"): how the CLI names the
// field of an InvalidRequest.
std::string option_name(std::string_view field);
// Checks of an option's text, run before it is converted (problem_options.cpp). CLI11 reports a
// failed one as "--option: <message>" with exit code 2.
const CLI::Validator& non_empty();  // "" is refused, not taken as "not given"
const CLI::Validator& seed();       // an integer in [0, 2^64 - 1], no sign (CLI11 wraps -1 to 2^64 - 1)
const CLI::Validator& fraction();   // a finite number in [0, 1] (CLI::Range lets NaN through)

// Prints bad input as the CLI reports it ("convtune: error: <field's option>: <rule>"), main.cpp.
int print_bad_input(const Error& e);

// The action of a subcommand returns the process exit code.
using Action = std::function<int()>;
void add_list(CLI::App& app, Action& action);
void add_run(CLI::App& app, Action& action);
void add_parse(CLI::App& app, Action& action);
void add_demo(CLI::App& app, Action& action);
void add_simulate(CLI::App& app, Action& action);
void add_record(CLI::App& app, Action& action);
void add_tune(CLI::App& app, Action& action);
void add_explain(CLI::App& app, Action& action);
void add_db(CLI::App& app, Action& action);

}  // namespace convtune::cli
