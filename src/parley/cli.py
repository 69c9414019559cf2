"""The `parley` command line: serve agents, and talk to any A2A server.

Errors are printed as one clear line (never a traceback) and exit with status 1; bad input that is caught
before anything is sent (an invalid --push-url, options that do not go together) exits with status 2.

`--json`: every command that prints data can print it as JSON on stdout instead: one document, or for
streams (`send --stream`, `tasks watch`, `chat`) one document per line (JSON lines), each line one event.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import sys
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import msgspec
import typer
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape

from parley.client import A2AClient, ClientError
from parley.protocol import models as m
from parley.protocol.codec import to_wire
from parley.protocol.errors import A2AError

app = typer.Typer(help="Parley: serve A2A agents, and talk to any A2A agent.", no_args_is_help=True, rich_markup_mode=None,
                  pretty_exceptions_enable=False, add_completion=False)
tasks_app = typer.Typer(help="Read, list, cancel and watch tasks.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")
keys_app = typer.Typer(help="Make, list and revoke the API keys of a server's agents (its --db or --config).",
                       no_args_is_help=True)
app.add_typer(keys_app, name="keys")
push_app = typer.Typer(help="Push notifications: a task's delivery log, and the key notifications are signed with.",
                       no_args_is_help=True)
app.add_typer(push_app, name="push")
cards_app = typer.Typer(help="Signed agent cards: the keys the cards are signed with.", no_args_is_help=True)
cards_keys_app = typer.Typer(help="List and rotate the card signing keys (beside the server's --db).",
                             no_args_is_help=True)
cards_app.add_typer(cards_keys_app, name="keys")
app.add_typer(cards_app, name="cards")
CREDENTIALS: dict[str, str] = {}  # headers every client command sends (--api-key / --token)


@app.callback()
def _credentials(
    api_key: str | None = typer.Option(None, "--api-key", envvar="PARLEY_API_KEY",
                                          help="An API key to send (X-API-Key)."),
    token: str | None = typer.Option(None, "--token", envvar="PARLEY_TOKEN",
                                        help="A bearer token to send (Authorization)."),
    version: bool = typer.Option(False, "--version", is_eager=True, callback=lambda shown: _version(shown),
                                 help="Show Parley's version and exit."),
) -> None:
    """Parley: serve A2A agents, and talk to any A2A agent."""
    CREDENTIALS.clear()
    if api_key:
        CREDENTIALS["X-API-Key"] = api_key
    if token:
        CREDENTIALS["Authorization"] = f"Bearer {token}"

out = Console()
err = Console(stderr=True)


def _version(shown: bool) -> None:
    """--version: the installed distribution's version, then exit."""
    if shown:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("parley-a2a")
        except PackageNotFoundError:
            number = "unknown (not installed)"
        print(f"parley {number}")
        raise typer.Exit()
T = TypeVar("T")

VersionOpt = typer.Option(None, "--version", "-V", help="Protocol version to use: 1.0 or 0.3 (default: the card's first).")
JsonOpt = typer.Option(False, "--json", help="Print JSON (A2A 1.0 shapes) on stdout instead of formatted output.")
StreamJsonOpt = typer.Option(False, "--json", help="Print each event as one line of JSON (A2A 1.0 shapes; JSON "
                             "lines) instead of formatted output.")
BindingOpt = typer.Option(None, "--binding", "-b", help="Binding to use: jsonrpc, rest or grpc (default: the card's first).")
BINDINGS = {"jsonrpc": "JSONRPC", "rest": "HTTP+JSON", "grpc": "GRPC"}


async def connect(url: str, version: str | None = None, binding: str | None = None) -> A2AClient:
    """Connect to an agent, honouring --version and --binding."""
    bindings = None
    if binding:
        key = binding.lower()
        if key not in BINDINGS:
            raise ClientError(f"unknown binding {binding!r}; use jsonrpc, rest or grpc")
        bindings = [BINDINGS[key]]
    return await A2AClient.connect(url, version=version, bindings=bindings, headers=dict(CREDENTIALS) or None)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print one error line and exit `code` (1 unless told)."""
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def usage_error(message: str) -> NoReturn:
    """Print one error line about the command's own input and exit 2 (nothing was sent)."""
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def warn(message: str) -> None:
    """Print one warning line on stderr."""
    err.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


# What a server's error message suggests in protocol terms, said with the command that does it.
_CLI_WORDS = (
    ("use GetTask, or resubscribe with Last-Event-ID to replay",
     "see it with `parley tasks get`, or replay its events with `parley tasks watch --last-event-id 0`"),
    ("GET /agents lists them", "`parley agents` lists them"),
)


def cli_words(message: str) -> str:
    """A server's error message with its protocol hints turned into the CLI commands that do the same."""
    for protocol, command in _CLI_WORDS:
        message = message.replace(protocol, command)
    return message


def run(coro_fn: Callable[..., Awaitable[T]]) -> Callable[..., T]:
    """Run an async command, turning every expected failure into one line."""

    @functools.wraps(coro_fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return asyncio.run(coro_fn(*args, **kwargs))
        except BrokenPipeError:  # `parley ... | head`: the reader left; end quietly
            _reader_gone()
        except A2AError as exc:
            fail(f"{cli_words(exc.message)} (A2A error {exc.code})")
        except ClientError as exc:
            fail(cli_words(str(exc)))
        except KeyboardInterrupt:
            err.print("interrupted")
            raise typer.Exit(130) from None
        raise AssertionError("unreachable")

    return wrapper


EXIT_TASK_UNSUCCESSFUL = 3  # the task ended failed, rejected or canceled
EXIT_TASK_WAITING = 4  # the task waits for the user (input-required, auth-required)


def exit_code(state: m.TaskState | None) -> int:
    """The exit status of `parley send` for the state its task ended in (None: a message reply)."""
    if state in (m.TaskState.FAILED, m.TaskState.REJECTED, m.TaskState.CANCELED):
        return EXIT_TASK_UNSUCCESSFUL
    if state in (m.TaskState.INPUT_REQUIRED, m.TaskState.AUTH_REQUIRED):
        return EXIT_TASK_WAITING
    return 0


def _state(state: m.TaskState) -> str:
    return state.value.removeprefix("TASK_STATE_").lower().replace("_", "-")


def _text(parts: list[m.Part]) -> str:
    chunks = []
    for p in parts:
        if p.text is not None:
            chunks.append(p.text)
        elif p.url is not None:
            chunks.append(f"[file {p.filename or ''} {p.url}]")
        elif p.raw is not None:
            chunks.append(f"[file {p.filename or ''} {len(p.raw)} bytes]")
        else:
            chunks.append(json.dumps(p.data))
    return "".join(chunks)


def emit_json(data: Any) -> None:
    """Print one JSON document on stdout, as it is (never wrapped or coloured: it must parse)."""
    out.file.write(json.dumps(data, indent=2) + "\n")
    out.file.flush()


def emit_json_line(data: Any) -> None:
    """Print one JSON document on one line (a stream's event: JSON lines)."""
    out.file.write(json.dumps(data, separators=(",", ":")) + "\n")
    out.file.flush()


def print_json(obj: Any) -> None:
    """Print a canonical object (task, card, page) as one JSON document."""
    emit_json(to_wire(obj))


# --- tables -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A table column: `keep` columns (ids, states) are always shown, whole; the others, in `rank` order (1 first),
    only if they fit in the width."""

    header: str
    keep: bool = False
    rank: int = 0


def table_width() -> int | None:
    """The width tables must fit: COLUMNS, else the terminal's; None in a pipe (lines as long as they need)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if out.file.isatty():
        import shutil

        return shutil.get_terminal_size().columns
    return None


def table_lines(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int | None) -> tuple[list[str],
                                                                                                      list[str]]:
    """(the lines of a plain table, the headers of the columns left out): every cell whole on one line, each column
    as wide as its widest cell; optional columns that would make a line longer than `width` are left out."""
    cells = [[" ".join(str(c).split()) for c in row] for row in rows]
    widths = [max([cell_len(col.header), *(cell_len(row[i]) for row in cells)]) for i, col in enumerate(columns)]
    shown = {i for i, col in enumerate(columns) if col.keep}
    used = sum(widths[i] for i in shown) + 2 * max(len(shown) - 1, 0)
    for i in sorted((i for i, col in enumerate(columns) if not col.keep), key=lambda i: columns[i].rank):
        if width is None or used + 2 + widths[i] <= width:
            shown.add(i)
            used += 2 + widths[i]
    order = [i for i in range(len(columns)) if i in shown]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v + " " * (widths[i] - cell_len(v)) for i, v in zip(order, values, strict=True)).rstrip()

    lines = [line([columns[i].header for i in order]), *(line([row[i] for i in order]) for row in cells)]
    return lines, [col.header for i, col in enumerate(columns) if i not in shown]


