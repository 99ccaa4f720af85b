"""Where an installed convtune package keeps what it ships, and the one environment default that
points convtune's C++ code at it.

A wheel (``pip install .``) and ``cmake --install`` put the repository's ``data/`` folder in the
package as ``convtune/data`` (the benchdnn shape files behind the built-in workload names under
``data/shapes/benchdnn``, the recording library behind ``--replay NAME`` under
``data/recordings``); a wheel also puts the CLI binary at ``convtune/bin/convtune``. The C++ code
reads these folders from ``$CONVTUNE_SHAPES_DIR`` and ``$CONVTUNE_RECORDINGS_DIR``, else from the
paths the build was configured with (the source tree, which an installed package must not depend
on), so importing convtune, and the wheel's ``convtune`` command, set each variable to the
package's copy when it is unset or empty. The build tree's package has no ``data`` folder and
changes nothing.

This module imports nothing from convtune: the wheel's ``convtune`` script loads it by its path
and runs the CLI without importing the package (which loads NumPy).
"""

import os
import sys

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
DATA_DIR = os.path.join(PACKAGE_DIR, "data")
SHAPES_DIR = os.path.join(DATA_DIR, "shapes", "benchdnn")
RECORDINGS_DIR = os.path.join(DATA_DIR, "recordings")
CLI = os.path.join(PACKAGE_DIR, "bin", "convtune")


def set_default_env(env=os.environ):
    """Set ``CONVTUNE_SHAPES_DIR`` and ``CONVTUNE_RECORDINGS_DIR`` in ``env`` to the package's
    folders when the variable is unset or empty and the package has that folder; a value the user
    set is kept."""
    for var, folder in (("CONVTUNE_SHAPES_DIR", SHAPES_DIR), ("CONVTUNE_RECORDINGS_DIR", RECORDINGS_DIR)):
        if not env.get(var) and os.path.isdir(folder):
            env[var] = folder


def exec_cli(argv):
    """Replace this process with the package's CLI binary, run with ``argv[1:]`` (the wheel's
    ``convtune`` command)."""
    if not os.access(CLI, os.X_OK):
        sys.exit(f"convtune: this package has no CLI binary ({CLI}); it is shipped in the wheel built by "
                 f"`pip install .`, and `cmake --install` puts it in <prefix>/bin")
    set_default_env()
    os.execv(CLI, [argv[0] if argv else "convtune", *argv[1:]])
