"""Signed notifications (A2A 1.0 sections 4.3.3 and 13.2: receivers "SHOULD implement appropriate
security measures to verify the notification source"; docs/push.md, "Signed").

Every notification carries `Parley-Signature`, an ES256 JWT whose keys are at /.well-known/jwks.json.
It is checked here with PyJWT directly, and with Parley's own receiver-side PushVerifier, against
real notifications a real server sent to a real webhook; forgeries are built from those.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from webhooks import Received, b64url_sha256, cli, http, push_settings, uid

from parley.client.push import PushVerificationError, PushVerifier
from parley.protocol import models as m

SIGNATURE = "parley-signature"


def jwks_of(server) -> dict:
    resp = http.get(f"{server.url}/.well-known/jwks.json")
    assert resp.status_code == 200, resp.text
    return resp.json()


def kid_of(req: Received) -> str:
    return jwt.get_unverified_header(req.headers[SIGNATURE])["kid"]


def notified(server, hooks, *, agent: str = "echo", text: str = "signed and sealed", token: str | None = None,
             version: str = "1.0") -> tuple[str, str, list[Received]]:
    """(task id, webhook URL, the requests it received) for one finished task with an inline config."""
    path = hooks.path("signed")
    url = hooks.url(path)
    config = {"url": url, **({"token": token} if token else {})}
    if version == "1.0":
        task = server.send(agent, text, push=config)
    else:
        task = server.rpc(agent, "message/send", {
            "message": {"kind": "message", "messageId": uid("m-"), "role": "user",
                        "parts": [{"kind": "text", "text": text}]},
            "configuration": {"pushNotificationConfig": config}}, version=None)
    changes = server.replay_changes(agent, task["id"])
    hooks.wait_for(path, len(changes))
    server.wait_settled_log(agent, task["id"], len(changes))
    return task["id"], url, hooks.requests(path)


def verifier(server, url: str, **kw) -> PushVerifier:
    return PushVerifier(jwks_url=f"{server.url}/.well-known/jwks.json", audience=url, issuer=server.url, **kw)


async def rejected(v: PushVerifier, headers: dict[str, str], body: bytes, reason: str | None = None) -> str:
    """The PushVerificationError message for a request the verifier must refuse."""
    with pytest.raises(PushVerificationError) as info:
        await v.verify(headers, body)
    if reason is not None:
        assert re.search(reason, str(info.value), re.IGNORECASE), str(info.value)
    return str(info.value)


def test_signature_verifies_against_jwks_with_pyjwt(server, hooks):
    """Sections 4.3.3/13.2 and docs/push.md: `Parley-Signature` is an ES256 JWT signed by a key of
    /.well-known/jwks.json, with `iss` (the server's URL), `aud` (the webhook URL), `iat`, `exp` (5
    minutes), `jti` (unique per attempt), `taskId`, `eventId`, `seq` and `body_sha256` (base64url
    SHA-256 of the exact body) - checked with PyJWT alone."""
    task_id, url, got = notified(server, hooks)
    keys = jwt.PyJWKSet.from_dict(jwks_of(server))
    by_kid = {k.key_id: k for k in keys.keys}
    jtis = set()
    for req in got:
        token = req.headers[SIGNATURE]
        header = jwt.get_unverified_header(token)
        assert header["alg"] == "ES256" and header["kid"] in by_kid
        claims = jwt.decode(token, by_kid[header["kid"]].key, algorithms=["ES256"], audience=url,
                            issuer=server.url, options={"require": ["exp", "iat", "iss", "aud", "jti"]})
        assert claims["aud"] == url and claims["iss"] == server.url
        assert claims["taskId"] == task_id
        assert claims["eventId"] == req.event_id == f"{task_id}:{req.seq}"
        assert claims["seq"] == req.seq
        assert claims["body_sha256"] == b64url_sha256(req.body)
        assert claims["exp"] - claims["iat"] == 300
        jtis.add(claims["jti"])
    assert len(jtis) == len(got), "jti is unique per attempt"
    for jwk in jwks_of(server)["keys"]:
        assert "d" not in jwk, "the JWKS publishes a private key"
        assert jwk["kty"] == "EC" and jwk["crv"] == "P-256" and jwk.get("alg", "ES256") == "ES256"


async def test_push_verifier_accepts_real_notifications_of_both_versions(server, hooks):
    """Sections 4.3.3/13.2 and docs/push.md ("Verifying, in a few lines"): PushVerifier with the JWKS
    URL, audience, issuer and token accepts what Parley really sent, in 1.0 (a StreamResponse) and in
    0.3 (the Task); the notification names its task and event."""
    for version in ("1.0", "0.3"):
        task_id, url, got = notified(server, hooks, token="tok-ok", version=version)
        v = verifier(server, url, token="tok-ok")
        try:
            for req in got:
                note = await v.verify(req.headers, req.body)
                assert note.task_id == task_id and note.event_id == req.event_id
                assert note.version == version
                assert note.claims is not None and note.claims["aud"] == url
                if version == "1.0":
                    assert isinstance(note.event, m.TaskStatusUpdateEvent)
                else:
                    assert isinstance(note.event, m.Task) and note.event.id == task_id
        finally:
            await v.aclose()


async def test_push_verifier_rejects_forgeries_and_replays(server, hooks):
    """Sections 4.3.3 (receivers verify the source; "duplicate deliveries may occur") and 13.2 and
    docs/push.md: PushVerifier refuses a tampered body, a wrong token, a replayed request (same headers
    and body twice), another audience, an expired or too old signature (injected clock), and a
    signature made with another key (with the server's key id, or an unknown one)."""
    _, url, got = notified(server, hooks, token="tok-real")
    req = got[-1]
    headers, body = dict(req.headers), req.body
    made: list[PushVerifier] = []

    def fresh(**kw) -> PushVerifier:
        v = verifier(server, url, **{"token": "tok-real", **kw})
        made.append(v)
        return v

    try:
        tampered = body.replace(b"TASK_STATE_", b"TASK_STATE_X")
        assert tampered != body
        await rejected(fresh(), headers, tampered, "body")
        await rejected(fresh(), {**headers, "x-a2a-notification-token": "tok-guess"}, body, "token")
        no_token = {k: v for k, v in headers.items() if k != "x-a2a-notification-token"}
        await rejected(fresh(), no_token, body, "token")
        unsigned = {k: v for k, v in headers.items() if k != SIGNATURE}
        await rejected(fresh(), unsigned, body, "signed")

        once = fresh()
        await once.verify(headers, body)
        await rejected(once, headers, body, "replay|already")

        other_audience = PushVerifier(jwks_url=f"{server.url}/.well-known/jwks.json", token="tok-real",
                                      audience=url + "-elsewhere")
        made.append(other_audience)
        await rejected(other_audience, headers, body, "audience")
        other_issuer = PushVerifier(jwks_url=f"{server.url}/.well-known/jwks.json", token="tok-real",
                                    audience=url, issuer="https://someone-else.example.com")
        made.append(other_issuer)
        await rejected(other_issuer, headers, body, "issuer")

        await rejected(fresh(clock=lambda: time.time() + 3600), headers, body, "expired")
        await rejected(fresh(clock=lambda: time.time() + 120, max_age=60), headers, body, "too old")

        claims = jwt.decode(headers[SIGNATURE], options={"verify_signature": False})
        stranger = ec.generate_private_key(ec.SECP256R1())
        for kid in (kid_of(req), "parley-unknown-key"):
            forged = jwt.encode({**claims, "jti": uid("jti-")}, stranger, algorithm="ES256",
                                headers={"kid": kid, "typ": "JWT"})
            await rejected(fresh(), {**headers, SIGNATURE: forged}, body, "signature|key")
        # a genuine request passes the same fresh verifier setup (the refusals above are not vacuous)
        await fresh().verify(headers, body)
    finally:
        for v in made:
            await v.aclose()


async def test_rotate_key_cli_then_restart(start_server, hooks, tmp_path):
    """Section 13.2 (signing material rotated) and docs/push.md: `parley push rotate-key --db` on a
    stopped server's file makes a new key; after the restart new notifications are signed with it, and
    the old key stays in the JWKS, so notifications signed before still verify."""
    db = tmp_path / "parley.db"
    first = start_server(db=db)
    _, old_url, old = notified(first, hooks, text="before the rotation")
    old_kid = kid_of(old[0])
    assert {k["kid"] for k in jwks_of(first)["keys"]} == {old_kid}
    first.stop()

    proc = cli("push", "rotate-key", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    announced = re.search(r"new signing key (\S+);", proc.stdout)
    assert announced, proc.stdout
    new_kid = announced.group(1)
    assert new_kid != old_kid

    second = start_server(db=db, port=first.live.port)
    published = {k["kid"] for k in jwks_of(second)["keys"]}
    assert published == {old_kid, new_kid}
    _, new_url, new = notified(second, hooks, text="after the rotation")
    assert {kid_of(r) for r in new} == {new_kid}
    for url, reqs in ((new_url, new), (old_url, old)):
        v = verifier(second, url)
        try:
            for r in reqs:
                await v.verify(r.headers, r.body)
        finally:
            await v.aclose()


async def test_standard_webhooks_headers(start_server, hooks, monkeypatch):
    """Section 13.2 and docs/push.md: with `webhook_secret_env` set, notifications also carry
    `webhook-id`, `webhook-timestamp` and `webhook-signature` (HMAC-SHA256 `v1` over
    `id.timestamp.body` with the base64 secret); PushVerifier(webhook_secret=...) accepts them and
    refuses them under another secret, with a tampered body, or replayed."""
    secret = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    other = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    monkeypatch.setenv("PARLEY_TEST_WEBHOOK_SECRET", secret)
    server = start_server(push_settings(webhook_secret_env="PARLEY_TEST_WEBHOOK_SECRET"))
    task_id, url, got = notified(server, hooks)
    key = base64.b64decode(secret.removeprefix("whsec_"))
    for req in got:
        h = req.headers
        assert h["webhook-id"] == req.event_id
        assert h["webhook-timestamp"].isdigit()
        expected = base64.b64encode(hmac.new(key, f"{h['webhook-id']}.{h['webhook-timestamp']}.".encode() + req.body,
                                             hashlib.sha256).digest()).decode()
        assert f"v1,{expected}" in h["webhook-signature"].split()
        assert SIGNATURE in h, "the JWT is still sent"

    ok = PushVerifier(webhook_secret=secret)
    for req in got:
        note = await ok.verify(req.headers, req.body)
        assert note.task_id == task_id and note.event_id == req.event_id
    await rejected(ok, got[0].headers, got[0].body, "replay|already")
    await rejected(PushVerifier(webhook_secret=other), got[0].headers, got[0].body, "signature")
    await rejected(PushVerifier(webhook_secret=secret), got[0].headers, got[0].body + b" ", "signature")
    both = verifier(server, url, webhook_secret=secret)
    try:
        await both.verify(got[0].headers, got[0].body)
    finally:
        await both.aclose()


def test_sign_false_sends_no_signature(start_server, hooks):
    """Section 13.2 and docs/push.md: `[push] sign = false` turns the signature off (the A2A headers
    are still sent)."""
    server = start_server(push_settings(sign=False))
    _, _, got = notified(server, hooks, token="still-sent")
    assert got and all(SIGNATURE not in r.headers for r in got)
    assert all(r.headers["x-a2a-notification-token"] == "still-sent" for r in got)
    assert json.loads(got[0].body)["statusUpdate"]
