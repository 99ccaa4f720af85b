// The f64 oracle: every direction of every valid problem computed in double precision from the
// same (already rounded) inputs an algorithm sees, together with the magnitude sum|a*b| of each
// output element, which turns an algorithm's error into a scale-free number comparable with its
// documented error_bound().
//
// It is written as a scatter over (n, k, c, o, r) — a different loop structure from cpu.direct's
// gather — so the two do not share a mistake by construction; the adjoint identities in the
// tests tie the three directions together without any reference.
#pragma once

#include <vector>

#include "convtune/host_data.hpp"

namespace convtune {

struct OracleResult {
    std::vector<double> value;      // exact-as-f64 output, in the problem's layout
    std::vector<double> magnitude;  // sum of |a*b| per output element
};

// Reads the inputs in place (no f64 copies): its only allocation is the result.
OracleResult oracle(const HostTensors& t);
// The bytes oracle() allocates: value and magnitude, 8 B each per output element (saturating).
// Part of `run --check`'s peak (check_memory_budget's `oracle`).
std::size_t oracle_bytes(const ConvProblem& p);

struct ErrorStats {
    double max_abs = 0;     // max |out - ref|
    double rel_l2 = 0;      // ||out - ref||_2 / ||ref||_2 (0 when ref is 0)
    double max_scaled =
        0;  // max of (|out - ref| - error_floor, at least 0) / (magnitude + tiny): compared with error_bound()
    bool finite = true;     // every output element finite (NaN marks an unwritten element)
    std::size_t worst_index = 0;
};

// Compares output_of(t) with the oracle.
ErrorStats compare(const HostTensors& t, const OracleResult& ref);

}  // namespace convtune
