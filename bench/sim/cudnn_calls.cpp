// cudnn_calls: an LD_PRELOAD library that counts and times a process's cuDNN backend-API calls
// (descriptor creation, finalisation and attribute queries per descriptor type, executions) and
// its CUDA synchronisations, to see what a convolution search is made of without reading any
// source: PyTorch's benchmark=True and convtune's emulation of it can be measured the same way.
//
//   c++ -O2 -shared -fPIC -o cudnn_calls.so bench/sim/cudnn_calls.cpp -ldl
//   CUDNN_CALLS_OUT=calls.jsonl LD_PRELOAD=$PWD/cudnn_calls.so python3 script.py
//
// Each call of the exported `cudnn_calls_dump(label)` (from Python: ctypes.CDLL(None)) appends one
// JSON line with the counters since the previous dump, then resets them; the process's end dumps
// what is left under the label "exit". Counters: per descriptor type (its number in cuDNN's
// cudnnBackendDescriptorType_t) the calls of create, finalize (ok / failed) and get_attribute,
// each with its count and wall milliseconds; execute (ok / failed); cudaEventSynchronize and
// cudaDeviceSynchronize (the wall time the CPU waited for the GPU). Nothing is changed in what the
// calls do. The real functions are found in the already loaded libcudnn.so.9 / libcudart.so.*
// (PyTorch loads them with local symbol scope, where RTLD_NEXT does not reach).
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>

