"""TorchRL's own tests, side by side: this package against upstream tensordict.

``python -m benchmarks.torchrl_parity [OPTIONS] SELECTION...`` runs one TorchRL test selection
(pytest arguments, paths relative to TorchRL's ``test/`` folder, e.g.
``test_collectors.py -k Sync``) twice, each under pytest's junit output and ``--timeout``:

- *here*: ``--here-python`` (default ``.venv/bin/python``) with this repository's ``src`` first
  on ``PYTHONPATH``;
- *upstream*: ``--upstream-python`` (default ``~/.cache/td-upstream-torchrl-venv/bin/python``), a
  venv with torch 2.13.0, tensordict 0.15.3 and TorchRL 0.14.1 (``--setup-upstream`` creates it:
  torch pinned first, TorchRL ``--no-deps`` and its pure-python requirements beside it).

It prints passed / failed / skipped and time per file for both sides, the tests that pass upstream
but not here, and the most frequent first error line among them. Both sides run under one hold
of an exclusive lock on ``--lock`` (default ``/tmp/heavy.lock``; ``--lock ""`` for none, for a
few small files), so heavy runs never overlap. The junit files stay in ``--out``;
``--reuse-upstream`` reads upstream's from there instead of running it again (upstream does
not change).

TorchRL's tests come from ``--tests DIR`` (the folder holding ``conftest.py``) or, by default, are
extracted once from a git clone of pytorch/rl (``--rl-git-dir``, its ``HEAD``) into
``~/.cache/torchrl-tests/<commit>/test``. ``make torchrl-parity ARGS="test_collectors.py -k Sync"``
runs it from the Makefile.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import fcntl
import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
UPSTREAM_VENV = CACHE / "td-upstream-torchrl-venv"
#: what the upstream venv holds; torch comes first and pinned (an unpinned one pulls CUDA builds)
UPSTREAM_TORCH = "torch==2.13.0"
UPSTREAM_PACKAGES = ["tensordict==0.15.3"]
TORCHRL_NO_DEPS = ["torchrl==0.14.1", "pyvers==0.2.3", "hoptorch==0.1.4"]
#: TorchRL's pure-python requirements and what its test files import at module level
TEST_REQUIREMENTS = [
    "numpy",
    "packaging",
    "cloudpickle",
    "pytest",
    "pytest-timeout",
    "psutil",
    "pyyaml",
    "scipy==1.17.1",
    "pytest-mock==3.17.0",
]


@dataclass
class Case:
    """One test's outcome as the junit file records it."""

    file: str
    name: str
    outcome: str  # "passed" | "failed" | "skipped"
    time: float
    message: str = ""


@dataclass
class Side:
    """One run of the selection: its cases, wall time and whether the cap cut it short, the CPU
    time of pytest and every process it started and reaped (collector workers included: on a
    shared machine wall time follows the load, CPU time much less), and the 1-minute load
    average before and after."""

    label: str
    cases: dict[str, Case] = field(default_factory=dict)
    wall: float = 0.0
    capped: bool = False
    cpu: float = float("nan")
    load: tuple[float, float] = (float("nan"), float("nan"))


def _file_of(classname: str, tests_dir: Path) -> str:
    """``transforms.test_x.TestY`` -> ``transforms/test_x.py``: longest prefix that is a file."""
    parts = classname.split(".")
    for n in range(len(parts), 0, -1):
        rel = "/".join(parts[:n]) + ".py"
        if (tests_dir / rel).is_file():
            return rel
    return parts[0] + ".py"


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:160]
    return ""


def read_junit(path: Path, tests_dir: Path) -> dict[str, Case]:
    """The cases of a junit file, keyed ``file::name``; an error in setup counts as a failure."""
    cases: dict[str, Case] = {}
    if not path.exists():
        return cases
    for tc in ET.parse(path).getroot().iter("testcase"):
        file = _file_of(tc.get("classname", ""), tests_dir)
        cls = tc.get("classname", "").split(".")[-1]
        name = f"{cls}::{tc.get('name')}" if cls.startswith("Test") else str(tc.get("name"))
        outcome, message = "passed", ""
        for child in tc:
            if child.tag in ("failure", "error"):
                outcome = "failed"
                message = child.get("message") or _first_line(child.text or "")
                break
            if child.tag == "skipped":
                outcome = "skipped"
        key = f"{file}::{name}"
        if key in cases and cases[key].outcome == "failed":
            continue  # a teardown error adds a second record; the failure is kept
        cases[key] = Case(file, name, outcome, float(tc.get("time") or 0.0), _first_line(message))
    return cases


