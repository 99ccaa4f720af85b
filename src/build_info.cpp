#include "convtune/build_info.hpp"

#include "convtune/tuning_db.hpp"
#include "cpu/isa.hpp"

#ifndef CONVTUNE_ARCH_NAME
#define CONVTUNE_ARCH_NAME ""
#endif

namespace convtune {

BuildInfo build_info() {
    BuildInfo b;
    b.version = convtune_version();
    b.arch = CONVTUNE_ARCH_NAME;
    // What this translation unit was compiled for: the library's code shares its flags.
#ifdef __SSE2__
    b.isa.push_back("sse2");
#endif
#ifdef __SSE4_2__
    b.isa.push_back("sse4.2");
#endif
#ifdef __AVX__
    b.isa.push_back("avx");
#endif
#ifdef __FMA__
    b.isa.push_back("fma");
#endif
#ifdef __AVX2__
    b.isa.push_back("avx2");
#endif
#ifdef __AVX512F__
    b.isa.push_back("avx512f");
#endif
#ifdef __AVX512BW__
    b.isa.push_back("avx512bw");
#endif
#ifdef __aarch64__
    b.isa.push_back("aarch64");
#endif
    const cpu::IsaLevels& levels = cpu::isa_levels();
    b.cpu_levels = levels.compiled;
    b.cpu_level = levels.active;
    b.backends.push_back("cpu");
#ifdef CONVTUNE_WITH_ONEDNN
    b.backends.push_back("onednn");
#endif
#ifdef CONVTUNE_WITH_CUDNN
    b.backends.push_back("cudnn");
#endif
#if defined(__clang__)
    b.compiler = "Clang " __clang_version__;
#elif defined(__GNUC__)
    b.compiler = "GCC " __VERSION__;
#else
    b.compiler = "unknown compiler";
#endif
    return b;
}

std::string to_text(const BuildInfo& b) {
    auto join = [](const std::vector<std::string>& v) {
        std::string s;
        for (const std::string& x : v) s += (s.empty() ? "" : " ") + x;
        return s;
    };
    return "convtune " + b.version +
           "\nbuild: " + (b.arch.empty() ? std::string("portable (no -march)") : "-march=" + b.arch) +
           " (instruction sets: " + (b.isa.empty() ? std::string("baseline") : join(b.isa)) + "), " + b.compiler +
           "\ncpu algorithms: " + join(b.cpu_levels) + ", running " + b.cpu_level + "\nbackends: " + join(b.backends) +
           "\n";
}

}  // namespace convtune
