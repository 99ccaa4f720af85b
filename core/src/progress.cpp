#include "convtune/progress.hpp"

#include <chrono>
#include <cstdio>

namespace convtune {

Progress::Progress(std::string label, bool enabled) : label_(std::move(label)), enabled_(enabled) {}
Progress::~Progress() { finish(); }

void Progress::update(int64_t done, int64_t total, const std::string& what) {
    if (!enabled_ || total <= 0) return;
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    if (done < total && last_ >= 0 && now - last_ < 0.1) return;
    last_ = now;
    const int width = 30;
    const int filled =
        static_cast<int>(static_cast<double>(width) * static_cast<double>(done) / static_cast<double>(total));
    std::string bar(static_cast<std::size_t>(filled), '=');
    if (filled < width) bar += '>';
    bar.resize(static_cast<std::size_t>(width), ' ');
    std::string w = what.size() > 60 ? what.substr(0, 57) + "..." : what;
    std::fprintf(stderr, "\r%s [%s] %lld/%lld %-60s", label_.c_str(), bar.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total), w.c_str());
    std::fflush(stderr);
    drawn_ = true;
}

void Progress::finish() {
    if (drawn_) {
        std::fprintf(stderr, "\r%*s\r", 120, "");
        std::fflush(stderr);
    }
    drawn_ = false;
}

}  // namespace convtune
