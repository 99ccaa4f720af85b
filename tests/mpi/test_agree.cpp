// dist::agree under mpirun -np 2: every rank ends with rank 0's algorithm for every shape.
// Each rank replays the same recording with a different seed (its own draws of the recorded
// samples), so searches of its own choose differently on some shapes; that is checked first, so
// the test cannot pass without agree doing its work. Exit 0 = pass.
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "convtune/dist/agree.hpp"
#include "convtune/error.hpp"
#include "convtune/sim/replay_backend.hpp"

int main(int argc, char** argv) {
    using namespace convtune;
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rc = 0;
    try {
        if (argc != 2 || size != 2) throw Error("usage: mpirun -np 2 test_agree RECORDING");
        sim::Recording rec = sim::Recording::load(argv[1]);
        std::vector<ConvProblem> problems;
        for (const sim::ProblemRecord& p : rec.problems) problems.push_back(p.problem);
        sim::ReplayBackend backend(rec, 1 + static_cast<uint64_t>(rank) * 7919);
        const FlagValues f = parse_flags("benchmark=1,max_samples=3,min_samples=1");

        // Without agree: each rank's own search; count the shapes where the ranks differ.
        Context own;
        std::string mine;
        for (const ConvProblem& p : problems) mine += own.selector(backend).select(p, f)->algorithm + "\n";
        std::string theirs = mine;
        if (rank == 1) MPI_Send(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        int differ = 0;
        if (rank == 0) {
            MPI_Status st;
            int n = 0;
            MPI_Probe(1, 1, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_CHAR, &n);
            theirs.assign(static_cast<std::size_t>(n), '\0');
            MPI_Recv(theirs.data(), n, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            differ = mine != theirs;
        }
        MPI_Bcast(&differ, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (!differ)
            throw Error("precondition: the ranks' own searches agree on every shape, so agree() would not be tested");

        // With agree: rank 0's decisions everywhere; a later select() returns them from memory.
        Context shared;
        const auto ds = dist::agree(problems, f, backend, shared);
        std::string chosen;
        for (std::size_t i = 0; i < problems.size(); ++i) {
            const auto d = shared.selector(backend).select(problems[i], f);
            if (d->algorithm != ds[i]->algorithm || d->source != Source::memory)
                throw Error("select() after agree() did not return the agreed decision for " + problems[i].to_string());
            chosen += d->algorithm + "\n";
        }
        std::string other = chosen;
        if (rank == 1) MPI_Send(chosen.data(), static_cast<int>(chosen.size()), MPI_CHAR, 0, 2, MPI_COMM_WORLD);
        int same = 1;
        if (rank == 0) {
            MPI_Status st;
            int n = 0;
            MPI_Probe(1, 2, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_CHAR, &n);
            other.assign(static_cast<std::size_t>(n), '\0');
            MPI_Recv(other.data(), n, MPI_CHAR, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            same = chosen == other;
            std::printf("%zu shapes: own searches differ between ranks; after agree(): %s\n", problems.size(),
                        same ? "identical" : "DIFFERENT");
        }
        MPI_Bcast(&same, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (!same) throw Error("the ranks run different algorithms after agree()");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: FAIL: %s\n", rank, e.what());
        rc = 1;
    }
    MPI_Finalize();
    return rc;
}
