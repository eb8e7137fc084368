"""Resolve the package's cross-references by object, not only by the name written.

Docstrings name objects where their code lives (``tensordict.core.lazy.shape.maybe_dense_stack``)
or by a short path (``TensorDictBase.apply``), while the reference documents each under the name
users import (``tensordict.maybe_dense_stack``). When Sphinx cannot resolve a Python reference,
:func:`resolve` looks for a documented object that is the same object, or whose name ends with
the written one (when that match is unique); otherwise the reference stays broken, and the build
fails on it (``nitpicky`` with warnings as errors): a broken internal link is still caught.
"""

from __future__ import annotations

import importlib
from typing import Any

from docutils import nodes


def _import(path: str) -> Any:
    """The object named by the dotted ``path``, or None."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except Exception:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _same(a: Any, b: Any) -> bool:
    a, b = getattr(a, "__func__", a), getattr(b, "__func__", b)
    return a is b


#: the object types a role may point at
_TYPES = {
    "func": ("function",),
    "class": ("class", "exception"),
    "exc": ("exception", "class"),
    "meth": ("method", "classmethod", "staticmethod", "property"),
    "attr": ("attribute", "property", "data"),
    "obj": (
        "function",
        "class",
        "exception",
        "method",
        "attribute",
        "property",
        "data",
    ),
    "data": ("data", "attribute"),
}


def _pick(names: list[str]) -> str | None:
    """The shortest of ``names`` if they all name one object (aliases), else None."""
    names = sorted(names, key=len)
    first = _import(names[0])
    if first is None or not all(_same(_import(n), first) for n in names[1:]):
        return None
    return names[0]


def _find(objects: dict[str, Any], target: str, role: str) -> str | None:
    """The documented name ``target`` means (see the module docstring), or None."""
    types = _TYPES.get(role, _TYPES["obj"])
    names = [n for n, e in objects.items() if not e.aliased and e.objtype in types]
    by_suffix = [n for n in names if n == target or n.endswith("." + target)]
    if (
        not by_suffix and "TensorDictBase." in target
    ):  # the API is listed on TensorDict's page
        return _find(objects, target.replace("TensorDictBase.", "TensorDict."), role)
    if by_suffix:
        return by_suffix[0] if len(by_suffix) == 1 else _pick(by_suffix)
    obj = _import(target) if target.startswith("tensordict.") else None
    if obj is None:
        return None
    tail = target.rsplit(".", 1)[-1]
    same = [n for n in names if n.rsplit(".", 1)[-1] == tail and _same(_import(n), obj)]
    return min(same, key=len) if same else None


def resolve(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """``missing-reference`` handler for the ``py`` domain (see the module docstring)."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    objects = env.get_domain(
        "py"
    ).objects  # name -> (docname, node_id, objtype, aliased)
    name = _find(objects, target, node.get("reftype", "obj"))
    if name is None:
        return None
    entry = objects[name]
    ref = nodes.reference("", "", internal=True)
    uri = app.builder.get_relative_uri(node["refdoc"], entry.docname)
    ref["refuri"] = f"{uri}#{entry.node_id}"
    ref["reftitle"] = name
    ref.append(contnode)
    return ref


def setup(app: Any) -> dict[str, Any]:
    app.connect("missing-reference", resolve)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
