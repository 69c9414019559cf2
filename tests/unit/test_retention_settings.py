"""The retention defaults docs/operations.md shows are the ones the code has, and bad values are refused with
the key and the reason (docs/operations.md, "Retention")."""

from __future__ import annotations

import asyncio
import re
import tomllib
from pathlib import Path

import msgspec
from test_store_contract import finished_task

from parley.settings import RetentionSettings, Settings
from parley.tasks.memory_store import MemoryTaskStore
from parley.tasks.retention import DAY, Pruner, retention_of

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def test_the_documented_defaults_are_the_defaults() -> None:
    text = DOCS.read_text()
    block = re.search(r"```toml\n(\[server\.retention\].*?)```", text, re.DOTALL)
    assert block is not None, "operations.md shows the [server.retention] table"
    documented = tomllib.loads(block.group(1))["server"]["retention"]
    assert msgspec.convert(documented, RetentionSettings) == RetentionSettings()


def test_bad_values_are_named() -> None:
    settings = Settings(retention=RetentionSettings(max_age_days=0, max_finished=-1, interval_seconds=0,
                                                    changes_minutes=0))
    assert [key for key, _ in settings.problems()] == [
        "retention.max_age_days", "retention.max_finished", "retention.interval_seconds", "retention.changes_minutes"]


def test_the_retention_a_pass_uses() -> None:
    defaults = retention_of(RetentionSettings(), now=100 * DAY)
    assert (defaults.finished_before, defaults.keep_finished) == (70 * DAY, 100_000)
    assert defaults.changes_before == 100 * DAY - 3600  # the change feed: an hour
    assert retention_of(RetentionSettings(changes_minutes=5), now=100 * DAY).changes_before == 100 * DAY - 300
    overridden = retention_of(RetentionSettings(), now=100 * DAY, max_age_days=1, max_finished=5)
    assert (overridden.finished_before, overridden.keep_finished) == (99 * DAY, 5)
    off = retention_of(RetentionSettings(max_age_days=None, max_finished=None), now=100 * DAY)
    assert (off.finished_before, off.keep_finished) == (None, None)  # no task is removed


async def test_the_job_trims_the_change_feed_with_both_task_limits_off() -> None:
    """`changes_minutes` holds even when no finished task is ever removed (docs/operations.md, "Retention")."""
    store = MemoryTaskStore(keep_finished=None)
    await finished_task(store, "a", 1000.0)
    await finished_task(store, "b", 5000.0)
    settings = RetentionSettings(max_age_days=None, max_finished=None, interval_seconds=0.001, changes_minutes=1)
    pruner = Pruner(store, settings, clock=lambda: 1e9)
    pruner.start()
    try:
        async with asyncio.timeout(10):
            while len(await store.changes_after(0)) > 1:
                await asyncio.sleep(0.01)
    finally:
        await pruner.stop()
    assert [(c.task_id, c.seq) for c in await store.changes_after(0)] == [("b", 3)]
    assert await store.get("a") is not None  # no task limit: every task stays
