"""The store tests' database fixtures: each test runs on SQLite and on a real PostgreSQL server
(one per test module, started and stopped by its PID; skipped when PostgreSQL is not installed),
with a clean schema per test. ``tests/conftest.py`` loads it as a plugin: a test asks for ``url``."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def postgres_url():
    from support.postgres import Postgres, pg_bindir

    if pg_bindir() is None:
        pytest.skip("PostgreSQL is not installed (apt-get install -y postgresql)")
    pytest.importorskip("psycopg")
    pg = Postgres().start()
    try:
        yield pg.url
    finally:
        pg.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/store.db"
    from dlsched.service.store import Store, metadata

    base = request.getfixturevalue("postgres_url")
    store = Store(base)   # a clean schema for each test
    metadata.drop_all(store.engine)
    store.close()
    return base
