"""A user's first hour with the wheel installed with no extras (`pip install parley-a2a`), as the README tells it:
`parley serve`, then `parley card`, `send`, `send --stream` and `chat` against it; an agent module of one's own
served with `parley serve --app`; the dashboard's forms. Every program is the install's, run as a subprocess
outside the checkout (see shipkit.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from shipkit import REPO, Install

MY_AGENTS = '''\
from parley import Parley

app = Parley()

@app.agent(id="shout", description="Answers in capitals")
async def shout(ctx):
    if not ctx.text:
        yield ctx.ask("What should I shout?")
        return
    yield ctx.text.upper()
'''


def test_the_install_is_the_wheel_not_the_checkout(bare: Install, workdir: Path) -> None:
    """`parley` and `import parley` of the install come from its own site-packages, never from this checkout:
    what the other tests here see is what a user installed."""
    done = bare.run_python("import parley, shutil; print(parley.__file__); print(shutil.which('parley'))",
                           cwd=workdir)
    assert done.returncode == 0, done.stderr
    module = Path(done.stdout.splitlines()[0]).resolve()
    assert module.is_relative_to((bare.project / ".venv").resolve()) and not module.is_relative_to(REPO)
    assert "site-packages" in module.parts


def test_serve_then_card_send_stream_and_chat(bare: Install, workdir: Path) -> None:
    """The README's "Two commands" and "Try it" with the installed `parley`: the server starts in an empty
    directory (its SQLite file under .parley/), the default agent's card names it, a send and a streamed send are
    echoed, and a chat with the interviewer asks a follow-up question and then answers."""
    with bare.serve(cwd=workdir) as served:
        url = served.url
        card = bare.parley("card", url, cwd=workdir)
        assert card.returncode == 0 and "Echo" in card.stdout, card.stdout + card.stderr

        sent = bare.parley("send", url, "hello there", cwd=workdir)
        assert sent.returncode == 0 and "hello there" in sent.stdout, sent.stdout + sent.stderr

        streamed = bare.parley("send", "--stream", url, "stream this back to me", cwd=workdir)
        said = streamed.stdout + streamed.stderr
        assert streamed.returncode == 0 and "stream this back to me" in streamed.stdout, said

        chat = bare.parley("chat", f"{url}/a2a/interviewer", input="I learn A2A\nagents talk\n", cwd=workdir)
        said = chat.stdout + chat.stderr
        assert chat.returncode == 0, said
        assert "[input-required] You said 'I learn A2A'. Why does that matter to you?" in said
        assert "Thank you. You said 'I learn A2A', and it matters because 'agents talk'." in said
    assert (workdir / ".parley" / "parley.db").exists()


def test_serve_an_agent_module_of_ones_own(bare: Install, workdir: Path) -> None:
    """`parley serve --app my_agents:app` imports the module from the directory it starts in (no PYTHONPATH) and
    serves its agent, which answers a send from the installed CLI."""
    project = workdir / "myproject"
    project.mkdir()
    (project / "my_agents.py").write_text(MY_AGENTS)
    with bare.serve("--app", "my_agents:app", cwd=project) as served:
        sent = bare.parley("send", f"{served.url}/a2a/shout", "hello", cwd=project)
        assert sent.returncode == 0 and "HELLO" in sent.stdout, sent.stdout + sent.stderr


def test_the_dashboard_forms_answer_on_a_bare_install(bare: Install, workdir: Path) -> None:
    """The dashboard's forms are parsed by what the bare install has (python-multipart is a dependency of Parley
    itself): logging in with an admin key made by `parley keys create` lands on the agents page, and logging out
    returns to the login page. Without the form parser every form POST answered 500."""
    made = bare.parley("keys", "create", "*", "--name", "dashboard", "--scopes", "admin,a2a",
                       "--db", ".parley/parley.db", cwd=workdir)
    assert made.returncode == 0, made.stderr
    admin_key = made.stdout.strip().splitlines()[-1]
    assert admin_key.startswith("pk_")
    with bare.serve(cwd=workdir) as served, httpx.Client(base_url=served.url, timeout=30) as browser:
        login_page = browser.get("/ui/login")
        assert login_page.status_code == 200
        csrf = re.search(r'name="csrf" value="([^"]+)"', login_page.text).group(1)
        logged_in = browser.post("/ui/login", data={"credential": admin_key, "csrf": csrf, "next": "/"})
        assert logged_in.status_code == 303, (logged_in.status_code, logged_in.text[:500])
        home = browser.get("/")
        assert home.status_code == 200 and "Echo" in home.text and "Interviewer" in home.text
        csrf = re.search(r'name="csrf" value="([^"]+)"', home.text).group(1)
        logged_out = browser.post("/ui/logout", data={"csrf": csrf})
        assert logged_out.status_code == 303 and logged_out.headers["location"].endswith("/ui/login?message=logged-out")
        assert browser.get("/").headers.get("location", "").startswith("/ui/login")
