"""Endpoint checks ``rollout`` makes before any episode: is each URL well formed and answering?

Without them an unreachable policy server turns every sample into a retried, then FAILED, episode and the
run prints ``pass^1=0.000``. Each check is one short request (``GET /health`` of the policy server,
``GET /models`` of an OpenAI-compatible LLM user or judge) and each failure is one :class:`ConfigError`
line naming the flag, the URL and the fix. Requests go direct, like the episode clients (no proxy from
the environment).
"""

from __future__ import annotations

import http.client
import json
import sys
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from slime_tau_plugin.engine.config.tau_config import LLMEndpoint
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.net.loop_http import shared_ssl_context

TIMEOUT_S = 5.0


def check_url(flag: str, url: str) -> None:
    """``url`` must be ``http(s)://HOST[:PORT][/path]``.

    Raises:
        ConfigError: no scheme, another scheme or no host; the message shows the likely intended URL.
    """
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.hostname:
        return
    guess = url if "://" in url else f"http://{url}"
    raise ConfigError(f"{flag} {url!r} is not an http(s) URL; write it with the scheme, e.g. {guess}")


def check_policy(url: str, flag: str = "--sglang-url") -> None:
    """``GET {url}/health`` answers 200 (SGLang's server and router both serve it).

    Raises:
        ConfigError: malformed URL, nothing answering, or a non-200 answer (e.g. 503 while loading).
    """
    check_url(flag, url)
    health = url.rstrip("/").removesuffix("/v1") + "/health"  # an OpenAI-style base URL: /health is at the root
    status, reason, _ = _get(health, None)
    if status is None:
        raise ConfigError(
            f"{flag} {url}: cannot reach the policy server (GET /health: {reason}); start SGLang "
            "(or 'slime-tau serve') there, or fix the URL"
        )
    if status != 200:
        raise ConfigError(
            f"{flag} {url}: GET /health answered HTTP {status}; wait until the server has loaded the model, "
            "or fix the URL"
        )


def check_chat_endpoint(flag: str, endpoint: LLMEndpoint, key_flag: str, model_flag: str | None = None) -> list[str]:
    """``GET {base_url}/models`` of an OpenAI-compatible endpoint answers 2xx with the configured key (each
    replica's, for several comma-separated URLs), and lists the model when ``model_flag`` names the flag that set
    it (the user's model is sent as is; a judge's is litellm's name, provider prefix included, so it is not
    compared). Of several replicas, those that cannot be reached are warned about and the run goes on, as it
    does when one dies mid-run; any replica that answers wrongly refuses the run.

    Returns:
        The URLs that answered.

    Raises:
        ConfigError: malformed URL, key variable named but unset, no replica answering, the key refused
            (401/403), 404 (usually a base URL without ``/v1``), or a model the list does not hold.
    """
    key = endpoint.api_key
    if endpoint.api_key_env and not key:
        raise ConfigError(
            f"{key_flag} {endpoint.api_key_env}: that environment variable is not set; export it with the API key"
        )
    answered, unreachable = [], []
    for url in endpoint.urls:
        check_url(flag, url)
        try:
            _check_models(flag, url, endpoint, key, key_flag, model_flag)
            answered.append(url)
        except _UnreachableError as exc:
            unreachable.append(exc)
    if not answered:
        if len(unreachable) == 1:
            raise ConfigError(str(unreachable[0]))
        each = ", ".join(f"{exc.url} ({exc.reason})" for exc in unreachable)
        raise ConfigError(
            f"{flag}: none of its {len(unreachable)} replicas answers GET /models: {each}; start them or fix the URLs"
        )
    for exc in unreachable:
        print(f"warning: {exc}; the run goes on with the {len(answered)} that answered", file=sys.stderr)
    return answered


class _UnreachableError(ConfigError):
    """Nothing answered at one URL (the others may)."""

    def __init__(self, message: str, url: str, reason: str) -> None:
        super().__init__(message)
        self.url = url
        self.reason = reason


def _check_models(
    flag: str, url: str, endpoint: LLMEndpoint, key: str | None, key_flag: str, model_flag: str | None
) -> None:
    key_env = endpoint.api_key_env
    models = url.rstrip("/") + "/models"
    status, reason, body = _get(models, key)
    if status is None:
        raise _UnreachableError(
            f"{flag} {url}: cannot reach it (GET /models: {reason}); start the server or fix the URL", url, reason
        )
    if status in (401, 403):
        source = f"${key_env}" if key_env else f"no key (set {key_flag})"
        raise ConfigError(f"{flag} {url}: GET /models answered HTTP {status}; the server refused {source}")
    if status == 404:
        raise ConfigError(
            f"{flag} {url}: GET /models answered HTTP 404; an OpenAI-compatible base URL usually ends in /v1"
        )
    if not 200 <= status < 300:
        raise ConfigError(f"{flag} {url}: GET /models answered HTTP {status}; check the server, or fix the URL")
    served = _model_ids(body)
    if model_flag and served and endpoint.model not in served:
        shown = ", ".join(served[:5]) + (", ..." if len(served) > 5 else "")
        raise ConfigError(f"{model_flag} {endpoint.model}: {flag} {url} serves {shown} (GET /models); pass one of them")


def _model_ids(body: bytes) -> list[str]:
    """The ``data[].id`` of an OpenAI ``/models`` answer; empty when it is not one."""
    try:
        data = json.loads(body).get("data")
        return [str(card["id"]) for card in data if isinstance(card, dict) and "id" in card]
    except (ValueError, AttributeError, TypeError):
        return []


def _get(url: str, api_key: str | None) -> tuple[int | None, str, bytes]:
    """``(status, "", body)`` for any HTTP answer, ``(None, reason, b"")`` when none came within the timeout."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=shared_ssl_context())
    )
    try:
        with opener.open(request, timeout=TIMEOUT_S) as answer:
            return answer.status, "", answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, "", b""
    except urllib.error.URLError as exc:
        return None, str(getattr(exc.reason, "strerror", None) or exc.reason), b""
    except (TimeoutError, OSError, http.client.HTTPException) as exc:
        return None, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, b""
