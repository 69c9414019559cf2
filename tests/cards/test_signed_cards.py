"""Signed agent cards (A2A 1.0 §8.4.1 canonicalization, §8.4.2 signature format, §8.4.3 verification): the
official verifiers of a2a-sdk (`a2a.utils.signing.create_signature_verifier`) and @a2a-js/sdk
(`verifyAgentCardSignature`) accept the cards a running Parley serves, for both versions of the card."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from a2a.client.card_resolver import A2ACardResolver
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier
from jwt import PyJWK

from parley.serve import default_app
from support import install_js_sdk, running, secured_app

CARD_PATHS = ["/.well-known/agent-card.json", "/a2a/echo/.well-known/agent-card.json",
              "/a2a/interviewer/.well-known/agent-card.json"]


def _header(card: dict) -> dict:
    raw = card["signatures"][0]["protected"]
    return json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))


def _key_provider(base: str, fetched: list[str]):
    """Keys from the JWKS the server publishes (checked to be the one the card's `jku` names)."""
    def provide(kid: str | None, jku: str | None) -> PyJWK:
        assert jku == f"{base}/.well-known/agent-card-jwks.json"
        fetched.append(kid or "")
        jwks = httpx.get(jku).json()
        return PyJWK({k: v for k, v in next(k for k in jwks["keys"] if k["kid"] == kid).items()})
    return provide


def _sdk_resolves(base: str, path: str, headers: dict[str, str]) -> str:
    """The a2a-sdk resolver fetches and verifies the card; the kid it verified with."""
    fetched: list[str] = []
    verifier = create_signature_verifier(_key_provider(base, fetched), ["ES256"])

    async def resolve():
        async with httpx.AsyncClient(headers=headers) as client:
            return await A2ACardResolver(client, base, path).get_agent_card(signature_verifier=verifier)

    asyncio.run(resolve())
    return fetched[-1]


@pytest.mark.parametrize("version", [{"A2A-Version": "1.0"}, {}], ids=["v1.0", "v0.3-compatible"])
@pytest.mark.parametrize("path", CARD_PATHS)
def test_sdk_verifier_accepts_every_card(tmp_path, path, version):
    """§8.4.2: alg ES256, typ JOSE, kid and jku in the protected header; §8.4.3: the a2a-sdk verifier accepts."""
    with running(default_app(str(tmp_path / "tasks.db"))) as srv:
        card = httpx.get(srv.url + path, headers=version).json()
        header = _header(card)
        assert header["alg"] == "ES256" and header["typ"] == "JOSE"
        assert header["jku"] == f"{srv.url}/.well-known/agent-card-jwks.json"
        assert _sdk_resolves(srv.url, path, version) == header["kid"]


def test_secured_server_cards_verify(tmp_path):
    """The security schemes (1.0 one-ofs, converted to 0.3 shapes for the unversioned card) are covered too."""
    app, _key = secured_app()
    with running(app) as srv:
        for headers in ({"A2A-Version": "1.0"}, {}):
            card = httpx.get(srv.url + CARD_PATHS[0], headers=headers).json()
            assert card["securitySchemes"]
            assert _sdk_resolves(srv.url, CARD_PATHS[0], headers) == _header(card)["kid"]


def test_tampered_card_is_refused(tmp_path):
    """§8.4.3: a card changed after signing does not verify."""
    from a2a.client.card_resolver import parse_agent_card

    with running(default_app(None)) as srv:
        card = httpx.get(srv.url + CARD_PATHS[0], headers={"A2A-Version": "1.0"}).json()
        card["description"] = "Not what the server said."
        verifier = create_signature_verifier(_key_provider(srv.url, []), ["ES256"])
        with pytest.raises(InvalidSignaturesError):
            verifier(parse_agent_card(card))


def test_key_survives_restart_and_rotation_keeps_old_key_published(tmp_path):
    """Keys live beside the tasks (SQLite): a restart signs with the same key; after a rotation the cards are
    signed with the new key, the old one stays in the JWKS (cached cards still verify), and a client revalidating
    with the old ETag gets the new card (200, not 304)."""
    db = str(tmp_path / "tasks.db")
    with running(default_app(db)) as srv:
        first = httpx.get(srv.url + CARD_PATHS[0])
        kid = _header(first.json())["kid"]
    app = default_app(db)
    with running(app) as srv:
        again = httpx.get(srv.url + CARD_PATHS[0])
        assert _header(again.json())["kid"] == kid
        assert httpx.get(srv.url + CARD_PATHS[0], headers={"If-None-Match": again.headers["etag"]}).status_code == 304
        new = json.loads(_parley("cards", "keys", "rotate", "--db", db, "--json"))["kid"]
        rotated = httpx.get(srv.url + CARD_PATHS[0], headers={"If-None-Match": again.headers["etag"]})
        assert rotated.status_code == 200
        assert _header(rotated.json())["kid"] == new != kid
        published = {k["kid"] for k in httpx.get(srv.url + "/.well-known/agent-card-jwks.json").json()["keys"]}
        assert published == {kid, new}
        assert [k["kid"] for k in json.loads(_parley("cards", "keys", "list", "--db", db, "--json"))] == [kid, new]
        assert _sdk_resolves(srv.url, CARD_PATHS[0], {}) == new


def _parley(*args: str) -> str:
    done = subprocess.run([str(Path(sys.executable).with_name("parley")), *args], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


JS_VERIFY = """
import { AgentCardResolver } from '@a2a-js/sdk/client';
import { verifyAgentCardSignature } from '@a2a-js/sdk';
import { importJWK } from 'jose';
const [baseUrl, path] = process.argv.slice(2);
const resolved = await AgentCardResolver.default.resolve(baseUrl, path);
if (!resolved.signatures?.length) throw new Error('the resolver read no signatures');
// The resolver turns a card with 1.0 security into its in-memory form, which the SDK's own canonicalization
// (AgentCard.fromJSON) does not read back: the verifier is given the JSON, fetched as the resolver fetches it.
const card = await (await fetch(new URL(path, baseUrl), { headers: { 'A2A-Version': '1.0' } })).json();
const verify = verifyAgentCardSignature(async (kid, jku) => {
  const jwks = await (await fetch(jku)).json();
  return importJWK(jwks.keys.find((k) => k.kid === kid), 'ES256');
});
await verify(card);
card.name = card.name + ' (changed)';
try { await verify(card); console.log('TAMPERED-ACCEPTED'); } catch { console.log('VERIFIED'); }
"""


@pytest.fixture(scope="module")
def js_sdk(tmp_path_factory) -> Path:
    """@a2a-js/sdk installed from the npm registry into a temporary directory."""
    where = install_js_sdk(tmp_path_factory.mktemp("a2a-js"))
    (where / "verify.mjs").write_text(JS_VERIFY)
    return where


@pytest.mark.parametrize("secured", [False, True], ids=["open", "secured"])
def test_js_sdk_verifier_accepts_cards(js_sdk, secured):
    """§8.4.3 with @a2a-js/sdk: its card resolver (which asks for A2A-Version 1.0) reads the signed card and
    `verifyAgentCardSignature` accepts the card as served to it; the same card changed is refused."""
    app = secured_app()[0] if secured else default_app(None)
    with running(app) as srv:
        for path in CARD_PATHS:
            done = subprocess.run(["node", "verify.mjs", srv.url, path.lstrip("/")], cwd=js_sdk,
                                  capture_output=True, text=True, timeout=60, check=False)
            assert done.returncode == 0, done.stderr
            assert done.stdout.strip().splitlines()[-1] == "VERIFIED", done.stdout  # the changed card: refused


def test_cards_served_by_calls_are_signed_too():
    """Beyond the well-known paths: 1.0 `GetExtendedAgentCard` (§8.4 applies to every AgentCard) and the cards of
    GET /agents carry a signature the a2a-sdk verifier accepts. The pure 0.3 card of HTTP+JSON `GET /v1/card` has
    none (a signature covers the 1.0 form, which that card does not carry)."""
    from a2a.client.card_resolver import parse_agent_card

    app, key = secured_app()
    auth = {"X-API-Key": key}
    with running(app) as srv:
        verifier = create_signature_verifier(_key_provider(srv.url, []), ["ES256"])
        extended = httpx.post(srv.url + "/a2a/echo", headers={"A2A-Version": "1.0", **auth},
                              json={"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}})
        listed = httpx.get(srv.url + "/agents", headers=auth).json()["agents"]
        v03 = httpx.get(srv.url + "/a2a/echo/v1/card", headers=auth)
        assert v03.status_code == 200, v03.text
        assert "signatures" not in v03.json()
        for card in (extended.json()["result"], *listed):
            assert card["signatures"], card
            verifier(parse_agent_card(card))
