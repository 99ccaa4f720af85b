// Consistent decisions across the ranks of a job: rank 0 decides, every rank runs the same
// algorithm per shape (as a data-parallel job needs: the same kernels, the same numerics).
// Needs MPI (CONVTUNE_WITH_MPI).
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "convtune/convtune.hpp"
#include "convtune/decision.hpp"

namespace convtune::dist {

// Collective over comm. Rank 0 selects each problem under f on backend b through ctx's selector
// (memory, then the tuning database, then its search) and broadcasts the decisions; every other
// rank puts them in ctx's cache under its own cache_key, so its later select() and convolution()
// calls return rank 0's algorithm for those shapes without searching. Returns the decisions, in
// order, on every rank. When rank 0 cannot decide a problem, every rank throws Error with its
// message. The backend must have the same name on every rank.
std::vector<std::shared_ptr<const Decision>> agree(const std::vector<ConvProblem>& problems, const FlagValues& f,
                                                   const Backend& b, Context& ctx = default_context(),
                                                   MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace convtune::dist
