// The one list of compiled-in backends. Add a backend here, behind its CONVTUNE_WITH_* option.
#include "convtune/registry.hpp"

#include <string>
#include <vector>

#include "convtune/error.hpp"
#include "cpu/cpu_backend.hpp"
#ifdef CONVTUNE_WITH_ONEDNN
#include "onednn/onednn_backend.hpp"
#endif
#ifdef CONVTUNE_WITH_CUDNN
#include "cudnn/cudnn_backend.hpp"
#endif

namespace convtune {

namespace {
std::vector<Backend*>& registered() {
    static std::vector<Backend*> list = [] {
        std::vector<Backend*> v{&cpu_backend()};
#ifdef CONVTUNE_WITH_ONEDNN
        v.push_back(&onednn_backend());
#endif
#ifdef CONVTUNE_WITH_CUDNN
        v.push_back(&cudnn_backend());
#endif
        return v;
    }();
    return list;
}
}  // namespace

std::span<Backend* const> backends() { return registered(); }

void register_backend(Backend& b) {
    for (const Backend* r : registered())
        if (r->name() == b.name()) throw Error("backend: '" + std::string(b.name()) + "' is already registered");
    registered().push_back(&b);
}

Backend& find_backend(std::string_view name) {
    std::string known;
    for (Backend* b : backends()) {
        if (b->name() == name) return *b;
        known += known.empty() ? "" : ", ";
        known += b->name();
    }
    throw Error("backend: unknown backend " + quote_input(name) + " (compiled in: " + known + ")");
}

const Algorithm& find_algorithm(std::string_view id) {
    for (Backend* b : backends())
        if (const Algorithm* a = b->find(id)) return *a;
    throw Error("algo: unknown algorithm id " + quote_input(id) + " (see `convtune list`)");
}

}  // namespace convtune
