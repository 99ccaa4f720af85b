// Batched mixed-radix complex FFT in double precision, the transform engine of cpu.fft.
//
// A transform of length n = 2^a 3^b 5^c (radix-4, 2, 3 and 5 stages) is applied to many sequences at once. Element e of
// a sequence is a *vector* of `batch` complex numbers stored contiguously (for cpu.fft: the channels of one spatial
// position), so every butterfly is a loop over a contiguous run of memory that the compiler vectorises, and a
// multi-dimensional transform is a 1-D transform per dimension with a larger batch (all inner dimensions folded into
// it). No transposes are needed.
//
// The algorithm is the self-sorting Stockham decimation-in-time FFT (Van Loan, "Computational
// Frameworks for the FFT", 1992, sec. 1.7 / 2.3): after stage t, entry j*r_t + k holds the
// length-L_t DFT (L_t = p_1...p_t, r_t = n / L_t) of the subsequence x[k + r_t*i] at frequency j.
// A stage of radix p combines p such DFTs with twiddles w_L^(q j') and a radix-p butterfly.
// Twiddles are computed per stage from angles reduced exactly (integer q*j' mod L) and evaluated
// in long double, so each is within about one double ulp of exact: mu <= 2^-53 (1 + 2^-10).
//
// Numerical model used by cpu.fft's error bound (see docs/algorithms-fft.md): each stage of radix p
// maps its input x to B*W*x (W: diagonal unit-modulus twiddles, B: block radix-p DFTs of norm
// sqrt(p)); in floating point the stage output has a normwise relative error at most
// eta_p = sqrt(p) * (p + 4) * u (twiddle product sqrt(2)*gamma_2 + mu, at most p-1 complex adds and
// one constant product per butterfly output, summed over p inputs and measured in the 2-norm).
// stage_error_sum() returns the sum of eta_p / u over a plan's stages.
#pragma once

#include <complex>
#include <cstdint>
#include <vector>

#include "cpu/level.hpp"

namespace convtune::cpu::CONVTUNE_ISA_NS::fft {

using cd = std::complex<double>;

// True when n > 0 has no prime factor other than 2, 3, 5.
bool is_smooth(int64_t n);
// Smallest smooth size >= n (and even when `even`).
int64_t good_size(int64_t n, bool even);

class Plan1D {
public:
    Plan1D() = default;
    // sign = -1: forward DFT (exp(-2 pi i jk/n)); sign = +1: unnormalised inverse.
    Plan1D(int64_t n, int sign);
    int64_t size() const { return n_; }
    // Transforms `lines` independent sequences in place. Sequence l starts at data + l*line_stride
    // (complex units); its element e is the `batch` contiguous complex numbers at e*batch.
    // `scratch` must hold n*batch complex numbers.
    void run(cd* data, cd* scratch, int64_t batch, int64_t lines, int64_t line_stride) const;
    // Sum over stages of the normwise relative error constant eta_p / u (see the header comment).
    double stage_error_sum() const { return stage_error_sum(n_); }
    static double stage_error_sum(int64_t n);
    static std::vector<int> radices(int64_t n);

private:
    struct Stage {
        int p = 1;
        int64_t lp = 1;  // L' = L / p (length of the DFTs combined by this stage)
        int64_t r = 1;   // n / L
        std::vector<cd> tw;  // [lp][p-1]: w_L^(q j') for q = 1..p-1
    };
    int64_t n_ = 1;
    int sign_ = -1;
    std::vector<Stage> stages_;
};

// Real-input helpers for the innermost transformed dimension of even length N = 2M.
// A real sequence x of length N is packed as z[m] = x[2m] + i x[2m+1] and transformed with a
// length-M complex FFT (Z); these turn Z into the half spectrum X[0..M] of x and back.
//   pack_post: X[f] = (Z[f] + conj Z[M-f]) / 2 - i w^f (Z[f] - conj Z[M-f]) / 2, w = exp(-2 pi i/N)
//   unpack_pre: Z'[f] = (X[f] + conj X[M-f]) + i w^-f (X[f] - conj X[M-f]) (= 2 Z; an inverse
//               length-M FFT of Z' gives N * z)
// Lines: `lines` sequences; Z line l at z + l*M*batch, X line l at x + l*(M+1)*batch.
void pack_post(const cd* z, cd* x, int64_t m, int64_t batch, int64_t lines);
void unpack_pre(const cd* x, cd* z, int64_t m, int64_t batch, int64_t lines);
// Normwise error constant (/u) of pack_post / unpack_pre relative to the full spectrum's norm.
inline constexpr double kPackErrorSum = 14.0;

}  // namespace convtune::cpu::CONVTUNE_ISA_NS::fft
