#include "support/sweep.hpp"

#include "convtune/registry.hpp"

#include <set>

namespace convtune::test {

std::string peer_shapes_dir() { return CONVTUNE_SHAPES_DIR; }

std::vector<Case> awkward_shapes() {
    std::vector<Case> r;
    auto add = [&](const char* label, const char* spec) { r.push_back({label, ConvProblem::parse(spec)}); };
    add("3x3 pad1 odd sizes", "n=2,c=3,k=5,in=7x9,ker=3x3,pad=1x1");
    add("batch1 C=1", "n=1,c=1,k=4,in=6x5,ker=3x3");
    add("K=1", "n=2,c=6,k=1,in=5x5,ker=3x3,pad=1x1");
    add("1x1", "n=2,c=8,k=6,in=5x7,ker=1x1");
    add("1x1 stride2 negative end pad", "n=1,c=4,k=8,in=6x6,ker=1x1,stride=2x2,pad_end=-1x-1");
    add("asymmetric pad", "n=2,c=4,k=3,in=13x13,ker=3x3,pad=0x0,pad_end=1x1");
    add("asym pad other way", "n=1,c=3,k=2,in=8x9,ker=3x3,pad=2x1,pad_end=0x1");
    add("stride2 3x3", "n=2,c=4,k=6,in=9x11,ker=3x3,stride=2x2,pad=1x1");
    add("stride3 pad_end negative", "n=1,c=2,k=3,in=10x10,ker=2x2,stride=3x3,pad_end=-2x-2");
    add("dilation2", "n=1,c=3,k=4,in=9x10,ker=3x3,dil=2x2,pad=2x2");
    add("dilation mixed stride", "n=2,c=2,k=2,in=11x12,ker=3x2,stride=2x1,dil=2x3,pad=1x0,pad_end=0x2");
    add("groups2", "n=2,c=6,k=4,g=2,in=6x6,ker=3x3,pad=1x1");
    add("depthwise", "n=2,c=5,k=5,g=5,in=7x7,ker=3x3,pad=1x1");
    add("depthwise multiplier", "n=1,c=3,k=6,g=3,in=8x6,ker=3x3,stride=2x2,pad=1x1");
    add("5x5 nonsquare kernel", "n=1,c=3,k=4,in=9x8,ker=5x3,pad=2x1");
    add("7x7 stride2 pad3", "n=1,c=3,k=4,in=15x15,ker=7x7,stride=2x2,pad=3x3");
    add("kernel = input", "n=2,c=3,k=2,in=4x4,ker=4x4");
    add("pad > kernel/2", "n=1,c=2,k=2,in=3x3,ker=3x3,pad=3x3");
    add("1-D", "n=2,c=3,k=4,in=17,ker=3,pad=1");
    add("1-D stride dilation", "n=1,c=4,k=2,in=20,ker=2,stride=2,dil=3,pad=0,pad_end=1");
    add("3-D", "n=1,c=2,k=3,in=5x6x7,ker=3x3x3,pad=1x1x1");
    add("3-D stride asym", "n=2,c=3,k=2,in=6x5x7,ker=2x3x3,stride=2x1x2,pad=0x1x1,pad_end=1x0x0");
    add("wide channels", "n=1,c=37,k=19,in=5x5,ker=3x3,pad=1x1");
    add("4x4 winograd-awkward", "n=1,c=5,k=7,in=10x10,ker=3x3,pad=1x1");
    add("tiny 1x1 spatial", "n=3,c=4,k=4,in=1x1,ker=1x1");
    // Channel counts in whole SIMD blocks (8 and 16 floats, 32 bf16 pairs): what blocked kernels
    // without tail handling require (oneDNN's SSE4.1 and AMX 1x1 kernels), rare above.
    add("3x3 channels in whole blocks", "n=2,c=16,k=32,in=9x7,ker=3x3,pad=1x1");
    add("1x1 channels in whole blocks", "n=2,c=64,k=64,in=14x14,ker=1x1");
    // Channels and positions past whole transpose tiles (16) with stride 2: the layout
    // conversions' partial tiles and the border positions' tap classes of blocked kernels.
    add("stride2 channels past whole blocks", "n=2,c=35,k=21,in=13x11,ker=3x3,stride=2x2,pad=1x1");
    add("1-D stride2 channels past whole blocks", "n=2,c=20,k=18,in=37,ker=3,stride=2,pad=1");
    return r;
}

std::vector<Case> expand(const std::vector<Case>& base, const std::vector<DataType>& dtypes) {
    std::vector<Case> r;
    for (const Case& c : base)
        for (Direction d : {Direction::fwd, Direction::bwd_data, Direction::bwd_filter})
            for (Layout l : {Layout::nchw, Layout::nhwc})
                for (DataType t : dtypes) {
                    ConvProblem p = c.problem;
                    p.direction = d;
                    p.layout = l;
                    p.dtype = t;
                    r.push_back({c.label, p});
                }
    return r;
}

std::vector<Case> shape_file_cases(const std::string& file, int64_t batch) {
    std::vector<Case> r;
    std::set<std::string> seen;
    for (const ShapeLine& l : read_shape_file(peer_shapes_dir() + "/" + file)) {
        ConvProblem p = l.problem;
        p.n = batch;
        if (seen.insert(p.to_string()).second) r.push_back({l.name, p});
    }
    return r;
}

std::vector<const Algorithm*> host_algorithms() {
    std::vector<const Algorithm*> r;
    for (Backend* b : backends()) {
        if (b->name() == "cudnn" || !b->availability().ok) continue;
        for (const Algorithm* a : b->algorithms()) r.push_back(a);
    }
    return r;
}

}  // namespace convtune::test
