"""An open server's dashboard (no credentials configured) answers only loopback host names, so a web page
whose name resolves to 127.0.0.1 (DNS rebinding) cannot read its CSRF token and make the first admin key
(docs/dashboard.md, "Open development mode"); and downloads of any file name work."""

from __future__ import annotations

import httpx

from parley.serve import default_app
from parley.settings import Settings
from parley.web.dashboard import _attachment


def client(**settings: object) -> httpx.AsyncClient:
    app = default_app()
    app.settings = Settings(db="memory", **settings)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app.asgi()), base_url="http://127.0.0.1:8000")


async def test_an_open_dashboard_refuses_a_rebound_host_name() -> None:
    """Host `evil.example:8000` (a name that resolves to this machine) gets 403 and no page, no token;
    `localhost`, `127.0.0.1` and `[::1]` get the dashboard."""
    async with client() as http:
        refused = await http.get("/", headers={"Host": "evil.example:8000"})
        assert refused.status_code == 403 and "csrf-token" not in refused.text
        assert (await http.get("/ui/keys", headers={"Host": "127.0.0.1.evil.example"})).status_code == 403
        for host in ("localhost:8000", "127.0.0.1:8000", "[::1]:8000"):
            page = await http.get("/", headers={"Host": host})
            assert page.status_code == 200 and "Open development mode" in page.text, host


async def test_an_open_dashboard_behind_a_named_public_url_is_served() -> None:
    """With `public_url` set (the operator named the address) the host check is lifted."""
    async with client(public_url="http://agents.internal:8000") as http:
        assert (await http.get("/", headers={"Host": "agents.internal:8000"})).status_code == 200


def test_a_download_name_of_any_characters_makes_a_valid_header() -> None:
    """A file part named in Chinese, with quotes or with a newline still downloads: the header has an ASCII
    fallback and the UTF-8 name (RFC 6266), and encodes as HTTP allows (latin-1, no line breaks)."""
    for name in ("报告.pdf", 'a "quoted"\\name.csv', "two\nlines.txt", ""):
        header = _attachment(name)
        header.encode("latin-1")
        assert "\n" not in header and "\r" not in header
        assert header.startswith('attachment; filename="') and "filename*=UTF-8''" in header
    assert "filename*=UTF-8''%E6%8A%A5%E5%91%8A.pdf" in _attachment("报告.pdf")
