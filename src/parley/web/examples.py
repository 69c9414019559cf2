"""Ready-to-paste calls of one agent for the dashboard: curl in A2A 1.0 and 0.3, and Python with parley.client.

The URL is the agent's real endpoint as the browser reached the server; the auth header is a placeholder
(`$PARLEY_KEY`) when the server requires credentials, absent when it is open. Every example is a shell
or Python snippet that a test runs against a real server.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

KEY_VARIABLE = "PARLEY_KEY"
MESSAGE_ID = "MESSAGE-ID"  # replaced in the curl text by a shell expansion: every run sends a new message id


@dataclass(frozen=True, slots=True)
class Example:
    """One snippet: a title, the language it is in ("sh" or "python") and its text."""

    title: str
    language: str
    text: str


def examples(url: str, *, secured: bool, text: str = "hello") -> list[Example]:
    """curl (1.0 and 0.3) and Python calls of the agent at `url` sending `text`."""
    auth = [f'-H "X-API-Key: ${KEY_VARIABLE}"'] if secured else []
    v1 = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
          "params": {"message": {"messageId": MESSAGE_ID, "role": "ROLE_USER", "parts": [{"text": text}]}}}
    v03 = {"jsonrpc": "2.0", "id": 1, "method": "message/send",
           "params": {"message": {"kind": "message", "messageId": MESSAGE_ID, "role": "user",
                                  "parts": [{"kind": "text", "text": text}]}}}
    return [
        Example("curl, A2A 1.0 (JSON-RPC)", "sh", _curl(url, ["-H 'A2A-Version: 1.0'", *auth], v1)),
        Example("curl, A2A 0.3 (JSON-RPC)", "sh", _curl(url, auth, v03)),
        Example("Python (parley.client)", "python", _python(url, secured=secured, text=text)),
    ]


def _curl(url: str, headers: list[str], body: dict) -> str:
    data = shlex.quote(json.dumps(body, separators=(",", ":")))
    # a fresh id per run (a repeated messageId is the same message: the server answers with the first task)
    data = data.replace(MESSAGE_ID, "m-'\"$(date +%s%N)\"'")
    lines = [f"curl -s {shlex.quote(url)}", "-H 'Content-Type: application/json'", *headers, f"-d {data}"]
    return " \\\n  ".join(lines)


def _python(url: str, *, secured: bool, text: str) -> str:
    headers = f', headers={{"X-API-Key": os.environ["{KEY_VARIABLE}"]}}' if secured else ""
    return "\n".join([
        "import asyncio" + (", os" if secured else ""),
        "",
        "from parley.client import A2AClient",
        "",
        "",
        "async def main() -> None:",
        f"    async with await A2AClient.connect({url!r}{headers}) as client:",
        f"        task = await client.send({text!r})",
        "        print(task.status.state, task.artifacts)",
        "",
        "",
        "asyncio.run(main())",
    ])


__all__ = ["KEY_VARIABLE", "Example", "examples"]
