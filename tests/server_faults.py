"""A fake model that fails the way a GPU server does: HTTP errors from the built-in server, then recovery.

The server turns :class:`ServerFaultError` into the status and error body SGLang would send, so the
clients' retry and classification run over real HTTP.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slime_tau_plugin.tools.servers.fake_models import ScriptedModel
from slime_tau_plugin.tools.servers.sglang_server import ModelOutput, ServerFaultError


class FailingModel(ScriptedModel):
    """Answers HTTP ``status`` to its first ``failures`` requests (every request when None), then as
    :class:`ScriptedModel` would with ``texts``."""

    def __init__(
        self,
        tokenizer: Any,
        status: int,
        message: str,
        *,
        failures: int | None = None,
        texts: Sequence[str] = ("unused",),
    ) -> None:
        super().__init__(tokenizer, texts)
        self.status = status
        self.message = message
        self.failures = failures
        self.failed = 0
        """Requests answered with the error so far."""

    def generate(self, input_ids: Sequence[int], sampling_params: dict[str, Any]) -> ModelOutput:
        if self.failures is None or self.failed < self.failures:
            self.failed += 1
            raise ServerFaultError(self.status, self.message)
        return super().generate(input_ids, sampling_params)
