#include "support/fake_backend.hpp"

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace convtune::test {

namespace {

class FakeAlgorithm final : public Algorithm {
public:
    FakeAlgorithm(const FakeBackend& b, FakeSpec s) : backend_(b), spec_(std::move(s)) {}
    std::string_view id() const override { return spec_.id; }
    const Backend& backend() const override { return backend_; }
    Notes notes() const override { return spec_.notes; }
    bool compiles_at_first_use(const ConvProblem&) const override { return spec_.compiles; }
    std::optional<Notes> notes_before_support(const ConvProblem&) const override {
        if (!spec_.notes_early) return std::nullopt;
        return spec_.notes;
    }
    Support supports(const ConvProblem& p) const override {
        {
            std::lock_guard lock(mutex_);
            ++support_queries_;
        }
        if (spec_.mode == FakeSpec::Mode::unsupported) return Support::no("scripted: never supported");
        if (spec_.only_direction >= 0 && static_cast<int>(p.direction) != spec_.only_direction)
            return Support::no("scripted: other direction only");
        return Support::yes();
    }
    std::size_t workspace_size(const ConvProblem&) const override {
        if (spec_.plan_build_ms > 0)
            std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(spec_.plan_build_ms));
        std::lock_guard lock(mutex_);
        ++ws_queries_;
        return spec_.workspace;
    }
    int workspace_queries() const {
        std::lock_guard lock(mutex_);
        return ws_queries_;
    }
    int support_queries() const {
        std::lock_guard lock(mutex_);
        return support_queries_;
    }
    Status run(const ConvProblem& p, const ConvTensors&, Workspace) const override {
        int i = 0;
        {
            std::lock_guard lock(mutex_);
            i = count_++;
        }
        if (spec_.mode == FakeSpec::Mode::fails) return Status::failure("scripted failure");
        if (spec_.mode == FakeSpec::Mode::out_of_memory) return Status::out_of_memory("scripted out of memory");
        const double t =
            spec_.ms_per_gflop > 0
                ? spec_.ms_per_gflop * p.flops() / 1e9
                : spec_.times_ms[std::min<std::size_t>(static_cast<std::size_t>(i), spec_.times_ms.size() - 1)];
        backend_.advance(backend_.load ? t * backend_.load(backend_.clock_ms()) : t);
        return Status::success();
    }
    bool suggested() const { return spec_.suggested; }
    int listings() const { return spec_.listings; }
    int count() const {
        std::lock_guard lock(mutex_);
        return count_;
    }
    void reset() {
        std::lock_guard lock(mutex_);
        count_ = 0;
        ws_queries_ = 0;
        support_queries_ = 0;
    }

private:
    const FakeBackend& backend_;
    FakeSpec spec_;
    mutable std::mutex mutex_;
    mutable int count_ = 0;
    mutable int ws_queries_ = 0;
    mutable int support_queries_ = 0;
};

}  // namespace

FakeBackend::FakeBackend(std::string name, std::vector<FakeSpec> specs, const Algorithm*, std::string fixed)
    : name_(std::move(name)), fixed_id_(std::move(fixed)) {
    for (FakeSpec& s : specs) {
        owned_.push_back(std::make_unique<FakeAlgorithm>(*this, std::move(s)));
        list_.push_back(owned_.back().get());
    }
    if (!list_.empty()) fallback_id_ = std::string(list_.back()->id());
}

FakeBackend::~FakeBackend() = default;

const Algorithm* FakeBackend::native_fallback(const ConvProblem&) const { return find(fallback_id_); }
const Algorithm* FakeBackend::fixed_default(const ConvProblem&) const {
    return fixed_id_.empty() ? nullptr : find(fixed_id_);
}

double FakeBackend::time_ms(const std::function<void()>& fn) const {
    const double t0 = clock_ms_;
    fn();
    return clock_ms_ - t0;
}

DeviceBuffer FakeBackend::allocate(std::size_t bytes) const {
    if (memory_limit && bytes > memory_limit) return {};
    ++allocations_;
    return HostBackend::allocate(bytes);
}

int FakeBackend::workspace_queries(const std::string& id) const {
    const Algorithm* a = find(id);
    return a ? static_cast<const FakeAlgorithm*>(a)->workspace_queries() : 0;
}

int FakeBackend::support_queries(const std::string& id) const {
    const Algorithm* a = find(id);
    return a ? static_cast<const FakeAlgorithm*>(a)->support_queries() : 0;
}

namespace {
// FakeBackend::listings_known_at_end: `r`, its lists' counts the defaults until it has ended.
class LateListings final : public Ranking {
public:
    explicit LateListings(std::unique_ptr<Ranking> r) : r_(std::move(r)) {}
    const Algorithm* next() override {
        const Algorithm* a = r_->next();
        ended_ = ended_ || !a;
        return a;
    }
    bool decided() const override { return r_->decided(); }
    bool explores() const override { return r_->explores(); }
    bool suggested(const Algorithm& a) const override { return r_->suggested(a); }
    int in_list(const Algorithm& a, ListName list) const override {
        return ended_ ? r_->in_list(a, list) : Ranking::in_list(a, list);
    }

private:
    std::unique_ptr<Ranking> r_;
    bool ended_ = false;
};
}  // namespace

std::unique_ptr<Ranking> FakeBackend::ranking(const ConvProblem&) const {
    std::set<const Algorithm*> unsuggested;
    std::map<const Algorithm*, int> listings;
    for (const Algorithm* a : list_)
        if (!static_cast<const FakeAlgorithm*>(a)->suggested()) unsuggested.insert(a);
    for (const Algorithm* a : list_)
        if (const int n = static_cast<const FakeAlgorithm*>(a)->listings(); n >= 0) listings[a] = n;
    auto r = list_ranking(list_, false, std::move(unsuggested), std::move(listings));
    if (listings_known_at_end) return std::make_unique<LateListings>(std::move(r));
    return r;
}

int FakeBackend::runs(const std::string& id) const {
    const Algorithm* a = find(id);
    return a ? static_cast<const FakeAlgorithm*>(a)->count() : 0;
}

void FakeBackend::reset_counters() {
    for (const Algorithm* a : list_) const_cast<FakeAlgorithm*>(static_cast<const FakeAlgorithm*>(a))->reset();
    clock_ms_ = 0;
}

}  // namespace convtune::test