def print_table(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> None:
    """Print a table readable at any width and in a pipe: ids never wrapped or cut (copy-pasteable), columns that
    do not fit left out (said on stderr; --json has everything)."""
    width = table_width()
    lines, left_out = table_lines(columns, rows, width)
    for text in lines:
        out.print(text, markup=False, highlight=False, soft_wrap=True)
    if left_out:
        err.print(f"[dim]({width} columns: not shown: {escape(', '.join(left_out))}; widen the terminal, or use "
                  "--json)[/]", highlight=False, soft_wrap=True)


def when_utc(ts: float | str | None, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    """A time (epoch seconds, or an ISO 8601 string) in UTC, as `fmt`; "-" when there is none."""
    from datetime import UTC, datetime

    if ts is None or ts == "":
        return "-"
    try:
        moment = (datetime.fromtimestamp(ts, UTC) if isinstance(ts, (int, float))
                  else datetime.fromisoformat(str(ts)))
    except (ValueError, OverflowError, OSError):
        return str(ts)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime(fmt)


def print_task(task: m.Task) -> None:
    """A task as a short human summary."""
    out.print(f"[bold]task[/] {task.id}  [cyan]{_state(task.status.state)}[/]  context {task.context_id}",
              highlight=False)
    if task.status.message is not None:
        out.print(f"[magenta]agent:[/] {escape(_text(task.status.message.parts))}", highlight=False)
    for art in task.artifacts or []:
        out.print(f"[green]{escape(art.name or art.artifact_id)}:[/] {escape(_text(art.parts))}", highlight=False)


class StreamPrinter:
    """Renders stream events live: artifact text as it arrives, states as lines."""

    def __init__(self) -> None:
        self.open_line = False
        self.task: m.Task | None = None
        self.last_state: m.TaskState | None = None

    def _newline(self) -> None:
        if self.open_line:
            out.print()
            self.open_line = False

    def __call__(self, ev: m.StreamEvent) -> None:
        if isinstance(ev, m.Task):
            self.task = ev
            self.last_state = ev.status.state
            out.print(f"[dim]task {ev.id} ({_state(ev.status.state)}), context {ev.context_id}[/]", highlight=False)
        elif isinstance(ev, m.Message):
            self._newline()
            out.print(f"[magenta]agent:[/] {escape(_text(ev.parts))}", highlight=False)
        elif isinstance(ev, m.TaskArtifactUpdateEvent):
            out.print(_text(ev.artifact.parts), end="", highlight=False, markup=False)
            sys.stdout.flush()
            self.open_line = not ev.last_chunk
            if ev.last_chunk:
                out.print()
        else:
            self._newline()
            self.last_state = ev.status.state
            line = f"[cyan]{escape('[' + _state(ev.status.state) + ']')}[/]"
            if ev.status.message is not None:
                line += f" {escape(_text(ev.status.message.parts))}"
            out.print(line, highlight=False)


@app.command()
def serve(
    host: str | None = typer.Option(None, help="Interface to listen on [default: 127.0.0.1]."),
    port: int | None = typer.Option(None, help="TCP port [default: 8000]."),
    db: str | None = typer.Option(None, help="Where tasks are kept: a SQLite file, or a postgresql:// URL that "
                                  "replicas share [default: .parley/parley.db]."),
    bus: str | None = typer.Option(None, help="How replicas share events: postgres (LISTEN/NOTIFY) or a redis:// "
                                   "URL (also shares rate limits) [default: postgres with a postgresql:// db, "
                                   "else in process]."),
    memory: bool = typer.Option(False, "--memory", help="Keep tasks in memory only (lost at exit)."),
    config_path: str | None = typer.Option(None, "--config", "-c", help="A parley.toml declaring the agents."),
    app_spec: str | None = typer.Option(None, "--app", help="Serve your own app: 'module:attribute' (a parley.Parley)."),
    public_url: str | None = typer.Option(None, help="Base URL clients use, if behind a proxy."),
    max_body_bytes: int | None = typer.Option(None, help="Largest request body accepted (HTTP 413 above) [default: 8 MiB]."),
    log_level: str = typer.Option("info", help="uvicorn log level."),
    access_log: bool | None = typer.Option(None, "--access-log/--no-access-log", help="A log line per request "
                                           "(uvicorn's access log) [default: on, or the config's access_log]."),
    grpc_port: int | None = typer.Option(None, "--grpc-port", help="Also serve A2A 1.0 over gRPC on this port."),
    group_commit_seconds: float | None = typer.Option(
        None, "--group-commit-seconds", help="SQLite: a busy store writes at most once per this interval, so that "
        "concurrent streams' tokens share a transaction; 0 turns it off [default: 0, off]."),
    otel: bool | None = typer.Option(None, "--otel/--no-otel", help="OpenTelemetry traces and metrics (parley-a2a[otel]) "
                                        "[default: on when OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_ENDPOINT is set]."),
    log_format: str = typer.Option("text", "--log-format", help="Log format: text, or json (one object per line, "
                                   "with task and trace ids)."),
    insecure: bool = typer.Option(False, "--insecure", help="Serve a non-loopback address with no credentials "
                                  "configured: every client is trusted. Never in production."),
    push_allow: list[str] = typer.Option([], "--push-allow",  # noqa: B008 - how Typer declares options
                                         help="A network (CIDR) or address webhooks may reach "
                                         "although it is not public, e.g. 10.0.0.0/8 (repeatable; adds to "
                                         "the config's push.allow)."),
) -> None:
    """Start the A2A server: built-in agents (echo, interviewer) over SQLite, and the dashboard at /.

    With --config or --app, the agents and server settings come from the file or the app; flags override them.
    """
    import uvicorn

    from parley.guarded_http import guarded_protocol
    from parley.postgres import is_postgres_url
    from parley.serve import DrainingServer, ServeError, default_app, load_app, tune_gc
    from parley.settings import DEFAULT_DB, MEMORY
    from parley.tasks.store import StoreError

    if config_path and app_spec:
        fail("use either --config or --app, not both")
    try:
        if config_path:
            parley = _from_config(config_path)
        elif app_spec:
            parley = load_app(app_spec)
        else:
            parley = default_app(DEFAULT_DB)
    except ServeError as exc:
        fail(str(exc))
    settings = parley.settings.merged(host=host, port=port, db=MEMORY if memory else db, bus=bus,
                                      public_url=public_url,
                                      max_body_bytes=max_body_bytes, grpc_port=grpc_port, insecure=insecure or None,
                                      access_log=access_log, group_commit_seconds=group_commit_seconds)
    if settings.db is None:
        settings.db = DEFAULT_DB
    if push_allow:
        settings.push = msgspec.structs.replace(settings.push, allow=[*settings.push.allow, *push_allow])
    for key, reason in settings.problems():
        fail(f"--{key.replace('_', '-')}: {reason}")
    if settings.grpc_port is not None:  # gRPC binding (parley-a2a[grpc])
        try:
            import google.protobuf  # noqa: F401
            import grpc  # noqa: F401
        except ImportError as exc:
            fail(f"--grpc-port needs the gRPC extra: pip install 'parley-a2a[grpc]' ({exc})")
    parley.settings = settings
    _check_port(settings.host, settings.port)  # a busy port is said before anything is created or printed
    if settings.grpc_port is not None:
        _check_port(settings.grpc_bind_host, settings.grpc_port)
    log_config, telemetry_on = _observability(otel, log_format, log_level)  # parley.telemetry, before asgi()
    local_db = settings.db if settings.db != MEMORY and not is_postgres_url(settings.db) else None
    with _removed_if_start_fails(local_db):
        try:
            asgi = parley.asgi(settings)
        except StoreError as exc:
            fail(str(exc))
        except ValueError as exc:  # a credential setting that cannot be used (a JWT secret variable unset, ...)
            fail(str(exc), getattr(exc, "exit_code", 1))  # 2: an unsafe one (parley.security.required)
        try:
            _check_open_mode(asgi.state.parley, settings)
        except StoreError as exc:  # the shared database or bus cannot be reached (or the schema is too new)
            fail(str(exc))
    base = settings.public_url or f"http://{settings.host}:{settings.port}"
    err.print(f"[bold]Parley[/] serving {len(parley.agents)} agent(s) at {base}  (default: {parley.default_agent})",
              highlight=False)
    for agent_id in parley.agents:
        err.print(f"  {agent_id:12} {base}/a2a/{agent_id}", highlight=False)
    if settings.grpc_port is not None:
        err.print(f"  gRPC (A2A 1.0) on {settings.grpc_bind_host}:{settings.grpc_port}", highlight=False)
    extra: dict[str, Any] = {"log_config": log_config} if log_config is not None else {}
    try:
        # proxy_headers=False: uvicorn would replace the peer address with X-Forwarded-For (trusting its own
        # list), and Parley could no longer tell whether the direct peer is one of `forwarded_allow_ips`;
        # Parley reads the forwarded headers itself, from trusted peers only (parley.server.urls).
        # Slow and idle clients are closed (parley.guarded_http): header-read, body-read, keep-alive idle and stall
        # timeouts.
        config = uvicorn.Config(asgi, host=settings.host, port=settings.port, log_level=log_level,
                                access_log=settings.access_log, proxy_headers=False,
                                timeout_keep_alive=settings.idle_timeout_seconds,
                                http=guarded_protocol(settings.header_timeout_seconds,
                                                      settings.stall_timeout_seconds,
                                                      settings.body_timeout_seconds, settings.body_min_rate),
                                **extra)
        tune_gc()
        DrainingServer(config, asgi.state.parley).run()
    except OSError as exc:
        fail(f"cannot listen on {settings.host}:{settings.port}: {exc}")
    finally:
        if telemetry_on:
            from parley.telemetry import shutdown_telemetry

            shutdown_telemetry()


def _check_port(host: str, port: int) -> None:
    """Fail now, in one line, when `host:port` cannot be listened on (busy, or not an address of this machine)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no obstacle
        try:
            probe.bind((host, port))
        except OSError as exc:
            fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")


@contextlib.contextmanager
def _removed_if_start_fails(db: str | None) -> Iterator[None]:
    """A database directory this start creates is removed again when the start fails (no `.parley/` left
    behind by a refused or broken start); one that existed before is never touched."""
    from pathlib import Path

    folder = Path(db).parent if db else None
    fresh = folder is not None and not folder.exists()
    try:
        yield
    except BaseException:
        if fresh and folder is not None:
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
        raise


async def _secured(runtime: Any, settings: Any) -> bool:
    """Whether the server will require credentials. A shared database is opened here with a pool of its own
    (the runtime's stores connect in the server's event loop): this also checks, before the banner, that it
    can be reached and that its schema is not newer than this Parley."""
    auth = runtime.security.authenticator
    if not runtime.backends.shared:
        return await auth.secured()
    from parley.backends import Backends

    backends = Backends(settings)
    try:
        await backends.store().open()  # migrations: the replicas' first start creates the tables
        bus = backends.bus()  # reachable now, or one line before the banner
        await bus.start()
        await bus.close()
        if auth.jwt is not None or auth.admin_key is not None:
            return True
        keys = backends.keys()
        await keys.open()
        return await keys.has_keys()
    finally:
        assert backends.postgres is not None
        await backends.postgres.close()


async def _credentials(runtime: Any) -> str:
    """What secures the server, for the banner: the token issuer, the admin key, the API keys (how many are
    active, and the command that lists them)."""
    auth = runtime.security.authenticator
    said = [what for what, on in (("a token issuer", auth.jwt is not None), ("an admin key", auth.admin_key))
            if on]
    keys = auth.keys
    if keys is not None and not runtime.backends.shared:
        await keys.open()
        listed = await keys.list()
        active = sum(k.active(time.time()) for k in listed)
        db = runtime.settings.db
        said.append(f"{active} active API key(s) of {len(listed)} (`parley keys list --db {db}`; "
                    "`parley keys purge` after revoking them all returns to development mode)")
    elif keys is not None:
        said.append("API keys in the shared database (`parley keys list --config ...`)")
    return ", ".join(said) or "credentials configured"


def _check_open_mode(runtime: Any, settings: Any) -> None:
    """No credentials configured: on a loopback address, say so loudly; elsewhere, refuse unless --insecure."""
    if asyncio.run(_secured(runtime, settings)):
        err.print(f"secured: {asyncio.run(_credentials(runtime))}; every request must authenticate",
                  highlight=False, soft_wrap=True)
        return
    problem = settings.open_mode_problem()  # every listening address: HTTP host and gRPC grpc_host
    if problem is not None:
        fail(problem)
    where = "every client that can reach it" if not settings.loopback else "every local process"
    err.print(f"[bold yellow]WARNING:[/] no credentials configured: {where} is trusted, as the `anonymous` "
              "principal (development mode). Make an API key with `parley keys create AGENT` to require one.",
              highlight=False, soft_wrap=True)


def _observability(otel: bool | None, log_format: str, log_level: str) -> tuple[dict | None, bool]:
    """--otel and --log-format: turn telemetry on (flag, else the OTEL_* environment); the uvicorn log config."""
    from parley import telemetry

    if log_format not in ("text", "json"):
        fail(f"unknown --log-format {log_format!r}; use text or json")
    log_config = None
    if log_format == "json":
        log_config = telemetry.logging_config("json", log_level)
        telemetry.enable_log_context()
    wanted = otel if otel is not None else telemetry.env_wants_telemetry()
    if not wanted:
        return log_config, False
    if otel is None and not telemetry.otel_available():
        err.print("[yellow]warning:[/] " + escape("the OTEL_* environment asks for telemetry but OpenTelemetry is "
                  "not installed (pip install 'parley-a2a[otel]'); serving without it"), highlight=False, soft_wrap=True)
        return log_config, False
    try:
        tel = telemetry.configure_telemetry()
    except telemetry.TelemetryUnavailable as exc:
        fail(f"--otel: {exc}")
    except ValueError as exc:
        fail(f"--otel: {exc}")
    err.print(f"[dim]OpenTelemetry on: service {tel.service_name}, spans to {tel.exporter}[/]", highlight=False)
    return log_config, True


def _from_config(path: str):
    """The app a parley.toml declares (agents, routes and its [server] settings)."""
    from parley.hub.build import build_app
    from parley.hub.config import ConfigError, load_config
    from parley.serve import ServeError

    try:
        config = load_config(path)
        return asyncio.run(build_app(config))
    except ConfigError as exc:
        raise ServeError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - never a traceback at start-up: say what failed, in one line
        raise ServeError(f"{path}: cannot build the agents: {type(exc).__name__}: {exc}") from None


# --- keys -------------------------------------------------------------------------------------------------------

DbOpt = typer.Option(None, "--db", help="The server's database: a SQLite file or a postgresql:// URL "
                     "[default: .parley/parley.db].")
ConfigOpt = typer.Option(None, "--config", "-c", help="The server's parley.toml (its [server] db, and its agents).")


def _key_store(db: str | None, config_path: str | None) -> tuple[Any, set[str] | None]:
    """The key store of a server's database, and the agent ids its config declares (None: unknown)."""
    from parley.backends import Backends
    from parley.settings import DEFAULT_DB, MEMORY, Settings
    from parley.tasks.store import StoreError

    agents: set[str] | None = None
    if config_path:
        from parley.hub.config import ConfigError, load_config

        try:
            config = load_config(config_path)
        except ConfigError as exc:
            fail(str(exc))
        db = db or config.server.db
        agents = {a.id for a in config.agents} | ({"echo", "interviewer"} if config.server.builtin_agents else set())
    db = db or DEFAULT_DB
    if db == MEMORY:
        fail("a --memory server keeps its keys in its own process: use its admin API (POST /admin/keys)")
    try:
        return Backends(Settings(db=db)).keys(), agents
    except StoreError as exc:
        fail(str(exc))


async def _opened(store: Any) -> Any:
    """`store` (keys, signing keys), connected; a database that cannot be used is one line."""
    from parley.tasks.store import StoreError

    try:
        await store.open()
    except StoreError as exc:
        raise ClientError(str(exc)) from None
    return store


def _duration(value: str) -> float | None:
    """Seconds in "30d", "12h" or "45m"; None if `value` is not such a duration."""
    import re

    found = re.fullmatch(r"(\d+)\s*([dhm])", value.strip())
    return int(found[1]) * {"d": 86400, "h": 3600, "m": 60}[found[2]] if found else None


def _expiry(value: str | None) -> float | None:
    """--expires: 30d, 12h, 45m, or an ISO 8601 date or time (UTC unless it says)."""
    import time as _time
    from datetime import UTC, datetime

    if not value:
        return None
    seconds = _duration(value)
    if seconds is not None:
        return _time.time() + seconds
    try:
        # not fromisoformat(value) alone: it rejects a date with a "Z" (2030-01-31Z), which this accepts
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))  # noqa: FURB162
    except ValueError:
        raise ClientError(f"--expires {value!r}: give a duration (30d, 12h, 45m) or an ISO 8601 date") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _key_row(key: Any) -> list[str]:
    """A key's record as the cells of `keys list` (and the values of its --json objects), in KEY_COLUMNS order."""
    import time as _time

    def when(ts: float | None) -> str:
        return when_utc(ts, "%Y-%m-%d %H:%M") if ts else "-"

    state = "revoked" if key.revoked_at else ("expired" if key.expires_at and key.expires_at <= _time.time()
                                               else "active")
    return [key.id, key.agent_id, key.name or "-", " ".join(sorted(key.scopes)), key.principal, when(key.created_at),
            when(key.last_used_at), when(key.expires_at), state]


