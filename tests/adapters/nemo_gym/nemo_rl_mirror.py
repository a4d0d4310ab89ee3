"""What NeMo RL does with a NeMo Gym ``/run`` answer, mirrored for tests: NeMo RL itself (torch, ray, vLLM) cannot be
installed in this CPU venv, so these functions restate, in plain Python, the code paths of NVIDIA-NeMo/RL at commit
7ea279abfbeb (Aug 2026) that decide whether a Gym row trains, is dropped, or stops the run. Each names its original;
none is imported from NeMo RL, and each keeps the original's failure behaviour (the assertion, the ``ValueError``,
the ``float(reward)``), since that is what the tests check our answers against.
"""

from __future__ import annotations

from typing import Any

RETRIABLE_HTTP_STATUSES = frozenset({408, 429})


def postprocess(result: dict[str, Any]) -> dict[str, Any]:
    """``NemoGym._postprocess_nemo_gym_to_nemo_rl_result`` (``nemo_rl/environments/nemo_gym.py``), token part: each
    output item with non-empty ``generation_token_ids`` becomes a user message (its new prompt ids) and an assistant
    message (ids, log-probs); each prompt must extend everything seen (the "Non-contiguous messages" assertion); a
    result with no such item is a ``ValueError`` ("NeMo Gym returned a result with no generation data")."""
    message_log: list[dict[str, Any]] = []
    seen: list[int] = []
    for item in result["response"]["output"]:
        if not item.get("generation_token_ids"):  # _is_trainable_output_item
            continue
        assert seen == item["prompt_token_ids"][: len(seen)], "Non-contiguous messages found!"
        new_prompt = item["prompt_token_ids"][len(seen) :]
        message_log.append({"role": "user", "token_ids": list(new_prompt)})
        message_log.append(
            {
                "role": "assistant",
                "token_ids": list(item["generation_token_ids"]),
                "generation_logprobs": [float(x) for x in item["generation_log_probs"]],
            }
        )
        seen += list(new_prompt) + list(item["generation_token_ids"])
    if not message_log:
        raise ValueError("NeMo Gym returned a result with no generation data.")
    return {"message_log": message_log, "full_result": result}


def rewards(results: list[dict[str, Any]]) -> list[float]:
    """The reward column: ``float(result["full_result"]["reward"])`` (``RolloutManager._result_to_completion``;
    the batched path builds ``torch.tensor([r["full_result"]["reward"] ...])``): a null reward raises."""
    return [float(r["full_result"]["reward"]) for r in results]


def mask_sample_flags(results: list[dict[str, Any]]) -> list[bool]:
    """``_extract_mask_sample_flags`` (``nemo_rl/experience/rollouts.py``): ``instance_config.mask_sample``."""
    return [bool((r["full_result"].get("instance_config") or {}).get("mask_sample", False)) for r in results]


def apply_mask_sample_filter(loss_multiplier: list[float], mask_sample: list[bool]) -> list[float]:
    """``_apply_mask_sample_filter`` (``nemo_rl/algorithms/grpo.py``): a flagged row's loss multiplier becomes 0."""
    return [0.0 if masked else m for m, masked in zip(loss_multiplier, mask_sample, strict=True)]


def http_status_is_infra(status: int) -> bool:
    """``http_status_is_infra`` (``nemo_rl/experience/failures.py``): 5xx, 408 and 429 are infrastructure."""
    return status >= 500 or status in RETRIABLE_HTTP_STATUSES


def flat(result: dict[str, Any]) -> tuple[list[int], list[int], list[float]]:
    """The postprocessed message log as one sequence: ids, loss mask (assistant ids 1), log-probs (0 elsewhere)."""
    ids: list[int] = []
    mask: list[int] = []
    lps: list[float] = []
    for message in result["message_log"]:
        n = len(message["token_ids"])
        ids += message["token_ids"]
        trained = message["role"] == "assistant"
        mask += [int(trained)] * n
        lps += message["generation_logprobs"] if trained else [0.0] * n
    return ids, mask, lps
