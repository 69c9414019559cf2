"""Registering a webhook: the checks a push config passes before it is stored, and what is shown back.

Used by the service for the push-config methods of both versions and for the inline config of a send
(A2A 1.0 sections 3.1.7-3.1.10 and 4.3.1): the URL is checked against SSRF rules (an unsafe URL is
-32602 at once, not a silent failure later; a name that does not resolve now is accepted and checked at
every delivery), the config gets an id when it has none, its secrets are
sealed for its row once it is bound to its task, and it records the protocol version its client spoke, which decides the notifications'
format. Answers never carry the secrets (:func:`parley.push.secrets.redact`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import msgspec

from parley.protocol import models as m
from parley.protocol.errors import InvalidParamsError
from parley.push.secrets import Binding, SecretBox, check_header_values, redact
from parley.push.ssrf import UrlGuard
from parley.settings import PushSettings
from parley.tasks.store import StoredPushConfig

MAX_CONFIGS_PER_TASK = 16


class PushConfigs:
    """Prepares push configs for the store, by the settings' rules."""

    def __init__(self, settings: PushSettings, guard: UrlGuard, box: SecretBox,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.guard = guard
        self.box = box
        self.clock = clock

    async def prepare(self, config: m.TaskPushNotificationConfig, version: str, agent_id: str = "",
                      owner: str = "") -> StoredPushConfig:
        """Check a config `owner` sent and make it storable (InvalidParamsError names what is wrong). Its secrets
        are sealed by :func:`parley.tasks.engine.bind_push`, bound to the task, the config id and `owner`."""
        await self.guard.check_registration(config.url)  # a name that does not resolve now: checked at delivery
        auth = config.authentication
        if auth is not None and not auth.scheme.strip():
            raise InvalidParamsError("Invalid params: `authentication.scheme` must not be empty")
        check_header_values(config)
        plain = msgspec.structs.replace(config, id=default_id(config, version))

        def seal(task_id: str, config_id: str) -> m.TaskPushNotificationConfig:
            """The config as stored in row (task_id, config_id): its secrets, as sent, sealed for that row."""
            bound = msgspec.structs.replace(plain, task_id=task_id, id=config_id)
            return self.box.seal(bound, Binding(task_id, config_id, owner))

        return StoredPushConfig(msgspec.structs.replace(plain), version=version,
                                artifacts=self.settings.artifacts_of(agent_id), created_at=self.clock(), seal=seal)

    @staticmethod
    def shown(config: m.TaskPushNotificationConfig) -> m.TaskPushNotificationConfig:
        """A stored config as an answer shows it: its secrets left out."""
        return redact(config)


def default_id(config: m.TaskPushNotificationConfig, version: str) -> str:
    """The id of a config: its own, else (A2A 0.3) its task's id, else a random UUID.

    A2A 0.3 makes `pushNotificationConfigId` optional in `tasks/pushNotificationConfig/get` (sections
    7.5-7.6.1), and the official a2a-sdk 0.3 stores a config sent without an `id` under its task's id, which is
    what a get without the id then finds; so does Parley for a 0.3 client. A config sent with a message that
    creates its task has no task id yet: "" here, and the engine binds it to the new task (ids included).
    A2A 1.0 requires the id in every get (section 3.1.8), so 1.0 configs without one get a random UUID."""
    if config.id:
        return config.id
    if version == "0.3":
        return config.task_id
    return str(uuid.uuid4())


__all__ = ["MAX_CONFIGS_PER_TASK", "PushConfigs", "default_id"]
