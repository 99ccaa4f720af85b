// How a process learns it was started by an MPI launcher, its local rank and its GPU
// (distributed/include/convtune/dist/launch.hpp), from the launcher's environment.
#define BOOST_TEST_MODULE launch
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <string>

#include "convtune/dist/launch.hpp"

namespace dist = convtune::dist;

namespace {
// Clears every variable these functions read, then sets the given ones.
void environment(std::initializer_list<std::pair<const char*, const char*>> set) {
    for (const char* n : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS", "SLURM_PROCID",
                          "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "CUDA_VISIBLE_DEVICES"})
        ::unsetenv(n);
    for (auto [k, v] : set) ::setenv(k, v, 1);
}
std::string visible() {
    const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
    return v ? v : "(unset)";
}
}  // namespace

BOOST_AUTO_TEST_CASE(ranks_from_the_launcher) {
    environment({});
    BOOST_TEST(dist::launched_ranks() == 0);
    environment({{"OMPI_COMM_WORLD_SIZE", "4"}});
    BOOST_TEST(dist::launched_ranks() == 4);
    environment({{"PMI_SIZE", "2"}});
    BOOST_TEST(dist::launched_ranks() == 2);
    // sbatch sets SLURM_NTASKS for the whole allocation: only srun's tasks have SLURM_PROCID
    environment({{"SLURM_NTASKS", "8"}});
    BOOST_TEST(dist::launched_ranks() == 0);
    environment({{"SLURM_NTASKS", "8"}, {"SLURM_PROCID", "3"}});
    BOOST_TEST(dist::launched_ranks() == 8);
    environment({{"OMPI_COMM_WORLD_SIZE", "two"}});
    BOOST_TEST(dist::launched_ranks() == 0);
}

BOOST_AUTO_TEST_CASE(one_gpu_per_local_rank) {
    environment({{"OMPI_COMM_WORLD_LOCAL_RANK", "3"}});
    BOOST_TEST(dist::local_rank() == 3);
    BOOST_TEST(dist::bind_gpu_to_local_rank() == "3");
    BOOST_TEST(visible() == "3");
    // a list: the local rank's entry, modulo its length
    environment({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"CUDA_VISIBLE_DEVICES", "4,5"}});
    BOOST_TEST(dist::bind_gpu_to_local_rank() == "5");
    BOOST_TEST(visible() == "5");
    environment({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"CUDA_VISIBLE_DEVICES", "0"}});
    BOOST_TEST(dist::bind_gpu_to_local_rank() == "0");  // two ranks share GPU 0
    environment({{"SLURM_LOCALID", "2"}, {"CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b"}});
    BOOST_TEST(dist::bind_gpu_to_local_rank() == "GPU-a");
    environment({});
    BOOST_TEST(dist::local_rank() == 0);
    BOOST_TEST(dist::bind_gpu_to_local_rank() == "0");
}
