"""README.md and every page of docs/ stay true: each ```python block runs as written (a fresh interpreter
each), each relative link reaches a file and, with a #fragment, a heading of it, and each docs page that
quotes a timing or a speed-up (each `## ` section of a page) names the command that produces it.

The indented shell blocks (setup, build, CMake, benchmark commands) are not run here: they build or time
things, and CI runs the same commands through scripts/."""

import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


def python_blocks(page: pathlib.Path) -> list[tuple[int, str]]:
    text = page.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, m.start()) + 2, m.group(1))
        for m in re.finditer(r"^```python\n(.*?)^```$", text, re.M | re.S)
    ]


BLOCKS = [(page, line, code) for page in PAGES for line, code in python_blocks(page)]


def test_readme_has_a_python_block():
    assert python_blocks(README), "README.md lost its standalone API example"


@pytest.mark.parametrize("page,line,code", BLOCKS, ids=[f"{page.relative_to(ROOT)}:{line}" for page, line, _ in BLOCKS])
def test_block_runs(page, line, code, tmp_path):
    if ("VideoProcessor(" in code or "FusedHFGeneric" in code) and importlib.util.find_spec("torchvision") is None:
        pytest.skip(
            "transformers' video processors and torchvision-backend image processors (the block's reference) need "
            "torchvision, not installed here"
        )
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{page.relative_to(ROOT)}:{line} failed:\n{result.stderr[-3000:]}"


def heading_anchors(page: pathlib.Path) -> set[str]:
    """The #fragments GitHub gives a page's headings: lowercased, punctuation but - and _ dropped, spaces to -,
    a repeated one suffixed -1, -2, ... (headings inside fenced code blocks are code, not headings)."""
    text = re.sub(r"^```.*?^```$", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    anchors: set[str] = set()
    for title in re.findall(r"^#{1,6} +(.+?) *#*$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in anchors:
            n += 1
            anchor = f"{slug}-{n}"
        anchors.add(anchor)
    return anchors


def relative_links(page: pathlib.Path) -> list[str]:
    text = re.sub(r"^```.*?^```$", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans are not links
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def dead_links(page: pathlib.Path) -> list[str]:
    dead = []
    for link in relative_links(page):
        path, _, fragment = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            dead.append(f"{link} (no such file)")
        elif fragment and target.suffix == ".md" and fragment not in heading_anchors(target):
            dead.append(f"{link} (no such heading in {target.name})")
    return dead


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_reach_their_targets(page):
    assert not dead_links(page), f"{page.relative_to(ROOT)}: dead links: {dead_links(page)}"


def test_the_link_check_can_fail(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\n## Its `second` part: here\n\n[ok](#its-second-part-here) [gone](missing.md) [bad](#nowhere)"
        " [web](https://example.com/x.md) `[code](missing.md)`\n"
    )
    assert dead_links(page) == ["missing.md (no such file)", "#nowhere (no such heading in page.md)"]


# A quoted measurement: a time ("12.5 ms", "80.1 us") or a ratio ("2.35x", "3x").
FIGURE = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|us)\b|\b\d+(?:\.\d+)?x\b")
# What produces one: a script of this repository, the benchmark module, the demo, or a test file whose
# long-probe mode prints the figures (FUSED_INPUT_NORM_LONG_PROBES=1).
PRODUCER = re.compile(r"(?:scripts|tests)/\w+\.(?:py|sh)|fused_input_norm\.bench|fused_input_norm\.demo")


def sections(page: pathlib.Path) -> list[str]:
    """The page cut at its `## ` headings (a section keeps its `###` subsections), code blocks left out."""
    text = re.sub(r"^```.*?^```$", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return re.split(r"^(?=## )", text, flags=re.M)


def unsourced_figures(page: pathlib.Path) -> list[str]:
    return [
        f"{section.splitlines()[0][:60]!r} quotes {FIGURE.search(section).group(0)}"
        for section in sections(page)
        if FIGURE.search(section) and not PRODUCER.search(section)
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_section_quoting_figures_names_what_produces_them(page):
    assert not unsourced_figures(page), (
        f"{page.relative_to(ROOT)}: figures without their script: {unsourced_figures(page)}"
    )


def test_the_figure_check_can_fail(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# t\n\n## measured\n\n1080p 2.35x, 80.1 us.\n\n## sourced\n\n3x (`scripts/bench_vllm.py`).\n")
    assert unsourced_figures(page) == ["'## measured' quotes 2.35x"]
