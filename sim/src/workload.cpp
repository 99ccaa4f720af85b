#include "convtune/sim/workload.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "convtune/error.hpp"
#include "convtune/file_io.hpp"

#ifndef CONVTUNE_DEFAULT_SHAPES_DIR
#define CONVTUNE_DEFAULT_SHAPES_DIR ""
#endif

namespace convtune::sim {

std::string_view to_string(Mode m) { return m == Mode::train ? "train" : "infer"; }

Mode parse_mode(std::string_view s) {
    if (s == "infer" || s == "inference") return Mode::infer;
    if (s == "train" || s == "training") return Mode::train;
    throw InvalidRequest("mode", "unknown mode " + quote_input(s) + " (expected train or infer)");
}

int64_t Workload::convolutions() const {
    int64_t n = 0;  // each repeat is below 2^31, their sum need not be
    for (const Layer& l : layers) n += l.repeat;
    return n;
}

std::span<const BuiltinWorkload> builtin_workloads() {
    static const BuiltinWorkload list[] = {
        {"resnet50", "shapes_resnet_50_v1_5", "ResNet-50 v1.5 (23 distinct layers, 53 convolutions)"},
        {"resnet50_v1", "shapes_resnet_50", "ResNet-50 v1"},
        {"vgg11", "shapes_vgg_11", "VGG-11"},
        {"vgg19", "shapes_vgg_19", "VGG-19"},
        {"mobilenet", "shapes_mobilenet", "MobileNet"},
        {"mobilenet_dw", "shapes_mobilenet_dw", "MobileNet depthwise layers"},
        {"googlenet_v3", "shapes_googlenet_v3", "GoogLeNet v3"},
        {"yolov2", "shapes_yolov2", "YOLOv2"},
        {"unet", "shapes_unet", "U-Net"},
        {"unet3d", "shapes_3d_unet", "3-D U-Net"},
        {"ssd300", "shapes_ssd_300_voc0712", "SSD-300 (VOC0712)"},
        {"alexnet", "shapes_alexnet", "AlexNet"},
        {"densenet", "shapes_densnet", "DenseNet"},
        {"deepbench", "shapes_deepbench_training", "DeepBench training convolutions"},
        {"wavenet", "shapes_1d_wavenet", "WaveNet (1-D)"},
    };
    return list;
}

std::string default_shapes_dir() {
    if (const char* e = std::getenv("CONVTUNE_SHAPES_DIR"); e && *e) return e;
    return CONVTUNE_DEFAULT_SHAPES_DIR;
}

namespace {

std::string trim(std::string_view s) {
    const auto b = s.find_first_not_of(" \t\r");
    if (b == std::string_view::npos) return {};
    const auto e = s.find_last_not_of(" \t\r");
    return std::string(s.substr(b, e - b + 1));
}

std::vector<std::string> split_ws(const std::string& s) {
    std::istringstream in(s);
    std::vector<std::string> out;
    for (std::string t; in >> t;) out.push_back(t);
    return out;
}

}  // namespace

Workload parse_workload_text(std::string_view text, const std::string& name) {
    Workload w;
    w.name = name;
    // The first non-comment line decides the format.
    std::istringstream in{std::string(text)};
    bool own = false, decided = false;
    int line_no = 0;
    for (std::string raw; std::getline(in, raw);) {
        ++line_no;
        std::string line = trim(raw);
        line = trim(strip_comment(line));
        if (line.empty()) continue;
        const std::vector<std::string> tok = split_ws(line);
        if (tok.empty()) continue;  // only whitespace that trim() keeps (\v, \f)
        auto fail = [&](const std::string& why) {
            throw ParseError("workload line " + std::to_string(line_no) + ": " + why);
        };
        if (!decided) {
            decided = true;
            own = tok[0] == "convtune-workload";
            if (!own) break;
            if (tok.size() != 2 || tok[1] != "1")
                fail("unsupported header '" + line + "' (expected 'convtune-workload 1')");
            continue;
        }
        if (tok[0] == "name") {
            if (tok.size() != 2) fail("'name' takes one word");
            w.name = tok[1];
        } else if (tok[0] == "layer") {
            // layer NAME [xN] PROBLEM
            if (tok.size() < 3 || tok.size() > 4) fail("expected 'layer NAME [xN] PROBLEM'");
            Layer l;
            l.name = tok[1];
            std::size_t next = 2;
            if (tok.size() == 4) {
                if (tok[2][0] != 'x') fail("bad repeat '" + tok[2] + "' (expected xN, N >= 1)");
                try {
                    l.repeat = parse_repeat(std::string_view(tok[2]).substr(1), "bad repeat " + quote_input(tok[2]));
                } catch (const Error& e) {
                    fail(e.what());
                }
                next = 3;
            }
            try {
                l.problem = ConvProblem::parse_any(tok[next]);
            } catch (const Error& e) {
                fail(e.what());
            }
            l.problem.direction = Direction::fwd;
            w.layers.push_back(std::move(l));
        } else {
            fail("unknown directive '" + tok[0] + "' (expected name or layer)");
        }
    }
    if (!own) {
        for (ShapeLine& s : parse_shape_text(text)) {
            Layer l;
            l.name = s.name.empty() ? "line" + std::to_string(s.line_number) : s.name;
            l.repeat = s.repeat;
            l.problem = s.problem;
            l.problem.direction = Direction::fwd;
            w.layers.push_back(std::move(l));
        }
    }
    if (w.layers.empty()) throw ParseError("workload '" + name + "' has no layers");
    return w;
}

Workload load_workload(const std::string& name_or_file, const std::string& shapes_dir) {
    namespace fs = std::filesystem;
    std::string path;
    std::string name;
    std::error_code ec;
    if (fs::is_regular_file(name_or_file, ec)) {
        path = name_or_file;
        name = fs::path(path).stem().string();
    } else {
        const BuiltinWorkload* b = nullptr;
        std::string known;
        for (const BuiltinWorkload& w : builtin_workloads()) {
            if (w.name == name_or_file) b = &w;
            known += (known.empty() ? "" : ", ") + std::string(w.name);
        }
        if (!b)
            throw InvalidRequest(
                "workload",
                quote_input(name_or_file) + " is neither a file nor a built-in workload (built-in: " + known + ")");
        const std::string dir = shapes_dir.empty() ? default_shapes_dir() : shapes_dir;
        path = (fs::path(dir) / b->file).string();
        if (!fs::is_regular_file(path, ec))
            throw InvalidRequest("workload", "built-in '" + name_or_file + "' needs " + std::string(b->file) +
                                                 " in the shapes folder '" + dir +
                                                 "' (set {shapes_dir} or CONVTUNE_SHAPES_DIR)");
        name = std::string(b->name);
    }
    std::string text;
    try {
        text = read_file_bounded(path, kMaxShapeFileBytes, "workload file");
    } catch (const Error& e) {
        throw InvalidRequest("workload", e.what());
    }
    try {
        Workload w = parse_workload_text(text, name);
        w.source = path;
        return w;
    } catch (const ParseError& e) {
        throw ParseError(path + ": " + e.what());
    }
}

std::string Variant::describe(int spatial_dims) const {
    std::string s;
    if (batch > 0) s = "batch " + std::to_string(batch);
    bool scaled = false;
    for (int i = 0; i < spatial_dims; ++i) scaled = scaled || scale[static_cast<std::size_t>(i)] != 1.0;
    if (scaled) {
        if (!s.empty()) s += ", ";
        for (int i = 0; i < spatial_dims; ++i) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%s%g", i ? "x" : "", scale[static_cast<std::size_t>(i)]);
            s += buf;
        }
    }
    return s.empty() ? "base" : s;
}

