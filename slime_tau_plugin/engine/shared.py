"""The process's shared state in one object: :class:`SharedState`, reached through :func:`shared_state`.

slime and verl play many episodes in one process, and a few things exist once per process: the resources of a
config (``resources.py``: their one cache lives here), the thread pools of ``run_blocking`` (``blocking.py``),
the τ backends (``envs.get_backend``), τ²'s judge setting (``envs/tau2_judge.py``), the endpoint guards
(``endpoints.py``), slime's failure window (``adapters/slime/group_filter.py``) and once-only log lines. They
live in this one object, not in module globals, each part behind its own lock, so a reader finds all process
state in one place. The parts every episode needs are typed attributes (``resources``, ``pools``, ``tokenizers``,
``backends``); a module's own process-wide part is found by its class (:meth:`SharedState.part`: the endpoint
guards' ``EndpointRegistry``, the user's ``UserTokenLedger``, slime's failure window), so the lookup is typed and
no two modules can pick the same name. The instance sits at the bottom of the engine (this module imports only
``errors``) because ``blocking`` and ``envs`` sit below ``resources``; ``resources.py`` is its owner and main user.

Settings are passed in, never "first caller wins":

- A value built from settings (:class:`SharedMap`) is keyed by *every* setting it is built from, so two callers
  with different settings get two values: the resources' key is the whole frozen ``TauConfig`` (plus the
  caller's tokenizer and the installed backend wrapper), a pool's key its size. Keying costs at most a second
  build and never refuses a valid mix of settings (a CLI run and its evaluation config share a process).
- A third party's process-wide setting that cannot be keyed (τ² reads its judge from module globals) is
  settled (:meth:`SharedState.settle`): the first value is applied, the same one again is a no-op, a different
  one raises ``ConfigError`` naming both. Keeping the first silently would score episodes with the wrong judge.

Tools change the engine only by installing a backend wrapper (:meth:`SharedState.install_backend_wrapper`:
fault injection wraps the τ backend from outside); the engine never asks whether a fault is on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from slime_tau_plugin.engine.errors import ConfigError

V = TypeVar("V")
BackendWrapper = Callable[[Any, Any], Any]
"""What a tool installs: ``(EnvBackend, TauConfig) -> EnvBackend`` (the config gives the wrapper its timeouts).
Spelt with ``Any``: this module sits below ``config`` and ``envs`` (both use the registry), so it names neither."""
_UNSET = object()


class SharedMap(Generic[V]):
    """Values built once per key and shared by the whole process; the key holds every setting a value is built from.

    Concurrent callers of one key wait for its one build; a failed build is not kept (the next call tries again,
    the callers waiting meanwhile get its error). The lock guards the dict only: builds run outside it, so a
    slow build (τ's import takes seconds) holds up no other key and no other map.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._slots: dict[Hashable, concurrent.futures.Future[V]] = {}
        self._built: dict[Hashable, V] = {}
        """The values built so far, read without the lock (a dict read is atomic)."""
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], V]) -> V:
        """The value for ``key``, built by ``build()`` in this thread on first use.

        Raises:
            Whatever ``build`` raises (not cached).
        """
        value = self._built.get(key, _UNSET)  # no lock once built: the event loop reads here (get_backend)
        if value is not _UNSET:
            return value
        future, is_builder = self._claim(key)
        if is_builder:
            self._build(key, future, build)
        return future.result()

    async def aget(self, key: Hashable, build: Callable[[], V]) -> V:
        """As :meth:`get`, with the build in a worker thread so the running event loop keeps serving meanwhile.

        A cancelled caller (verl cancels its other tasks once one raises) stops waiting, nothing more: the build
        runs to its end in its thread and settles the shared future, so every other waiter gets the value or the
        build's own error, never a ``CancelledError`` or ``InvalidStateError`` that is not theirs.

        Raises:
            Whatever ``build`` raises (not cached).
        """
        future, is_builder = self._claim(key)
        if is_builder:
            asyncio.get_running_loop().run_in_executor(None, self._build, key, future, build)
        return await asyncio.wrap_future(future)

    def _build(self, key: Hashable, future: concurrent.futures.Future[V], build: Callable[[], V]) -> None:
        """Run ``build`` and settle ``future`` with its value or its error (never raises: callers read the future)."""
        try:
            value = build()
        except BaseException as exc:
            with self._lock:
                if self._slots.get(key) is future:
                    del self._slots[key]
            future.set_exception(exc)
            return
        self._built[key] = value
        future.set_result(value)

    def __len__(self) -> int:
        with self._lock:
            return len(self._slots)

    def _claim(self, key: Hashable) -> tuple[concurrent.futures.Future[V], bool]:
        with self._lock:
            future = self._slots.get(key)
            if future is not None:
                return future, False
            future = self._slots[key] = concurrent.futures.Future()
            future.set_running_or_notify_cancel()  # running: a cancelled waiter's cancel() is a no-op on it
            return future, True