@contextlib.contextmanager
def heavy_lock(path: str | None) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (nothing when it is empty) for the block's duration."""
    if not path:
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def run_side(
    label: str,
    python: str,
    env: dict[str, str],
    selection: Sequence[str],
    tests_dir: Path,
    junit: Path,
    args: argparse.Namespace,
) -> Side:
    """Run pytest on ``selection`` with ``python`` in TorchRL's tests, stopped at ``args.cap``."""
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--timeout={args.timeout}"]
    cmd += [f"--junitxml={junit}", "-o", "junit_family=xunit1", *selection]
    log = junit.with_suffix(".log")
    junit.unlink(missing_ok=True)
    side = Side(label)
    with open(log, "w") as out:
        cpu_before, load_before = _children_cpu(), os.getloadavg()[0]
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            cwd=tests_dir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=args.cap)
        except subprocess.TimeoutExpired:
            side.capped = True
            # SIGINT first: pytest then still writes the junit file of what ran
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        side.wall = time.perf_counter() - start
        side.cpu = _children_cpu() - cpu_before
        side.load = (load_before, os.getloadavg()[0])
    side.cases = read_junit(junit, tests_dir)
    meta = {"wall": side.wall, "capped": side.capped, "cpu": side.cpu, "load": side.load}
    (junit.with_suffix(".json")).write_text(json.dumps(meta))
    print(f"[{label}] {len(side.cases)} tests in {side.wall:.1f} s (log: {log})", file=sys.stderr)
    return side


def _children_cpu() -> float:
    """User + system seconds of this process's reaped descendants."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load_side(label: str, junit: Path, tests_dir: Path) -> Side | None:
    """A side recorded by an earlier run, or None when there is none."""
    meta = junit.with_suffix(".json")
    if not (junit.exists() and meta.exists()):
        return None
    info = json.loads(meta.read_text())
    side = Side(label, read_junit(junit, tests_dir), info["wall"], info["capped"])
    side.cpu = info.get("cpu", float("nan"))  # runs recorded before CPU time was
    side.load = tuple(info.get("load", side.load))  # type: ignore[assignment]
    return side


def _counts(cases: list[Case]) -> tuple[int, int, int, float]:
    c = collections.Counter(case.outcome for case in cases)
    return c["passed"], c["failed"], c["skipped"], sum(case.time for case in cases)


def _pfs(counts: Sequence[float]) -> str:
    return "/".join(str(int(v)) for v in counts[:3])


def table(here: Side, upstream: Side) -> str:
    """Per file: passed / failed / skipped and summed test time, here and upstream."""
    files = sorted(
        {c.file for c in here.cases.values()} | {c.file for c in upstream.cases.values()}
    )
    head = (
        f"{'file':44} {'here p/f/s':>16} {'upstream p/f/s':>16} {'time here':>10} {'upstream':>10}"
    )
    lines = [head, "-" * len(head)]
    totals = {"here": [0, 0, 0, 0.0], "up": [0, 0, 0, 0.0]}
    for f in files:
        h = _counts([c for c in here.cases.values() if c.file == f])
        u = _counts([c for c in upstream.cases.values() if c.file == f])
        for tot, vals in ((totals["here"], h), (totals["up"], u)):
            for i, v in enumerate(vals):
                tot[i] += v
        lines.append(f"{f:44} {_pfs(h):>16} {_pfs(u):>16} {h[3]:9.1f}s {u[3]:9.1f}s")
    h, u = totals["here"], totals["up"]
    lines.append("-" * len(head))
    lines.append(f"{'total':44} {_pfs(h):>16} {_pfs(u):>16} {h[3]:9.1f}s {u[3]:9.1f}s")
    for side in (here, upstream):
        cap = " (CAP HIT: the rest did not run)" if side.capped else ""
        lines.append(
            f"wall time {side.label}: {side.wall:.1f} s{cap}; CPU {side.cpu:.1f} s; "
            f"load {side.load[0]:.1f} -> {side.load[1]:.1f}"
        )
    return "\n".join(lines)


def differences(here: Side, upstream: Side, top: int) -> str:
    """Tests passing upstream but failing (or not run) here, and their commonest first errors."""
    lost = [
        key
        for key, up in upstream.cases.items()
        if up.outcome == "passed" and (key not in here.cases or here.cases[key].outcome == "failed")
    ]
    gained = [
        k
        for k, c in here.cases.items()
        if c.outcome == "passed" and upstream.cases.get(k, c).outcome == "failed"
    ]
    both = [
        k
        for k, c in here.cases.items()
        if c.outcome == "failed" and upstream.cases.get(k, c).outcome == "failed"
    ]
    out = [
        f"\npass upstream, not here: {len(lost)}; here, not upstream: {len(gained)}; "
        f"fail on both: {len(both)}"
    ]
    errors = collections.Counter(
        here.cases[k].message if k in here.cases else "(did not run here)" for k in lost
    )
    if errors:
        out.append("most frequent first errors here (among those):")
        out += [f"  {n:4d}  {msg}" for msg, n in errors.most_common(top)]
        out.append("those tests:")
        out += [f"  {k}" for k in lost[: top * 4]]
    slow = sorted(
        (
            (c.time - upstream.cases[k].time, k)
            for k, c in here.cases.items()
            if k in upstream.cases and c.time > 2 * upstream.cases[k].time + 1.0
        ),
        reverse=True,
    )
    if slow:
        out.append("slower here by more than 2x + 1 s (extra seconds):")
        out += [f"  {d:7.1f}  {k}" for d, k in slow[:top]]
    return "\n".join(out)


def extract_tests(git_dir: str) -> Path:
    """TorchRL's ``test/`` folder at ``HEAD`` of ``git_dir``, extracted once into the cache."""
    commit = subprocess.check_output(
        ["git", "--git-dir", git_dir, "rev-parse", "HEAD"], text=True
    ).strip()
    dest = CACHE / "torchrl-tests" / commit
    if not (dest / "test" / "conftest.py").exists():
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile() as tmp:
            subprocess.run(
                ["git", "--git-dir", git_dir, "archive", "HEAD", "test"], stdout=tmp, check=True
            )
            tmp.seek(0)
            with tarfile.open(fileobj=tmp) as tar:
                tar.extractall(dest, filter="data")
    return dest / "test"