ConvProblem scale_problem(const ConvProblem& p, const std::array<double, 3>& scale) {
    ConvProblem q = p;
    for (int i = 0; i < p.spatial_dims; ++i) {
        const auto u = static_cast<std::size_t>(i);
        if (scale[u] == 1.0) continue;
        const int64_t ek = p.effective_kernel(i), st = p.stride[u], pb = p.pad_begin[u];
        // Padding as a framework writes it (pad_begin on both sides, the output rounded down; the
        // end padding only records the rows the rounding leaves out) is re-derived for the new
        // size, as PyTorch would compute it; truly asymmetric padding is kept as written.
        const int64_t span0 = p.in[u] + 2 * pb - ek;
        const bool symmetric = span0 >= 0 && span0 / st + 1 == p.out(i);
        const int64_t need = std::max<int64_t>(1, symmetric ? ek - 2 * pb : ek - pb - p.pad_end[u]);
        q.in[u] = std::max(need, static_cast<int64_t>(std::llround(static_cast<double>(p.in[u]) * scale[u])));
        if (symmetric) {
            const int64_t out = (q.in[u] + 2 * pb - ek) / st + 1;
            q.pad_end[u] = (out - 1) * st + ek - q.in[u] - pb;
        }
    }
    q.validate();
    return q;
}

std::vector<Call> instantiate(const Workload& w, const WorkloadOptions& o, const Variant& v) {
    std::vector<ConvProblem> fwd;
    fwd.reserve(w.layers.size());
    for (const Layer& l : w.layers) {
        ConvProblem p = l.problem;
        p.direction = Direction::fwd;
        if (o.dtype) p.dtype = *o.dtype;
        if (o.layout) p.layout = *o.layout;
        if (v.batch > 0) p.n = v.batch;
        else if (o.batch > 0) p.n = o.batch;
        p = scale_problem(p, v.scale);
        fwd.push_back(p);
    }
    std::vector<Call> calls;
    for (std::size_t i = 0; i < fwd.size(); ++i) calls.push_back({fwd[i], w.layers[i].repeat, w.layers[i].name});
    if (o.mode == Mode::train) {
        for (std::size_t j = fwd.size(); j-- > 0;) {
            ConvProblem bd = fwd[j], bf = fwd[j];
            bd.direction = Direction::bwd_data;
            bf.direction = Direction::bwd_filter;
            const int r = w.layers[j].repeat;
            const int data_calls = j == 0 ? r - 1 : r;
            if (data_calls > 0) calls.push_back({bd, data_calls, w.layers[j].name});
            calls.push_back({bf, r, w.layers[j].name});
        }
    }
    return calls;
}

}  // namespace convtune::sim
