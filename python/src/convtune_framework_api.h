/* convtune's framework interface in plain C: what convtune._convtune exposes for a framework
 * extension built apart from convtune (convtune.torch's C++ override, compiled where it runs
 * against the PyTorch that is imported) to run one convolution through the one copy of convtune
 * in the process (its registry, selectors, tuning databases and flags): convtune::app::run_framework.
 *
 *   capsule = convtune._convtune._framework_api()         a PyCapsule named CONVTUNE_FRAMEWORK_API_NAME
 *   api = (const convtune_framework_api*) PyCapsule_GetPointer(capsule, CONVTUNE_FRAMEWORK_API_NAME);
 *   ctx = (void*) convtune._convtune.FrameworkContext(db)._address()   (kept alive by its owner)
 *   api->refuse(&request, &refusal)     whether convtune takes the call at all, before any memory is made
 *   api->run(ctx, &call, &result)
 *
 * Only C types cross it: no C++ object, exception or allocator of one side reaches the other.
 * The capsule's name carries the version; a struct that changes gets a new version. */
#ifndef CONVTUNE_FRAMEWORK_API_H
#define CONVTUNE_FRAMEWORK_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CONVTUNE_FRAMEWORK_API_VERSION 2
#define CONVTUNE_FRAMEWORK_API_NAME "convtune._convtune.framework_api.v2"

/* One tensor as the framework holds it: sizes and element strides in logical order
 * (x: n, c, spatial...; w: k, c/groups, kernel...; y: n, k, out...). */
typedef struct convtune_tensor {
    int32_t rank; /* 3, 4 or 5 (1-D to 3-D convolutions) */
    int64_t sizes[5];
    int64_t strides[5];
    void* data;   /* the backend's memory (CUDA: device memory) */
    size_t bytes; /* what the framework's storage holds from data on */
} convtune_tensor;

/* Workspace from the framework's allocator: returns `bytes` of the backend's memory, or NULL
 * (out of memory: convtune treats it so). The memory must stay valid until run() returns;
 * release (when not NULL) is called with the pointer once convtune is done with it. */
typedef void* (*convtune_alloc_fn)(void* user, size_t bytes);
typedef void (*convtune_release_fn)(void* user, void* data);

typedef struct convtune_call {
    const char* direction; /* "fwd" (writes y), "bwd_data" (writes x), "bwd_filter" (writes w) */
    const char* dtype;     /* "f32", "f16", "bf16", "f64", or PyTorch's name of one ("torch.float32", ...) */
    convtune_tensor x, w, y;
    int32_t spatial_dims;  /* entries used in stride, padding, dilation */
    int64_t stride[3], padding[3], dilation[3];
    int64_t groups;
    const char* backend; /* "cudnn", "cpu", ... */
    /* PyTorch's flags (torch.backends.cudnn), applied on top of convtune's current flags as
     * convtune.torch.flag_values + the flags dict do: */
    int32_t enabled, benchmark, deterministic, allow_tf32;
    int64_t benchmark_limit; /* < 0: leave convtune's value (a PyTorch without the flag) */
    const char* policy;      /* convtune's selection policy */
    void* stream;            /* the backend's stream (CUDA: a cudaStream_t); NULL: its default */
    convtune_alloc_fn alloc; /* NULL: the backend's own allocator */
    convtune_release_fn release;
    void* alloc_user;
} convtune_call;

typedef struct convtune_result {
    int32_t ran;
    char fallback[32];   /* when !ran: layout, problem, unsupported, failed */
    char detail[1024];   /* why (truncated to fit) */
    char algorithm[128]; /* what ran */
    char source[32];     /* where the decision came from: memory, database, search, heuristic, ... */
    double search_ms;    /* time this call spent searching */
} convtune_result;

/* x or w as the framework names them (PyTorch's names: str(t.device.type), str(t.layout), str(t.dtype)). */
typedef struct convtune_operand {
    const char* device; /* the device type: "cpu", "cuda", ... */
    int32_t index;      /* the device index; -1: none */
    const char* layout; /* "torch.strided", "torch.sparse_coo", ... */
    const char* dtype;  /* "torch.float32", ... */
} convtune_operand;

/* One convolution the framework asks convtune to take (convtune::app::framework_refusal). */
typedef struct convtune_request {
    const char* device; /* the device type convtune runs for: "cpu" or "cuda" */
    convtune_operand x, w;
    int32_t transposed;
    int32_t enabled; /* torch.backends.cudnn.enabled */
    /* cuda: the device convtune's handles live on, -1 until the first call taken claims it;
     * the caller owns it and touches it only through refuse() (which updates it atomically).
     * NULL: no such rule. */
    int32_t* home;
    /* The convolution's shape, for the rule on where PyTorch runs its own kernel (pytorch_kernel):
     * groups, x's channels, w's output channels, and whether the call's memory format is
     * channels-last (x or w is). */
    int64_t groups, channels, out_channels;
    int32_t channels_last;
} convtune_request;

typedef struct convtune_refusal {
    const char* category; /* NULL: convtune takes the call; else (a static string) device, layout,
                             dtype, transposed, cudnn_disabled, pytorch_kernel */
    char detail[256];     /* why (truncated to fit); empty when taken */
} convtune_refusal;

typedef struct convtune_framework_api {
    uint32_t version;     /* CONVTUNE_FRAMEWORK_API_VERSION */
    uint32_t struct_size; /* sizeof(convtune_framework_api) */
    /* Runs the call on the context's selector of call->backend. Returns 0 with *result filled
     * (ran, or the fallback and its detail), or -1 for an error that is not a fallback (an
     * unknown or unavailable backend, a bad flag or policy): the message in result->detail. */
    int (*run)(void* context, const convtune_call* call, convtune_result* result);
    /* Whether convtune takes the request at all: returns 0 with refusal->category NULL (taken)
     * or the category and its detail; -1 for a request missing a name (the message in
     * refusal->detail). Allocates nothing when the call is taken. */
    int (*refuse)(const convtune_request* request, convtune_refusal* refusal);
} convtune_framework_api;

#ifdef __cplusplus
}
#endif

#endif /* CONVTUNE_FRAMEWORK_API_H */
