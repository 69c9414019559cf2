"""Parley's client checks card signatures (A2A 1.0 §8.4.3) with keys the caller trusts, never with the card's
`jku` alone (spec PR #2099): `A2AClient.connect(..., verify=...)`, `parley card URL --verify JWKS`, and the
dashboard's card check shows the result."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
import uvicorn
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from parley.client import A2AClient, CardTrust, CardVerificationError
from parley.serve import default_app
from support import free_port, running

PARLEY = str(Path(sys.executable).with_name("parley"))
JWKS = "/.well-known/agent-card-jwks.json"


def _stranger_jwks() -> dict:
    """A JWKS of a key that did not sign the card, with the kid the server's key has (a look-alike)."""
    jwk = json.loads(ECAlgorithm.to_jwk(ec.generate_private_key(ec.SECP256R1()).public_key()))
    return {"keys": [{**jwk, "kid": "stranger", "alg": "ES256"}]}


def _connect(url: str, trust: CardTrust) -> A2AClient:
    async def go():
        client = await A2AClient.connect(url, verify=trust)
        await client.close()
        return client
    return asyncio.run(go())


@pytest.fixture(scope="module")
def server():
    with running(default_app(None)) as srv:
        yield srv


def test_connect_verifies_with_pinned_jwks(server):
    """The server's published card JWKS, fetched by the caller and pinned: the card verifies."""
    trust = CardTrust(httpx.get(server.url + JWKS).json())
    client = _connect(server.url + "/a2a/echo", trust)
    assert client.card.name


def test_connect_refuses_untrusted_key(server):
    """A key list without the signing key: refused as untrusted, although the card's jku would give the key."""
    with pytest.raises(CardVerificationError) as caught:
        _connect(server.url, CardTrust(_stranger_jwks()))
    assert caught.value.reason == "untrusted"
    assert "is not one you trust" in str(caught.value)


def test_connect_refuses_key_with_the_right_kid_but_other_material(server):
    """A trusted-looking kid whose key did not make the signature: invalid."""
    kid = httpx.get(server.url + JWKS).json()["keys"][0]["kid"]
    jwks = _stranger_jwks()
    jwks["keys"][0]["kid"] = kid
    with pytest.raises(CardVerificationError) as caught:
        _connect(server.url, CardTrust(jwks))
    assert caught.value.reason == "invalid"


def test_unsigned_card_is_refused():
    """A card without signatures is refused as missing (served by a stub on 127.0.0.1: Parley signs its own)."""
    with running(default_app(None)) as srv:
        card = httpx.get(srv.url + "/.well-known/agent-card.json", headers={"A2A-Version": "1.0"}).json()
    card.pop("signatures")
    stub = Starlette(routes=[Route("/.well-known/agent-card.json", lambda request: JSONResponse(card))])
    server = uvicorn.Server(uvicorn.Config(stub, host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            thread.join(0.01)
        with pytest.raises(CardVerificationError) as caught:
            _connect(f"http://127.0.0.1:{server.config.port}", CardTrust(_stranger_jwks()))
        assert caught.value.reason == "missing"
        assert "not signed" in str(caught.value)
    finally:
        server.should_exit = True
        thread.join(20)


def test_cli_card_verify(server, tmp_path):
    """`parley card URL --verify JWKS` with a pinned file and with a URL; a wrong key list fails with the reason."""
    pinned = tmp_path / "trusted.jwks.json"
    pinned.write_text(json.dumps(httpx.get(server.url + JWKS).json()))
    for where in (str(pinned), server.url + JWKS):
        done = subprocess.run([PARLEY, "card", server.url + "/a2a/echo", "--verify", where],
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert "signature: verified" in done.stdout
    wrong = tmp_path / "wrong.jwks.json"
    wrong.write_text(json.dumps(_stranger_jwks()))
    done = subprocess.run([PARLEY, "card", server.url, "--verify", str(wrong)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    assert "is not one you trust" in done.stderr + done.stdout


def test_dashboard_card_check_shows_the_signature(server):
    """The dashboard's card check (an open server's agent page) says the served card's signature verifies."""
    page = httpx.get(server.url + "/ui/agents/echo")
    assert page.status_code == 200
    kid = httpx.get(server.url + JWKS).json()["keys"][0]["kid"]
    assert f"signature verifies (JWS over the RFC 8785 form, key {kid} of this server" in page.text


def test_cli_card_verify_bad_key_lists_are_one_precise_line(server, tmp_path):
    """A missing file, a file that is not a JWKS, a URL that is not one: each refused with what is wrong."""
    not_jwks = tmp_path / "card.json"
    not_jwks.write_text(json.dumps({"name": "not a key set"}))
    cases = {str(tmp_path / "absent.json"): "cannot read the trusted keys",
             str(not_jwks): "a trusted key set is a JWKS",
             server.url + "/no-such-jwks.json": "cannot read the trusted keys at"}
    for where, said in cases.items():
        done = subprocess.run([PARLEY, "card", server.url, "--verify", where],
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode != 0
        assert said in done.stderr + done.stdout, (where, done.stderr + done.stdout)
        assert "Traceback" not in done.stderr