class SharedState:
    """Everything one process shares across episodes and event loops (see the module docstring)."""

    def __init__(self) -> None:
        self.resources: SharedMap[Any] = SharedMap("resources")
        """``EpisodeResources`` by ``(TauConfig, id of the caller's tokenizer or None, backend wrapper or None)``."""
        self.pools: SharedMap[concurrent.futures.ThreadPoolExecutor] = SharedMap("pools")
        """``run_blocking``'s thread pools by worker count; ``run_cpu``'s by (name, worker count)."""
        self.tokenizers: SharedMap[Any] = SharedMap("tokenizers")
        """Tokenizers by ``(path, trust_remote_code)``, for resources that load their own: parsing one holds the GIL
        for ~0.3 s (Qwen's 7 MB tokenizer.json), which stalls the event loop however it is threaded, so a process
        parses each once, whatever number of configs name it (a run's train and eval configs, the CLI's domains)."""
        self.backends: SharedMap[Any] = SharedMap("backends")  # EnvBackend by benchmark name
        """τ backends by benchmark name (``tau1``, ``tau2``); a backend takes no settings."""
        self._parts: SharedMap[Any] = SharedMap("parts")
        self._notes: SharedMap[dict[Hashable, Any]] = SharedMap("notes")
        self._seen: set[tuple[str, Hashable]] = set()
        self._seen_lock = threading.Lock()
        self._settled: dict[str, object] = {}
        self._settle_lock = threading.Lock()
        self._wrapper: BackendWrapper | None = None
        self._wrapper_lock = threading.Lock()

    def part(self, kind: type[V]) -> V:
        """The process's one ``kind()``, built on first use: a module's own part that is process-wide by design
        (``EndpointRegistry``: every episode shares an endpoint's slots and breaker; slime's failure guard: one
        window over a run's groups). Keyed by the class, so each owner declares a class of its own for it."""
        return self._parts.get(kind, kind)

    def first_time(self, topic: str, key: Hashable) -> bool:
        """True only the first time this process sees ``key`` under ``topic`` (a warning logged once per key)."""
        with self._seen_lock:
            if (topic, key) in self._seen:
                return False
            self._seen.add((topic, key))
            return True

    def notes(self, topic: str) -> dict[Hashable, Any]:
        """A process-wide dict for facts learned along the way (verl's routed-experts shape per model); one key
        per write, the last write wins."""
        return self._notes.get(topic, dict)

    def settle(self, what: str, value: object, apply: Callable[[], None], *, fix: str) -> None:
        """Apply a third party's process-wide setting once: ``apply()`` runs for the first value only.

        Raises:
            ConfigError: ``value`` differs from the one already applied (both named, then ``fix``); or what
                ``apply`` raises (then nothing is recorded).
        """
        with self._settle_lock:
            previous = self._settled.get(what, _UNSET)
            if previous is _UNSET:
                apply()
                self._settled[what] = value
            elif previous != value:
                raise ConfigError(
                    f"{what} {value!r} differs from the one already set in this process ({previous!r}); {fix}"
                )

    @property
    def backend_wrapper(self) -> BackendWrapper | None:
        """The wrapper ``EpisodeResources`` applies to the τ backend of each resources it builds (None: none)."""
        with self._wrapper_lock:
            return self._wrapper

    def install_backend_wrapper(self, wrapper: BackendWrapper | None) -> None:
        """Wrap the τ backend of every resources built from now on (None: stop wrapping). Resources are keyed by
        the wrapper, so a config built before gets fresh resources; those built earlier keep their backend."""
        with self._wrapper_lock:
            self._wrapper = wrapper


_PROCESS = SharedState()


def shared_state() -> SharedState:
    """This process's one :class:`SharedState`."""
    return _PROCESS