def _key_json(key: Any) -> dict[str, str]:
    """A key's record as a `keys ... --json` object (the columns of `keys list`; never its secret)."""
    return dict(zip(KEY_COLUMNS, _key_row(key), strict=True))


KEY_COLUMNS = ("id", "agent", "name", "scopes", "principal", "created", "last used", "expires", "state")
# At 80 columns the id, agent and state always show; then name, expiry, scopes... as they fit.
KEY_TABLE = (Column("id", keep=True), Column("agent", keep=True), Column("name", rank=1), Column("scopes", rank=3),
             Column("principal", rank=5), Column("created", rank=6), Column("last used", rank=4),
             Column("expires", rank=2), Column("state", keep=True))


@keys_app.command("create")
@run
async def keys_create(
    agent: str = typer.Argument(..., help="The agent the key opens (its id)."),
    name: str = typer.Option("", "--name", help="A name to recognise the key by."),
    scopes: str = typer.Option("a2a", "--scopes", help="Comma-separated scopes (admin: manage keys, open every agent)."),
    expires: str | None = typer.Option(None, "--expires", help="When it stops working: 30d, 12h, or a date."),
    principal: str | None = typer.Option(None, "--principal", help="Whose tasks it sees [default: its own]."),
    db: str | None = DbOpt,
    config_path: str | None = ConfigOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the key's record and its token as one JSON object "
                                 "(the token under \"token\")."),
) -> None:
    """Make an API key; it is printed once (stdout) and stored only as a keyed hash."""
    from parley.security.keys import KeyProblem

    store, agents = _key_store(db, config_path)
    try:
        await _opened(store)
        if agents is not None and agent not in agents and agent != "*":
            raise ClientError(f"{config_path} declares no agent {agent!r} (it has: {', '.join(sorted(agents))})")
        try:
            key, token = await store.create(agent, name=name, scopes=frozenset(s.strip() for s in scopes.split(",")
                                                                               if s.strip()),
                                            expires_at=_expiry(expires), principal=principal)
        except KeyProblem as exc:
            raise ClientError(str(exc)) from None
    finally:
        await store.close()
    err.print(f"API key {key.id} for agent {key.agent_id} ({', '.join(sorted(key.scopes))}), principal "
              f"{key.principal}. It is shown once, now:", highlight=False, soft_wrap=True)
    if as_json:
        emit_json({**_key_json(key), "token": token})
        return
    print(token)


