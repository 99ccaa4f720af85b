// The instruction-set level the CPU algorithms run at: the highest compiled level this CPU has,
// or a lower one named by CONVTUNE_CPU_ISA (isa.hpp).
#include "cpu/isa.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "convtune/error.hpp"
#include "cpu/cpu_levels.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace convtune::cpu {

namespace {

// The x86-64 levels convtune compiles for, each including those before it.
constexpr std::string_view kKnown[] = {"baseline", "x86-64-v3", "x86-64-v4"};

int rank_of(std::string_view level) {
    const auto* it = std::find(std::begin(kKnown), std::end(kKnown), level);
    return it == std::end(kKnown) ? -1 : static_cast<int>(it - std::begin(kKnown));
}

// The rank (in kKnown) of the highest level this CPU runs, its operating system saving the
// vector registers the level uses: the features of the x86-64 psABI's level definitions, read
// with CPUID (x86-64-v3 includes x86-64-v2).
int cpu_rank() {
#if defined(__x86_64__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    auto bit = [](unsigned r, int i) { return ((r >> i) & 1u) != 0; };
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const unsigned ecx1 = c;
    unsigned ecx_ext = 0;
    if (__get_cpuid(0x80000001u, &a, &b, &c, &d)) ecx_ext = c;
    unsigned ebx7 = 0;
    if (__get_cpuid_max(0, nullptr) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        ebx7 = b;
    }
    // x86-64-v2: SSE3, SSSE3, CX16, SSE4.1, SSE4.2, POPCNT, LAHF/SAHF.
    const bool v2 = bit(ecx1, 0) && bit(ecx1, 9) && bit(ecx1, 13) && bit(ecx1, 19) && bit(ecx1, 20) && bit(ecx1, 23) &&
                    bit(ecx_ext, 0);
    // AVX with OSXSAVE, and the OS saving the SSE and AVX state (XCR0 bits 1, 2).
    if (!v2 || !bit(ecx1, 27) || !bit(ecx1, 28)) return 0;
    uint32_t xcr0_lo = 0, xcr0_hi = 0;
    __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    if ((xcr0_lo & 0x6u) != 0x6u) return 0;
    // x86-64-v3: AVX2, BMI1, BMI2, F16C, FMA, LZCNT, MOVBE.
    const bool v3 = bit(ebx7, 5) && bit(ebx7, 3) && bit(ebx7, 8) && bit(ecx1, 29) && bit(ecx1, 12) && bit(ecx_ext, 5) &&
                    bit(ecx1, 22);
    if (!v3) return 0;
    // x86-64-v4: AVX-512 F, DQ, CD, BW, VL, and the OS saving the opmask and ZMM state (XCR0 bits 5-7).
    const bool v4 =
        bit(ebx7, 16) && bit(ebx7, 17) && bit(ebx7, 28) && bit(ebx7, 30) && bit(ebx7, 31) && (xcr0_lo & 0xe0u) == 0xe0u;
    return v4 ? 2 : 1;
#else
    return 0;
#endif
}

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
}

IsaLevels decide() {
    IsaLevels L;
#define CONVTUNE_X(ns, name) L.compiled.emplace_back(name);
    CONVTUNE_CPU_LEVELS(CONVTUNE_X)
#undef CONVTUNE_X
    // A build with one level (-march set, or not x86-64) runs it: its whole binary needs it anyway.
    const int have = cpu_rank();
    for (const std::string& level : L.compiled)
        if (L.compiled.size() == 1 || rank_of(level) <= have) L.usable.push_back(level);
    L.active = L.usable.back();
    const char* env = std::getenv("CONVTUNE_CPU_ISA");
    if (env == nullptr || *env == '\0') return L;
    const std::string want = env;
    const bool compiled = std::find(L.compiled.begin(), L.compiled.end(), want) != L.compiled.end();
    if (!compiled && rank_of(want) < 0)
        throw Error("CONVTUNE_CPU_ISA=" + want + ": not an instruction-set level of this build (" + join(L.compiled) +
                    ")");
    if (std::find(L.usable.begin(), L.usable.end(), want) != L.usable.end()) {
        L.active = want;
    } else if (compiled) {
        L.note = "CONVTUNE_CPU_ISA=" + want + ": this CPU lacks " + want + "; running " + L.active;
    } else {
        L.note = "CONVTUNE_CPU_ISA=" + want + ": this build's CPU algorithms are compiled for " + join(L.compiled) +
                 " only; running " + L.active;
    }
    if (!L.note.empty()) std::fprintf(stderr, "convtune: %s\n", L.note.c_str());
    return L;
}

}  // namespace

const IsaLevels& isa_levels() {
    static const IsaLevels levels = decide();
    return levels;
}

int active_level_index() {
    const IsaLevels& L = isa_levels();
    return static_cast<int>(std::find(L.compiled.begin(), L.compiled.end(), L.active) - L.compiled.begin());
}

}  // namespace convtune::cpu
