// The CPU algorithms' tests run once per instruction-set level compiled in, the level named by
// CONVTUNE_CPU_ISA (tests/CMakeLists.txt). A level this CPU lacks would run at a lower one: such
// a run prints "skipped: ..." and exits 0, and ctest reports it as Skipped.
// Use: using convtune::test::RequireCpuLevel; BOOST_TEST_GLOBAL_FIXTURE(RequireCpuLevel);
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "cpu/isa.hpp"

namespace convtune::test {

struct RequireCpuLevel {
    RequireCpuLevel() {
        const char* want = std::getenv("CONVTUNE_CPU_ISA");
        const cpu::IsaLevels& levels = cpu::isa_levels();
        if (want != nullptr && *want != '\0' && levels.active != want) {
            std::printf("skipped: the CPU algorithms cannot run at %s here (%s)\n", want, levels.note.c_str());
            std::fflush(stdout);
            std::_Exit(0);
        }
        std::printf("cpu algorithms at %s\n", levels.active.c_str());
    }
};

}  // namespace convtune::test
