// Scalar conversions between the storage types convtune supports and float.
//
// f16 is IEEE binary16 and bf16 the top half of an IEEE binary32; both are stored as uint16_t
// so the same buffers travel to cuDNN unchanged. Conversions to the narrow types round to
// nearest even. round_tf32 keeps 10 mantissa bits (what a tensor core reads from an fp32 input).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "convtune/problem.hpp"

namespace convtune {

inline float bf16_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_bf16(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

#if defined(__clang__) && __clang_major__ < 15
// clang 14 has no _Float16 on x86 (the fuzz preset), and its __fp16 conversions call runtime
// helpers (__gnu_f2h_ieee) that GCC's libgcc lacks: the conversions in integer arithmetic,
// round to nearest even, as IEEE 754 binary16 does.
inline float f16_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));  // Inf, NaN
    if (e == 0) {                                                                  // zero, subnormal: m x 2^-24
        const float v = static_cast<float>(m) * 0x1p-24f;
        return sign ? -v : v;
    }
    return std::bit_cast<float>(sign | ((e + 112) << 23) | (m << 13));
}
inline uint16_t float_to_f16(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));  // NaN stays NaN
    if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);                         // >= 65520: Inf
    if (ax >= 0x38800000u) {  // a normal half: rebias the exponent, round the 13 bits dropped
        uint32_t r = ax - 0x38000000u;
        r += 0x0fffu + ((r >> 13) & 1u);
        return static_cast<uint16_t>(sign | (r >> 13));
    }
    const uint32_t e = ax >> 23;
    if (e < 102) return static_cast<uint16_t>(sign);  // below half the smallest subnormal: zero
    const uint32_t mant = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;  // value = mant x 2^(e-150)
    uint32_t m = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (m & 1u))) ++m;
    return static_cast<uint16_t>(sign | m);
}
#else
inline float f16_to_float(uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }
inline uint16_t float_to_f16(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }
#endif

// Round an fp32 value to TF32 (1+8+10 bits), nearest even; Inf/NaN pass through.
inline float round_tf32(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7f800000u) == 0x7f800000u) return f;
    u += 0xfffu + ((u >> 13) & 1u);
    u &= 0xffffe000u;
    return std::bit_cast<float>(u);
}

// Unit roundoff of a storage type (half the distance from 1 to the next value).
inline double unit_roundoff(DataType t) {
    switch (t) {
        case DataType::f64: return 0x1p-53;
        case DataType::f32: return 0x1p-24;
        case DataType::f16: return 0x1p-11;
        case DataType::bf16: return 0x1p-8;
    }
    return 0.0;
}

// Half the spacing of t's subnormals (half its smallest positive value): the largest absolute
// error of rounding a value into t's subnormal range, where unit_roundoff(t) no longer bounds the
// relative error. f16: 2^-24 / 2, bf16: 2^-133 / 2, f32: 2^-149 / 2 (f64: 0, below double's range).
inline double subnormal_rounding(DataType t) {
    switch (t) {
        case DataType::f64: return 0.0;  // 2^-1075 is below double's range
        case DataType::f32: return 0x1p-150;
        case DataType::f16: return 0x1p-25;
        case DataType::bf16: return 0x1p-134;
    }
    return 0.0;
}

// Element i of a buffer of type t, read as double / written from double (rounding to t).
inline double load_as_double(const void* p, DataType t, std::size_t i) {
    switch (t) {
        case DataType::f64: return static_cast<const double*>(p)[i];
        case DataType::f32: return static_cast<const float*>(p)[i];
        case DataType::f16: return f16_to_float(static_cast<const uint16_t*>(p)[i]);
        case DataType::bf16: return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
    }
    return 0.0;
}

inline void store_from_double(void* p, DataType t, std::size_t i, double v) {
    switch (t) {
        case DataType::f64: static_cast<double*>(p)[i] = v; break;
        case DataType::f32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
        case DataType::f16: static_cast<uint16_t*>(p)[i] = float_to_f16(static_cast<float>(v)); break;
        case DataType::bf16: static_cast<uint16_t*>(p)[i] = float_to_bf16(static_cast<float>(v)); break;
    }
}

}  // namespace convtune
