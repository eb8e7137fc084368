"""torch.compile of tensordict code, here and with upstream tensordict 0.15.3.

Run: ``python -m benchmarks.compiled [--quick]``. Three workloads, each timed eager and compiled
(``torch.compile(fn, fullgraph=True)``, the default inductor backend, CPU, one thread):

* **policy**: a stochastic policy as a TorchRL collector calls it, under ``torch.no_grad()``,
  on a fresh ``TensorDict(observation=[16, 32])`` per step (16 environments): a
  ``TensorDictSequential`` of an MLP module (Linear 32->64, Tanh, Linear 64->64, Tanh,
  Linear 64->16), a module splitting its output into ``loc`` and ``scale`` (softplus), and a
  ``ProbabilisticTensorDictModule`` sampling ``action`` from a Normal with its log-probability;
* **ppo loss**: a PPO-style loss on a batch tensordict of 256 transitions: actor (loc, scale) and
  critic modules write into a copy of the batch, then clipped ratio objective, value loss and
  entropy bonus as a tensordict of losses; the step is the compiled forward plus the backward of
  their sum (gradients zeroed after each step);
* **arithmetic + apply**: ``((td * 2 + 1).apply(sin) - td / 3).apply(relu)`` on a tensordict of
  ten [1000, 8] leaves, five of them nested.

Figures per workload: the first call of the compiled function (its compile time: Dynamo's trace
and inductor's code generation, with an empty inductor cache: each measuring process gets a fresh
``TORCHINDUCTOR_CACHE_DIR`` and compiles with one thread), then the median step time of the
compiled function and of the eager one. All are CPU time (the process's, plus the compiler
processes it waited for while compiling), not wall time: on a shared machine wall time also
counts the time other processes held the core, which moved single rounds by up to 40%.

The same file measures both packages: it starts itself with ``--measure`` once with this
interpreter and once with upstream's (``$TD_UPSTREAM_PYTHON``, default
``~/.cache/td-upstream-venv/bin/python``), in turn for several rounds so that machine noise hits
both alike; a ratio is the median over rounds of ours over upstream's figure of the same round.
The measuring part imports only torch and the ``tensordict`` of the interpreter running it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

UPSTREAM_PYTHON = Path(
    os.environ.get("TD_UPSTREAM_PYTHON", "~/.cache/td-upstream-venv/bin/python")
).expanduser()
WORKLOADS = ("policy", "ppo loss", "arithmetic + apply")
FIGURES = ("compile", "compiled step", "eager step")
BATCH = 256  # transitions in a loss batch
ENVS = 16  # environments a policy steps at once


# ====================================================================== the workloads
def _mlp(sizes: list[int]) -> Any:
    import torch

    layers: list[Any] = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        layers.append(torch.nn.Linear(n_in, n_out))
        if i < len(sizes) - 2:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


def _loc_scale() -> Any:
    import torch

    class LocScale(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            loc, scale = x.chunk(2, -1)
            return loc, torch.nn.functional.softplus(scale) + 1e-4

    return LocScale()


def _policy() -> tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]:
    import torch

    from tensordict import TensorDict
    from tensordict.nn import InteractionType
    from tensordict.nn import ProbabilisticTensorDictModule as Prob
    from tensordict.nn import TensorDictModule as Mod
    from tensordict.nn import TensorDictSequential as Seq

    policy = Seq(
        Mod(_mlp([32, 64, 64, 16]), ["observation"], ["params"]),
        Mod(_loc_scale(), ["params"], ["loc", "scale"]),
        Prob(
            in_keys=["loc", "scale"],
            out_keys=["action"],
            distribution_class=torch.distributions.Normal,
            return_log_prob=True,
            default_interaction_type=InteractionType.RANDOM,
        ),
    )
    obs = torch.randn(ENVS, 32)

    def step(fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(td: TensorDict) -> Any:
            with torch.no_grad():
                return fn(td)

        return run

    policy.step = step  # (see _measure_one)
    return policy, lambda: (TensorDict(observation=obs, batch_size=[ENVS]),)


def _ppo() -> tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]:
    import torch

    from tensordict import TensorDict
    from tensordict.nn import TensorDictModule as Mod

    actor = Mod(
        torch.nn.Sequential(_mlp([32, 64, 64, 16]), _loc_scale()), ["observation"], ["loc", "scale"]
    )
    critic = Mod(_mlp([32, 64, 64, 1]), ["observation"], ["state_value"])

    def loss(batch: TensorDict) -> TensorDict:
        td = critic(actor(batch.copy()))
        dist = torch.distributions.Normal(td["loc"], td["scale"], validate_args=False)
        log_prob = dist.log_prob(td["action"]).sum(-1)
        ratio = (log_prob - td["sample_log_prob"]).exp()
        adv = td["advantage"]
        surrogate = torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
        return TensorDict(
            loss_objective=-surrogate.mean(),
            loss_critic=(td["state_value"].squeeze(-1) - td["value_target"]).pow(2).mean(),
            loss_entropy=-0.01 * dist.entropy().sum(-1).mean(),
        )

    params = [*actor.parameters(), *critic.parameters()]
    batch = TensorDict(
        observation=torch.randn(BATCH, 32),
        action=torch.randn(BATCH, 8),
        sample_log_prob=torch.randn(BATCH),
        advantage=torch.randn(BATCH),
        value_target=torch.randn(BATCH),
        batch_size=[BATCH],
    )

    def step(fn: Callable[[TensorDict], TensorDict]) -> Callable[[TensorDict], Any]:
        def run(b: TensorDict) -> Any:
            losses = fn(b)
            sum(losses.values()).backward()
            for p in params:
                p.grad = None

        return run

    loss.step = step  # type: ignore[attr-defined]  # (forward + backward: see _measure_one)
    return loss, lambda: (batch,)


def _arithmetic() -> tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]:
    import torch

    from tensordict import TensorDict

    leaves = {f"k{i}": torch.randn(1000, 8) for i in range(5)}
    nested = {f"n{i}": torch.randn(1000, 8) for i in range(5)}
    td = TensorDict({**leaves, "nested": nested}, batch_size=[1000])

    def chain(td: TensorDict) -> TensorDict:
        return ((td * 2 + 1).apply(torch.sin) - td / 3).apply(torch.relu)

    return chain, lambda: (td,)


_BUILDERS = {"policy": _policy, "ppo loss": _ppo, "arithmetic + apply": _arithmetic}


# ====================================================================== measuring (one package)
def _cpu_s() -> float:
    """CPU seconds of this process and of the children it waited for (inductor's compiler runs).

    Steps and compiles are timed in CPU time, not wall time: the machine may be shared, and a
    process's CPU time leaves out the time other processes held the core (one torch thread, one
    compile thread: the work itself is serial).
    """
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _step_us(fn: Callable[[], Any], repeat: int) -> float:
    """Median CPU microseconds per call over ``repeat`` runs of enough calls to last ~50 ms."""
    number = 1
    while True:
        t0 = time.process_time()
        for _ in range(number):
            fn()
        if time.process_time() - t0 > 0.05:
            break
        number *= 2
    samples = []
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(number):
            fn()
        samples.append((time.process_time() - t0) / number * 1e6)
    return statistics.median(samples)


def _measure_one(name: str, repeat: int) -> dict[str, float]:
    import torch

    fn, args = _BUILDERS[name]()
    wrap = getattr(fn, "step", lambda f: f)  # policy: under no_grad; loss: forward + backward
    compiled = torch.compile(fn, fullgraph=True)
    eager_step, compiled_step = wrap(fn), wrap(compiled)
    eager_step(*args())
    t0 = _cpu_s()
    compiled_step(*args())
    compile_s = _cpu_s() - t0
    for _ in range(3):
        compiled_step(*args())
    return {
        "compile": compile_s,
        "compiled step": _step_us(lambda: compiled_step(*args()), repeat),
        "eager step": _step_us(lambda: eager_step(*args()), repeat),
    }


def measure(repeat: int) -> dict[str, dict[str, float]]:
    """Compile seconds and step microseconds per workload (in this interpreter's tensordict)."""
    import warnings

    import torch

    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    return {name: _measure_one(name, repeat) for name in WORKLOADS}


# ====================================================================== both packages, in turn
def _package_path(python: Path | str) -> str | None:
    """The ``PYTHONPATH`` the measuring process needs: for this interpreter, the folder of the
    ``tensordict`` this process imported (a work tree's ``src`` may not be the installed one);
    for upstream's, none (an inherited one would make it import ours)."""
    if str(python) != sys.executable:
        return None
    import tensordict

    return str(Path(tensordict.__file__).resolve().parents[1])


def _measure_in(python: Path | str, repeat: int) -> dict[str, dict[str, float]]:
    # (here: this file also runs as a script under upstream's interpreter, which has no
    # benchmarks package on its path)
    from benchmarks.timing import run_json

    script = str(Path(__file__).resolve())
    with tempfile.TemporaryDirectory(prefix="td-bench-inductor-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        path = _package_path(python)
        if path is not None:
            env["PYTHONPATH"] = path
        env = {
            **env,
            "PYTHONWARNINGS": "ignore",
            "TORCHINDUCTOR_CACHE_DIR": cache,  # a cold compile, whoever ran before
            "TORCHINDUCTOR_COMPILE_THREADS": "1",
            "OMP_NUM_THREADS": "1",
        }
        cmd = [str(python), script, "--measure", "--repeat", str(repeat)]
        result: dict[str, dict[str, float]] = run_json(cmd, env)
    return result


def run(rounds: int = 3, repeat: int = 7) -> dict[str, Any]:
    """Rounds of (ours, upstream) measurements; per workload and figure: medians and ratios."""
    have_upstream = UPSTREAM_PYTHON.exists()
    samples: dict[str, list[dict[str, dict[str, float]]]] = {"ours": [], "upstream": []}
    for _ in range(rounds):
        samples["ours"].append(_measure_in(sys.executable, repeat))
        if have_upstream:
            samples["upstream"].append(_measure_in(UPSTREAM_PYTHON, repeat))
    rows = []
    for workload in WORKLOADS:
        for figure in FIGURES:
            scale, unit = (1.0, "s") if figure == "compile" else (1.0, "µs")
            ours = [s[workload][figure] * scale for s in samples["ours"]]
            row: dict[str, Any] = {"name": f"{workload}: {figure}", "unit": unit, **_stats(ours)}
            ratios: dict[str, float] = {}
            if samples["upstream"]:
                up = [s[workload][figure] * scale for s in samples["upstream"]]
                row["upstream"] = statistics.median(up)
                ratios["upstream"] = statistics.median(o / u for o, u in zip(ours, up))
            if figure == "compiled step":
                eager = [s[workload]["eager step"] for s in samples["ours"]]
                ratios["eager"] = statistics.median(c / e for c, e in zip(ours, eager))
            row["ratios"] = ratios
            rows.append(row)
    return {
        "rows": rows,
        "rounds": rounds,
        "samples": samples,
        "upstream_python": str(UPSTREAM_PYTHON) if have_upstream else None,
    }


def _stats(samples: list[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", action="store_true", help="measure in this interpreter")
    parser.add_argument("--quick", action="store_true", help="one round, fewer repeats")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.repeat)))
        return
    raw = run(rounds=1 if args.quick else 3, repeat=3 if args.quick else args.repeat)
    print(f"{'figure':<36} {'ours':>10} {'upstream':>10} {'ratio':>7} {'vs eager':>9}")
    for r in raw["rows"]:
        up = f"{r['upstream']:.4g}" if "upstream" in r else "-"
        ratio = f"{r['ratios']['upstream']:.2f}x" if "upstream" in r["ratios"] else "-"
        eager = f"{r['ratios']['eager']:.2f}x" if "eager" in r["ratios"] else ""
        label = f"{r['name']} ({r['unit']})"
        print(f"{label:<36} {r['median']:>10.4g} {up:>10} {ratio:>7} {eager:>9}")


if __name__ == "__main__":
    main()
