// A one-line progress bar on stderr ("\rlabel [=====>    ] 12/50 what"), redrawn at most every
// 0.1 s and erased when finished (or destroyed). Disabled, it draws nothing (the CLI enables it
// when stderr is a terminal or when asked to).
#pragma once

#include <cstdint>
#include <string>

namespace convtune {

class Progress {
public:
    Progress(std::string label, bool enabled);
    ~Progress();
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;
    void update(int64_t done, int64_t total, const std::string& what);
    void finish();

private:
    std::string label_;
    bool enabled_;
    bool drawn_ = false;
    double last_ = -1;
};

}  // namespace convtune
