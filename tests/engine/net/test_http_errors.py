"""``net/http_errors.py``: the one table from an HTTP status to retried-or-final, read by every HTTP client."""

from __future__ import annotations

import json

import pytest

from slime_tau_plugin.engine.net.http_errors import classify_status


@pytest.mark.parametrize("status", [200, 204, 302])
def test_a_status_below_400_is_not_a_failure(status):
    assert classify_status(status, "{}") is None


@pytest.mark.parametrize(("status", "transient"), [(429, True), (500, True), (503, True), (400, False), (404, False)])
def test_429_and_5xx_are_transient_other_4xx_final(status, transient):
    failure = classify_status(status, "busy", "7")
    assert failure.status == status and failure.is_transient is transient
    assert failure.retry_after == (7.0 if transient else None)  # a final answer is not retried: no wait


def test_the_servers_own_message_and_a_context_length_400():
    body = json.dumps({"error": {"message": "This model's maximum context length is 4096 tokens"}})
    failure = classify_status(400, body)
    assert failure.message == "This model's maximum context length is 4096 tokens" and failure.is_context_length
    assert not classify_status(413, body).is_context_length  # only a 400 is the context outcome
    flat = classify_status(400, "Bad Request: malformed sampling_params")
    assert flat.message == "Bad Request: malformed sampling_params" and not flat.is_context_length
