"""The task-state transition table (spec §3.1.1, §3.4): every allowed and forbidden pair."""

from __future__ import annotations

import itertools

import pytest

from parley.protocol.models import TaskState
from parley.protocol.states import (
    ACTIVE,
    INTERRUPTED,
    TERMINAL,
    TRANSITIONS,
    InvalidTransition,
    check_transition,
    is_interrupted,
    is_settled,
    is_terminal,
)

S = TaskState

# The expected table, written out independently of the implementation.
EXPECTED: dict[TaskState, set[TaskState]] = {
    S.SUBMITTED: {S.WORKING, S.INPUT_REQUIRED, S.AUTH_REQUIRED, S.COMPLETED, S.FAILED, S.CANCELED, S.REJECTED},
    S.WORKING: {S.WORKING, S.INPUT_REQUIRED, S.AUTH_REQUIRED, S.COMPLETED, S.FAILED, S.CANCELED, S.REJECTED},
    S.INPUT_REQUIRED: {S.WORKING, S.CANCELED, S.FAILED, S.REJECTED},
    S.AUTH_REQUIRED: {S.WORKING, S.CANCELED, S.FAILED, S.REJECTED},
    S.COMPLETED: set(),
    S.FAILED: set(),
    S.CANCELED: set(),
    S.REJECTED: set(),
}

ALL_PAIRS = list(itertools.product(list(S), repeat=2))
ALLOWED = [(a, b) for a, b in ALL_PAIRS if b in EXPECTED[a]]
FORBIDDEN = [(a, b) for a, b in ALL_PAIRS if b not in EXPECTED[a]]


def _pair_id(pair: tuple[TaskState, TaskState]) -> str:
    return f"{pair[0].name}->{pair[1].name}"


def test_table_covers_every_state() -> None:
    assert set(TRANSITIONS) == set(S)
    assert {k: set(v) for k, v in TRANSITIONS.items()} == EXPECTED


def test_state_classes() -> None:
    assert TERMINAL == {S.COMPLETED, S.FAILED, S.CANCELED, S.REJECTED}
    assert INTERRUPTED == {S.INPUT_REQUIRED, S.AUTH_REQUIRED}
    assert ACTIVE == {S.SUBMITTED, S.WORKING}
    assert TERMINAL | INTERRUPTED | ACTIVE == set(S)
    assert not (TERMINAL & INTERRUPTED or TERMINAL & ACTIVE or INTERRUPTED & ACTIVE)


@pytest.mark.parametrize("state", list(S), ids=lambda s: s.name)
def test_predicates(state: TaskState) -> None:
    assert is_terminal(state) == (state in EXPECTED and state in {S.COMPLETED, S.FAILED, S.CANCELED, S.REJECTED})
    assert is_interrupted(state) == (state in {S.INPUT_REQUIRED, S.AUTH_REQUIRED})
    assert is_settled(state) == (is_terminal(state) or is_interrupted(state))


@pytest.mark.parametrize("state", sorted(TERMINAL, key=lambda s: s.name), ids=lambda s: s.name)
def test_terminal_states_have_no_exits(state: TaskState) -> None:
    assert TRANSITIONS[state] == frozenset()
    for new in S:
        with pytest.raises(InvalidTransition):
            check_transition(state, new)


@pytest.mark.parametrize("state", [S.INPUT_REQUIRED, S.AUTH_REQUIRED], ids=lambda s: s.name)
def test_interrupted_states_go_back_to_working(state: TaskState) -> None:
    check_transition(state, S.WORKING)
    # ... but not straight to completion, nor to another interruption, nor back to submitted.
    for new in (S.COMPLETED, S.INPUT_REQUIRED, S.AUTH_REQUIRED, S.SUBMITTED):
        with pytest.raises(InvalidTransition):
            check_transition(state, new)


@pytest.mark.parametrize("pair", ALLOWED, ids=_pair_id)
def test_allowed(pair: tuple[TaskState, TaskState]) -> None:
    check_transition(*pair)  # does not raise


@pytest.mark.parametrize("pair", FORBIDDEN, ids=_pair_id)
def test_forbidden(pair: tuple[TaskState, TaskState]) -> None:
    current, new = pair
    with pytest.raises(InvalidTransition) as info:
        check_transition(current, new)
    assert current.name in str(info.value) and new.name in str(info.value)


def test_invalid_transition_is_a_value_error() -> None:
    assert issubclass(InvalidTransition, ValueError)


def test_nothing_returns_to_submitted() -> None:
    assert all(S.SUBMITTED not in exits for exits in TRANSITIONS.values())


def test_the_tables_cannot_be_changed_by_a_caller() -> None:
    """The classes and the exits of every state are read-only, so no module can loosen the rules for all."""
    for table in (TERMINAL, INTERRUPTED, ACTIVE, *TRANSITIONS.values()):
        with pytest.raises(AttributeError):
            table.add(S.WORKING)  # type: ignore[attr-defined]
