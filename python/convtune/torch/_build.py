"""Building convtune.torch's C++ override (_override.cpp) for the PyTorch that is imported.

The override is compiled where it runs, against the headers that ship with the imported torch
(Debian: libtorch-dev), with the C++ compiler directly ($CXX, else ``c++``; no ninja), into a
per-user cache folder ($CONVTUNE_CACHE_DIR, else $XDG_CACHE_HOME/convtune, else ~/.cache/convtune)
under a name keyed by a hash of the source, the C interface's header, the torch build, the Python
version and the compiler: a new torch, Python or compiler, or another source, builds a new file;
the same ones find it there. A file is written atomically (temporary file + rename) and loaded
only when its recorded checksum matches, so two processes compiling at once never load a half
file and a corrupt one is rebuilt. ``python3 -m convtune.torch build-override`` builds it ahead
of time (nodes without a compiler then find it in the shared cache folder).
"""

import contextlib
import hashlib
import importlib.util
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
import time

import torch

from .._convtune import Error, write_file_atomic

_HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(_HERE, "_override.cpp")
HEADER = os.path.join(_HERE, "convtune_framework_api.h")
MODULE = "convtune.torch._override"  # its PyInit__override


def cache_dir():
    """Where built overrides are kept: $CONVTUNE_CACHE_DIR, else $XDG_CACHE_HOME/convtune, else ~/.cache/convtune."""
    d = os.environ.get("CONVTUNE_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "convtune")


def compiler():
    """The C++ compiler command: $CXX (split as a shell would), else c++."""
    return shlex.split(os.environ.get("CXX") or "c++")


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _compiler_identity(cxx):
    try:
        r = subprocess.run(cxx + ["--version"], capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise Error(f"compiler: cannot run {shlex.join(cxx)}: {e.strerror or e} (set CXX to a C++ compiler, or build the "
                    "override ahead of time where there is one: python3 -m convtune.torch build-override)") from None
    if r.returncode != 0:
        raise Error(f"compiler: {shlex.join(cxx)} --version failed: {(r.stderr or r.stdout).strip()[:300]}")
    return r.stdout.strip()


def _torch_version():
    return f"{torch.__version__} ({os.path.dirname(torch.__file__)})"


def base_key(source=None, header=None, torch_version=None, python_version=None):
    """The part of the cache key that the code and its environment make: the source and header
    texts, the torch build (its version and where it lives, its C++ ABI) and the Python version.
    Each argument defaults to what this process has."""
    source = _read(SOURCE) if source is None else source
    header = _read(HEADER) if header is None else header
    torch_version = _torch_version() if torch_version is None else torch_version
    python_version = sys.version if python_version is None else python_version
    h = hashlib.sha256()
    for part in (source, header, torch_version.encode(), python_version.encode(), str(torch._C._GLIBCXX_USE_CXX11_ABI).encode()):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:20]


def cache_key(source=None, header=None, torch_version=None, python_version=None, compiler_id=None):
    """The name of the built file: base_key() and a hash of the compiler's identity (its
    ``--version``; default: that of compiler())."""
    compiler_id = _compiler_identity(compiler()) if compiler_id is None else compiler_id
    return f"{base_key(source, header, torch_version, python_version)}-{hashlib.sha256(compiler_id.encode()).hexdigest()[:8]}"


def built_path(key=None):
    """The cache file for `key` (default: this process's cache_key())."""
    return os.path.join(cache_dir(), f"torch_override-{key or cache_key()}{_suffix()}")


def _suffix():
    return sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def find_prebuilt():
    """A valid build for this source, torch and Python by any compiler (the newest), or None: what
    a node without a compiler loads after `python3 -m convtune.torch build-override` elsewhere."""
    d, prefix = cache_dir(), f"torch_override-{base_key()}-"
    try:
        names = [n for n in os.listdir(d) if n.startswith(prefix) and n.endswith(_suffix())]
    except OSError:
        return None
    paths = sorted((os.path.join(d, n) for n in names), key=os.path.getmtime, reverse=True)
    return next((p for p in paths if is_valid(p)), None)


def _digest_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_valid(path):
    """Whether `path` is a complete build: its checksum file (written after it) matches it."""
    try:
        with open(path + ".sha256") as f:
            return f.read().strip() == _digest_file(path)
    except OSError:
        return False


def _std_flag():
    major = int(torch.__version__.split(".")[0])
    return "-std=c++17" if major < 2 else "-std=c++20"  # PyTorch 2's newer headers need C++20


def compile_command(output, cxx=None):
    """The command that builds the override into `output`."""
    from torch.utils import cpp_extension

    cxx = compiler() if cxx is None else cxx
    cmd = cxx + ["-shared", "-fPIC", "-O2", _std_flag(), "-w", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]
    for d in cpp_extension.include_paths() + [sysconfig.get_paths()["include"], _HERE]:
        cmd.append(f"-I{d}")
    cmd += [SOURCE, "-o", output]
    for d in cpp_extension.library_paths():
        cmd += [f"-L{d}", f"-Wl,-rpath,{d}"]
    cmd += ["-ltorch", "-ltorch_cpu", "-lc10", "-ltorch_python"]
    return cmd


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


def _first_errors(text, n=8):
    lines = [l for l in text.splitlines() if l.strip()]
    errors = [l for l in lines if "error" in l.lower()]
    return "\n".join((errors or lines)[:n])


def compile_to(path, quiet=False):
    """Compiles the override into `path` (a temporary file, then a rename, then its checksum
    file). Raises convtune.Error with the compiler's first error lines."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    ver = ".".join(torch.__version__.split(".")[:2])
    if not quiet:
        print(f"convtune.torch: compiling its C++ override for torch {ver}, once: ~20-60 s", file=sys.stderr, flush=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".so")
    os.close(fd)
    try:
        cmd = compile_command(tmp)
        t0 = time.monotonic()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as e:
            raise Error(f"compiler: cannot run {shlex.join(cmd[:1])}: {e.strerror or e} (set CXX to a C++ compiler)") from None
        if r.returncode != 0:
            raise Error(f"compiler: building convtune.torch's C++ override failed (exit {r.returncode}):\n"
                        f"{_first_errors(r.stderr or r.stdout)}")
        os.chmod(tmp, 0o755 & ~_umask())
        os.replace(tmp, path)
        write_file_atomic(path + ".sha256", _digest_file(path).encode())  # convtune's one atomic write
        return time.monotonic() - t0
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def build(force=False, quiet=False):
    """The path of a valid build of the override for this torch, compiling it when the cache
    has none (or `force`). Without a compiler, a build that another compiler made for this
    source, torch and Python (find_prebuilt()) is used."""
    try:
        key = cache_key()
    except Error:
        prebuilt = None if force else find_prebuilt()
        if prebuilt:
            return prebuilt
        raise
    path = built_path(key)
    if force or not is_valid(path):
        compile_to(path, quiet=quiet)
    return path


def load(path):
    """Imports the built file as convtune.torch._override."""
    if MODULE in sys.modules:
        m = sys.modules[MODULE]
        if getattr(m, "__file__", None) == path:
            return m
    spec = importlib.util.spec_from_file_location(MODULE, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    sys.modules[MODULE] = m
    return m
