// How this process was started: by an MPI launcher (mpirun, srun) or not, its local rank, and
// the GPU that local rank owns. Needs no MPI library: the launcher's environment says it all.
#pragma once

#include <string>

namespace convtune::dist {

// Whether this build can share work out over MPI (CONVTUNE_WITH_MPI).
bool mpi_built();

// The number of ranks the launcher started, from its environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE,
// SLURM_NTASKS under srun); 0 when this process was not started by an MPI launcher.
int launched_ranks();

// This rank's index among the ranks of its host (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,
// SLURM_LOCALID); 0 when none is set.
int local_rank();

// One GPU per rank: restricts CUDA to the local rank's device by setting CUDA_VISIBLE_DEVICES
// before any backend initialises (the cuDNN backend uses device 0 of what it sees). When
// CUDA_VISIBLE_DEVICES is already a list, the rank takes its (local rank mod length)-th entry, so
// `CUDA_VISIBLE_DEVICES=0 mpirun -np 2` has two ranks share GPU 0. Returns the value set.
std::string bind_gpu_to_local_rank();

}  // namespace convtune::dist
