"""The task-state transition table: the one place that says what may follow what.

Terminal states are final. Interrupted states (`input-required`,
`auth-required`) wait for a message with the task's id, which moves the task
back to `working`.
"""

from __future__ import annotations

from parley.protocol.models import TaskState

S = TaskState

TERMINAL: frozenset[TaskState] = frozenset({S.COMPLETED, S.FAILED, S.CANCELED, S.REJECTED})
INTERRUPTED: frozenset[TaskState] = frozenset({S.INPUT_REQUIRED, S.AUTH_REQUIRED})
SETTLED: frozenset[TaskState] = TERMINAL | INTERRUPTED  # is_settled, as one set (a test in hot paths)
ACTIVE: frozenset[TaskState] = frozenset({S.SUBMITTED, S.WORKING})

_ENDINGS = {S.INPUT_REQUIRED, S.AUTH_REQUIRED, S.COMPLETED, S.FAILED, S.CANCELED, S.REJECTED}

TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    S.SUBMITTED: frozenset({S.WORKING, *_ENDINGS}),
    S.WORKING: frozenset({S.WORKING, *_ENDINGS}),
    # A new message continues an interrupted task; it may also be canceled or fail.
    S.INPUT_REQUIRED: frozenset({S.WORKING, S.CANCELED, S.FAILED, S.REJECTED}),
    S.AUTH_REQUIRED: frozenset({S.WORKING, S.CANCELED, S.FAILED, S.REJECTED}),
    S.COMPLETED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELED: frozenset(),
    S.REJECTED: frozenset(),
}


class InvalidTransition(ValueError):
    """A state change the table does not allow."""


def is_terminal(state: TaskState) -> bool:
    """True for completed, failed, canceled and rejected."""
    return state in TERMINAL


def is_interrupted(state: TaskState) -> bool:
    """True for input-required and auth-required."""
    return state in INTERRUPTED


def is_settled(state: TaskState) -> bool:
    """True when a blocking send may return: terminal or interrupted."""
    return state in SETTLED


def check_transition(current: TaskState, new: TaskState) -> None:
    """Raise :class:`InvalidTransition` unless `current -> new` is allowed."""
    if new not in TRANSITIONS[current]:
        raise InvalidTransition(f"a task in state {current.name} cannot move to {new.name}")
