"""`[server.dashboard]`: the dashboard can be moved or turned off, and the documented defaults are the code's
(docs/dashboard.md, "Settings")."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import httpx
import pytest

from parley import Parley
from parley.serve import default_app
from parley.settings import DashboardSettings, Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "dashboard.md"


def client(settings: Settings) -> httpx.AsyncClient:
    app: Parley = default_app()
    app.settings = settings
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app.asgi()), base_url="http://127.0.0.1")


async def test_the_dashboard_can_be_turned_off() -> None:
    """enabled = false: GET / is no page at all, and the dashboard's own paths are not served."""
    async with client(Settings(db="memory", dashboard=DashboardSettings(enabled=False))) as http:
        assert (await http.get("/")).status_code == 404
        assert (await http.get("/ui/tasks")).status_code == 404
        assert (await http.get("/agents")).status_code == 200  # the rest of the server is there


async def test_the_dashboard_can_live_under_another_path() -> None:
    """path = "/console": the home page and every other page move there; / is no longer the dashboard."""
    async with client(Settings(db="memory", dashboard=DashboardSettings(path="/console"))) as http:
        home = await http.get("/console")
        assert home.status_code == 200 and 'href="/console/tasks"' in home.text
        assert (await http.get("/console/tasks")).status_code == 200
        assert (await http.get("/console/static/dashboard.js")).status_code == 200
        assert "text/html" not in (await http.get("/")).headers.get("content-type", "")


def test_a_path_not_starting_with_a_slash_is_refused() -> None:
    """A misconfigured path is named with the reason, before the server starts."""
    problems = Settings(dashboard=DashboardSettings(path="console")).problems()
    assert ("dashboard.path", "must start with '/'") in problems


def test_an_oidc_client_needs_a_provider() -> None:
    """A dashboard OIDC client id without auth.jwt.oidc_discovery_url is refused, naming the missing setting."""
    problems = Settings(dashboard=DashboardSettings(oidc_client_id="dash")).problems()
    assert ("dashboard.oidc_client_id", "needs auth.jwt.oidc_discovery_url (the provider to log in at)") in problems


def test_the_documented_settings_are_the_defaults() -> None:
    """The TOML block of docs/dashboard.md says what the code does when nothing is set."""
    block = re.search(r"```toml\n(\[server\.dashboard\].*?)```", DOC.read_text(), re.DOTALL)
    assert block is not None
    documented = tomllib.loads(block.group(1))["server"]["dashboard"]
    defaults = DashboardSettings()
    assert documented == {name: getattr(defaults, name) for name in documented}
    unset = {name for name in DashboardSettings.__struct_fields__ if getattr(defaults, name) is None}
    assert set(documented) == set(DashboardSettings.__struct_fields__) - unset
    for name in unset:  # settings without a default are shown commented out, with an example
        assert re.search(rf"^# {name} = ", block.group(1), re.MULTILINE), name


def test_ui_is_reserved() -> None:
    """An agent called `ui` would shadow the dashboard's pages: its id is refused, with the reason."""
    from parley.server.reserved import agent_id_problem

    assert "web dashboard" in (agent_id_problem("ui") or "")


def test_a_dashboard_path_that_names_an_agent_is_refused(tmp_path: Path) -> None:
    """`path = "/console"` beside an agent called `console`: the dashboard's pages would take that agent's
    HTTP+JSON tenant paths (`/console/tasks/...`), so the config is refused, naming the key and the agent."""
    from parley.hub.config import ConfigError, load_config

    config = tmp_path / "parley.toml"
    config.write_text('[server]\nbuiltin_agents = true\n[server.dashboard]\npath = "/console"\n'
                      '[[agents]]\nid = "console"\ntype = "python"\nentry = "m:f"\n')
    with pytest.raises(ConfigError) as info:
        load_config(str(config))
    assert info.value.key == "server.dashboard.path" and "'console'" in str(info.value)
    config.write_text('[server]\nbuiltin_agents = true\n[server.dashboard]\npath = "/console"\n')
    assert load_config(str(config)).server.dashboard.path == "/console"
