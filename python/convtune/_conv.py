"""Convolutions on NumPy arrays through convtune::convolution (the selector; the flags apply).

The signatures follow PyTorch's functional ones:
    conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)
        like torch.nn.functional.conv1d/2d/3d (the dimension comes from input.ndim)
    conv_backward_data(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1)
        like torch.nn.grad.conv2d_input
    conv_backward_filter(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1)
        like torch.nn.grad.conv2d_weight
plus a keyword-only ``backend`` ("cpu" by default; see convtune.list_backends()).
Arrays are channels first (N, C, [D,] [H,] W), float32 or float16, both operands the same type.
"""

import numpy as np

from . import _convtune
from ._args import ArgumentTypeError, is_int, to_int, type_name as _type_name
from ._convtune import Error

_DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}


def _tuple(name, value, nd):
    """An int or a sequence of 1 or nd ints -> a list of nd ints (convtune.Error naming ``name``
    for anything else: floats, bools and strings are refused, not truncated)."""
    if is_int(value):
        return [to_int(name, value)] * nd
    if isinstance(value, (str, bytes)):
        raise ArgumentTypeError(f"{name}: must be an int or a tuple of ints, got {_type_name(value)} {value!r}")
    try:
        items = list(value)
    except TypeError:
        raise ArgumentTypeError(f"{name}: must be an int or a tuple of ints, got {_type_name(value)}") from None
    items = [to_int(f"{name}[{i}]", v, what="an int") for i, v in enumerate(items)]
    if len(items) == 1:
        items = items * nd
    if len(items) != nd:
        raise Error(f"{name}: expected {nd} values (one per spatial dim) for a {nd}-D convolution, got {len(items)}")
    return items


