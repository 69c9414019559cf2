"""Parley's canonical A2A data model.

One model inside, shaped like A2A 1.0 (the protobuf JSON mapping of
`lf.a2a.v1`): encoding a struct with :func:`parley.protocol.codec.to_wire`
gives the 1.0 JSON directly, and the 0.3 adapter converts at the edge.
Validation happens when a wire dict is converted into these structs
(`msgspec.convert`), which yields precise, path-qualified error messages.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

NonEmptyStr = Annotated[str, Meta(min_length=1)]


class TaskState(str, enum.Enum):
    """Task lifecycle states; values are the A2A 1.0 enum names."""

    SUBMITTED = "TASK_STATE_SUBMITTED"
    WORKING = "TASK_STATE_WORKING"
    INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
    AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"
    COMPLETED = "TASK_STATE_COMPLETED"
    FAILED = "TASK_STATE_FAILED"
    CANCELED = "TASK_STATE_CANCELED"
    REJECTED = "TASK_STATE_REJECTED"


class Role(str, enum.Enum):
    """Who wrote a message; values are the A2A 1.0 enum names."""

    USER = "ROLE_USER"
    AGENT = "ROLE_AGENT"


class Base(Struct, omit_defaults=True, rename="camel", forbid_unknown_fields=False, gc=False):
    """Common struct options: camelCase on the wire, defaults omitted.

    `gc=False`: the garbage collector does not track them. They are plain data and form no reference cycles
    (a model never refers back to one that holds it), and a server keeps many of them: the memory store's
    finished tasks made every full collection pause it for 40-75 ms (bench/RESULTS.md). Do not put a model
    inside its own metadata: such a cycle would never be collected."""


class Part(Base):
    """One piece of content: exactly one of text, raw bytes, url or data."""

    text: str | None = None
    raw: bytes | None = None
    url: str | None = None
    data: Any | UnsetType = UNSET
    metadata: dict[str, Any] | None = None
    filename: str | None = None
    media_type: str | None = None

    def __post_init__(self) -> None:
        present = (
            (self.text is not None)
            + (self.raw is not None)
            + (self.url is not None)
            + (self.data is not UNSET)
        )
        if present != 1:
            raise ValueError("a part must have exactly one of `text`, `raw`, `url` or `data`")

    @property
    def content_kind(self) -> str:
        """Which content field this part carries: text, raw, url or data."""
        if self.text is not None:
            return "text"
        if self.raw is not None:
            return "raw"
        if self.url is not None:
            return "url"
        return "data"


# A text part to copy (`new_text_part()`, then set `text`): what a streamed token's chunk and the snapshot's joined
# text are made of, without __post_init__'s check (a Python call per part) for what has one content field by
# construction. Copying a struct does not run __post_init__.
new_text_part = Part(text="").__copy__


class Message(Base):
    """One communication turn between a user and an agent."""

    message_id: NonEmptyStr
    role: Role
    parts: Annotated[list[Part], Meta(min_length=1)]
    context_id: str | None = None
    task_id: str | None = None
    metadata: dict[str, Any] | None = None
    extensions: list[str] | None = None
    reference_task_ids: list[str] | None = None

    def text(self) -> str:
        """All text parts joined by newlines (convenience for agents)."""
        return "\n".join(p.text for p in self.parts if p.text is not None)


class TaskStatus(Base):
    """The state of a task, with an optional message and timestamp."""

    state: TaskState
    message: Message | None = None
    timestamp: str | None = None


class Artifact(Base):
    """An output of a task, made of parts."""

    artifact_id: NonEmptyStr
    parts: list[Part]
    name: str | None = None
    description: str | None = None
    metadata: dict[str, Any] | None = None
    extensions: list[str] | None = None


class Task(Base):
    """A unit of work: status, artifacts and conversation history."""

    id: str
    context_id: str
    status: TaskStatus
    artifacts: list[Artifact] | None = None
    history: list[Message] | None = None
    metadata: dict[str, Any] | None = None
    generation: int | None = None  # A2A 1.1 section 3.2.7 (tasks.log counts it; only 1.1 answers carry it)


class TaskStatusUpdateEvent(Base):
    """A change of a task's status."""

    task_id: str
    context_id: str
    status: TaskStatus
    metadata: dict[str, Any] | None = None
    generation: int | None = None  # the task's generation after this event (A2A 1.1 section 3.2.7)


class TaskArtifactUpdateEvent(Base):
    """A new artifact or a chunk of one (`append`, `lastChunk`)."""

    task_id: str
    context_id: str
    artifact: Artifact
    append: bool = False
    last_chunk: bool = False
    metadata: dict[str, Any] | None = None
    generation: int | None = None  # the task's generation after this event (A2A 1.1 section 3.2.7)