@keys_app.command("list")
@run
async def keys_list(agent: str | None = typer.Argument(None, help="Only the keys that open this agent."),
                    db: str | None = DbOpt, config_path: str | None = ConfigOpt,
                    as_json: bool = JsonOpt) -> None:
    """List the keys (never their secrets)."""
    store, _ = _key_store(db, config_path)
    try:
        await _opened(store)
        keys = await store.list(agent)
    finally:
        await store.close()
    if as_json:
        emit_json([_key_json(k) for k in keys])
        return
    print_table(KEY_TABLE, [_key_row(k) for k in keys])


@keys_app.command("revoke")
@run
async def keys_revoke(key_id: str = typer.Argument(..., help="The key's id (see parley keys list)."),
                      db: str | None = DbOpt, config_path: str | None = ConfigOpt,
                      as_json: bool = typer.Option(False, "--json", help="Print the revoked key's record as JSON "
                                                   "(as `keys list --json` shows it).")) -> None:
    """Revoke a key: it stops working at once (a running server notices within a second)."""
    store, _ = _key_store(db, config_path)
    try:
        await _opened(store)
        key = await store.revoke(key_id)
    finally:
        await store.close()
    if key is None:
        raise ClientError(f"no key {key_id!r}")
    if as_json:
        emit_json(_key_json(key))
        return
    out.print(f"revoked {key.id} (agent {key.agent_id}, {key.name or 'no name'})", highlight=False)


