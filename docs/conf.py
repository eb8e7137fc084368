"""Sphinx configuration of the tensordict docs (``make docs``; see contributing.md for why Sphinx).

Pages are MyST Markdown; the API reference is generated from the docstrings (autodoc,
autosummary, napoleon for the Google style). The performance charts are drawn from
``benchmarks/results.json`` when the build starts (``charts.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))  # this tree's package, whatever is installed
sys.path.insert(0, str(HERE))

import tensordict  # noqa: E402

project = "tensordict"
author = "the tensordict contributors"
copyright = "2026, the tensordict contributors"
release = version = tensordict.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "xref",  # docs/xref.py: references resolved by object (a broken one still fails the build)
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "README.md", "Thumbs.db", ".DS_Store"]
templates_path = ["_templates"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"tensordict {release}"
html_theme_options = {"navigation_with_keys": True}

# -- API reference
autosummary_generate = True
autosummary_imported_members = True
# the whole API is listed once, on these classes' pages (the others list what they add)
autosummary_context = {"full_api": ["TensorDict", "TensorClass"]}
autodoc_typehints = "signature"
autodoc_docstring_signature = (
    False  # a docstring's first line is prose, never a signature
)
autodoc_member_order = "groupwise"
autodoc_default_options = {"show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

# -- every cross-reference to this package must resolve (a broken internal link fails the
# build); names of other packages (torch, numpy, typing, ...) are not linked: no network here
nitpicky = True
_OUTSIDE = (
    r"(torch|numpy|np|typing|typing_extensions|collections|builtins|os|pathlib|multiprocessing"
    r"|concurrent|enum|abc|types|functools|contextlib|dataclasses|io|socket|ray|h5py|zarr"
    r"|pyarrow|pandas|pd|redis|safetensors|weakref|argparse|json|tqdm)(\..*)?"
)
nitpick_ignore_regex = [
    (r"py:.*", _OUTSIDE),
    (
        r"py:.*",
        r"(Any|Callable|Iterator|Iterable|Sequence|Mapping|MutableMapping|Tensor|Size)",
    ),
    (
        r"py:.*",
        r"(Module|Parameter|Deprecated|zipfile|nn\.Module|ndarray|Tensor\..*|Delta)",
    ),
    # words of the docstrings that torch.Tensor's methods pass down to UnbatchedTensor
    (r"py:.*", r"(number|list or number|seq|List of Tensors|force)"),
    # upstream's namespaces kept for compatibility, and the views keys()/values()/items() return
    (
        r"py:class",
        r"tensordict\.utils\.\w+|TensorDictFuture|tensordict\.core\.keys\.\w+View",
    ),
    (r"py:class", r"tensordict\.formats\.backed\.BackedTensorDict"),
    (r"py:.*", r".*\.(InputClass|OutputClass|TruncatedStandardNormal)"),
    # base classes and helpers that are not public (mixins, private names): not documented
    (r"py:class", r"tensordict\..*\.(_\w+|\w+Mixin)"),
    # modules named in docstrings for readers of the source; the reference documents names
    (r"py:mod", r"tensordict\..*"),
    (
        r"py:.*",
        r"(int|float|str|bool|bytes|dict|list|tuple|set|type|object|None|slice)",
    ),
    # TypeVars of annotations, and words of the Google style's type fields ("x (int, optional)")
    (r"py:.*", r"(.*\.)?(T|T_co|P|R|_T|S)"),
    (
        r"py:.*",
        r"(self|optional|string|callable|iterable|sequence|array|scalar|tensor)",
    ),
]


def setup(app):
    import charts  # docs/charts.py: the performance page's pictures

    app.connect("builder-inited", lambda app: charts.draw_all(HERE / "_generated"))
    return {"parallel_read_safe": True}
