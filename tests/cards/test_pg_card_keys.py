"""Card signing keys shared by replicas (A2A 1.0 §8.4; the keys live beside the tasks, in PostgreSQL for a
cluster): two `parley serve` processes on one database sign their cards with one key, publish one JWKS, and a
rotation made with `parley cards keys rotate --config` is what both sign with next."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import httpx

from cluster.replicas import replicas
from support import require

require("asyncpg", "postgres")

PARLEY = str(Path(sys.executable).with_name("parley"))
CARD = "/a2a/echo/.well-known/agent-card.json"
JWKS = "/.well-known/agent-card-jwks.json"


def _kid(url: str) -> str:
    raw = httpx.get(url + CARD, headers={"A2A-Version": "1.0"}).json()["signatures"][0]["protected"]
    return json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))["kid"]


def test_replicas_share_the_card_key_and_its_rotation(tmp_path, postgres_url):
    from a2a.client.card_resolver import parse_agent_card
    from a2a.utils.signing import create_signature_verifier
    from jwt import PyJWK

    with replicas(tmp_path, postgres_url) as (a, b):
        kid = _kid(a.url)
        assert _kid(b.url) == kid
        assert httpx.get(a.url + JWKS).json() == httpx.get(b.url + JWKS).json()
        done = subprocess.run([PARLEY, "cards", "keys", "rotate", "--config", str(tmp_path / "parley.toml"), "--json"],
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        new = json.loads(done.stdout)["kid"]
        assert new != kid and _kid(a.url) == new and _kid(b.url) == new
        # a card from B verifies with the JWKS of A, which still holds the old key too
        jwks = httpx.get(a.url + JWKS).json()
        assert {k["kid"] for k in jwks["keys"]} == {kid, new}
        verify = create_signature_verifier(lambda k, _jku: PyJWK(next(j for j in jwks["keys"] if j["kid"] == k)),
                                           ["ES256"])
        verify(parse_agent_card(httpx.get(b.url + CARD, headers={"A2A-Version": "1.0"}).json()))
