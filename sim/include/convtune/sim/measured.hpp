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

#include "convtune/problem.hpp"

namespace convtune::sim {

struct MeasuredRun {
    std::string setting;  // "bm0" (benchmark off) or "bm1" (benchmark on)
    std::string cache;    // "cold" or "warm" kernel cache
    // The process's first convolution (CUDA context, cuDNN handle, libraries): a probe shape outside
    // the list. As loaded, every run of a cache state has the median of that state's benchmark-off
    // probes (PyTorchMeasurements::load): a probe under benchmark=True searches its own shape, in
    // f32, and with TF32 allowed compiles kernels on an empty kernel cache that no f16/bf16 network
    // needs (about 0.8 s on the H100, where benchmark off's probe took 0.07 s), a cost of the probe
    // and not of the workload.
    double startup_ms = 0;
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
    // Made by PyTorchLibrary::for_problems: the problems whose times the library's model
    // predicted (it had no measurement of them), and what the library is.
    std::vector<std::string> estimated;
    std::string library;
    // Cold kernel-cache measurements load() left out: those without the name of the kernel-cache
    // folder their process was given (kernel_cache_folder). Grids made before each process got
    // its own folder lack it, and their "cold" processes shared the default kernel cache, cold
    // only for kernels no earlier process had compiled (docs/simulation.md).
    int unverified_cold = 0;

    // Reads and validates a grid file (plain or gzip-compressed, .json.gz) (format convtune-pytorch-measurement-grid,
    // version 1): times finite and within [0, 1e7] ms, settings bm0/bm1, caches cold/warm, keys canonical problems.
    // Throws Error naming the file and the field. Cold measurements without kernel_cache_folder are
    // validated, then left out (counted in unverified_cold).
    static PyTorchMeasurements load(const std::string& path);

    // The runs of one setting ("bm0"/"bm1") in one kernel-cache state.
    std::vector<const MeasuredRun*> select(const std::string& setting, const std::string& cache) const;
};

// The measured library: every grid file of a recording library folder's `pytorch/` subfolder
// (data/recordings/<name>/pytorch/*.json[.gz], one per network, all of one GPU model), merged per
// problem. A problem's times at a kernel-cache state and benchmark setting are every run's that
// measured it, in any file; f32 problems are told apart by allow_tf32 (cuDNN's TF32 applies to
// them only), f16/bf16 problems are not.
//
// For a problem no file measured, the times come from a model fitted on the whole library by
// least squares, one fit per quantity (steady time and first call, per setting and kernel-cache
// state; docs/simulation.md, "PyTorch's measured library", has its features and its
// leave-one-network-out error):
//   steady_ms = a + sum over data classes (f32, TF32, f16/bf16) of b_class * GMACs
//               + c * GB moved + d * GMACs of grouped problems + e * GMACs of backward-filter ones
//   first_ms  = a + b * half + c * depthwise + d * depthwise half + e * grouped + f * backward
//               + g * 3-D + h * 1-D + i * steady_ms (the problem's, measured or predicted)
// with every prediction at least the smallest time the library measured for that quantity, and a
// first call at least its steady time.
struct PyTorchLibrary {
    std::string name;                  // the library's name (its folder) or path
    std::vector<PyTorchMeasurements> files;

    // Every grid file in `dir` (*.json, *.json.gz, sorted); an empty library when `dir` does not
    // exist. Throws Error when a file is not a valid grid or the files are of different GPUs.
    static PyTorchLibrary load_dir(const std::string& dir, const std::string& name);
    bool empty() const { return files.empty(); }
    // "11 workloads, 599 problems (f32 171, ...), NVIDIA H100 80GB HBM3, PyTorch 2.11.0+cu130, cuDNN 91900"
    std::string describe() const;

    // The measurements of `problems` with allow_tf32 as given: as many runs per setting and
    // kernel-cache state as any one file holds, run r taking each problem's r-th measurement
    // (cycling through those there are), the model's prediction where there is none.
    PyTorchMeasurements for_problems(const std::vector<ConvProblem>& problems, bool allow_tf32) const;
};

}  // namespace convtune::sim
