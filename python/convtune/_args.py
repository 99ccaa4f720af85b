"""Checks of the Python arguments, shared by the convtune modules: one rule for every int."""

import numbers

from ._convtune import Error

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1
INT_MAX = 2**31 - 1


class ArgumentTypeError(Error, TypeError):
    """An argument of the wrong type (a float, bool or str where an int is needed): a
    convtune.Error (so a ValueError) that is also a TypeError, so either ``except`` catches it."""


def type_name(v):
    t = type(v)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def is_int(v):
    """An int or a NumPy integer; never a bool, a float or a str (even 2.0 or "2")."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def to_int(name, v, minimum=INT64_MIN, maximum=INT64_MAX, what="an int"):
    """v as a Python int, or convtune.Error naming ``name``: ArgumentTypeError for a value that is
    not an int, Error for one outside [minimum, maximum]."""
    if not is_int(v):
        raise ArgumentTypeError(f"{name}: expected {what}, got {type_name(v)} {v!r}")
    v = int(v)
    if v < minimum:
        raise Error(f"{name}: must be >= {minimum} (got {v})")
    if v > maximum:
        raise Error(f"{name}: must be <= {maximum} (got {v})")
    return v
