"""Worker functions for the Ray tests (importable by module name in the actors)."""

from __future__ import annotations

import os
import sys
import time


class TwoArgError(Exception):
    """An exception that does not unpickle (its __init__ needs two arguments)."""

    def __init__(self, a, b):
        super().__init__(a)
        self.b = b


def raise_unpicklable(data):
    raise TwoArgError("cannot travel", 2)


def exit_via_system_exit(data):
    if int(data["x"].reshape(-1)[0]) == 3:
        sys.exit("fn called sys.exit")
    return data.empty().set("y", data["x"] + 1)


def wait_for_file_after_chunk_zero(path, data):
    """Chunk 0 at once; later chunks once the file ``path`` exists (bind ``path`` with
    ``functools.partial``: the actors do not see the test's environment)."""
    if int(data["x"].reshape(-1)[0]) > 0:
        while not os.path.exists(path):
            time.sleep(0.001)
    return data.empty().set("y", data["x"] + 1)
