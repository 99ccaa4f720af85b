"""The C interface of convtune._convtune (python/src/convtune_framework_api.h) seen through ctypes:
the structs and the ``run`` and ``refuse`` functions that convtune.torch's C++ override calls, for tests and for
bench/gpu/torch_overhead.py (what one call costs without any framework on top). The header is the
definition; these mirror it field for field.
"""

import ctypes

from . import _convtune

NAME = b"convtune._convtune.framework_api.v2"
VERSION = 2


class Tensor(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int32), ("sizes", ctypes.c_int64 * 5), ("strides", ctypes.c_int64 * 5),
                ("data", ctypes.c_void_p), ("bytes", ctypes.c_size_t)]


ALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
RELEASE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


class Call(ctypes.Structure):
    _fields_ = [("direction", ctypes.c_char_p), ("dtype", ctypes.c_char_p), ("x", Tensor), ("w", Tensor), ("y", Tensor),
                ("spatial_dims", ctypes.c_int32), ("stride", ctypes.c_int64 * 3), ("padding", ctypes.c_int64 * 3),
                ("dilation", ctypes.c_int64 * 3), ("groups", ctypes.c_int64), ("backend", ctypes.c_char_p),
                ("enabled", ctypes.c_int32), ("benchmark", ctypes.c_int32), ("deterministic", ctypes.c_int32),
                ("allow_tf32", ctypes.c_int32), ("benchmark_limit", ctypes.c_int64), ("policy", ctypes.c_char_p),
                ("stream", ctypes.c_void_p), ("alloc", ALLOC), ("release", RELEASE), ("alloc_user", ctypes.c_void_p)]


class Result(ctypes.Structure):
    _fields_ = [("ran", ctypes.c_int32), ("fallback", ctypes.c_char * 32), ("detail", ctypes.c_char * 1024),
                ("algorithm", ctypes.c_char * 128), ("source", ctypes.c_char * 32), ("search_ms", ctypes.c_double)]


class Operand(ctypes.Structure):
    _fields_ = [("device", ctypes.c_char_p), ("index", ctypes.c_int32), ("layout", ctypes.c_char_p),
                ("dtype", ctypes.c_char_p)]


class Request(ctypes.Structure):
    _fields_ = [("device", ctypes.c_char_p), ("x", Operand), ("w", Operand), ("transposed", ctypes.c_int32),
                ("enabled", ctypes.c_int32), ("home", ctypes.POINTER(ctypes.c_int32)), ("groups", ctypes.c_int64),
                ("channels", ctypes.c_int64), ("out_channels", ctypes.c_int64), ("channels_last", ctypes.c_int32)]


class Refusal(ctypes.Structure):
    _fields_ = [("category", ctypes.c_char_p), ("detail", ctypes.c_char * 256)]


RUN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(Call), ctypes.POINTER(Result))
REFUSE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Request), ctypes.POINTER(Refusal))


class Api(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("struct_size", ctypes.c_uint32), ("run", RUN), ("refuse", REFUSE)]


def api():
    """The interface's struct, from the capsule _convtune._framework_api() returns."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return ctypes.cast(get(_convtune._framework_api(), NAME), ctypes.POINTER(Api)).contents


def tensor(sizes, strides, data, nbytes):
    t = Tensor(rank=len(sizes), data=data, bytes=nbytes)
    for i, (n, s) in enumerate(zip(sizes, strides)):
        t.sizes[i], t.strides[i] = n, s
    return t


def call(direction, dtype, x, w, y, stride, padding, dilation, groups, backend, flags, policy="convtune", stream=None):
    """A Call; x, w, y are Tensors, flags a dict of PyTorch's (enabled, benchmark, deterministic,
    allow_tf32, benchmark_limit: None to leave convtune's)."""
    c = Call(direction=direction.encode(), dtype=dtype.encode(), x=x, w=w, y=y, spatial_dims=len(stride), groups=groups,
             backend=backend.encode(), enabled=flags["enabled"], benchmark=flags["benchmark"],
             deterministic=flags["deterministic"], allow_tf32=flags["allow_tf32"],
             benchmark_limit=-1 if flags.get("benchmark_limit") is None else flags["benchmark_limit"], policy=policy.encode(),
             stream=stream)
    for i in range(len(stride)):
        c.stride[i], c.padding[i], c.dilation[i] = stride[i], padding[i], dilation[i]
    return c
