// A build without MPI (CONVTUNE_WITH_MPI off): a distributed tune says so.
#include "convtune/dist/tune.hpp"

namespace convtune::dist {

namespace {
[[noreturn]] void unavailable() {
    throw Error(
        "this convtune was built without MPI (CONVTUNE_WITH_MPI=OFF: install libopenmpi-dev and configure again); it "
        "cannot share a tune over the ranks of mpirun");
}
}  // namespace

TuneReport tune(const app::TuneRequest&, app::TuneSink*, const TuneOptions&) { unavailable(); }
std::string to_text(const TuneReport&) { unavailable(); }
Session::Session() { unavailable(); }
void end_job(int) { unavailable(); }
Session::~Session() = default;
int Session::rank() const { return 0; }
int Session::size() const { return 1; }

}  // namespace convtune::dist
