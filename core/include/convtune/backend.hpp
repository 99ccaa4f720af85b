// Backend: a family of algorithms (a Catalogue) on one device (a Device).
//
// The Device says whether it can run here (and why not), owns the memory and the clock the
// selector times with, and names itself (library version, device) so tuning results from another
// environment are recognised as such. The Catalogue lists the algorithms in a fixed order and
// ranks them for a problem the way its "benchmark off" heuristic would. Code that only moves
// data or times calls (DeviceTensors, execute) takes a Device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "convtune/algorithm.hpp"

namespace convtune {

struct Availability {
    bool ok = true;
    std::string reason;  // why not, when !ok
};

class Backend;
// Throws InvalidRequest("backend", "'<name>' is unavailable here: <reason>") when `b` cannot run
// here; the one check every caller that is about to use a backend makes.
void require_available(const Backend& b);

// Identity of the environment a timing belongs to (the tuning database's validity key).
struct BackendIdentity {
    std::string library;  // e.g. "reference", "oneDNN 2.6.3", "cuDNN 9.19.0"
    std::string device;   // e.g. "x86-64 avx512 2 threads", "NVIDIA H200 sm_90"
    std::string driver;   // empty where it does not apply
};

// Device memory owned by a backend; freed by its deleter.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    DeviceBuffer(void* p, std::size_t bytes, std::function<void(void*)> free)
        : ptr_(p, std::move(free)), bytes_(bytes) {}
    void* data() const { return ptr_.get(); }
    std::size_t bytes() const { return bytes_; }
    explicit operator bool() const { return ptr_ != nullptr; }

private:
    std::unique_ptr<void, std::function<void(void*)>> ptr_{nullptr, [](void*) {}};
    std::size_t bytes_ = 0;
};

// The candidate lists a ranking offers by name, as cudnn-frontend offers its heuristic modes; a
// policy's search says which it draws from (SelectionPolicy::draws_from). A list may name an
// algorithm more than once (cuDNN's lists repeat configurations).
//   heuristic  what the backend's heuristics list for the problem (cuDNN: heuristics mode A); by
//              default every algorithm the ranking suggests, once
//   fallback   the backend's fallback list (cuDNN's); by default empty
//   all        every algorithm the ranking yields, once
enum class ListName : uint8_t { heuristic, fallback, all };

// A backend's heuristic ranking for one problem, produced as it is consumed: next() returns the
// next algorithm, best first, or nullptr at the end; each algorithm at most once. It decides no
// support: an algorithm it returns may not support the problem, and the consumer (the Selector)
// asks supports() only of the algorithms it reaches. On cuDNN a support decision is a plan build
// and the heuristic queries are separate calls, so a decision that stops at its first eligible
// candidate pays for little of the ranking.
class Ranking {
public:
    virtual ~Ranking() = default;
    virtual const Algorithm* next() = 0;
    // True when producing the ranking already decided every algorithm's support (the default
    // ranking walks heuristic_order): a decision then explains the candidates it did not reach
    // too, at no extra cost, instead of listing them as not checked.
    virtual bool decided() const { return false; }
    // Whether the backend's heuristics suggest `a` (an algorithm next() returned), as opposed to
    // listing it only so that the ranking is complete (cuDNN: an engine no heuristics mode lists,
    // a legacy algorithm cudnnGet*_v7 does not rank). The convtune policy's search keeps
    // `explore_slots` of its benchmark_limit for candidates that are not suggested, when
    // explores() says the ranking can yield such candidates (the default ranking cannot).
    virtual bool explores() const { return false; }
    virtual bool suggested(const Algorithm&) const { return true; }
    // How many times the named list holds `a` (an algorithm next() returned); known once the
    // ranking has yielded `a` and walked past the list. Default: heuristic, 1 when suggested;
    // fallback, 0; all, 1.
    virtual int in_list(const Algorithm& a, ListName list) const;
    // How many times the lists `from` hold `a`, together: PyTorch's cuDNN v8 search builds and
    // times one plan per listing of heuristics mode A and the fallback list, so a configuration
    // both list is timed twice, and one neither lists is never seen.
    int in_lists(const Algorithm& a, std::span<const ListName> from) const;
};

// A Ranking over a fixed list, in its order; `decided`: producing the list decided every
// algorithm's support (Ranking::decided); `unsuggested`: the algorithms the heuristics do not
// suggest (the ranking explores() when there are any); `heuristic`: how many times the heuristic
// list holds an algorithm where that is not the default (1 when suggested). Its fallback list is
// empty.
std::unique_ptr<Ranking> list_ranking(std::vector<const Algorithm*> order, bool decided,
                                      std::set<const Algorithm*> unsuggested = {},
                                      std::map<const Algorithm*, int> heuristic = {});

// Where a device's memory is: the host's (its buffers are ordinary host memory, within the memory
// budget, memory_budget.hpp) or the device's own (reached through upload and download).
enum class Memory { host, device };