@keys_app.command("purge")
@run
async def keys_purge(db: str | None = DbOpt, config_path: str | None = ConfigOpt,
                     as_json: bool = typer.Option(False, "--json", help="Print the purged keys' records and how many "
                                                  "are left as JSON.")) -> None:
    """Forget revoked and expired keys. With none left, a loopback server on this database runs in development
    mode again at its next start (its tasks are kept); active keys are never purged."""
    store, _ = _key_store(db, config_path)
    try:
        await _opened(store)
        gone = await store.purge()
        left = await store.list()
    finally:
        await store.close()
    if as_json:
        emit_json({"purged": [_key_json(k) for k in gone], "left": len(left)})
        return
    out.print(f"purged {len(gone)} revoked or expired key(s); {len(left)} left", highlight=False)
    if left:
        err.print("the server stays secured: revoke the keys still listed by `parley keys list` first, then purge",
                  highlight=False, soft_wrap=True)
    else:
        err.print("no key is left: restart `parley serve` on a loopback address for development mode (tasks are "
                  "kept)", highlight=False, soft_wrap=True)


# --- push -------------------------------------------------------------------------------------------------------


PUSH_LOG_TABLE = (Column("event", keep=True), Column("config", keep=True), Column("kind", rank=3),
                  Column("state", keep=True), Column("attempts", rank=2), Column("last", rank=1),
                  Column("next try", rank=4))


@push_app.command("log")
@run
async def push_log(url: str = typer.Argument(..., help="Agent URL (a Parley server's /a2a/{agent}, or its base URL)."),
                   task_id: str = typer.Argument(..., help="The task whose notifications to show."),
                   as_json: bool = JsonOpt) -> None:
    """Show the push notifications of a task: each one's state, and every delivery attempt."""

    data = await _get_json(f"{url.rstrip('/')}/tasks/{task_id}/pushLog")
    if as_json:
        emit_json(data)
        return

    def when(ts: float | None) -> str:
        return when_utc(ts, "%H:%M:%S") if ts else "-"

    rows = []
    for n in data["notifications"]:
        last = str(n["lastStatus"] or n["lastError"] or "-")
        rows.append([n["eventId"], n["configId"], n["kind"], n["state"], str(n["attempts"]), last, when(n["nextAt"])])
        for t in n["tries"]:  # each attempt on a line of its own, under its notification: `#N HH:MM:SS`
            rows.append([f"  #{t['attempt']} {when(t['at'])}", "", "", t["outcome"], "",
                         str(t["status"] or t["error"] or "-"), when(t["nextAt"])])
    print_table(PUSH_LOG_TABLE, rows)


def _server_settings(db: str | None, config_path: str | None, *, memory: str) -> Any:
    """The settings of the server a command's --db / --config names (its database filled in); `memory` is the
    one-line refusal for a --memory server, whose state lives in its process only."""
    from parley.settings import DEFAULT_DB, MEMORY, Settings

    settings = Settings()
    if config_path:
        from parley.hub.config import ConfigError, load_config

        try:
            settings = load_config(config_path).server.settings()
        except ConfigError as exc:
            fail(str(exc))
    settings.db = db or settings.db or DEFAULT_DB
    if settings.db == MEMORY:
        fail(memory)
    return settings


@cards_keys_app.command("rotate")
@run
async def cards_keys_rotate(db: str | None = DbOpt, config_path: str | None = ConfigOpt,
                            as_json: bool = JsonOpt) -> None:
    """Sign the cards with a new key; the old one stays in the card JWKS for the grace period (a week)."""
    from parley.server.card_signing import KEEP_SECONDS

    keys = await _card_keys(db, config_path)
    try:
        key = await keys.rotate()
    finally:
        await keys.close()
    if as_json:
        emit_json({"kid": key.kid, "previousPublishedSeconds": KEEP_SECONDS})
        return
    out.print(f"new card signing key {key.kid}; the previous one stays published for {KEEP_SECONDS:g} s",
              highlight=False)


@cards_keys_app.command("list")
@run
async def cards_keys_list(db: str | None = DbOpt, config_path: str | None = ConfigOpt,
                          as_json: bool = JsonOpt) -> None:
    """The card signing keys the JWKS publishes: the active one and the retired ones still in their grace period."""
    from parley.server.card_signing import KEEP_SECONDS

    keys = await _card_keys(db, config_path)
    try:
        found = sorted(await keys.published(KEEP_SECONDS), key=lambda k: k.created_at)
    finally:
        await keys.close()
    rows = [{"kid": k.kid, "createdAt": k.created_at, "retiredAt": k.retired_at} for k in found]
    if as_json:
        emit_json(rows)
        return
    for row in rows:
        out.print(f"{row['kid']}  {'active' if row['retiredAt'] is None else 'retired'}", highlight=False)


async def _card_keys(db: str | None, config_path: str | None):
    """The card signing keys of the server whose database is `db` (or its config's), opened."""
    from parley.backends import Backends

    settings = _server_settings(db, config_path, memory="a --memory server keeps its card keys in its own process")
    try:
        keys = Backends(settings).card_keys()
    except ValueError as exc:
        fail(str(exc))
    await _opened(keys)
    return keys


@push_app.command("rotate-key")
@run
async def push_rotate_key(db: str | None = DbOpt, config_path: str | None = ConfigOpt,
                          as_json: bool = typer.Option(False, "--json", help="Print the new key's id and how long "
                                                       "the previous one stays published, as JSON.")) -> None:
    """Sign new notifications with a new key; the old one stays in the JWKS while its notifications may be retried."""
    from parley.backends import Backends
    from parley.push.setup import key_lifetime, secret_box

    settings = _server_settings(db, config_path, memory="a --memory server keeps its signing keys in its own process")
    try:
        keys = Backends(settings).signing_keys(secret_box(settings))
    except ValueError as exc:
        fail(str(exc))
    try:
        await _opened(keys)
        key = await keys.rotate()
    finally:
        await keys.close()
    if as_json:
        emit_json({"kid": key.kid, "previousPublishedSeconds": key_lifetime(settings.push)})
        return
    out.print(f"new signing key {key.kid}; the previous one stays published for "
              f"{key_lifetime(settings.push):g} s", highlight=False)


@app.command()
@run
async def card(url: str = typer.Argument(..., help="Agent URL or card URL."), as_json: bool = JsonOpt,
               verify: str | None = typer.Option(None, "--verify", metavar="JWKS",
                                                 help="Require the card to be signed by a key of this JWKS (a file, "
                                                      "or an http(s) URL you trust; never the card's own jku).")
               ) -> None:
    """Show an agent's card (with --verify, only once its signature checks out)."""
    from parley.client.card_trust import CardTrust

    trust = await CardTrust.load(verify) if verify else None
    async with await A2AClient.connect(url, headers=dict(CREDENTIALS) or None, verify=trust) as client:
        c = client.card
        assert c is not None
        if as_json:
            print_json(c)
            return
        out.print(f"[bold]{c.name}[/] {c.version}  — {c.description}", highlight=False)
        if trust is not None:
            out.print("  signature: verified with a trusted key", highlight=False)
        shown: set[tuple[str, str, str]] = set()
        for i in c.supported_interfaces:  # a 0.3 card repeats its main interface among the additional ones
            if (i.protocol_binding, i.protocol_version, i.url) not in shown:
                shown.add((i.protocol_binding, i.protocol_version, i.url))
                out.print(f"  {i.protocol_binding:9} {i.protocol_version:4} {i.url}", highlight=False)
        caps = c.capabilities
        out.print(f"  streaming={bool(caps.streaming)} push={bool(caps.push_notifications)} "
                  f"extended-card={bool(caps.extended_agent_card)}", highlight=False)
        for s in c.skills:
            out.print(f"  skill [green]{s.id}[/]: {s.description}", highlight=False)


