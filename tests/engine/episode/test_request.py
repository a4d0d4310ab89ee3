"""The one episode value (``engine/episode/request.py``): written once at a door, pickled to a worker without the
asking process's abort check, its stored suspended state read only where the boundary asks for it."""

from __future__ import annotations

import pickle

import pytest

from slime_tau_plugin.engine.episode.request import EpisodeOptions, EpisodeRequest, HeldTokens, StoredState
from slime_tau_plugin.engine.errors import ResumeError


def _request() -> EpisodeRequest:
    options = EpisodeOptions(
        session_id="s-1",
        headers={"X-SMG-Routing-Key": "s-1"},
        should_abort=lambda: True,
        resume=StoredState({"version": 1}, HeldTokens.of([1, 2, 3])),
        suspend=True,
        group="slime:4",
    )
    return EpisodeRequest("r-1", 7, {"domain": "retail"}, {"temperature": 1.0}, options)


def test_a_request_crosses_to_a_worker_whole_but_for_the_abort_check() -> None:
    request = _request()
    for crossed in (pickle.loads(pickle.dumps(request)), pickle.loads(pickle.dumps(request, protocol=2))):
        assert crossed.options.should_abort is None  # a closure over the trainer's state never runs elsewhere
        assert crossed.options.resume == request.options.resume
        kept = ("session_id", "headers", "suspend", "group")
        assert [getattr(crossed.options, k) for k in kept] == [getattr(request.options, k) for k in kept]
        assert (crossed.request_id, crossed.prompt, crossed.metadata, crossed.sampling_params) == (
            "r-1",
            7,
            {"domain": "retail"},
            {"temperature": 1.0},
        )


def test_a_worker_sets_its_own_abort_check_on_a_copy() -> None:
    request = pickle.loads(pickle.dumps(_request()))
    flags: set[str] = set()
    mine = request.with_abort(lambda: "r-1" in flags)
    assert request.options.should_abort is None and mine.options.should_abort is not None
    assert not mine.options.should_abort()
    flags.add("r-1")
    assert mine.options.should_abort()
    assert mine.options.group == "slime:4" and mine.options.resume == request.options.resume


def test_a_stored_state_is_read_only_when_asked_and_refused_naming_why() -> None:
    options = _request().options  # building and pickling the request never parsed the state
    with pytest.raises(ResumeError, match="tau_episode_state|version"):
        options.state()
    assert EpisodeOptions().state() is None
    with pytest.raises(ResumeError, match="JSON"):
        StoredState("{not json").load()