// What a device offers: availability, identity, memory and a timer.
class Device {
public:
    virtual ~Device() = default;
    virtual Availability availability() const = 0;
    virtual BackendIdentity identity() const = 0;

    // Memory: where it is (HostBackend: the host's), and an empty buffer on failure (out of
    // memory is a value, not an exception).
    virtual Memory memory() const { return Memory::device; }
    virtual DeviceBuffer allocate(std::size_t bytes) const = 0;
    virtual void upload(void* device_dst, const void* host_src, std::size_t bytes) const = 0;
    virtual void download(void* host_dst, const void* device_src, std::size_t bytes) const = 0;
    // Timer: milliseconds of device time spent in fn (waits for the device to finish).
    virtual double time_ms(const std::function<void()>& fn) const = 0;
    virtual void synchronize() const {}
    // Makes this thread's later calls on the device (runs, timings, synchronize) go to `stream`
    // (CUDA: a cudaStream_t; nullptr: the device's default stream) and returns the previous
    // one: for a caller that orders its work on streams of its own (PyTorch's current stream).
    // A device without streams (the host) ignores it and returns nullptr.
    virtual void* exchange_thread_stream(void* stream) const {
        (void)stream;
        return nullptr;
    }
    // False for a device whose algorithms never read or write tensor memory (a replay of
    // recorded timings): tensors are then allocated but not filled (DeviceTensors), so timing
    // candidates generates no host data of the problem's size.
    virtual bool needs_tensor_data() const { return true; }
};

// What a catalogue offers: the algorithms and their ranking.
class Catalogue {
public:
    virtual ~Catalogue() = default;
    virtual std::string_view name() const = 0;  // "cpu", "onednn", "cudnn"
    // Every algorithm, in the backend's fixed order (the order ids are listed in).
    virtual std::span<const Algorithm* const> algorithms() const = 0;
    // The algorithms that support p, best first by the backend's heuristic (what
    // "benchmark off" runs). The default keeps the fixed order.
    virtual std::vector<const Algorithm*> heuristic_order(const ConvProblem& p) const;
    // The same order, produced lazily and without support decisions (Ranking). The default
    // walks heuristic_order(p); a backend whose support decisions or ranking queries are costly
    // overrides it (heuristic_order is then this ranking filtered by supports()).
    virtual std::unique_ptr<Ranking> ranking(const ConvProblem& p) const;
    // What `enabled=false` runs instead of the tuned path (PyTorch: its native im2col + GEMM
    // kernels); nullptr when the backend has none.
    virtual const Algorithm* native_fallback(const ConvProblem&) const { return nullptr; }
    // PyTorch v7's fixed choice for deterministic && !benchmark (cuDNN: implicit precomp GEMM
    // forward, ALGO_1 backward); nullptr = the heuristic's first deterministic algorithm.
    virtual const Algorithm* fixed_default(const ConvProblem&) const { return nullptr; }

    // The algorithm with this id, or nullptr. Every framework call asks it once (the decision's
    // algorithm), and cuDNN registers about a thousand: an index by id, built on first use and
    // again whenever algorithms() is another list (its address or size changed). Every catalogue
    // builds its list once; one that replaced an entry in place would need a new list.
    const Algorithm* find(std::string_view id) const;

    // The preparation work the backend has done in this process, by kind, counted since the
    // process started (cuDNN: heuristic queries, engine and execution-plan builds, note probes,
    // legacy queries; see cudnn_backend.hpp). A backend that prepares nothing reports none.
    virtual std::map<std::string, int64_t> work_counts() const { return {}; }

private:
    mutable std::mutex find_mutex_;
    mutable std::unordered_map<std::string_view, const Algorithm*> find_index_;
    mutable const Algorithm* const* find_list_ = nullptr;  // the list the index was built from
    mutable std::size_t find_size_ = 0;
};

// A catalogue on its device: what the selector, the registry and the CLI work with.
class Backend : public Device, public Catalogue {
public:
    const Device& device() const { return *this; }
};

// A backend whose device is the host: memory is new[]/delete[], time is the steady clock.
class HostBackend : public Backend {
public:
    Memory memory() const override { return Memory::host; }
    DeviceBuffer allocate(std::size_t bytes) const override;
    void upload(void* dst, const void* src, std::size_t bytes) const override;
    void download(void* dst, const void* src, std::size_t bytes) const override;
    double time_ms(const std::function<void()>& fn) const override;
};

// The NVIDIA kernel module's release ("580.159.04") in the first line of
// /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  ..." or
// "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ..."): the
// first word after "Kernel Module" made of digits and dots; empty when there is none.
std::string nvidia_driver_release(std::string_view version_line);

// A short description of the host CPU and thread count, for BackendIdentity::device.
std::string host_device_name();

}  // namespace convtune