@app.command()
@run
async def send(
    url: str = typer.Argument(..., help="Agent URL."),
    text: str = typer.Argument(..., help="Message text."),
    stream: bool = typer.Option(False, "--stream", "-s", help="Stream events as they happen."),
    task_id: str | None = typer.Option(None, "--task-id", help="Continue this task."),
    context_id: str | None = typer.Option(None, "--context-id", help="Continue this context."),
    no_wait: bool = typer.Option(False, "--no-wait", help="Return as soon as the task is created."),
    push_url: str | None = typer.Option(None, "--push-url", help="A webhook (http:// or https:// URL) the agent "
                                        "POSTs the task's changes to (a push notification config sent with the "
                                        "message)."),
    push_token: str | None = typer.Option(None, "--push-token", help="A token the webhook gets back in "
                                          "X-A2A-Notification-Token (with --push-url)."),
    version: str | None = VersionOpt,
    binding: str | None = BindingOpt,
    as_json: bool = typer.Option(False, "--json", help="Print JSON (A2A 1.0 shapes) instead of formatted output: "
                                 "the task (or message) as one document; with --stream, each event as one line "
                                 "(JSON lines)."),
) -> None:
    """Send a message to an agent.

    Exit status: 0 when the task completed (or the agent answered with a message, or --no-wait); 3 when
    it ended failed, rejected or canceled; 4 when it waits for input (input-required, auth-required:
    answer with --task-id); 1 for an error before there was a task; 2 for invalid options.
    """
    push = push_option(push_url, push_token)
    async with await connect(url, version, binding) as client:
        final: m.TaskState | None = None
        if stream:
            printer = StreamPrinter()
            async with contextlib.aclosing(client.stream(text, task_id=task_id, context_id=context_id,
                                                         push=push)) as events:
                async for ev in events:  # closed here, in this task, whatever ends the loop (a closed pipe too)
                    emit_json_line(to_wire(ev)) if as_json else printer(ev)
                    if isinstance(ev, (m.Task, m.TaskStatusUpdateEvent)):
                        final = ev.status.state
        else:
            result = await client.send(text, task_id=task_id, context_id=context_id, blocking=not no_wait,
                                       push=push)
            if as_json:
                print_json(result)
            elif isinstance(result, m.Task):
                print_task(result)
            else:
                out.print(f"[magenta]agent:[/] {escape(_text(result.parts))}", highlight=False)
            final = result.status.state if isinstance(result, m.Task) else None
    code = exit_code(final)
    if code:
        raise typer.Exit(code)


def push_option(push_url: str | None, push_token: str | None) -> m.TaskPushNotificationConfig | None:
    """--push-url and --push-token as a push notification config (a usage error, exit 2, when they are invalid)."""
    from urllib.parse import urlsplit

    if push_url is None:
        if push_token is not None:
            usage_error("--push-token needs --push-url (the webhook the token is sent to)")
        return None
    try:
        parts = urlsplit(push_url)
        host = parts.hostname
    except ValueError:
        parts, host = None, None
    if (parts is None or parts.scheme not in ("http", "https") or not host or any(c.isspace() for c in push_url)
            or parts.username is not None or parts.password is not None):
        usage_error(f"--push-url {push_url!r}: give an http:// or https:// URL with a host and no user name or "
                    "password, e.g. https://hooks.example.com/a2a")
    if push_token is not None and not push_token.strip():
        usage_error("--push-token is empty")
    return m.TaskPushNotificationConfig(url=push_url, token=push_token)


def _prompt(text: str, *, to_stderr: bool = False, before: Callable[[], None] | None = None) -> str:
    """input() that Ctrl-C interrupts at once: asyncio.run's own SIGINT handler only cancels the main task,
    which cannot happen while it waits in input(). `to_stderr`: the prompt goes to stderr (stdout is JSON).
    `before` (the chat's banner) is printed once Ctrl-C already interrupts: a Ctrl-C right after it is not lost."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        if before is not None:
            before()
        if to_stderr:
            sys.stderr.write(text)
            sys.stderr.flush()
            return input()
        return input(text)
    finally:
        signal.signal(signal.SIGINT, previous)


@app.command()
@run
async def chat(url: str = typer.Argument(..., help="Agent URL."), version: str | None = VersionOpt,
               binding: str | None = BindingOpt, as_json: bool = StreamJsonOpt) -> None:
    """Talk to an agent interactively; answers its follow-up questions (input-required).

    With --json, stdout has each event as one line of JSON, and the banner and prompt go to stderr."""
    async with await connect(url, version, binding) as client:
        assert client.card is not None
        name = client.card.name

        def banner() -> None:
            """The chat's first line (on stderr with --json)."""
            (err if as_json else out).print(f"[bold]{escape(name)}[/] — type a message, empty line or Ctrl-D to "
                                            "quit.", highlight=False)
            (err if as_json else out).file.flush()

        task_id: str | None = None
        context_id: str | None = None
        greeting: Callable[[], None] | None = banner
        while True:
            try:
                line = _prompt("you> ", to_stderr=as_json, before=greeting)
                greeting = None
            except EOFError:
                break
            if not line.strip():
                break
            printer = StreamPrinter()
            async for ev in client.stream(line, task_id=task_id, context_id=context_id):
                if not as_json:
                    printer(ev)
                else:
                    emit_json_line(to_wire(ev))
                    if isinstance(ev, (m.Task, m.TaskStatusUpdateEvent)):
                        printer.last_state = ev.status.state  # what the printer remembers when it prints
                if isinstance(ev, m.Task):
                    context_id = ev.context_id
                    task_id = ev.id
            if printer.last_state not in (m.TaskState.INPUT_REQUIRED, m.TaskState.AUTH_REQUIRED):
                task_id = None  # the task is finished: the next message starts a new one in the same context


@app.command()
@run
async def agents(url: str = typer.Argument(..., help="Server base URL."), as_json: bool = JsonOpt) -> None:
    """List the agents a server hosts: its AI Catalog (/.well-known/ai-catalog.json), else Parley's GET /agents."""
    import httpx

    from parley.client.discovery import hosted_agents

    async with httpx.AsyncClient(timeout=30, headers=dict(CREDENTIALS) or None) as http:
        cards, source = await hosted_agents(http, url)
    if as_json:
        emit_json({"agents": cards, "source": source})
        return
    for c in cards:
        out.print(f"[bold]{c['name']}[/]  {c['supportedInterfaces'][0]['url']}  — {c['description']}", highlight=False)


async def _get_agents(url: str) -> Any:
    """GET {url}/agents with the command's credentials (the httpx response); unreachable is one line."""
    import httpx

    async with httpx.AsyncClient(timeout=30, headers=dict(CREDENTIALS) or None) as http:
        try:
            return await http.get(url.rstrip("/") + "/agents")
        except httpx.HTTPError as exc:
            raise ClientError(f"cannot reach {url}: {exc}") from None


