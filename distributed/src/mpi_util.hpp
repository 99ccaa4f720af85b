// Small MPI helpers shared by tune.cpp and agree.cpp: strings over MPI, and waits that sleep
// between polls instead of spinning (OpenMPI's blocking calls busy-poll a core, which a rank
// sharing its core with its own work, or a CPU rank pinned with --bind-to core, cannot spare).
#pragma once

#include <mpi.h>

#include <string>

namespace convtune::dist::detail {

void check(int rc, const char* what);  // throws Error when an MPI call failed
void wait(MPI_Request& req);           // MPI_Test with short sleeps
void send_string(const std::string& s, int dest, int tag, MPI_Comm comm);
std::string recv_string(int source, int tag, MPI_Comm comm, int* from = nullptr);  // polls
// rank root's s on every rank of comm
std::string broadcast_string(std::string s, int root, MPI_Comm comm);

}  // namespace convtune::dist::detail
