// Memory order of the three tensors of a ConvProblem.
//
// Channels-first layouts store x as N C [D] [H] W, w as K C/g [KD] [KH] KW, y as N K [OD] [OH] OW.
// Channels-last layouts store x as N [D] [H] W C, w as K [KD] [KH] KW C/g, y as N [OD] [OH] OW K
// (what cuDNN calls NHWC and PyTorch channels_last). Group g owns channels
// [g*C/g, (g+1)*C/g) of x and filters [g*K/g, (g+1)*K/g) of w and y.
#pragma once

#include <cstddef>
#include <cstdint>

#include "convtune/problem.hpp"

namespace convtune {

// Element strides of a 4-part tensor view: outer index (n or k), channel, spatial dims.
struct Strides {
    int64_t outer = 0;
    int64_t channel = 0;
    Dims spatial{0, 0, 0};  // unused dims have stride 0

    // Offset of (outer, channel, s0, s1, s2); unused spatial indices must be 0.
    int64_t at(int64_t o, int64_t ch, int64_t s0, int64_t s1 = 0, int64_t s2 = 0) const {
        return o * outer + ch * channel + s0 * spatial[0] + s1 * spatial[1] + s2 * spatial[2];
    }
};

// Strides of a tensor with `channels` channels and the given spatial sizes in `layout`.
Strides make_strides(Layout layout, int spatial_dims, int64_t channels, const Dims& sizes);

inline Dims out_dims(const ConvProblem& p) {
    Dims o{1, 1, 1};
    for (int i = 0; i < p.spatial_dims; ++i) o[static_cast<std::size_t>(i)] = p.out(i);
    return o;
}
inline Strides x_strides(const ConvProblem& p) { return make_strides(p.layout, p.spatial_dims, p.c, p.in); }
inline Strides y_strides(const ConvProblem& p) { return make_strides(p.layout, p.spatial_dims, p.k, out_dims(p)); }
inline Strides w_strides(const ConvProblem& p) {
    return make_strides(p.layout, p.spatial_dims, p.c_per_group(), p.kernel);
}

// Host buffers of a problem's three tensors. Which ones are read and which one is written
// depends on the direction: fwd reads x,w writes y; bwd_data reads y(=dy),w writes x(=dx);
// bwd_filter reads x,y(=dy) writes w(=dw). The written tensor is overwritten (beta = 0).
// Sizes are in bytes so that a wrong-sized buffer is caught before any element is touched.
struct TensorView {
    void* data = nullptr;
    std::size_t bytes = 0;
};
struct ConvTensors {
    TensorView x, w, y;
};

// Throws convtune::Error when a buffer is null or smaller than the problem needs.
void check_tensors(const ConvProblem& p, const ConvTensors& t);

}  // namespace convtune
