"""The LLM user simulator's token budget: per rollout step and per run, enforced before each request, reported.

A hosted user simulator is paid per token. ``tau_user_token_budget_per_step`` and ``tau_user_token_budget_total``
bound the tokens (prompt + completion, as its ``usage`` reports them) the user spends in one rollout step and in
the whole run (this process). Each request first asks :meth:`UserTokenLedger.check`: once a budget is spent, the
request is not sent and the episode ends ``user_token_budget`` (TRUNCATED, not scored, not trained on: a
conversation cut short by a bill is no evidence about the policy). Requests already in flight finish, so a
budget can be overrun by what those spend.

A step is what slime's rollout log hook closes (``adapters/slime/metrics.log_rollout`` calls :meth:`end_step`,
which reports the step's spend and starts the next); a ``slime-tau rollout`` is one step. The ledger is the
process's (``shared.py``): every episode of a rollout shares it. Imports ``errors`` and ``process`` only.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from slime_tau_plugin.engine.errors import UserTokenBudgetError
from slime_tau_plugin.engine.shared import shared_state


@dataclass(frozen=True, slots=True)
class UserTokenBudget:
    """The LLM user's token limits (from ``TauConfig``); None = no limit."""

    per_step: int | None = None
    total: int | None = None

    @property
    def is_set(self) -> bool:
        return self.per_step is not None or self.total is not None


class UserTokenLedger:
    """Tokens the LLM user spent this step and this run, and the requests the budget refused."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.step_tokens = 0
        self.total_tokens = 0
        self.step_refused = 0
        """Requests refused this step (each ended one episode)."""

    def check(self, budget: UserTokenBudget) -> None:
        """Let the next request go, or refuse it because a budget is spent.

        Raises:
            UserTokenBudgetError: naming the budget key, what it allows and what was spent.
        """
        if not budget.is_set:
            return
        with self._lock:
            spent = [
                (key, limit, used)
                for key, limit, used in (
                    ("tau_user_token_budget_per_step", budget.per_step, self.step_tokens),
                    ("tau_user_token_budget_total", budget.total, self.total_tokens),
                )
                if limit is not None and used >= limit
            ]
            if spent:
                self.step_refused += 1
        if spent:
            key, limit, used = spent[0]
            raise UserTokenBudgetError(
                f"the LLM user's token budget is spent: {used} tokens used, {key}={limit}; the episode ends "
                "user_token_budget (not trained on); raise the budget to play more"
            )

    def spend(self, tokens: int) -> None:
        """Add one answer's tokens (prompt + completion)."""
        with self._lock:
            self.step_tokens += tokens
            self.total_tokens += tokens

    def end_step(self) -> dict[str, float]:
        """This step's numbers (``user_tokens/step``, ``/total``, ``/refused``), then a new step begins."""
        with self._lock:
            numbers = {
                "user_tokens/step": float(self.step_tokens),
                "user_tokens/total": float(self.total_tokens),
                "user_tokens/refused": float(self.step_refused),
            }
            self.step_tokens = self.step_refused = 0
        return numbers

    def forget(self) -> None:
        """Back to nothing spent (a new run in the same process, tests)."""
        with self._lock:
            self.step_tokens = self.total_tokens = self.step_refused = 0


def user_token_ledger() -> UserTokenLedger:
    """The process's one ledger (every episode of a rollout spends from it)."""
    return shared_state().part(UserTokenLedger)
