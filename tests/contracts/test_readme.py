"""The README and the docs/ pages work as written: their Python blocks run, their tau_* YAML blocks are valid
config, their links lead somewhere, the Quick start holds exactly the two set-up commands, and the README stays a
front page (at most 400 lines; the rest is one docs/ page per topic)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from slime_tau_plugin.adapters.slime.args import config_from_args

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
"""The README first, then every docs/ page: what a reader is told to run."""
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")
FRONT_PAGE_LINES = 400


def blocks(language: str) -> list[str]:
    return [
        body for page in PAGES for lang, body in BLOCK.findall(page.read_text(encoding="utf-8")) if lang == language
    ]


def test_quick_start_has_the_two_commands():
    section = README.read_text(encoding="utf-8").split("## Quick start", 1)[1].split("\n## ", 1)[0]
    (commands,) = BLOCK.findall(section)
    lines = [line for line in commands[1].splitlines() if line.strip()]
    assert len(lines) == 2
    assert lines[0].endswith("bash scripts/install.sh && slime-tau rollout")
    assert lines[1].endswith("bash scripts/test.sh")


@pytest.mark.parametrize("code", blocks("python"), ids=lambda code: code.splitlines()[0][:40])
def test_python_blocks_run_as_written(code, tmp_path, tau2_backend):
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Unclosed" not in done.stderr, done.stderr[-3000:]
    assert "user_stop 1.0" in done.stdout


def test_tau_yaml_blocks_are_valid_config():
    checked = 0
    for body in blocks("yaml"):
        if not re.search(r"^tau_\w+:", body, re.MULTILINE):  # slime's eval YAML excerpts, abbreviated with "..."
            continue
        values = yaml.safe_load(body)
        if not isinstance(values, dict) or not any(str(k).startswith("tau_") for k in values):
            continue
        config_from_args(SimpleNamespace(**values))  # raises on an unknown key or a bad value
        checked += 1
    assert checked >= 2


def test_the_readme_is_a_front_page_that_links_every_docs_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= FRONT_PAGE_LINES, "move the detail to a docs/ page and link it"
    linked = {target.split("#", 1)[0] for target in LINK.findall(text)}
    unlinked = [page.relative_to(ROOT).as_posix() for page in PAGES[1:]]
    assert not [page for page in unlinked if page not in linked], "every docs/ page is reachable from the README"


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens (code blocks hold no headings)."""
    text = BLOCK.sub("", page.read_text(encoding="utf-8"))
    headings = re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_leads_to_a_file_and_heading(page: Path):
    broken = []
    for target in LINK.findall(BLOCK.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):  # https://...
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"
