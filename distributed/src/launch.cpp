#include "convtune/dist/launch.hpp"

#include <cstdlib>
#include <string_view>
#include <vector>

namespace convtune::dist {

namespace {

// The first of these variables that is set to a non-negative integer, else -1.
int env_int(std::initializer_list<const char*> names) {
    for (const char* n : names) {
        const char* v = std::getenv(n);
        if (!v || !*v) continue;
        char* end = nullptr;
        const long x = std::strtol(v, &end, 10);
        if (*end == '\0' && x >= 0 && x < (1L << 30)) return static_cast<int>(x);
    }
    return -1;
}

}  // namespace

bool mpi_built() {
#ifdef CONVTUNE_WITH_MPI
    return true;
#else
    return false;
#endif
}

int launched_ranks() {
    const int n = env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"});
    // SLURM_NTASKS is also set inside an allocation by sbatch; only srun sets SLURM_PROCID with it.
    if (n > 0 && std::getenv("SLURM_NTASKS") && !std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMI_SIZE") &&
        !std::getenv("PMIX_SIZE") && !std::getenv("SLURM_PROCID"))
        return 0;
    return n > 0 ? n : 0;
}

int local_rank() {
    const int r = env_int({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"});
    return r < 0 ? 0 : r;
}

std::string bind_gpu_to_local_rank() {
    const int lr = local_rank();
    std::string value = std::to_string(lr);
    if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v && *v) {
        std::vector<std::string> list;
        std::string_view s(v);
        while (true) {
            const auto comma = s.find(',');
            list.emplace_back(s.substr(0, comma));
            if (comma == std::string_view::npos) break;
            s.remove_prefix(comma + 1);
        }
        value = list[static_cast<std::size_t>(lr) % list.size()];
    }
    ::setenv("CUDA_VISIBLE_DEVICES", value.c_str(), 1);
    return value;
}

}  // namespace convtune::dist
