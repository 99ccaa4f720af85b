// PyTorch's own behaviour, measured: what `python/convtune/pytorch_measure.py grid` wrote.
//
// The simulator's `pytorch` setting emulates PyTorch's algorithm search on convtune's recording;
// a measurement file holds what PyTorch itself cost on a GPU, per problem: the first call of the
// problem in a fresh process (heuristics, plan builds, runtime kernel compiles and, with
// benchmark=True, PyTorch's timed search) and the steady time of later calls, for benchmark off
// (`bm0`) and on (`bm1`), with an empty (`cold`) or a filled (`warm`) CUDA kernel cache, over
// several runs (fresh processes). Where a simulation is given such a file, its `off` and
// `pytorch` rows replay what PyTorch measured instead of emulating it (docs/simulation.md).
#pragma once
#include <map>
#include <string>
#include <vector>

namespace convtune::sim {

struct MeasuredRun {
    std::string setting;  // "bm0" (benchmark off) or "bm1" (benchmark on)
    std::string cache;    // "cold" or "warm" kernel cache
    double startup_ms = 0;  // the process's first convolution (CUDA context, cuDNN handle)
    struct Problem {
        double first_ms = 0, steady_ms = 0;
    };
    std::map<std::string, Problem> problems;  // canonical problem -> times
};

struct PyTorchMeasurements {
    std::string path;
    std::string device, torch;
    int cudnn = 0;
    int allow_tf32 = 1;
    std::vector<MeasuredRun> runs;

    // Reads and validates a grid file (format convtune-pytorch-measurement-grid, version 1):
    // times finite and within [0, 1e7] ms, settings bm0/bm1, caches cold/warm, keys canonical
    // problems. Throws Error naming the file and the field.
    static PyTorchMeasurements load(const std::string& path);

    // The runs of one setting ("bm0"/"bm1") in one kernel-cache state.
    std::vector<const MeasuredRun*> select(const std::string& setting, const std::string& cache) const;
};

}  // namespace convtune::sim