StreamEvent = Task | Message | TaskStatusUpdateEvent | TaskArtifactUpdateEvent


class AuthenticationInfo(Base):
    """Credentials Parley sends to a push-notification webhook."""

    scheme: str
    credentials: str | None = None


class TaskPushNotificationConfig(Base):
    """A webhook registered for a task."""

    url: NonEmptyStr
    task_id: str = ""
    id: str = ""
    tenant: str | None = None
    token: str | None = None
    authentication: AuthenticationInfo | None = None


class SendMessageConfiguration(Base):
    """Per-request options of SendMessage / SendStreamingMessage."""

    accepted_output_modes: list[str] | None = None
    task_push_notification_config: TaskPushNotificationConfig | None = None
    history_length: int | None = None
    return_immediately: bool = False
    if_generation_match: int | None = None  # A2A 1.1 section 3.2.2: refuse a follow-up to a task that moved on


class SendMessageRequest(Base):
    """Params of SendMessage and SendStreamingMessage."""

    message: Message
    configuration: SendMessageConfiguration | None = None
    metadata: dict[str, Any] | None = None
    tenant: str | None = None


class GetTaskRequest(Base):
    """Params of GetTask."""

    id: NonEmptyStr
    history_length: int | None = None
    tenant: str | None = None
    current_generation: int | None = None  # A2A 1.1 section 3.2.7: long-poll until the generation exceeds it


class ListTasksRequest(Base):
    """Params of ListTasks."""

    context_id: str | None = None
    status: TaskState | None = None
    page_size: int | None = None
    page_token: str | None = None
    history_length: int | None = None
    status_timestamp_after: str | None = None
    include_artifacts: bool = False
    tenant: str | None = None


class ListTasksResponse(Base):
    """Result of ListTasks; `nextPageToken` is always present."""

    tasks: list[Task]
    next_page_token: str
    page_size: int
    total_size: int


class CancelTaskRequest(Base):
    """Params of CancelTask."""

    id: NonEmptyStr
    metadata: dict[str, Any] | None = None
    tenant: str | None = None


class SubscribeToTaskRequest(Base):
    """Params of SubscribeToTask."""

    id: NonEmptyStr
    tenant: str | None = None


class TaskPushConfigRef(Base):
    """Params of Get/DeleteTaskPushNotificationConfig."""

    task_id: NonEmptyStr
    id: NonEmptyStr
    tenant: str | None = None


class ListTaskPushConfigsRequest(Base):
    """Params of ListTaskPushNotificationConfigs."""

    task_id: NonEmptyStr
    page_size: int | None = None
    page_token: str | None = None
    tenant: str | None = None


class ListTaskPushConfigsResponse(Base):
    """Result of ListTaskPushNotificationConfigs."""

    configs: list[TaskPushNotificationConfig]
    next_page_token: str = ""


class GetExtendedAgentCardRequest(Base):
    """Params of GetExtendedAgentCard."""

    tenant: str | None = None


# --- Agent card ------------------------------------------------------------


class AgentInterface(Base):
    """One (binding, version) at which an agent is served."""

    url: str
    protocol_binding: str
    protocol_version: str
    tenant: str | None = None


class AgentProvider(Base):
    """Who runs the agent."""

    organization: str
    url: str


class AgentExtension(Base):
    """An A2A extension the agent supports."""

    uri: str
    description: str | None = None
    required: bool = False
    params: dict[str, Any] | None = None


class AgentCapabilities(Base):
    """Optional protocol features the agent supports."""

    streaming: bool | None = None
    push_notifications: bool | None = None
    extensions: list[AgentExtension] | None = None
    extended_agent_card: bool | None = None


class AgentSkill(Base):
    """Something the agent can do."""

    id: str
    name: str
    description: str
    tags: list[str] = msgspec.field(default_factory=list)
    examples: list[str] | None = None
    input_modes: list[str] | None = None
    output_modes: list[str] | None = None
    security_requirements: list[dict[str, Any]] | None = None


class AgentCard(Base):
    """The A2A 1.0 agent card."""

    name: str
    description: str
    supported_interfaces: list[AgentInterface]
    version: str
    capabilities: AgentCapabilities
    default_input_modes: list[str]
    default_output_modes: list[str]
    skills: list[AgentSkill]
    provider: AgentProvider | None = None
    documentation_url: str | None = None
    security_schemes: dict[str, dict[str, Any]] | None = None
    security_requirements: list[dict[str, Any]] | None = None
    signatures: list[dict[str, Any]] | None = None
    icon_url: str | None = None