@tasks_app.command("get")
@run
async def tasks_get(url: str, task_id: str, history_length: int | None = typer.Option(None, "--history-length"),
                    version: str | None = VersionOpt, binding: str | None = BindingOpt,
                    as_json: bool = JsonOpt) -> None:
    """Show one task."""
    async with await connect(url, version, binding) as client:
        task = await client.get(task_id, history_length=history_length)
        print_json(task) if as_json else print_task(task)


TASK_TABLE = (Column("agent", keep=True), Column("task", keep=True), Column("state", keep=True),
              Column("updated", rank=1), Column("context", rank=2))
AGENT_URL = re.compile(r"/a2a/([^/]+)/?$")  # a Parley agent URL: {base}/a2a/{agent id}


@dataclass
class AgentTasks:
    """One agent's page of tasks in `parley tasks list` (or why it could not be read)."""

    agent: str
    url: str
    page: m.ListTasksResponse | None = None
    error: str | None = None


async def hosted_agents(url: str) -> list[str] | None:
    """The ids of the agents a Parley server hosts (GET {url}/agents, in its order); None when `url` answers
    no such list (another A2A server, or an agent's own URL)."""
    resp = await _get_agents(url)
    try:
        cards = resp.json().get("agents") if resp.status_code == 200 else None
    except (ValueError, AttributeError):
        cards = None
    if not isinstance(cards, list):
        return None
    ids: list[str] = []
    for card in cards:
        interfaces = card.get("supportedInterfaces") if isinstance(card, dict) else None
        for iface in interfaces if isinstance(interfaces, list) else []:
            found = AGENT_URL.search(urllib.parse.urlsplit(str(iface.get("url", "") if isinstance(iface, dict)
                                                               else "")).path)
            if found:  # the agent's id is the last segment of its URL, /a2a/{id}
                if urllib.parse.unquote(found[1]) not in ids:
                    ids.append(urllib.parse.unquote(found[1]))
                break
    return ids


async def _agent_tasks(agent: str, url: str, request: dict[str, Any], version: str | None,
                       binding: str | None, alone: bool) -> AgentTasks:
    """One agent's page; when it is one of several, an error is kept (said as a warning) instead of raised."""
    try:
        async with await connect(url, version, binding) as client:
            return AgentTasks(agent, url, await client.list(**request))
    except (A2AError, ClientError) as exc:
        if alone:
            raise
        message = exc.message if isinstance(exc, A2AError) else str(exc)
        code = f" (A2A error {exc.code})" if isinstance(exc, A2AError) else ""
        return AgentTasks(agent, url, error=cli_words(message) + code)


@tasks_app.command("list")
@run
async def tasks_list(
    url: str = typer.Argument(..., help="A Parley server's base URL (every hosted agent's tasks), or one agent's "
                                        "URL (/a2a/{agent}, or any A2A agent's)."),
    agent: str | None = typer.Option(None, "--agent", "-a", help="Only this agent's tasks (its id; with a server's "
                                     "base URL)."),
    context_id: str | None = typer.Option(None, "--context-id"),
    state: str | None = typer.Option(None, "--state", help="e.g. completed, working, input-required"),
    page_size: int | None = typer.Option(None, "--page-size", help="At most this many tasks of each agent."),
    page_token: str | None = typer.Option(None, "--page-token", help="The next page of one agent's tasks (as the "
                                          "previous page said; with --agent when the URL is a server's)."),
    version: str | None = VersionOpt,
    binding: str | None = BindingOpt,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document: tasks (A2A 1.0 Tasks, each with "
                                 "its \"agent\"), totalSize, and agents (each with totalSize and nextPageToken)."),
) -> None:
    """List tasks, newest first: every hosted agent's, with an agent column (a server's base URL), or one agent's."""
    st = None
    if state:
        try:
            st = m.TaskState("TASK_STATE_" + state.upper().replace("-", "_"))
        except ValueError:
            raise ClientError(f"unknown state {state!r}") from None
    base = url.rstrip("/")
    named = AGENT_URL.search(urllib.parse.urlsplit(base).path)
    if named is not None:  # an agent's own URL: that agent only
        named_id = urllib.parse.unquote(named[1])
        if agent is not None and agent != named_id:
            usage_error(f"--agent {agent}: {url} is agent {named_id}'s URL; give the server's base URL with --agent")
        targets = [(named_id, base)]
    else:
        hosted = await hosted_agents(base)
        if hosted is None:  # not a Parley server: an A2A agent of its own
            if agent is not None:
                raise ClientError(f"{url} does not list its agents (GET /agents): give the agent's own URL "
                                  "instead of --agent")
            targets = [("-", base)]
        elif agent is not None:
            if agent not in hosted:
                raise ClientError(f"no agent {agent!r} at {url} (the agents are: {', '.join(hosted) or 'none'})")
            targets = [(agent, f"{base}/a2a/{urllib.parse.quote(agent, safe='')}")]
        else:
            targets = [(a, f"{base}/a2a/{urllib.parse.quote(a, safe='')}") for a in hosted]
    if page_token is not None and len(targets) > 1:
        usage_error("--page-token continues one agent's list: add --agent ID (the agent the token is for)")
    request = {"context_id": context_id, "state": st, "page_size": page_size, "page_token": page_token}
    alone = len(targets) == 1
    pages = await asyncio.gather(*(_agent_tasks(a, u, request, version, binding, alone) for a, u in targets))
    read = [p for p in pages if p.page is not None]
    if not read:
        raise ClientError("; ".join(f"{p.agent}: {p.error}" for p in pages) or f"{url} hosts no agents")
    rows = sorted(((p.agent, t) for p in read for t in p.page.tasks),  # type: ignore[union-attr]
                  key=lambda row: _sort_time(row[1].status.timestamp), reverse=True)
    total = sum(p.page.total_size for p in read)  # type: ignore[union-attr]
    if as_json:
        doc: dict[str, Any] = {"tasks": [{**to_wire(t), "agent": a} for a, t in rows], "totalSize": total}
        if alone:
            doc["nextPageToken"] = read[0].page.next_page_token  # type: ignore[union-attr]
        doc["agents"] = [{"id": p.agent, "url": p.url,
                          **({"totalSize": p.page.total_size, "nextPageToken": p.page.next_page_token}
                             if p.page is not None else {"error": p.error})} for p in pages]
        emit_json(doc)
    else:
        print_table(TASK_TABLE, [[a, t.id, _state(t.status.state), when_utc(t.status.timestamp), t.context_id]
                                 for a, t in rows])
        summary = f"{len(rows)} of {total}"
        if alone:
            token = read[0].page.next_page_token  # type: ignore[union-attr]
            out.print(summary + (f"; next page: --page-token {token}" if token else ""), highlight=False)
        else:
            out.print(summary + " (" + ", ".join(f"{p.agent} {p.page.total_size}" for p in read)  # type: ignore[union-attr]
                      + ")", highlight=False)
            for p in read:
                if p.page.next_page_token:  # type: ignore[union-attr]
                    out.print(f"next page of {p.agent}: --agent {p.agent} --page-token "
                              f"{p.page.next_page_token}", highlight=False)  # type: ignore[union-attr]
    for p in pages:
        if p.error is not None:
            warn(f"{p.agent}: its tasks are not listed: {p.error}")


def _sort_time(timestamp: str | None) -> float:
    """A task's status time as seconds, to sort newest first (0 when it has none, or one that does not parse)."""
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(str(timestamp))
    except ValueError:
        return 0.0
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


