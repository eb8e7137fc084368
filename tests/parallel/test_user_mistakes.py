"""A new user's mistakes with map/map_iter get errors that name the cause and the fix.

- ``fn`` returns something other than a tensordict, a tensorclass, a tensor or None:
  :class:`ResultTypeError` (a TypeError) naming ``fn``, the chunk and the type, before anything
  is yielded for that chunk or written to ``out``.
- A worker fails before its first chunk (``fn`` not importable, no main guard, a script read
  from stdin): :class:`WorkerStartError` (a WorkerDiedError) in three lines, with the worker's
  traceback as ``__cause__``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from tensordict import TensorDict
from tensordict.errors import ResultTypeError, WorkerDiedError, WorkerStartError
from tensordict.parallel import WorkerPool
from tests.parallel import helpers


def source(n: int = 8) -> TensorDict:
    return TensorDict({"x": torch.arange(float(n))}, [n])


# ---------------------------------------------------------------------- what fn returns
@pytest.mark.parametrize(
    ("fn", "type_name"),
    [
        (helpers.return_dict, "dict"),
        (helpers.return_int, "int"),
        (helpers.return_list_of_tensordicts, "list"),
    ],
)
def test_map_iter_refuses_a_result_that_is_not_a_tensordict_tensor_or_none(fn, type_name):
    with pytest.raises(ResultTypeError) as info:
        list(source().map_iter(fn, num_workers=2, chunksize=4, generator=torch.Generator()))
    message = str(info.value)
    assert fn.__qualname__ in message and f"a {type_name} " in message and "chunk 0" in message
    assert isinstance(info.value, TypeError)


def test_a_dict_result_is_told_how_to_wrap_it():
    with pytest.raises(ResultTypeError, match=r"TensorDict\(result, batch_size="):
        source().map(helpers.return_dict, num_workers=2, chunksize=4, generator=torch.Generator())


def test_map_names_fn_and_the_chunk_instead_of_failing_in_concatenation():
    with pytest.raises(ResultTypeError, match="return_int returned a int for chunk 0"):
        source().map(helpers.return_int, num_workers=2, chunksize=4, generator=torch.Generator())


@pytest.mark.parametrize("kind", ["memmap", "plain"])
def test_a_wrong_result_writes_nothing_into_out(kind, tmp_path):
    td = source()
    out = td.clone().zero_()
    if kind == "memmap":
        out = out.memmap_like(str(tmp_path / "out"))
    out["x"].fill_(7.0)
    with pytest.raises(ResultTypeError):
        td.map(
            helpers.return_dict,
            num_workers=2,
            chunksize=4,
            out=out,
            generator=torch.Generator(),
        )
    assert (out["x"] == 7.0).all()


def test_results_that_are_tensors_tensorclasses_or_none_still_pass():
    td = source()
    kw = {"num_workers": 2, "chunksize": 4, "generator": torch.Generator()}
    got = list(td.map_iter(helpers.as_tensor, **kw))
    assert torch.equal(torch.cat(got), td["x"] * 2)
    assert td.map(helpers.return_none, **kw) is None


def test_a_wrong_result_in_a_persistent_pool_leaves_the_pool_usable():
    td = source()
    with WorkerPool(2, generator=torch.Generator()) as pool:
        with pytest.raises(ResultTypeError):
            list(td.map_iter(helpers.return_int, chunksize=4, pool=pool))
        again = [r["y"] for r in td.map_iter(helpers.add_one, chunksize=4, pool=pool)]
    assert torch.equal(torch.cat(again), td["x"] + 1)


# ---------------------------------------------------------------------- workers that cannot start
def run_script(tmp_path, code: str, *, stdin: bool = False) -> subprocess.CompletedProcess:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(code))
    args = [sys.executable, "-"] if stdin else [sys.executable, str(script)]
    return subprocess.run(
        args,
        input=script.read_text() if stdin else None,
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )


REPORT = textwrap.dedent(
    """
    import sys, traceback
    import torch
    from tensordict import TensorDict
    from tensordict.errors import WorkerStartError

    def double(chunk):
        return chunk * 2

    def main():
        td = TensorDict({"x": torch.zeros(8)}, [8])
        try:
            list(td.map_iter(double, num_workers=2, chunksize=4, mp_start_method="spawn",
                             generator=torch.Generator()))
        except WorkerStartError as err:
            print("ERROR", type(err).__mro__[1].__name__)
            print(str(err))
            print("CAUSE", type(err.__cause__).__name__)
            print(str(err.__cause__))
            sys.exit(0)
        print("NO ERROR")
"""
)


def test_missing_main_guard_raises_worker_start_error_naming_the_guard(tmp_path):
    res = run_script(tmp_path, REPORT + "\nmain()\n")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "ERROR WorkerDiedError"
    message = lines[1:4]
    assert "failed before its first chunk" in message[0] and "__main__" in message[0]
    assert message[2].startswith("Fix:")
    assert lines[4] == "CAUSE RemoteTraceback"
    assert "job.py" in res.stdout.split("CAUSE", 1)[1]  # the line of the script that starts them
    assert "died while processing" not in res.stdout


def test_script_read_from_stdin_raises_worker_start_error_naming_the_import(tmp_path):
    res = run_script(tmp_path, REPORT + "\nif __name__ == '__main__':\n    main()\n", stdin=True)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "ERROR WorkerDiedError"
    assert "could not import fn" in lines[1] and "double" in lines[1]
    assert "stdin" in lines[2] and lines[3].startswith("Fix:")
    assert lines[4] == "CAUSE RemoteTraceback"
    assert "AttributeError" in res.stdout.split("CAUSE", 1)[1]


def test_script_from_stdin_with_an_importable_fn_runs_under_spawn(tmp_path):
    code = """
        import operator, torch
        from tensordict import TensorDict
        if __name__ == "__main__":
            td = TensorDict({"x": torch.ones(8)}, [8])
            out = td.map(operator.neg, num_workers=2, chunksize=4, mp_start_method="spawn",
                         generator=torch.Generator())
            print(out["x"].sum().item())
    """
    res = run_script(tmp_path, code, stdin=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "-8.0"


def test_worker_start_error_is_a_worker_died_error_without_a_chunk():
    assert issubclass(WorkerStartError, WorkerDiedError)
    from tensordict.parallel.startup import start_error

    err = start_error(1, 99, "spawn", "with exit code 1")
    assert err.chunk is None and err.pid == 99
    assert len(str(err).splitlines()) == 3


def test_a_worker_dying_before_it_is_ready_is_not_reported_as_dying_in_a_chunk(tmp_path):
    """A failure nothing reports (here: the script exits while the spawned worker imports it)."""
    code = """
        import sys, torch
        from tensordict import TensorDict
        from tensordict.errors import WorkerStartError

        if __name__ != "__main__":
            sys.exit(1)  # the worker's import of this script fails

        def double(chunk):
            return chunk * 2

        td = TensorDict({"x": torch.zeros(8)}, [8])
        try:
            list(td.map_iter(double, num_workers=1, chunksize=4, mp_start_method="spawn",
                             generator=torch.Generator()))
        except WorkerStartError as err:
            print(str(err).splitlines()[0])
    """
    res = run_script(tmp_path, code)
    assert res.returncode == 0, res.stderr
    assert "failed before its first chunk" in res.stdout
    assert "before it was ready" in res.stdout