namespace {

struct Acc {
    long n = 0;
    double ms = 0;
    void add(double t) { ++n; ms += t; }
};
constexpr int kTypes = 64;
struct Counters {
    Acc create[kTypes], fin_ok[kTypes], fin_fail[kTypes], get[kTypes];
    Acc exec_ok, exec_fail, event_sync, device_sync;
    Acc heur[4];
    double heur_max[4] = {};
};

std::mutex mu;
std::unordered_map<void*, int> type_of;  // descriptor -> its type
std::unordered_map<void*, int> heur_mode;  // engine heuristic descriptor -> its mode
constexpr int kEngineHeur = 4, kAttrHeurMode = 200, kAttrHeurResults = 202;
Counters c;

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void* real(const char* name, const char* const* libs) {
    if (void* f = dlsym(RTLD_NEXT, name)) return f;
    for (const char* const* l = libs; *l; ++l)
        if (void* h = dlopen(*l, RTLD_NOW | RTLD_NOLOAD))
            if (void* f = dlsym(h, name)) return f;
    std::fprintf(stderr, "cudnn_calls: %s not found in the loaded libraries\n", name);
    std::abort();
}
const char* const kCudnn[] = {"libcudnn.so.9", "libcudnn_graph.so.9", nullptr};
const char* const kCudart[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so", nullptr};

int type_lookup(void* d) {
    auto it = type_of.find(d);
    return it == type_of.end() ? kTypes - 1 : it->second;
}

void append(std::string& s, const char* name, const Acc* a) {
    bool any = false;
    for (int t = 0; t < kTypes; ++t)
        if (a[t].n) {
            char buf[96];
            std::snprintf(buf, sizeof buf, "%s\"%d\": [%ld, %.4f]", any ? ", " : "", t, a[t].n, a[t].ms);
            if (!any) s += std::string(", \"") + name + "\": {";
            s += buf;
            any = true;
        }
    if (any) s += "}";
}

void dump(const char* label, double wall_ms) {
    std::string s;
    {
        std::lock_guard<std::mutex> g(mu);
        char buf[512];
        std::snprintf(
            buf, sizeof buf,
            "{\"label\": \"%s\", \"wall_ms\": %.4f, \"execute\": [%ld, %.4f], \"execute_failed\": [%ld, %.4f], "
            "\"event_sync\": [%ld, %.4f], \"device_sync\": [%ld, %.4f]",
            label, wall_ms, c.exec_ok.n, c.exec_ok.ms, c.exec_fail.n, c.exec_fail.ms, c.event_sync.n, c.event_sync.ms,
            c.device_sync.n, c.device_sync.ms);
        s = buf;
        append(s, "create", c.create);
        append(s, "finalize", c.fin_ok);
        append(s, "finalize_failed", c.fin_fail);
        append(s, "get_attribute", c.get);
        bool any = false;
        for (int m = 0; m < 4; ++m)
            if (c.heur[m].n) {
                std::snprintf(buf, sizeof buf, "%s\"%d\": [%ld, %.4f, %.4f]", any ? ", " : ", \"heuristics\": {", m,
                              c.heur[m].n, c.heur[m].ms, c.heur_max[m]);
                s += buf;
                any = true;
            }
        if (any) s += "}";
        s += "}\n";
        c = Counters{};
    }
    const char* path = std::getenv("CUDNN_CALLS_OUT");
    FILE* f = path ? std::fopen(path, "a") : stderr;
    if (!f) return;
    std::fputs(s.c_str(), f);
    if (f != stderr) std::fclose(f);
}

struct AtExit {
    ~AtExit() { dump("exit", 0); }
} at_exit;

}  // namespace

extern "C" {

void cudnn_calls_dump(const char* label, double wall_ms) { dump(label, wall_ms); }

int cudnnBackendCreateDescriptor(int type, void** d) {
    static auto f = reinterpret_cast<int (*)(int, void**)>(real("cudnnBackendCreateDescriptor", kCudnn));
    const double t0 = now_ms();
    const int s = f(type, d);
    const double t = now_ms() - t0;
    std::lock_guard<std::mutex> g(mu);
    const int k = type >= 0 && type < kTypes - 1 ? type : kTypes - 1;
    if (s == 0 && d) type_of[*d] = k;
    c.create[k].add(t);
    return s;
}

int cudnnBackendFinalize(void* d) {
    static auto f = reinterpret_cast<int (*)(void*)>(real("cudnnBackendFinalize", kCudnn));
    const double t0 = now_ms();
    const int s = f(d);
    const double t = now_ms() - t0;
    std::lock_guard<std::mutex> g(mu);
    (s == 0 ? c.fin_ok : c.fin_fail)[type_lookup(d)].add(t);
    return s;
}

int cudnnBackendGetAttribute(void* d, int name, int type, int64_t requested, int64_t* count, void* array) {
    static auto f =
        reinterpret_cast<int (*)(void*, int, int, int64_t, int64_t*, void*)>(real("cudnnBackendGetAttribute", kCudnn));
    const double t0 = now_ms();
    const int s = f(d, name, type, requested, count, array);
    const double t = now_ms() - t0;
    std::lock_guard<std::mutex> g(mu);
    const int k = type_lookup(d);
    c.get[k].add(t);
    if (k == kEngineHeur && name == kAttrHeurResults) {
        const auto it = heur_mode.find(d);
        const int m = it == heur_mode.end() || it->second < 0 || it->second > 3 ? 0 : it->second;
        c.heur[m].add(t);
        if (t > c.heur_max[m]) c.heur_max[m] = t;
    }
    return s;
}

int cudnnBackendSetAttribute(void* d, int name, int type, int64_t count, const void* array) {
    static auto f =
        reinterpret_cast<int (*)(void*, int, int, int64_t, const void*)>(real("cudnnBackendSetAttribute", kCudnn));
    const int s = f(d, name, type, count, array);
    if (name == kAttrHeurMode && s == 0 && count >= 1 && array) {
        std::lock_guard<std::mutex> g(mu);
        heur_mode[d] = *static_cast<const int*>(array);
    }
    return s;
}

int cudnnBackendExecute(void* handle, void* plan, void* pack) {
    static auto f = reinterpret_cast<int (*)(void*, void*, void*)>(real("cudnnBackendExecute", kCudnn));
    const double t0 = now_ms();
    const int s = f(handle, plan, pack);
    const double t = now_ms() - t0;
    std::lock_guard<std::mutex> g(mu);
    (s == 0 ? c.exec_ok : c.exec_fail).add(t);
    return s;
}

int cudnnBackendDestroyDescriptor(void* d) {
    static auto f = reinterpret_cast<int (*)(void*)>(real("cudnnBackendDestroyDescriptor", kCudnn));
    {
        std::lock_guard<std::mutex> g(mu);
        type_of.erase(d);
        heur_mode.erase(d);
    }
    return f(d);
}

int cudaEventSynchronize(void* e) {
    static auto f = reinterpret_cast<int (*)(void*)>(real("cudaEventSynchronize", kCudart));
    const double t0 = now_ms();
    const int s = f(e);
    const double t = now_ms() - t0;
    std::lock_guard<std::mutex> g(mu);
    c.event_sync.add(t);
    return s;
}

int cudaDeviceSynchronize() {
    static auto f = reinterpret_cast<int (*)()>(real("cudaDeviceSynchronize", kCudart));
    const double t0 = now_ms();
    const int s = f();
    const double t = now_ms() - t0;
    std::lock_guard<std::mutex> g(mu);
    c.device_sync.add(t);
    return s;
}

}  // extern "C"
