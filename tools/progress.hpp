// A one-line progress bar on stderr, drawn only when stderr is a terminal (or when forced).
#pragma once

#include <unistd.h>

#include <cstdio>
#include <string>

namespace convtune::cli {

class Progress {
public:
    Progress(std::size_t total, bool force = false) : total_(total), on_(force || ::isatty(2)) {}
    ~Progress() { done(); }
    void update(std::size_t done, const std::string& what) {
        if (!on_ || total_ == 0) return;
        const int width = 30;
        const int filled = static_cast<int>(width * done / total_);
        std::string label = what.size() > 40 ? what.substr(0, 37) + "..." : what;
        std::fprintf(stderr, "\r[%s%s] %zu/%zu %-40s", std::string(static_cast<std::size_t>(filled), '#').c_str(),
                     std::string(static_cast<std::size_t>(width - filled), ' ').c_str(), done, total_, label.c_str());
        std::fflush(stderr);
        drawn_ = true;
    }
    void done() {
        if (drawn_) std::fprintf(stderr, "\r%*s\r", 90, "");
        drawn_ = false;
    }

private:
    std::size_t total_;
    bool on_;
    bool drawn_ = false;
};

}  // namespace convtune::cli
