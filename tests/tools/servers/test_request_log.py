"""The built-in servers' request logs stay bounded over a long run and still count every request."""

from __future__ import annotations

from slime_tau_plugin.tools.servers.http_base import RequestLog


def test_the_log_keeps_the_latest_requests_and_counts_all():
    log = RequestLog(limit=3)
    for i in range(100):
        log.append(i)
        assert len(log) <= 6 and log[-1] == i
    assert log.total == 100
    assert log[-3:] == [97, 98, 99] and log == sorted(log)


def test_a_short_run_keeps_everything():
    log = RequestLog(limit=3)
    for i in range(6):
        log.append(i)
    assert log == list(range(6)) and log.total == 6
