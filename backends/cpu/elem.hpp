// Typed element access for CPU algorithms: storage type per DataType, load to the accumulation
// type, store with rounding. Dispatch a templated kernel with dispatch_dtype(p.dtype, f).
#pragma once

#include <cstdint>

#include "convtune/numeric.hpp"

namespace convtune::cpu {

template <DataType DT> struct Elem;
template <> struct Elem<DataType::f32> {
    using T = float;
    using Acc = float;
    static float load(float v) { return v; }
    static float store(float v) { return v; }
};
template <> struct Elem<DataType::f64> {
    using T = double;
    using Acc = double;
    static double load(double v) { return v; }
    static double store(double v) { return v; }
};
template <> struct Elem<DataType::f16> {
    using T = uint16_t;
    using Acc = float;
    static float load(uint16_t v) { return f16_to_float(v); }
    static uint16_t store(float v) { return float_to_f16(v); }
};
template <> struct Elem<DataType::bf16> {
    using T = uint16_t;
    using Acc = float;
    static float load(uint16_t v) { return bf16_to_float(v); }
    static uint16_t store(float v) { return float_to_bf16(v); }
};

template <class F> decltype(auto) dispatch_dtype(DataType t, F&& f) {
    switch (t) {
        case DataType::f32: return f(Elem<DataType::f32>{});
        case DataType::f16: return f(Elem<DataType::f16>{});
        case DataType::bf16: return f(Elem<DataType::bf16>{});
        case DataType::f64: break;
    }
    return f(Elem<DataType::f64>{});
}

}  // namespace convtune::cpu
