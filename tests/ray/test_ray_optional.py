"""ray is an optional dependency: imported only for a Ray pool, with an install hint if missing.

These tests run with or without ray installed.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tensordict.errors import MissingDependencyError
from tensordict.parallel.ray_pool import require_ray


def test_missing_ray_raises_an_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(MissingDependencyError, match=r"tensordict\[ray\]"):
        require_ray()


def test_tensordict_does_not_import_ray_for_other_pools():
    code = (
        "import multiprocessing as mp, sys, torch\n"
        "from tensordict import TensorDict\n"
        "from tensordict.parallel.pools import external_backend, is_ray_pool, pool_size\n"
        "with mp.get_context('fork').Pool(1) as p:\n"
        "    assert not is_ray_pool(p) and pool_size(p) == 1\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
