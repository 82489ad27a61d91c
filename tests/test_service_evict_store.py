"""Eviction intents in the durable store, on SQLite and on PostgreSQL: written with their
decision-log entry, marked done once (a second completion writes nothing), read back by state
by a second store on the same database (what a restarted process sees)."""

from __future__ import annotations

import pytest

pytest.importorskip("sqlalchemy")

from dlsched.service.store import Store  # noqa: E402

# the `url` fixture (SQLite and PostgreSQL): tests/support/store_fixtures.py, a plugin of tests/conftest.py


def test_an_intent_is_durable_done_once_and_seen_by_a_restarted_store(url):
    store = Store(url)
    first = store.evict_intent("u1", "default/long-0", "default/short-0", "preempted by the policy", 5, 100.0)
    second = store.evict_intent("u2", "default/long-1", "", "why", 30, 101.0)
    store.close()

    again = Store(url)   # a restarted process
    pending = again.eviction_rows("pending")
    assert [(r["id"], r["pod"], r["for_pod"], r["grace_s"]) for r in pending] == [
        (first, "default/long-0", "default/short-0", 5), (second, "default/long-1", "", 30)]
    log = again.decision_log()
    assert [d["kind"] for d in log] == ["evict", "evict"] and pending[0]["decision_id"] == log[0]["id"]
    assert log[1]["detail"] == "evicted default/long-1 for (no pending pod named): why (grace 30 s)"
    assert again.evict_done(first, "accepted", 102.0) is True
    assert again.evict_done(first, "accepted", 103.0) is False   # never done twice
    assert [r["id"] for r in again.eviction_rows("pending")] == [second]
    assert [(r["id"], r["outcome"]) for r in again.eviction_rows("done")] == [(first, "accepted")]
    assert [d["kind"] for d in again.decision_log()].count("evicted") == 1
    assert again.evict_done(9999, "accepted", 104.0) is False
    again.close()
