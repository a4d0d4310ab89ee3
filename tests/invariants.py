"""The invariants of docs/ARCHITECTURE.md, asserted on every sample a test produces (one shared checker)."""

from __future__ import annotations

from typing import Any

from slime_tau_plugin.tools.servers.sglang_server import fake_logprob


def assert_sample_invariants(sample: Any) -> None:
    """Masks, lengths, status and failure bookkeeping of one filled slime Sample."""
    status_cls = type(sample).Status
    assert isinstance(sample.status, status_cls), f"status must be slime's enum, got {sample.status!r}"
    assert sample.status is not status_cls.PENDING
    n = sample.response_length
    assert n >= 1, "every returned sample has a response"
    assert len(sample.tokens) > n, "tokens = prompt + response with a non-empty prompt"
    assert len(sample.loss_mask) == n and len(sample.rollout_log_probs) == n
    assert set(sample.loss_mask) <= {0, 1}
    assert all(isinstance(t, int) for t in sample.tokens)
    for mask, logprob in zip(sample.loss_mask, sample.rollout_log_probs, strict=True):
        if mask == 0:
            assert logprob == 0.0
        else:
            assert logprob <= 0.0
    assert isinstance(sample.reward, float)
    assert "termination_reason" in sample.metadata
    if sample.status is status_cls.FAILED:
        assert sample.remove_sample is True and sample.reward == 0.0 and sample.metadata.get("error")
        assert sum(sample.loss_mask) == 0, "a FAILED episode trains on nothing"


def assert_tito(sample: Any, requests: list[dict[str, Any]]) -> None:
    """Every request extends the previous one by exactly its output and a continuation; ids are untouched.

    ``requests`` are the /generate bodies our server received for this sample, in order. The server's
    log-probs are a known function of (token, position), so a misplaced or altered id is caught.
    """
    prompt_len = len(sample.tokens) - sample.response_length
    assert requests, "the sample made at least one request"
    expected_mask = [0] * sample.response_length
    previous_end = None
    for req in requests:
        ids = req["input_ids"]
        assert sample.tokens[: len(ids)] == ids, "request input_ids must be a prefix of the stored tokens"
        if previous_end is not None:
            assert len(ids) > previous_end, "each request extends the previous output with a continuation"
        start = len(ids) - prompt_len
        end = start
        while end < sample.response_length and sample.loss_mask[end] == 1:
            end += 1
        for i in range(start, end):
            expected_mask[i] = 1
            token = sample.tokens[prompt_len + i]
            assert sample.rollout_log_probs[i] == fake_logprob(token, i - start), f"log-prob misplaced at {i}"
        previous_end = prompt_len + end
    assert expected_mask == sample.loss_mask, "mask 1 exactly on the ids the server generated"
