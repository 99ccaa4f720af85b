#include "convtune/tensor.hpp"

#include <string>

#include "convtune/error.hpp"

namespace convtune {

Strides make_strides(Layout layout, int spatial_dims, int64_t channels, const Dims& sizes) {
    Strides s;
    int64_t spatial = 1;
    for (int i = 0; i < spatial_dims; ++i) spatial *= sizes[static_cast<std::size_t>(i)];
    if (layout == Layout::nchw) {
        int64_t st = 1;
        for (int i = spatial_dims - 1; i >= 0; --i) {
            s.spatial[static_cast<std::size_t>(i)] = st;
            st *= sizes[static_cast<std::size_t>(i)];
        }
        s.channel = spatial;
        s.outer = channels * spatial;
    } else {
        s.channel = 1;
        int64_t st = channels;
        for (int i = spatial_dims - 1; i >= 0; --i) {
            s.spatial[static_cast<std::size_t>(i)] = st;
            st *= sizes[static_cast<std::size_t>(i)];
        }
        s.outer = channels * spatial;
    }
    return s;
}

void check_tensors(const ConvProblem& p, const ConvTensors& t) {
    p.validate();  // the element counts below are only defined for a valid problem
    const std::size_t es = size_of(p.dtype);
    struct Item { const char* name; const TensorView& v; int64_t elements; };
    for (const Item& it :
         {Item{"x", t.x, p.x_elements()}, Item{"w", t.w, p.w_elements()}, Item{"y", t.y, p.y_elements()}}) {
        const std::size_t need = static_cast<std::size_t>(it.elements) * es;
        if (it.v.data == nullptr) throw Error(std::string("tensor ") + it.name + ": buffer is null");
        if (it.v.bytes < need)
            throw Error(std::string("tensor ") + it.name + ": buffer holds " + std::to_string(it.v.bytes) +
                        " bytes but the problem needs " + std::to_string(need));
    }
}

}  // namespace convtune
