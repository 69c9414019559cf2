"""`parley serve` refuses settings that would let strangers in (parley.security.required), as a real process:
exit status 2, one `error:` line on stderr naming the setting, nothing listening, and no secret echoed.

- Issue 28, item 5: a token issuer whose keys come from a JWKS URL or an OIDC discovery document without an
  audience (any token the provider signs, for any application, would be accepted), or a JWKS URL without an
  issuer.
- Issue 28, item 14: an admin key shorter than 32 characters, an HS256 secret shorter than 32 bytes.

The JWKS and discovery URLs point at a closed port: the refusal comes before anything is fetched.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest

from .secured import ENV, PARLEY, TIMEOUT, free_port, one_error_line

CLOSED = "http://127.0.0.1:9"  # the discard port: nothing answers, nothing must be asked
ADMIN_ENV = "PARLEY_TEST_REFUSALS_ADMIN_KEY"
SECRET_ENV = "PARLEY_TEST_REFUSALS_JWT_SECRET"


def serve(tmp_path: Path, auth: str, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, int]:
    """`parley serve --config` of a config whose [server.auth] section is `auth`; (the finished process, its port)."""
    config = tmp_path / "parley.toml"
    config.write_text(f'[server]\ndb = "memory"\n{auth}\n[[agents]]\nid = "echo"\ntype = "builtin"\n')
    port = free_port()
    proc = subprocess.run([*PARLEY, "serve", "--config", str(config), "--port", str(port)], check=False,
                          capture_output=True, text=True, env={**ENV, **(env or {})}, timeout=TIMEOUT)
    return proc, port


def refused(proc: subprocess.CompletedProcess, port: int, *fragments: str) -> str:
    """Exit 2, one error line naming `fragments`, and no server left behind on `port`."""
    line = one_error_line(proc, *fragments)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
    return line


@pytest.mark.parametrize("source", ["jwks_url", "oidc_discovery_url"])
def test_a_public_key_issuer_without_an_audience_refuses_to_start(tmp_path: Path, source: str) -> None:
    """Item 5: without `audience`, a JWKS or OIDC issuer's tokens for any application would be accepted."""
    proc, port = serve(tmp_path, f'[server.auth.jwt]\n{source} = "{CLOSED}/keys"\nissuer = "https://idp.example"')
    refused(proc, port, "auth.jwt.audience", f"auth.jwt.{source}")


def test_a_jwks_url_without_an_issuer_refuses_to_start(tmp_path: Path) -> None:
    """Item 5: a JWKS URL needs the issuer too (discovery names its own)."""
    proc, port = serve(tmp_path, f'[server.auth.jwt]\njwks_url = "{CLOSED}/keys"\naudience = ["https://agents.example"]')
    refused(proc, port, "auth.jwt.issuer", "auth.jwt.jwks_url")


def test_a_short_admin_key_refuses_to_start(tmp_path: Path) -> None:
    """Item 14: an admin key of 1 or 31 characters is refused, naming the setting and the variable, not the key."""
    for key in ("Q", "adm-" + "Z" * 27):
        proc, port = serve(tmp_path, f'[server.auth]\nadmin_key_env = "{ADMIN_ENV}"', env={ADMIN_ENV: key})
        line = refused(proc, port, "auth.admin_key_env", ADMIN_ENV, "32")
        assert key not in line, line


def test_a_short_hs256_secret_refuses_to_start(tmp_path: Path) -> None:
    """Item 14: an HS256 secret under 32 bytes is refused, naming the setting and the variable, not the secret."""
    secret = "s3cr3t-of-twenty-two-b"
    proc, port = serve(tmp_path, f'[server.auth.jwt]\nsecret_env = "{SECRET_ENV}"\nissuer = "https://idp.example"',
                       env={SECRET_ENV: secret})
    line = refused(proc, port, "auth.jwt.secret_env", SECRET_ENV, "32")
    assert secret not in line


def test_strong_settings_start(tmp_path: Path) -> None:
    """The same settings, made strong, pass these checks (the process gets as far as listening: `--port` of a
    busy port then fails with the listening error, not a settings error)."""
    busy = __import__("socket").socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        config = tmp_path / "parley.toml"
        config.write_text(f'[server]\ndb = "memory"\n[server.auth]\nadmin_key_env = "{ADMIN_ENV}"\n'
                          f'[server.auth.jwt]\njwks_url = "{CLOSED}/keys"\nissuer = "https://idp.example"\n'
                          'audience = ["https://agents.example"]\n[[agents]]\nid = "echo"\ntype = "builtin"\n')
        proc = subprocess.run([*PARLEY, "serve", "--config", str(config), "--port", str(busy.getsockname()[1])],
                              check=False, capture_output=True, text=True, env={**ENV, ADMIN_ENV: "a" * 32},
                              timeout=TIMEOUT)
    finally:
        busy.close()
    line = one_error_line(proc)
    assert "auth." not in line and proc.returncode == 1, line
