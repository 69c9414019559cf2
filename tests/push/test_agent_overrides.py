"""Per-agent push options (`[push.agents.<id>]`): signing and artifact updates decided agent by agent.

Issue (push): "Per agent (config), each notification carries a JWS"; docs/push.md "Configuration".
A2A 1.0 section 4.3.3 (the payload: status and artifact updates as StreamResponse).
"""

from __future__ import annotations

import pytest
from webhooks import push_settings

from parley.app import Parley, Settings
from parley.hub.config import ConfigError, parse_config
from parley.settings import AgentPushSettings


def test_signing_and_artifact_updates_follow_each_agents_own_settings(start_server, hooks) -> None:
    """echo keeps the server's defaults (signed, status updates only); interviewer is set to unsigned with
    artifact updates: its webhook gets no Parley-Signature and, besides its status updates, the artifact."""
    server = start_server(push_settings(agents={"interviewer": AgentPushSettings(sign=False, artifact_updates=True)}))
    signed, unsigned = hooks.path("signed"), hooks.path("unsigned")
    echo = server.send("echo", "hello", push={"url": hooks.url(signed)})
    asked = server.send("interviewer", "hi", push={"url": hooks.url(unsigned)})
    answered = server.send("interviewer", "Ada", task_id=asked["id"])
    assert answered["status"]["state"] == "TASK_STATE_COMPLETED"

    echo_log = server.wait_settled_log("echo", echo["id"])
    got = hooks.wait_for(signed, len(echo_log["notifications"]))
    assert all("parley-signature" in r.headers for r in got)
    assert {n["kind"] for n in echo_log["notifications"]} == {"status"}

    log = server.wait_settled_log("interviewer", asked["id"])
    kinds = [n["kind"] for n in log["notifications"]]
    assert "artifact" in kinds and "status" in kinds, kinds
    got = hooks.wait_for(unsigned, len(kinds))
    assert not any("parley-signature" in r.headers for r in got)
    assert any("artifactUpdate" in r.json() for r in got)


def test_push_options_for_an_agent_that_is_not_hosted_are_refused() -> None:
    app = Parley(settings=Settings(db="memory", push=push_settings(agents={"nosuch": AgentPushSettings(sign=False)})))

    @app.agent(id="echo")
    async def echo(ctx):
        yield ctx.text

    with pytest.raises(ValueError, match="push.agents names no hosted agent: nosuch"):
        app.runtime()
    with pytest.raises(ConfigError, match=r"push\.agents\.nosuch: no agent 'nosuch' is declared"):
        parse_config({"server": {"builtin_agents": True}, "push": {"agents": {"nosuch": {"sign": False}}}})