@tasks_app.command("cancel")
@run
async def tasks_cancel(url: str, task_id: str, version: str | None = VersionOpt, binding: str | None = BindingOpt,
                       as_json: bool = JsonOpt) -> None:
    """Cancel a task."""
    async with await connect(url, version, binding) as client:
        task = await client.cancel(task_id)
        print_json(task) if as_json else print_task(task)


@tasks_app.command("watch")
@run
async def tasks_watch(url: str, task_id: str,
                      last_event_id: str | None = typer.Option(None, "--last-event-id", help="Replay after this id."),
                      version: str | None = VersionOpt, binding: str | None = BindingOpt,
                      as_json: bool = StreamJsonOpt) -> None:
    """Follow a task's events live (resubscribe)."""
    async with await connect(url, version, binding) as client:
        printer = StreamPrinter()
        async for ev in client.resubscribe(task_id, last_event_id=last_event_id):
            emit_json_line(to_wire(ev)) if as_json else printer(ev)


@tasks_app.command("prune")
@run
async def tasks_prune(
    url: str | None = typer.Argument(None, help="A running server's base URL (needs an admin --api-key or --token); "
                                                "without it, the store of --db / --config is pruned directly."),
    older_than: str | None = typer.Option(None, "--older-than", help="Remove tasks finished longer ago than this "
                                          "(30d, 12h, 45m) [default: the config's retention.max_age_days, 30d]."),
    keep: int | None = typer.Option(None, "--keep", min=0, help="Keep at most this many finished tasks, the newest "
                                    "[default: the config's retention.max_finished, 100000]."),
    db: str | None = DbOpt,
    config_path: str | None = ConfigOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Remove finished tasks past the retention limits now, with their logs, keys, checkpoints and push state.

    A running server does the same in the background every retention.interval_seconds (docs/operations.md)."""
    age_days = None
    if older_than is not None:
        seconds = _duration(older_than)
        if not seconds:
            raise ClientError(f"--older-than {older_than!r}: give a duration such as 30d, 12h or 45m")
        age_days = seconds / 86400
    if url is not None:
        if db or config_path:
            raise ClientError("give a server URL or --db / --config, not both")
        body = {k: v for k, v in (("maxAgeDays", age_days), ("maxFinished", keep)) if v is not None}
        result = await _post_json(f"{url.rstrip('/')}/admin/prune", body)
    else:
        result = await _prune_store(db, config_path, age_days, keep)
    if as_json:
        emit_json(result)
        return
    out.print(f"removed {result['removed']} finished task(s)", highlight=False)


async def _prune_store(db: str | None, config_path: str | None, age_days: float | None,
                       keep: int | None) -> dict[str, Any]:
    """A retention pass on the store a server's --db or --config names (the server need not run: PostgreSQL)."""
    import os
    import time as _time

    from parley.backends import Backends
    from parley.tasks.retention import prune, retention_of
    from parley.tasks.store import StoreError

    settings = _server_settings(db, config_path, memory="a --memory server keeps its tasks in its own process: "
                                                        "give its URL (parley tasks prune URL)")
    assert settings.db is not None
    if "://" not in settings.db and not os.path.isfile(settings.db):
        fail(f"no task database at {settings.db} (give the server's --db or --config)")
    try:
        store = Backends(settings).store()
        await _opened(store)
    except StoreError as exc:
        in_use = "in use by another Parley process" in str(exc)
        fail(str(exc) + ("; or prune through it: parley tasks prune URL --api-key ADMIN_KEY" if in_use else ""))
    try:
        now = _time.time()
        retention = retention_of(settings.retention, now, max_age_days=age_days, max_finished=keep)
        removed = await prune(store, retention, now=now)
    finally:
        await store.close()
    return {"removed": removed, "finishedBefore": retention.finished_before, "keepFinished": retention.keep_finished}


@app.command("trace")
@run
async def trace(url: str = typer.Argument(..., help="Agent URL (a Parley server's /a2a/{agent}, or its base URL)."),
                task_id: str = typer.Argument(..., help="The task to trace."),
                depth: int | None = typer.Option(None, "--depth", help="Levels of delegation to show [default: 5]."),
                as_json: bool = JsonOpt) -> None:
    """Show a task and every task it delegated to (a Parley server's trace endpoint), with states and timings."""
    from rich.tree import Tree

    data = await _get_json(f"{url.rstrip('/')}/tasks/{task_id}/trace",
                           {"depth": depth} if depth is not None else None)
    if as_json:
        emit_json(data)
        return

    def label(node: dict[str, Any]) -> str:
        colour = {"completed": "green", "failed": "red", "canceled": "yellow", "rejected": "red",
                  "input-required": "magenta", "auth-required": "magenta"}.get(node.get("state") or "", "cyan")
        text = f"[bold]{escape(str(node.get('agent') or '?'))}[/] [{colour}]{escape(str(node.get('state')))}[/]"
        if node.get("durationSeconds") is not None:
            text += f" {node['durationSeconds']:.3f}s"
        text += f"  [dim]task {escape(str(node.get('taskId')))}"
        if node.get("principal"):
            text += f" by {escape(str(node['principal']))}"
        if node.get("source") not in (None, "local"):
            text += f" ({escape(str(node['source']))} {escape(str(node.get('url') or ''))})"
        text += "[/]"
        detail = node.get("error") or (node.get("message") if node.get("state") != "completed" else None)
        if detail:
            text += f"\n  {escape(str(detail))}"
        if node.get("truncated"):
            text += "\n  [dim]... (deeper delegations not shown; use --depth)[/]"
        return text

    def grow(tree: Tree, node: dict[str, Any]) -> None:
        for child in node.get("children") or []:
            grow(tree.add(label(child)), child)

    root = Tree(label(data))
    grow(root, data)
    out.print(root, highlight=False)


async def _get_json(target: str, params: dict[str, Any] | None = None) -> Any:
    """GET one of Parley's JSON extension endpoints (trace, push log) with the command's credentials."""
    return await _call_json("GET", target, params=params, timeout=60)


async def _post_json(target: str, body: dict[str, Any]) -> Any:
    """POST to one of Parley's JSON endpoints (the admin API) with the command's credentials."""
    return await _call_json("POST", target, body=body, timeout=300)


async def _call_json(method: str, target: str, *, body: dict[str, Any] | None = None,
                     params: dict[str, Any] | None = None, timeout: float) -> Any:
    """One request to a Parley JSON endpoint; anything but 200 is one line with the server's reason."""
    import httpx

    async with httpx.AsyncClient(timeout=timeout, headers=dict(CREDENTIALS) or None) as http:
        try:
            resp = await http.request(method, target, json=body, params=params)
        except httpx.HTTPError as exc:
            raise ClientError(f"cannot reach {target}: {exc}") from None
    if resp.status_code != 200:
        try:
            error = resp.json().get("error") or ""
        except (ValueError, AttributeError):
            error = ""
        reason = error.get("message") or "" if isinstance(error, dict) else str(error)
        raise ClientError(f"{method} {target} answered HTTP {resp.status_code}" + (f": {reason}" if reason else ""))
    return resp.json()


def _reader_gone() -> NoReturn:
    """The process reading our output closed the pipe: stop, quietly (no traceback, no error)."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # Python's flush at exit must not fail again
    raise typer.Exit(0)


def main() -> None:
    """Entry point of the `parley` command."""
    try:
        app()
    except BrokenPipeError:  # output written outside a command (help, version)
        try:
            _reader_gone()
        except typer.Exit:
            sys.exit(0)


if __name__ == "__main__":
    main()
