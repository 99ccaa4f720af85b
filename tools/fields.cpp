// How the CLI names a request field: the public names of app's field tables
// (convtune/app/fields.hpp) are the options without their dashes, so an InvalidRequest prints as
// "--shapes-dir: ..." here and "shapes_dir: ..." in Python.
#include <algorithm>

#include "cli.hpp"

namespace convtune::cli {

std::string option_name(std::string_view field) {
    // tune's list of problems is given one --problem at a time.
    if (field == "problems") return "--problem";
    std::string option = "--" + std::string(field);
    std::replace(option.begin(), option.end(), '_', '-');
    return option;
}

}  // namespace convtune::cli