def setup_upstream(venv: Path) -> None:
    """Create the upstream venv: pinned torch, tensordict 0.15.3, TorchRL ``--no-deps``."""
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(py), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, UPSTREAM_TORCH], check=True)
    subprocess.run([*pip, *UPSTREAM_PACKAGES, *TEST_REQUIREMENTS, UPSTREAM_TORCH], check=True)
    subprocess.run([*pip, "--no-deps", *TORCHRL_NO_DEPS], check=True)


def _env(python: str, pythonpath: str | None) -> dict[str, str]:
    """The environment of an activated venv: its ``bin`` first on ``PATH`` (TorchRL's tests
    start ``python -c ...`` subprocesses), and ``pythonpath`` (none for upstream)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    bin_dir = str(Path(python).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    env["VIRTUAL_ENV"] = str(Path(bin_dir).parent)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "selection", nargs=argparse.REMAINDER, help="pytest arguments (after the options)"
    )
    p.add_argument("--tests", help="TorchRL's test/ folder (default: extracted from --rl-git-dir)")
    p.add_argument(
        "--rl-git-dir", default=os.environ.get("TORCHRL_GIT_DIR", "/work/.mirror/pytorch+rl/repo")
    )
    p.add_argument("--here-python", default=str(ROOT / ".venv" / "bin" / "python"))
    p.add_argument("--here-path", default=str(ROOT / "src"), help="PYTHONPATH of the here side")
    p.add_argument("--upstream-python", default=str(UPSTREAM_VENV / "bin" / "python"))
    p.add_argument("--setup-upstream", action="store_true", help="create the upstream venv")
    p.add_argument("--only", choices=["here", "upstream"], help="run one side, read the other")
    p.add_argument("--reuse-upstream", action="store_true", help="read upstream's last run")
    p.add_argument("--timeout", type=int, default=300, help="pytest-timeout per test, seconds")
    p.add_argument("--cap", type=float, default=3600.0, help="seconds before a side is stopped")
    p.add_argument("--lock", default=os.environ.get("TD_HEAVY_LOCK", "/tmp/heavy.lock"))
    p.add_argument("--out", default=str(CACHE / "td-torchrl-parity"))
    p.add_argument("--top", type=int, default=10)
    args = p.parse_args(argv)
    if args.selection[:1] == ["--"]:
        args.selection = args.selection[1:]
    if not args.selection:
        p.error("name a TorchRL test selection, e.g. test_collectors.py -k Sync")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    tests_dir = Path(args.tests).resolve() if args.tests else extract_tests(args.rl_git_dir)
    if args.setup_upstream or not Path(args.upstream_python).exists():
        setup_upstream(UPSTREAM_VENV)
    key = hashlib.sha1(json.dumps([str(tests_dir), *args.selection]).encode()).hexdigest()[:12]
    out = Path(args.out) / key
    out.mkdir(parents=True, exist_ok=True)
    (out / "selection.txt").write_text(" ".join(args.selection) + "\n")
    runs = {
        "here": (args.here_python, _env(args.here_python, args.here_path)),
        "upstream": (args.upstream_python, _env(args.upstream_python, None)),
    }
    sides: dict[str, Side] = {}
    # upstream's package was byte-compiled when pip installed it; compile this one as a wheel
    # install would, or (under PYTHONDONTWRITEBYTECODE) every worker TorchRL spawns compiles
    # each module from source again
    subprocess.run([args.here_python, "-m", "compileall", "-q", args.here_path], check=True)
    with heavy_lock(args.lock):  # (both sides in one hold: they run back to back)
        _run_sides(runs, sides, tests_dir, out, args)
    print(f"selection: {' '.join(args.selection)}   (results in {out})")
    print(table(sides["here"], sides["upstream"]))
    print(differences(sides["here"], sides["upstream"], args.top))
    return 0


def _run_sides(
    runs: dict[str, tuple[str, dict[str, str]]],
    sides: dict[str, Side],
    tests_dir: Path,
    out: Path,
    args: argparse.Namespace,
) -> None:
    for label, (python, env) in runs.items():
        junit = out / f"{label}.xml"
        skip = args.only not in (None, label) or (label == "upstream" and args.reuse_upstream)
        if skip:  # an earlier run's record, or an empty side when there is none
            sides[label] = load_side(label, junit, tests_dir) or Side(f"{label} (not run)")
        else:
            sides[label] = run_side(label, python, env, args.selection, tests_dir, junit, args)


if __name__ == "__main__":
    sys.exit(main())
