#include "convtune/backend.hpp"

#include "convtune/error.hpp"

#include <cctype>
#include <chrono>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <thread>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace convtune {

void require_available(const Backend& b) {
    if (const Availability av = b.availability(); !av.ok)
        throw InvalidRequest("backend", "'" + std::string(b.name()) + "' is unavailable here: " + av.reason);
}

std::vector<const Algorithm*> Catalogue::heuristic_order(const ConvProblem& p) const {
    std::vector<const Algorithm*> r;
    for (const Algorithm* a : algorithms())
        if (a->supports(p)) r.push_back(a);
    return r;
}

int Ranking::in_list(const Algorithm& a, ListName list) const {
    switch (list) {
        case ListName::heuristic: return suggested(a) ? 1 : 0;
        case ListName::fallback: return 0;
        case ListName::all: return 1;
    }
    return 0;
}

int Ranking::in_lists(const Algorithm& a, std::span<const ListName> from) const {
    int n = 0;
    for (const ListName l : from) n += in_list(a, l);
    return n;
}

namespace {
class ListRanking final : public Ranking {
public:
    ListRanking(std::vector<const Algorithm*> v, bool decided, std::set<const Algorithm*> unsuggested,
                std::map<const Algorithm*, int> heuristic)
        : v_(std::move(v)), decided_(decided), unsuggested_(std::move(unsuggested)), heuristic_(std::move(heuristic)) {}
    const Algorithm* next() override { return i_ < v_.size() ? v_[i_++] : nullptr; }
    bool decided() const override { return decided_; }
    bool explores() const override { return !unsuggested_.empty(); }
    bool suggested(const Algorithm& a) const override { return !unsuggested_.count(&a); }
    int in_list(const Algorithm& a, ListName list) const override {
        const auto it = list == ListName::heuristic ? heuristic_.find(&a) : heuristic_.end();
        return it != heuristic_.end() ? it->second : Ranking::in_list(a, list);
    }

private:
    std::vector<const Algorithm*> v_;
    bool decided_;
    std::set<const Algorithm*> unsuggested_;
    std::map<const Algorithm*, int> heuristic_;
    std::size_t i_ = 0;
};
}  // namespace

std::unique_ptr<Ranking> list_ranking(std::vector<const Algorithm*> order, bool decided,
                                      std::set<const Algorithm*> unsuggested,
                                      std::map<const Algorithm*, int> heuristic) {
    return std::make_unique<ListRanking>(std::move(order), decided, std::move(unsuggested), std::move(heuristic));
}

std::unique_ptr<Ranking> Catalogue::ranking(const ConvProblem& p) const {
    return list_ranking(heuristic_order(p), true);
}

const Algorithm* Catalogue::find(std::string_view id) const {
    const std::span<const Algorithm* const> all = algorithms();
    std::lock_guard lock(find_mutex_);
    if (all.data() != find_list_ || all.size() != find_size_) {
        find_index_.clear();
        for (const Algorithm* a : all) find_index_.emplace(a->id(), a);  // the first of equal ids, as a scan finds
        find_list_ = all.data();
        find_size_ = all.size();
    }
    const auto it = find_index_.find(id);
    return it == find_index_.end() ? nullptr : it->second;
}

DeviceBuffer HostBackend::allocate(std::size_t bytes) const {
    // 64-byte alignment: what AVX-512 loads and oneDNN like.
    const std::size_t rounded = (bytes + 63) / 64 * 64;
    void* p = ::operator new(rounded == 0 ? 64 : rounded, std::align_val_t{64}, std::nothrow);
    if (!p) return {};
    return DeviceBuffer(p, bytes, [](void* q) { ::operator delete(q, std::align_val_t{64}); });
}

void HostBackend::upload(void* dst, const void* src, std::size_t bytes) const {
    if (bytes) std::memcpy(dst, src, bytes);
}
void HostBackend::download(void* dst, const void* src, std::size_t bytes) const {
    if (bytes) std::memcpy(dst, src, bytes);
}

double HostBackend::time_ms(const std::function<void()>& fn) const {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

std::string nvidia_driver_release(std::string_view line) {
    const std::size_t at = line.find("Kernel Module");
    if (at == std::string_view::npos) return {};
    std::istringstream words{std::string(line.substr(at + 13))};
    for (std::string w; words >> w;)
        if (std::isdigit(static_cast<unsigned char>(w.front())) && w.find('.') != std::string::npos &&
            w.find_first_not_of("0123456789.") == std::string::npos)
            return w;
    return {};
}

std::string host_device_name() {
    std::string model = "x86-64";
    std::ifstream f("/proc/cpuinfo");
    for (std::string line; std::getline(f, line);) {
        if (line.rfind("model name", 0) == 0) {
            const auto c = line.find(':');
            if (c != std::string::npos) model = line.substr(c + 2);
            break;
        }
    }
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
#else
    const int threads = 1;
#endif
    return model + ", " + std::to_string(threads) + " threads";
}

}  // namespace convtune
