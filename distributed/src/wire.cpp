#include "wire.hpp"

namespace convtune::dist {

nlohmann::json to_wire(const Environment& e) {
    return nlohmann::json::array({e.convtune, e.backend, e.library, e.device, e.driver});
}

Environment environment_from_wire(const nlohmann::json& j) {
    return {j.at(0).get<std::string>(), j.at(1).get<std::string>(), j.at(2).get<std::string>(),
            j.at(3).get<std::string>(), j.at(4).get<std::string>()};
}

}  // namespace convtune::dist
