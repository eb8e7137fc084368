"""The layout of ``tensordict.core``: its rooms and the one direction of its imports.

core/ is read in tiers (see ``tensordict/core/__init__.py``): a module may import, at module
level, only modules of its own tier or lower ones. Code below the concrete classes reaches them
through ``core.factory`` and binds methods implemented higher up through the forwarding table of
``core.behaviour.forwards``; these two are the only places where core reaches up. Function-local
imports stay few, and each says why on its line or the line above.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "src" / "tensordict" / "core"

# lowest first: a module may import its own tier and the tiers before it
TIERS: list[tuple[str, ...]] = [
    ("collection", "options", "indexing", "batch_shape", "unbatched", "factory"),
    ("nontensor",),
    ("keys", "checks"),
    ("behaviour",),
    ("dense",),
    ("typed", "lazy"),
    ("functional",),
    ("serial",),
]
# the modules allowed to import from any tier, late (each import commented)
REACH_UP = {"factory", "behaviour.forwards"}
MAX_LOCAL_IMPORTS = 40
MAX_TOP_LEVEL_ENTRIES = 16


def _tier(module: str) -> int:
    head = module.split(".")[0]
    for rank, names in enumerate(TIERS):
        if head in names:
            return rank
    raise AssertionError(f"tensordict.core.{module} is in no tier of tests/test_layout.py")


def _core_modules() -> dict[str, Path]:
    out = {}
    for path in CORE.rglob("*.py"):
        rel = path.relative_to(CORE).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        if parts:
            out[".".join(parts)] = path
    return out


def _imports(path: Path) -> list[tuple[str, int, bool, bool]]:
    """``(core module imported, line, is function-local, under TYPE_CHECKING)`` per import."""
    found: list[tuple[str, int, bool, bool]] = []

    def visit(node: ast.AST, local: bool, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            is_local = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            typing = typing_only or (
                isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)
            )
            if isinstance(child, ast.ImportFrom) and child.module == "tensordict.core":
                for alias in child.names:  # ``from tensordict.core import factory``
                    found.append((alias.name, child.lineno, is_local, typing))
            elif isinstance(child, ast.ImportFrom) and child.module:
                mod = child.module
                if mod.startswith("tensordict.core."):
                    name = mod[len("tensordict.core.") :]
                    found.append((name, child.lineno, is_local, typing))
                elif mod.startswith("tensordict.") or mod == "tensordict":
                    found.append(("<outside core> " + mod, child.lineno, is_local, typing))
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.startswith("tensordict"):
                        found.append(
                            ("<outside core> " + alias.name, child.lineno, is_local, typing)
                        )
            visit(child, is_local, typing)

    visit(ast.parse(path.read_text()), False, False)
    return found


MODULES = _core_modules()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_level_imports_point_down(module: str) -> None:
    rank = _tier(module)
    for target, line, local, typing_only in _imports(MODULES[module]):
        if local or typing_only:
            continue
        assert not target.startswith("<outside core>") or target.endswith(("tensordict.errors",)), (
            f"core.{module}:{line} imports {target[15:]} at module level: core builds below it"
        )
        if not target.startswith("<outside core>"):
            assert _tier(target) <= rank, (
                f"core.{module}:{line} imports core.{target} (a higher tier) at module level: "
                "go through core.factory or the forwarding table of core.behaviour.forwards"
            )


def test_local_imports_are_few_and_explained() -> None:
    local = []
    for module, path in MODULES.items():
        lines = path.read_text().splitlines()
        for target, line, is_local, _ in _imports(path):
            if not is_local:
                continue
            local.append(f"core.{module}:{line}")
            text = lines[line - 1] + "\n" + lines[line - 2]
            assert "#" in text, f"core.{module}:{line}: a local import needs a comment saying why"
            if module in REACH_UP or target.startswith("<outside core>"):
                continue
            assert _tier(target) <= _tier(module), (
                f"core.{module}:{line} reaches up to core.{target} late: use core.factory"
            )
    assert len(local) < MAX_LOCAL_IMPORTS, local


def test_upward_reach_outside_core_only_through_factory_and_forwards() -> None:
    for module, path in MODULES.items():
        if module in REACH_UP:
            continue
        for target, line, _local, typing_only in _imports(path):
            if typing_only or not target.startswith("<outside core>"):
                continue
            assert target.endswith("tensordict.errors"), (
                f"core.{module}:{line} imports {target[15:]}: packages above core are reached "
                "through core.factory or the forwarding table"
            )


def test_core_top_level_stays_small() -> None:
    entries = [p for p in CORE.iterdir() if p.name != "__pycache__"]
    assert len(entries) <= MAX_TOP_LEVEL_ENTRIES, sorted(p.name for p in entries)


@pytest.mark.parametrize("room", ["behaviour", "lazy", "nontensor", "serial"])
def test_each_room_says_what_it_owns_and_may_import(room: str) -> None:
    doc = ast.get_docstring(ast.parse((CORE / room / "__init__.py").read_text())) or ""
    assert "Imports" in doc and len(doc.splitlines()) >= 3, doc