def _padding(padding, kernel, stride, dilation):
    """PyTorch's padding argument -> (pad_begin, pad_end)."""
    nd = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return [0] * nd, [0] * nd
        if padding == "same":
            if any(s != 1 for s in stride):
                raise Error("padding='same' is not supported for strided convolutions")
            total = [d * (k - 1) for k, d in zip(kernel, dilation)]
            begin = [t // 2 for t in total]
            return begin, [t - b for t, b in zip(total, begin)]
        raise Error(f"Invalid padding string '{padding}', should be one of {{'valid', 'same'}}")
    pad = _tuple("padding", padding, nd)
    return pad, list(pad)


def _array(name, a):
    """``a`` as an ndarray of a supported type, not copied yet: the problem and the memory
    budget are checked from its shape first (_contiguous copies it afterwards if needed)."""
    a = np.asarray(a)
    if a.dtype not in _DTYPES:
        raise TypeError(f"{name}: convtune convolutions take float32 or float16 arrays, got {a.dtype}")
    return a


def _contiguous(p, *arrays):
    """Checks the problem against the memory budget (what the call copies and allocates is at
    most its x + w + y), then returns the arrays C-contiguous, copied where they are not."""
    _convtune.check_memory_budget(p["canonical"])
    return [np.ascontiguousarray(a) for a in arrays]


def _shape(name, value, ndim=None):
    if isinstance(value, (str, bytes)) or is_int(value):
        raise ArgumentTypeError(f"{name}: must be a sequence of ints, got {_type_name(value)} {value!r}")
    try:
        items = list(value)
    except TypeError:
        raise ArgumentTypeError(f"{name}: must be a sequence of ints, got {_type_name(value)}") from None
    shape = [to_int(f"{name}[{i}]", v) for i, v in enumerate(items)]
    if len(shape) not in (3, 4, 5):
        raise Error(f"{name}: expected 3, 4 or 5 sizes (N, C, spatial... / K, C/groups, kernel...), got {len(shape)}")
    if ndim is not None and len(shape) != ndim:
        raise Error(f"{name}: expected {ndim} sizes to match the other operands, got {len(shape)}")
    return shape


def _make(direction, dtype, x_shape, w_shape, stride, padding, dilation, groups):
    groups = to_int("groups", groups)
    if len(x_shape) != len(w_shape):
        raise Error(
            f"Expected {len(w_shape)}-dimensional input for {len(w_shape)}-dimensional weight {list(w_shape)}, "
            f"but got {len(x_shape)}-dimensional input of size {list(x_shape)} instead")
    if len(x_shape) not in (3, 4, 5):
        raise Error(f"expected 3-D, 4-D or 5-D arrays (N, C, spatial...), got {len(x_shape)}-D")
    nd = len(x_shape) - 2
    if groups >= 1 and w_shape[1] * groups != x_shape[1]:
        raise Error(
            f"Given groups={groups}, weight of size {list(w_shape)}, expected input{list(x_shape)} to have "
            f"{w_shape[1] * groups} channels, but got {x_shape[1]} channels instead")
    kernel = list(w_shape[2:])
    stride = _tuple("stride", stride, nd)
    dilation = _tuple("dilation", dilation, nd)
    pad, pad_end = _padding(padding, kernel, stride, dilation)
    return _convtune.make_problem(direction, dtype, "nchw", x_shape[0], x_shape[1], w_shape[0], groups, list(x_shape[2:]),
                                  kernel, stride, dilation, pad, pad_end)


def _dtype_of(*arrays):
    dts = {a.dtype for a in arrays}
    if len(dts) != 1:
        raise TypeError("operands must have the same dtype, got " + " and ".join(str(a.dtype) for a in arrays))
    return _DTYPES[arrays[0].dtype]


def problem(input_size, weight_size, stride=1, padding=0, dilation=1, groups=1, *, direction="fwd", dtype="f32"):
    """The convtune problem of a convolution of an input of ``input_size`` with a weight of
    ``weight_size`` (PyTorch's argument conventions), as a dict: ``canonical`` (the problem string
    the CLI, tuning database and trace files use), its fields, and x/w/y shapes."""
    x_shape = _shape("input_size", input_size)
    w_shape = _shape("weight_size", weight_size, len(x_shape))
    return _make(direction, dtype, x_shape, w_shape, stride, padding, dilation, groups)


def parse_problem(text):
    """A problem string (canonical or benchdnn descriptor) -> the dict problem() returns."""
    return _convtune.parse_problem(text)


def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *, backend="cpu"):
    """Forward convolution (cross-correlation, like PyTorch), 1-D/2-D/3-D by input.ndim."""
    x = _array("input", input)
    w = _array("weight", weight)
    p = _make("fwd", _dtype_of(x, w), x.shape, w.shape, stride, padding, dilation, groups)
    if bias is not None:
        b = np.asarray(bias)
        if b.shape != (p["k"],):
            raise Error(f"bias: expected shape ({p['k']},), got {b.shape}")
    x, w = _contiguous(p, x, w)
    y = np.empty(p["y_shape"], dtype=x.dtype)
    _convtune.convolution(p["canonical"], x, w, y, backend)
    if bias is not None:
        y += b.astype(y.dtype).reshape((1, -1) + (1,) * p["spatial_dims"])
    return y


def conv_backward_data(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1, *, backend="cpu"):
    """Gradient of a convolution with respect to its input (cuDNN's backward data): an array of
    ``input_size``."""
    w = _array("weight", weight)
    dy = _array("grad_output", grad_output)
    x_shape = _shape("input_size", input_size, w.ndim)
    p = _make("bwd_data", _dtype_of(w, dy), x_shape, w.shape, stride, padding, dilation, groups)
    w, dy = _contiguous(p, w, dy)
    dx = np.empty(p["x_shape"], dtype=w.dtype)
    _convtune.convolution(p["canonical"], dx, w, dy, backend)
    return dx


def conv_backward_filter(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1, *, backend="cpu"):
    """Gradient of a convolution with respect to its weight (cuDNN's backward filter): an array of
    ``weight_size``."""
    x = _array("input", input)
    dy = _array("grad_output", grad_output)
    w_shape = _shape("weight_size", weight_size, x.ndim)
    p = _make("bwd_filter", _dtype_of(x, dy), x.shape, w_shape, stride, padding, dilation, groups)
    x, dy = _contiguous(p, x, dy)
    dw = np.empty(p["w_shape"], dtype=x.dtype)
    _convtune.convolution(p["canonical"], x, dw, dy, backend)
    return dw
