#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include "convtune/dist/tune.hpp"
#include "convtune/error.hpp"
#include "mpi_util.hpp"

namespace convtune::dist {

namespace detail {

void check(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw Error(std::string(what) + " failed: " + std::string(text, static_cast<std::size_t>(len)));
}

void wait(MPI_Request& req) {
    int flag = 0;
    auto pause = std::chrono::microseconds(20);
    while (true) {
        check(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), "MPI_Test");
        if (flag) return;
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
}

void send_string(const std::string& s, int dest, int tag, MPI_Comm comm) {
    MPI_Request req;
    check(MPI_Isend(s.data(), static_cast<int>(s.size()), MPI_CHAR, dest, tag, comm, &req), "MPI_Isend");
    wait(req);
}

std::string recv_string(int source, int tag, MPI_Comm comm, int* from) {
    MPI_Status st;
    int flag = 0;
    auto pause = std::chrono::microseconds(20);
    while (true) {
        check(MPI_Iprobe(source, tag, comm, &flag, &st), "MPI_Iprobe");
        if (flag) break;
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
    int n = 0;
    MPI_Get_count(&st, MPI_CHAR, &n);
    std::string s(static_cast<std::size_t>(n), '\0');
    check(MPI_Recv(s.data(), n, MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, comm, MPI_STATUS_IGNORE), "MPI_Recv");
    if (from) *from = st.MPI_SOURCE;
    return s;
}

std::string broadcast_string(std::string s, int root, MPI_Comm comm) {
    int64_t n = static_cast<int64_t>(s.size());
    MPI_Request req;
    check(MPI_Ibcast(&n, 1, MPI_INT64_T, root, comm, &req), "MPI_Ibcast");
    wait(req);
    s.resize(static_cast<std::size_t>(n));
    if (n > 0) {
        check(MPI_Ibcast(s.data(), static_cast<int>(n), MPI_CHAR, root, comm, &req), "MPI_Ibcast");
        wait(req);
    }
    return s;
}

}  // namespace detail

Session::Session() {
    int init = 0;
    MPI_Initialized(&init);
    if (init) return;
    int provided = 0;
    detail::check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    owner_ = true;
}

Session::~Session() {
    int fin = 0;
    MPI_Finalized(&fin);
    if (owner_ && !fin) MPI_Finalize();
}

int Session::rank() const {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int Session::size() const {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

}  // namespace convtune::dist
