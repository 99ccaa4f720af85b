// PerfModel: a performance model fitted on a recording at load, for the problems it lacks.
//
// Per algorithm family (algorithm_family: the id without its backend's direction and math-mode
// parts, e.g. cudnn.fwd.implicit_gemm.tensor_op -> cudnn.implicit_gemm) and per direction and
// data type, the median time of every recorded (problem, algorithm) is fitted as
//     log t = alpha_a + beta * log MACs
// by least squares: one slope per family group, one intercept per algorithm of it (algorithms of
// one family differ by a constant factor). Groups with too few points to estimate the slope and
// the spread (fewer than 2 degrees of freedom or one multiply-add count) use the recording's
// pooled fit (one slope over every group, one intercept per algorithm, direction and data
// type); when even that is impossible the time is scaled linearly in multiply-adds from the
// neighbour with an assumed uncertainty of a factor 2. The slope is clamped to [0, 1.5].
//
// The uncertainty of a prediction is the fit's residual standard deviation widened as a
// regression's prediction interval is, by how far the problem's log MACs lie from the fitted
// ones: sigma * sqrt(1 + 1/n_a + (x - mean_a)^2 / Sxx) (from an anchor of the same layer:
// sigma * sqrt(2 + (x - x_anchor)^2 / Sxx), the anchor's residual and the problem's counted as
// independent). The range a prediction states is
// exp(+-kSigmas * sigma_pred) around it.
//
// The same layer recorded at two sizes (two batch sizes, say) says more than any fit across
// layers: a convolution's time is about a fixed part (launch, tail, the GPU not yet full) plus a
// part linear in the work. So when a same-layer anchor has a partner (the same layer at another
// multiply-add count), the time of each algorithm timed at both is the line through the two,
// t = a + b * MACs, where that line has a >= 0 and b > 0; otherwise (the time grew faster than
// the work, or not at all between the two: noise) the power law through them, its exponent
// clamped to [0, 1.5]. Measured against the H200 library's ResNet-50 f16 inference at batch 1,
// 32 and 128, each estimated from the other two (tests/test_sim.cpp, docs/simulation.md): median
// errors 28%, 7% and 11%, against 76% and 42% for batch 1 and 128 from batch 32 by the slope.
// The stated uncertainty stays the fit's (from the nearer anchor).
//
// No prediction is below the launch floor: the smallest time the recording measured for any
// algorithm on its device (no kernel was ever seen to take less). Not per family: a family's
// smallest time in a recording of large problems is no floor (cuDNN's engine 0 never took less
// than 1.9 ms in the batch-32 ResNet-50 recordings).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/sim/recording.hpp"

namespace convtune::sim {

// The part of an algorithm id that names its kind: the id without the direction token (fwd,
// bwd_data, bwd_filter) and without a trailing math-mode token (default, tensor_op, fma, tf32).
std::string algorithm_family(std::string_view id);

struct Prediction {
    double ms = 0;          // the predicted median, never below the launch floor
    double sigma = 0;       // standard deviation of log(ms)
    double floor_ms = 0;    // the launch floor
    bool floored = false;   // the fit or the scaling fell below the floor and was raised to it
    std::string basis;      // "family fit", "pooled fit", "no fit (linear in multiply-adds, factor 2 assumed)", or
                            // "two sizes of the layer (...)" (see above)
};

class PerfModel {
public:
    // The stated range of a prediction: +-kSigmas standard deviations in log space (about 95%).
    static constexpr double kSigmas = 2.0;
    // The uncertainty assumed where nothing can be fitted: a factor 2 (one sigma).
    static constexpr double kAssumedSigma = 0.6931471805599453;

    // Fitted on every supported, successful (problem, algorithm) of r except the problems equal
    // to `leave_out` (the leave-one-out check).
    explicit PerfModel(const Recording& r, const ConvProblem* leave_out = nullptr);

    // The median time of algorithm `id` on p, from `neighbour` (a recorded problem where `id`
    // ran): its direction and type pick the group; when same_layer, the neighbour's own median
    // anchors the fit's slope, else the algorithm's fitted intercept does. nullopt when the
    // neighbour has no successful timing of `id`.
    // `partner`: the same layer recorded at another size (only with same_layer; see above).
    std::optional<Prediction> predict(const std::string& id, const ConvProblem& p, const ProblemRecord& neighbour,
                                      bool same_layer, const ProblemRecord* partner = nullptr) const;

    // The launch floor (0 when the recording has no time at all).
    double floor_ms() const { return floor_; }

    struct Fit {
        double beta = 1, sigma = kAssumedSigma, sxx = 0;
        int n = 0, dof = 0;
        bool usable = false;
        std::map<std::string, std::pair<int, std::pair<double, double>>> intercepts;  // key -> (n, (mean x, mean y))
    };

private:
    std::map<std::string, Fit> groups_;  // "<family>|<dir>|<dtype>"
    Fit pooled_;                          // keys "<id>|<dir>|<dtype>"
    double floor_ = 0;                    // the smallest recorded time
};

}  // namespace convtune::sim
