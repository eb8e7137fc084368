"""The docs site: it builds with warnings as errors, no internal link is broken, and the code of
the guides runs.

The build is Sphinx's (``make docs``), with ``nitpicky`` cross-references: a reference to a name
of this package that resolves nowhere is a warning, hence a failure. Links between the built
pages (``href``/``src``, with their ``#fragment``) are then checked on the HTML itself, which
Sphinx's own linkcheck would do over the network.
"""

from __future__ import annotations

import html.parser
import os
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md"))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The built site (one build for the module's tests)."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(DOCS)])}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-n",
            "-q",
            "-j",
            "2",
            "-b",
            "html",
            "-d",
            str(out / "doctrees"),
            str(DOCS),
            str(out / "html"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert res.returncode == 0, f"the docs build warned or failed:\n{res.stdout}\n{res.stderr}"
    assert res.stderr.strip() == "", res.stderr
    return out / "html"


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if name in ("href", "src") and value:
                self.links.append(value)


def parse(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def test_the_site_has_the_guides_the_api_and_the_charts(site: Path) -> None:
    for name in (
        "index",
        "getting-started",
        "map-iter",
        "memmap",
        "formats-and-stores",
        "nn-and-torchrl",
        "migrating-from-upstream",
        "performance",
        "contributing",
        "changelog",
        "api/index",
    ):
        assert (site / f"{name}.html").is_file(), name
    api = (site / "api" / "generated").glob("*.html")
    assert len(list(api)) > 120  # a page per public name
    perf = parse(site / "performance.html")
    charts = [link for link in perf.links if link.endswith(".svg")]
    assert len(set(charts)) == 3


def test_no_internal_link_is_broken(site: Path) -> None:
    pages = {page: parse(page) for page in site.rglob("*.html")}
    broken = []
    for page, parsed in pages.items():
        for link in parsed.links:
            url = urllib.parse.urlsplit(link)
            if url.scheme or link.startswith(("//", "mailto:", "data:")):
                continue  # outside the site
            target = (page.parent / urllib.parse.unquote(url.path)).resolve() if url.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)}: {link}")
            elif url.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else parse(target).ids
                if url.fragment not in ids:
                    broken.append(f"{page.relative_to(site)}: {link} (no #{url.fragment})")
    assert not broken, "\n".join(broken[:50])
    assert sum(len(p.links) for p in pages.values()) > 1000


def test_every_public_name_has_a_page(site: Path) -> None:
    import tensordict

    generated = {p.stem for p in (site / "api" / "generated").glob("*.html")}
    missing = []
    for name in tensordict.__all__:
        value = getattr(tensordict, name)
        if type(value).__name__ == "module":
            continue
        if not any(page.rsplit(".", 1)[-1] == name for page in generated):
            missing.append(name)
    assert not missing, missing


def blocks(page: Path) -> list[tuple[int, str]]:
    """The ```python blocks of ``page``: (line, code)."""
    text = page.read_text()
    out = []
    for match in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        out.append((text[: match.start()].count("\n") + 2, match.group(1)))
    return out


def test_the_guides_have_code() -> None:
    assert sum(len(blocks(p)) for p in PAGES) >= 20


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p)], ids=lambda p: p.name)
def test_the_code_of_a_guide_runs(page: Path, tmp_path: Path) -> None:
    """The page's blocks run in order, as one script (a block may use an earlier one's names)."""
    parts = [f"# --- {page.name}, line {line}\n{code}" for line, code in blocks(page)]
    script = tmp_path / f"{page.stem.replace('-', '_')}.py"
    script.write_text("\n".join(parts).replace("/tmp/", f"{tmp_path}/"))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    res = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert res.returncode == 0, res.stdout + res.stderr
