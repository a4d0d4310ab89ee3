"""Why a domain the installed τ² lists cannot be built, in one line naming the domain, the missing piece and the fix.

τ² registers every domain in one module, but building one may need more than τ² itself: upstream τ³'s
``banking_knowledge`` imports ``rank_bm25`` only when its retrieval is built, and its default retrieval
variant (``alltools``) embeds the documents with OpenAI's API, so it needs ``OPENAI_API_KEY``. Either used to
surface as a traceback from the first episode. The backend builds a domain before any episode
(``Tau2Backend.domain``) and turns such a failure into a ``ConfigError`` here.
"""

from __future__ import annotations

import re

from slime_tau_plugin.engine.errors import ConfigError

RETRIEVAL_PARAMETER = "retrieval_variant"
"""The keyword a τ³ knowledge domain's environment constructor takes its retrieval variant by."""

EXTRAS: dict[str, str] = {"rank_bm25": "pip install 'slime-tau-plugin[banking]' (rank-bm25)"}
"""A module a τ domain imports only when built -> how to install it (the plugin's extra, where it has one)."""

_KEY_NAME = re.compile(r"\b([A-Z][A-Z0-9]*_API_KEY)\b")


def build_error(domain: str, exc: Exception, variant: str | None, version: str) -> ConfigError:
    """A one-line ``ConfigError`` for ``exc``, raised while τ² ``version`` built ``domain``.

    ``variant`` is the ``tau_retrieval_variant`` the build used (None: the domain takes none).
    """
    where = f"domain (benchmark tau2)={domain!r} cannot be built by the installed tau2 {version}"
    setting = f" with tau_retrieval_variant={variant}" if variant is not None else ""
    if isinstance(exc, ImportError):
        module = (exc.name or str(exc)).split(".")[0]
        fix = EXTRAS.get(module, f"pip install {module}")
        return ConfigError(f"{where}{setting}: it needs the Python module {module}; {fix}")
    key = _missing_key(exc)
    if key is not None:
        offline = "; or tau_retrieval_variant=bm25 (offline retrieval)" if variant is not None else ""
        return ConfigError(f"{where}{setting}: it needs the API key {key}; set {key}{offline}")
    first_line = next((line for line in str(exc).splitlines() if line.strip()), "")
    return ConfigError(f"{where}{setting}: {type(exc).__name__}: {first_line.strip()[:300]}")


def _missing_key(exc: Exception) -> str | None:
    """The environment variable a client library said it lacks (OpenAI's "Missing credentials"), or None."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    message = str(exc)
    if not ({"OpenAIError", "AuthenticationError"} & names or "credential" in message.lower()):
        return None
    found = _KEY_NAME.search(message)
    return found.group(1) if found else "OPENAI_API_KEY" if "OpenAIError" in names else None
