#include "cpu/fft_transform.hpp"

#include <cmath>
#include <cstring>
#include <numbers>

namespace convtune::cpu::CONVTUNE_ISA_NS::fft {

namespace {

// exp(sign * 2 pi i * num / den) with the angle reduced exactly and evaluated in long double.
cd unit_root(int64_t num, int64_t den, int sign) {
    num %= den;
    if (num < 0) num += den;
    if (num == 0) return {1.0, 0.0};
    const long double a =
        2.0L * std::numbers::pi_v<long double> * static_cast<long double>(num) / static_cast<long double>(den);
    return {static_cast<double>(std::cos(a)), static_cast<double>(sign) * static_cast<double>(std::sin(a))};
}

// One Stockham stage: for j' in [0, lp): inputs u_q = in[(j' r p + r q) B + kk], outputs
// out[((j' + lp s) r) B + kk], kk over the contiguous run [0, r B).
template <int P>
void stage(const cd* __restrict in, cd* __restrict out, int64_t lp, int64_t r, int64_t batch, const cd* tw, int sign) {
    const int64_t run = r * batch;
    const double sg = sign;
    for (int64_t j = 0; j < lp; ++j) {
        const double* ip[P];
        double* op[P];
        for (int q = 0; q < P; ++q) ip[q] = reinterpret_cast<const double*>(in + (j * r * P + r * q) * batch);
        for (int s = 0; s < P; ++s) op[s] = reinterpret_cast<double*>(out + (j + lp * s) * r * batch);
        double wr[P], wi[P];
        for (int q = 1; q < P; ++q) {
            wr[q] = tw[j * (P - 1) + q - 1].real();
            wi[q] = tw[j * (P - 1) + q - 1].imag();
        }
        const bool plain = j == 0;  // all twiddles are 1
        for (int64_t kk = 0; kk < run; ++kk) {
            double ar[P], ai[P];
            ar[0] = ip[0][2 * kk];
            ai[0] = ip[0][2 * kk + 1];
            for (int q = 1; q < P; ++q) {
                const double xr = ip[q][2 * kk], xi = ip[q][2 * kk + 1];
                if (plain) {
                    ar[q] = xr;
                    ai[q] = xi;
                } else {
                    ar[q] = xr * wr[q] - xi * wi[q];
                    ai[q] = xr * wi[q] + xi * wr[q];
                }
            }
            if constexpr (P == 2) {
                op[0][2 * kk] = ar[0] + ar[1];
                op[0][2 * kk + 1] = ai[0] + ai[1];
                op[1][2 * kk] = ar[0] - ar[1];
                op[1][2 * kk + 1] = ai[0] - ai[1];
            } else if constexpr (P == 3) {
                constexpr double h = 0.86602540378443864676;  // sqrt(3)/2
                const double tr = ar[1] + ar[2], ti = ai[1] + ai[2];
                const double dr = sg * h * (ar[1] - ar[2]), di = sg * h * (ai[1] - ai[2]);
                const double mr = ar[0] - 0.5 * tr, mi = ai[0] - 0.5 * ti;
                op[0][2 * kk] = ar[0] + tr;
                op[0][2 * kk + 1] = ai[0] + ti;
                // i * (dr + i di) = -di + i dr
                op[1][2 * kk] = mr - di;
                op[1][2 * kk + 1] = mi + dr;
                op[2][2 * kk] = mr + di;
                op[2][2 * kk + 1] = mi - dr;
            } else if constexpr (P == 4) {
                const double s0r = ar[0] + ar[2], s0i = ai[0] + ai[2];
                const double d0r = ar[0] - ar[2], d0i = ai[0] - ai[2];
                const double s1r = ar[1] + ar[3], s1i = ai[1] + ai[3];
                const double d1r = sg * (ar[1] - ar[3]), d1i = sg * (ai[1] - ai[3]);
                op[0][2 * kk] = s0r + s1r;
                op[0][2 * kk + 1] = s0i + s1i;
                op[2][2 * kk] = s0r - s1r;
                op[2][2 * kk + 1] = s0i - s1i;
                // v1 = d0 + i*sg*(a1 - a3), v3 = d0 - i*sg*(a1 - a3)
                op[1][2 * kk] = d0r - d1i;
                op[1][2 * kk + 1] = d0i + d1r;
                op[3][2 * kk] = d0r + d1i;
                op[3][2 * kk + 1] = d0i - d1r;
            } else {
                static_assert(P == 5);
                constexpr double c1 = 0.30901699437494742410;   // cos(2 pi/5)
                constexpr double c2 = -0.80901699437494742410;  // cos(4 pi/5)
                constexpr double s1 = 0.95105651629515357212;   // sin(2 pi/5)
                constexpr double s2 = 0.58778525229247312917;   // sin(4 pi/5)
                const double t1r = ar[1] + ar[4], t1i = ai[1] + ai[4];
                const double t2r = ar[2] + ar[3], t2i = ai[2] + ai[3];
                const double t3r = ar[1] - ar[4], t3i = ai[1] - ai[4];
                const double t4r = ar[2] - ar[3], t4i = ai[2] - ai[3];
                op[0][2 * kk] = ar[0] + t1r + t2r;
                op[0][2 * kk + 1] = ai[0] + t1i + t2i;
                const double m1r = ar[0] + c1 * t1r + c2 * t2r, m1i = ai[0] + c1 * t1i + c2 * t2i;
                const double m2r = ar[0] + c2 * t1r + c1 * t2r, m2i = ai[0] + c2 * t1i + c1 * t2i;
                const double e1r = sg * (s1 * t3r + s2 * t4r), e1i = sg * (s1 * t3i + s2 * t4i);
                const double e2r = sg * (s2 * t3r - s1 * t4r), e2i = sg * (s2 * t3i - s1 * t4i);
                // v1 = m1 + i e1, v4 = m1 - i e1, v2 = m2 + i e2, v3 = m2 - i e2
                op[1][2 * kk] = m1r - e1i;
                op[1][2 * kk + 1] = m1i + e1r;
                op[4][2 * kk] = m1r + e1i;
                op[4][2 * kk + 1] = m1i - e1r;
                op[2][2 * kk] = m2r - e2i;
                op[2][2 * kk + 1] = m2i + e2r;
                op[3][2 * kk] = m2r + e2i;
                op[3][2 * kk + 1] = m2i - e2r;
            }
        }
    }
}

}  // namespace

bool is_smooth(int64_t n) {
    if (n <= 0) return false;
    for (int64_t f : {2, 3, 5})
        while (n % f == 0) n /= f;
    return n == 1;
}

int64_t good_size(int64_t n, bool even) {
    int64_t m = n < 1 ? 1 : n;
    while (!is_smooth(m) || (even && m % 2 != 0)) ++m;
    return m;
}

std::vector<int> Plan1D::radices(int64_t n) {
    // Radix order: 4s first (fewest stages), then 2, 3, 5.
    std::vector<int> r;
    int64_t rest = n;
    while (rest % 4 == 0) r.push_back(4), rest /= 4;
    while (rest % 2 == 0) r.push_back(2), rest /= 2;
    while (rest % 3 == 0) r.push_back(3), rest /= 3;
    while (rest % 5 == 0) r.push_back(5), rest /= 5;
    return r;
}

Plan1D::Plan1D(int64_t n, int sign) : n_(n), sign_(sign) {
    int64_t l = 1;
    for (int p : radices(n)) {
        Stage s;
        s.p = p;
        s.lp = l;
        l *= p;
        s.r = n / l;
        s.tw.resize(static_cast<std::size_t>(s.lp * (p - 1)));
        for (int64_t j = 0; j < s.lp; ++j)
            for (int q = 1; q < p; ++q) s.tw[static_cast<std::size_t>(j * (p - 1) + q - 1)] = unit_root(q * j, l, sign);
        stages_.push_back(std::move(s));
    }
}

void Plan1D::run(cd* data, cd* scratch, int64_t batch, int64_t lines, int64_t line_stride) const {
    if (stages_.empty()) return;
    for (int64_t l = 0; l < lines; ++l) {
        cd* a = data + l * line_stride;
        cd* b = scratch;
        for (const Stage& s : stages_) {
            switch (s.p) {
                case 2: stage<2>(a, b, s.lp, s.r, batch, s.tw.data(), sign_); break;
                case 3: stage<3>(a, b, s.lp, s.r, batch, s.tw.data(), sign_); break;
                case 4: stage<4>(a, b, s.lp, s.r, batch, s.tw.data(), sign_); break;
                default: stage<5>(a, b, s.lp, s.r, batch, s.tw.data(), sign_); break;
            }
            std::swap(a, b);
        }
        if (a != data + l * line_stride)
            std::memcpy(static_cast<void*>(data + l * line_stride), a,
                        sizeof(cd) * static_cast<std::size_t>(n_ * batch));
    }
}

double Plan1D::stage_error_sum(int64_t n) {
    double s = 0;
    for (int p : radices(n)) s += std::sqrt(static_cast<double>(p)) * (p + 4);
    return s;
}

void pack_post(const cd* z, cd* x, int64_t m, int64_t batch, int64_t lines) {
    std::vector<cd> w(static_cast<std::size_t>(m + 1));
    for (int64_t f = 0; f <= m; ++f) w[static_cast<std::size_t>(f)] = unit_root(f, 2 * m, -1);
    for (int64_t l = 0; l < lines; ++l) {
        const double* zl = reinterpret_cast<const double*>(z + l * m * batch);
        double* xl = reinterpret_cast<double*>(x + l * (m + 1) * batch);
        for (int64_t f = 0; f <= m; ++f) {
            const double* a = zl + 2 * (f % m) * batch;      // Z[f]  (Z[M] = Z[0])
            const double* b = zl + 2 * ((m - f) % m) * batch;  // Z[M-f]
            double* o = xl + 2 * f * batch;
            const double wr = w[static_cast<std::size_t>(f)].real(), wi = w[static_cast<std::size_t>(f)].imag();
            for (int64_t c = 0; c < batch; ++c) {
                const double ar = a[2 * c], ai = a[2 * c + 1], br = b[2 * c], bi = -b[2 * c + 1];  // b = conj Z[M-f]
                const double er = 0.5 * (ar + br), ei = 0.5 * (ai + bi);
                // O = (a - b) / (2i) = (di - i dr) / 2 with d = a - b
                const double orr = 0.5 * (ai - bi), oi = -0.5 * (ar - br);
                o[2 * c] = er + (wr * orr - wi * oi);
                o[2 * c + 1] = ei + (wr * oi + wi * orr);
            }
        }
    }
}

void unpack_pre(const cd* x, cd* z, int64_t m, int64_t batch, int64_t lines) {
    std::vector<cd> w(static_cast<std::size_t>(m));
    for (int64_t f = 0; f < m; ++f) w[static_cast<std::size_t>(f)] = unit_root(f, 2 * m, +1);  // w^-f
    for (int64_t l = 0; l < lines; ++l) {
        const double* xl = reinterpret_cast<const double*>(x + l * (m + 1) * batch);
        double* zl = reinterpret_cast<double*>(z + l * m * batch);
        for (int64_t f = 0; f < m; ++f) {
            const double* a = xl + 2 * f * batch;        // X[f]
            const double* b = xl + 2 * (m - f) * batch;  // X[M-f]
            double* o = zl + 2 * f * batch;
            const double wr = w[static_cast<std::size_t>(f)].real(), wi = w[static_cast<std::size_t>(f)].imag();
            for (int64_t c = 0; c < batch; ++c) {
                const double ar = a[2 * c], ai = a[2 * c + 1], br = b[2 * c], bi = -b[2 * c + 1];  // b = conj X[M-f]
                const double er = ar + br, ei = ai + bi;
                const double dr = ar - br, di = ai - bi;
                // t = w^-f * d; Z' = E + i t
                const double tr = wr * dr - wi * di, ti = wr * di + wi * dr;
                o[2 * c] = er - ti;
                o[2 * c + 1] = ei + tr;
            }
        }
    }
}

}  // namespace convtune::cpu::CONVTUNE_ISA_NS::fft
