#include <cstdlib>

#include "convtune/convtune.hpp"
#include "convtune/error.hpp"
#include "convtune/registry.hpp"

namespace convtune {

Context::Context(const std::string& db_path, std::size_t cache_capacity) : cache_(cache_capacity) {
    if (!db_path.empty()) db_ = std::make_unique<TuningDatabase>(db_path);
}

Selector& Context::selector(const Backend& b) {
    std::lock_guard lock(mutex_);
    for (auto& s : selectors_)
        if (&s->backend() == &b) return *s;
    selectors_.push_back(std::make_unique<Selector>(b, cache_, db_.get()));
    return *selectors_.back();
}

std::string default_db_path() {
    const char* p = std::getenv("CONVTUNE_DB");
    return p ? p : "";
}

Context& default_context() {
    static Context c(default_db_path());
    return c;
}

Status convolution(const ConvProblem& p, const ConvTensors& t, std::string_view backend) {
    Backend& b = find_backend(backend);
    require_available(b);
    return default_context().selector(b).run(p, t, current_flags());
}

}  // namespace convtune
