"""JwtVerifier against a real identity provider on 127.0.0.1: a JWKS and an OIDC discovery document.

Keys are made here (RSA, EC P-256, Ed25519); tokens are signed with PyJWT or, for the attacks
(`alg: none`, HS256 keyed with the RSA public key), by hand. Time is an injected clock: expiry and
the JWKS refresh intervals move with it, nothing sleeps.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from parley.protocol.errors import UnauthenticatedError
from parley.security.jwt import JwtVerifier, TokenIdentity
from parley.security.required import UnsafeSettingError
from parley.settings import JwtSettings

NOW = 1_700_000_000.0
AUDIENCE = "https://agents.example/a2a"
SECRET = "a-shared-secret-of-at-least-32-bytes!!"


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class IdP:
    """An identity provider's documents over real HTTP (a thread), counting the requests per path."""

    def __init__(self) -> None:
        self.documents: dict[str, Any] = {}
        self.hits: Counter[str] = Counter()
        self._lock = threading.Lock()
        idp = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with idp._lock:
                    idp.hits[self.path] += 1
                    document = idp.documents.get(self.path)
                body = json.dumps(document).encode() if document is not None else b"{}"
                self.send_response(200 if document is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()
        self.running = True

    def publish(self, *keys: dict[str, Any]) -> None:
        with self._lock:
            self.documents["/keys"] = {"keys": list(keys)}

    def discovery(self, issuer: str) -> None:
        with self._lock:
            self.documents["/.well-known/openid-configuration"] = {"issuer": issuer, "jwks_uri": f"{self.url}/keys"}

    def stop(self) -> None:
        """Down: nothing listens on the port any more (connection refused)."""
        if self.running:
            self.running = False
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(timeout=10)


@pytest.fixture
def idp() -> Iterator[IdP]:
    server = IdP()
    yield server
    server.stop()


class Signer:
    """A private key and its public JWK."""

    def __init__(self, alg: str, kid: str, private: Any) -> None:
        self.alg, self.kid, self.private = alg, kid, private
        to_jwk = {"RS256": RSAAlgorithm, "ES256": ECAlgorithm, "EdDSA": OKPAlgorithm}[alg].to_jwk
        self.jwk = {**to_jwk(private.public_key(), as_dict=True), "kid": kid, "use": "sig"}

    def with_kid(self, kid: str) -> Signer:
        return Signer(self.alg, kid, self.private)

    def sign(self, claims: dict[str, Any] | None = None, **overrides: Any) -> str:
        return jwt.encode(payload(claims, **overrides), self.private, algorithm=self.alg, headers={"kid": self.kid})


def rsa_signer(kid: str = "rsa-1") -> Signer:
    return Signer("RS256", kid, rsa.generate_private_key(public_exponent=65537, key_size=2048))


@pytest.fixture(scope="module")
def rsa_key() -> Signer:
    return rsa_signer()


@pytest.fixture(scope="module")
def ec_key() -> Signer:
    return Signer("ES256", "ec-1", ec.generate_private_key(ec.SECP256R1()))


@pytest.fixture(scope="module")
def ed_key() -> Signer:
    return Signer("EdDSA", "ed-1", ed25519.Ed25519PrivateKey.generate())


def payload(claims: dict[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    base = {"sub": "alice", "iss": "https://idp.example", "aud": AUDIENCE, "iat": int(NOW), "exp": int(NOW) + 300}
    base.update(claims or {})
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def hs_token(**claims: Any) -> str:
    return jwt.encode(payload(**claims), SECRET, algorithm="HS256")


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def handmade(header: dict[str, Any], claims: dict[str, Any], key: bytes | None = None) -> str:
    """A compact JWS built by hand: unsigned (`alg: none`) or HMAC-SHA256 with any key bytes."""
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    signature = b"" if key is None else hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(signature)}"


OPEN: list[JwtVerifier] = []  # closed after each test


@pytest.fixture(autouse=True)
async def close_verifiers() -> Any:
    yield
    while OPEN:
        await OPEN.pop().aclose()


def make_verifier(settings: JwtSettings, **kwargs: Any) -> JwtVerifier:
    made = JwtVerifier(settings, **kwargs)
    OPEN.append(made)
    return made


def jwks_verifier(idp: IdP, clock: Clock | None = None, **settings: Any) -> JwtVerifier:
    fields = {"jwks_url": f"{idp.url}/keys", "issuer": "https://idp.example", "audience": [AUDIENCE], **settings}
    return make_verifier(JwtSettings(**fields), clock=clock or Clock())


def hs_verifier(clock: Clock | None = None, **settings: Any) -> JwtVerifier:
    fields = {"secret_env": "PARLEY_JWT_SECRET", "issuer": "https://idp.example", "audience": [AUDIENCE], **settings}
    return make_verifier(JwtSettings(**fields), env={"PARLEY_JWT_SECRET": SECRET}, clock=clock or Clock())


async def rejected(verifier: JwtVerifier, token: str, reason: str) -> UnauthenticatedError:
    """verify() refuses the token with this reason, an RFC 6750 challenge, no token and no chained trace."""
    with pytest.raises(UnauthenticatedError) as info:
        await verifier.verify(token)
    exc = info.value
    assert reason.lower() in exc.message.lower(), exc.message
    assert exc.headers == {"WWW-Authenticate": f'Bearer realm="a2a", error="invalid_token", '
                                               f'error_description="{exc.message}"'}
    assert '"' not in exc.message and "\\" not in exc.message  # a valid quoted-string as it stands
    for part in (token, *token.split(".")):
        assert len(part) < 8 or part not in exc.message  # nothing of the token is echoed
    assert exc.__cause__ is None and exc.__suppress_context__
    return exc


# -- valid tokens ----------------------------------------------------------------------------------


@pytest.mark.parametrize("key_fixture", ["rsa_key", "ec_key", "ed_key"])
async def test_public_key_tokens_verify(idp: IdP, key_fixture: str, request: pytest.FixtureRequest) -> None:
    signer: Signer = request.getfixturevalue(key_fixture)
    idp.publish(signer.jwk)
    verifier = jwks_verifier(idp)
    identity = await verifier.verify(signer.sign(scope="tasks:read tasks:write"))
    assert identity == TokenIdentity("alice", frozenset({"tasks:read", "tasks:write"}), identity.claims)
    assert identity.claims["aud"] == AUDIENCE


async def test_every_algorithm_against_one_mixed_key_set(idp: IdP, rsa_key: Signer, ec_key: Signer,
                                                         ed_key: Signer) -> None:
    idp.publish(rsa_key.jwk, ec_key.jwk, ed_key.jwk)
    verifier = jwks_verifier(idp)
    for signer in (rsa_key, ec_key, ed_key):
        assert (await verifier.verify(signer.sign(sub=f"user-{signer.kid}"))).principal == f"user-{signer.kid}"
    assert idp.hits["/keys"] == 1  # one fetch, then the cache


async def test_hs256_with_a_secret_from_the_environment() -> None:
    verifier = hs_verifier()
    token = jwt.encode(payload(scp=["a2a", "admin"]), SECRET, algorithm="HS256")
    identity = await verifier.verify(token)
    assert (identity.principal, identity.scopes) == ("alice", frozenset({"a2a", "admin"}))
    other = jwt.encode(payload(), "another-secret-that-is-32-bytes-long!!", algorithm="HS256")
    await rejected(verifier, other, "signature does not verify")


async def test_scopes_as_string_list_scp_or_a_configured_claim() -> None:
    verifier = hs_verifier()
    sign = hs_token
    assert (await verifier.verify(sign(scope="a  b\tc"))).scopes == {"a", "b", "c"}
    assert (await verifier.verify(sign(scope=["a", "b"]))).scopes == {"a", "b"}
    assert (await verifier.verify(sign(scp="x y"))).scopes == {"x", "y"}
    assert (await verifier.verify(sign(scope="from-scope", scp="from-scp"))).scopes == {"from-scope"}
    assert (await verifier.verify(sign())).scopes == frozenset()
    await rejected(verifier, sign(scope=42), "scope claim is neither a string nor a list")
    await rejected(verifier, sign(scope=["a", 1]), "scope claim is neither a string nor a list")
    custom = hs_verifier(scopes_claim="permissions", principal_claim="email")
    identity = await custom.verify(sign(permissions=["p1"], email="alice@example.com"))
    assert (identity.principal, identity.scopes) == ("alice@example.com", frozenset({"p1"}))


async def test_the_principal_claim_must_be_a_non_empty_string() -> None:
    verifier = hs_verifier()
    for sub in (None, "", "  ", 7, ["alice"]):
        await rejected(verifier, jwt.encode(payload(sub=sub), SECRET, algorithm="HS256"),
                       "sub claim is not a non-empty string")


# -- forged and misdirected tokens -------------------------------------------------------------------


async def test_alg_none_is_rejected(idp: IdP, rsa_key: Signer) -> None:
    idp.publish(rsa_key.jwk)
    for verifier in (jwks_verifier(idp), hs_verifier()):
        for alg in ("none", "None", "NONE"):
            token = handmade({"alg": alg, "typ": "JWT", "kid": rsa_key.kid}, payload())
            assert token.endswith(".")  # empty signature
            await rejected(verifier, token, "algorithm is not accepted")
    assert idp.hits["/keys"] == 0  # refused before any key is looked up


async def test_a_signature_by_another_key_with_the_same_kid_is_rejected(idp: IdP, rsa_key: Signer) -> None:
    idp.publish(rsa_key.jwk)
    verifier = jwks_verifier(idp)
    impostor = rsa_signer(kid=rsa_key.kid)
    await rejected(verifier, impostor.sign(), "signature does not verify")
    header, _, signature = rsa_key.sign().split(".")
    tampered = f"{header}.{b64(json.dumps(payload(sub='mallory')).encode())}.{signature}"
    await rejected(verifier, tampered, "signature does not verify")
    assert (await verifier.verify(rsa_key.sign())).principal == "alice"


async def test_hs256_keyed_with_the_rsa_public_key_is_rejected(idp: IdP, rsa_key: Signer) -> None:
    """Algorithm confusion: the public key (PEM or JWK) used as an HMAC secret must never verify."""
    idp.publish(rsa_key.jwk)
    verifier = jwks_verifier(idp)
    pem = rsa_key.private.public_key().public_bytes(serialization.Encoding.PEM,
                                                    serialization.PublicFormat.SubjectPublicKeyInfo)
    for key in (pem, json.dumps(rsa_key.jwk).encode()):
        token = handmade({"alg": "HS256", "typ": "JWT", "kid": rsa_key.kid}, payload(), key)
        await rejected(verifier, token, "algorithm is not accepted")
    # even when the operator lists HS256 too, a JWKS verifier refuses to start
    with pytest.raises(ValueError, match="HS256 needs secret_env"):
        jwks_verifier(idp, algorithms=["RS256", "HS256"])


async def test_a_token_whose_alg_differs_from_its_keys_is_rejected(idp: IdP, rsa_key: Signer, ec_key: Signer) -> None:
    """An ES256 token naming the RSA key's kid: the JWK decides the algorithm, not the token."""
    idp.publish(rsa_key.jwk, ec_key.jwk)
    verifier = jwks_verifier(idp)
    token = jwt.encode(payload(), ec_key.private, algorithm="ES256", headers={"kid": rsa_key.kid})
    await rejected(verifier, token, "signing key is not known")


async def test_an_rs256_token_to_an_hs256_verifier_is_rejected(rsa_key: Signer) -> None:
    await rejected(hs_verifier(), rsa_key.sign(), "algorithm is not accepted")


async def test_not_a_jwt(idp: IdP) -> None:
    verifier = hs_verifier()
    for token in ("", "abc", "a.b.c", "pk_live_1234", "e30.e30", "!!.??.**", "x" * 20000):
        await rejected(verifier, token, "not a JWT")


async def test_audience(idp: IdP, rsa_key: Signer) -> None:
    idp.publish(rsa_key.jwk)
    verifier = jwks_verifier(idp, audience=["https://one.example", AUDIENCE])
    await rejected(verifier, rsa_key.sign(aud="https://elsewhere.example"), "audience is not accepted")
    await rejected(verifier, rsa_key.sign(aud=["https://elsewhere.example"]), "audience is not accepted")
    await rejected(verifier, rsa_key.sign(aud=None), "has no aud claim")
    assert await verifier.verify(rsa_key.sign(aud=["https://elsewhere.example", AUDIENCE]))
    assert await verifier.verify(rsa_key.sign(aud="https://one.example"))
    anyone = jwks_verifier(idp, audience=[])  # no audience configured: not checked
    assert await anyone.verify(rsa_key.sign(aud="https://elsewhere.example"))


async def test_issuer(idp: IdP, rsa_key: Signer) -> None:
    idp.publish(rsa_key.jwk)
    verifier = jwks_verifier(idp)
    await rejected(verifier, rsa_key.sign(iss="https://evil.example"), "issuer is not accepted")
    for part in ("https://idp", "idp.example", ""):  # an exact match, not a substring (CVE-2024-53861)
        await rejected(verifier, rsa_key.sign(iss=part), "issuer is not accepted")
    as_list = json.dumps(payload(iss=["https://idp.example"])).encode()  # PyJWT's encode() refuses to make it
    token = jwt.api_jws.encode(as_list, rsa_key.private, algorithm="RS256", headers={"kid": rsa_key.kid})
    await rejected(verifier, token, "issuer is not accepted")
    await rejected(verifier, rsa_key.sign(iss=None), "has no iss claim")
    unchecked = jwks_verifier(idp, issuer=None)
    assert await unchecked.verify(rsa_key.sign(iss="https://anyone.example"))


# -- time ------------------------------------------------------------------------------------------


async def test_expiry_and_not_before_with_leeway() -> None:
    clock = Clock()
    verifier = hs_verifier(clock, leeway_seconds=30)
    sign = hs_token
    t = int(NOW)
    await rejected(verifier, sign(exp=t - 31), "has expired")
    await rejected(verifier, sign(exp=t - 30), "has expired")  # exp <= now - leeway, as PyJWT
    assert await verifier.verify(sign(exp=t - 29))  # expired, but inside the leeway
    await rejected(verifier, sign(nbf=t + 31), "not valid yet")
    assert await verifier.verify(sign(nbf=t + 29))
    await rejected(verifier, sign(iat=t + 31), "issue time (iat) is in the future")
    assert await verifier.verify(sign(iat=t + 29))
    await rejected(verifier, sign(exp=None), "has no exp claim")
    for bad in ("soon", True, float("nan"), float("inf")):
        await rejected(verifier, sign(exp=bad), "exp claim is not a number")

    token = sign(exp=t + 100)
    assert await verifier.verify(token)
    clock.now = NOW + 129
    assert await verifier.verify(token)
    clock.now = NOW + 130
    await rejected(verifier, token, "has expired")


async def test_no_leeway() -> None:
    verifier = hs_verifier(leeway_seconds=0)
    await rejected(verifier, jwt.encode(payload(exp=int(NOW)), SECRET, algorithm="HS256"), "has expired")
    assert await verifier.verify(jwt.encode(payload(exp=int(NOW) + 1), SECRET, algorithm="HS256"))


# -- key rotation, refresh limits, outages -------------------------------------------------------------


async def test_key_rotation_refetches_once_after_the_min_interval(idp: IdP, rsa_key: Signer) -> None:
    clock = Clock()
    idp.publish(rsa_key.jwk)
    verifier = jwks_verifier(idp, clock, jwks_min_refresh_seconds=30)
    assert await verifier.verify(rsa_key.sign())
    assert idp.hits["/keys"] == 1

    new = rsa_signer(kid="rsa-2")
    idp.publish(rsa_key.jwk, new.jwk)  # the provider rotates
    await rejected(verifier, new.sign(), "signing key is not known")  # keys fetched just now: not again yet
    assert idp.hits["/keys"] == 1

    clock.now += 30
    assert (await verifier.verify(new.sign(sub="bob"))).principal == "bob"
    assert idp.hits["/keys"] == 2
    assert await verifier.verify(new.sign()) and await verifier.verify(rsa_key.sign())
    assert idp.hits["/keys"] == 2  # both cached now


async def test_a_flood_of_unknown_kids_fetches_at_most_once_per_interval(idp: IdP, rsa_key: Signer) -> None:
    clock = Clock()
    idp.publish(rsa_key.jwk)
    verifier = jwks_verifier(idp, clock, jwks_min_refresh_seconds=30)
    cold = await asyncio.gather(*(verifier.verify(rsa_key.sign()) for _ in range(20)))  # an empty cache, at once
    assert {identity.principal for identity in cold} == {"alice"}
    assert idp.hits["/keys"] == 1
    new = rsa_signer(kid="rsa-new")
    idp.publish(rsa_key.jwk, new.jwk)
    flood = [rsa_key.with_kid(f"unknown-{i}").sign() for i in range(100)]

    async def outcome(token: str) -> str:
        try:
            return (await verifier.verify(token)).principal
        except UnauthenticatedError as exc:
            return exc.message

    for round_ in (1, 2, 3):
        clock.now += 30  # a refetch is allowed again
        # all at once: the unknown kids and the rotated key share one fetch, which brings the new key
        results = await asyncio.gather(*(outcome(t) for t in [*flood[:50], new.sign(sub="bob"), *flood[50:]]))
        assert results[50] == "bob"
        assert set(results[:50] + results[51:]) == {"The token's signing key is not known"}
        assert idp.hits["/keys"] == 1 + round_
        await asyncio.gather(*(outcome(t) for t in flood))  # same interval: no fetch at all
        assert idp.hits["/keys"] == 1 + round_


async def test_keys_are_refetched_after_max_age(idp: IdP, rsa_key: Signer) -> None:
    clock = Clock()
    idp.publish(rsa_key.jwk)
    verifier = jwks_verifier(idp, clock, jwks_min_refresh_seconds=30, jwks_max_age_seconds=600)
    token = rsa_key.sign(exp=int(NOW) + 10_000)
    assert await verifier.verify(token)
    clock.now += 599
    assert await verifier.verify(token)
    assert idp.hits["/keys"] == 1
    clock.now += 1
    idp.publish(rsa_signer(kid="rsa-9").jwk)  # the old key is withdrawn
    await rejected(verifier, token, "signing key is not known")
    assert idp.hits["/keys"] == 2


async def test_cached_keys_keep_working_while_the_jwks_endpoint_is_down(idp: IdP, rsa_key: Signer) -> None:
    clock = Clock()
    idp.publish(rsa_key.jwk)
    verifier = jwks_verifier(idp, clock, jwks_min_refresh_seconds=30, jwks_max_age_seconds=600)
    token = rsa_key.sign(exp=int(NOW) + 10_000)
    assert await verifier.verify(token)
    idp.stop()
    clock.now += 700  # past max age: a refetch is tried, fails, the cache stays
    assert (await verifier.verify(token)).principal == "alice"
    clock.now += 30
    await rejected(verifier, rsa_signer(kid="rsa-2").sign(exp=int(NOW) + 10_000), "signing key is not known")
    assert (await verifier.verify(token)).principal == "alice"


async def test_no_keys_at_all_rejects_without_details(idp: IdP, rsa_key: Signer) -> None:
    clock = Clock()
    idp.stop()
    verifier = jwks_verifier(idp, clock)
    exc = await rejected(verifier, rsa_key.sign(), "signing keys cannot be fetched")
    assert idp.url not in exc.message and "Error" not in exc.message


async def test_a_failed_first_fetch_is_retried_after_the_min_interval(idp: IdP, rsa_key: Signer) -> None:
    clock = Clock()
    verifier = jwks_verifier(idp, clock, jwks_min_refresh_seconds=30)  # /keys answers 404 for now
    await rejected(verifier, rsa_key.sign(), "signing keys cannot be fetched")
    idp.publish(rsa_key.jwk)
    await rejected(verifier, rsa_key.sign(), "signing keys cannot be fetched")  # not asked again so soon
    assert idp.hits["/keys"] == 1
    clock.now += 30
    assert (await verifier.verify(rsa_key.sign(exp=int(NOW) + 300))).principal == "alice"
    assert idp.hits["/keys"] == 2


@pytest.mark.parametrize("document", [{"keys": []}, {"keys": "nope"}, {"keys": [{"kty": "RSA", "n": 5}]}, ["x"]])
async def test_a_broken_key_set_is_no_key_set(idp: IdP, rsa_key: Signer, document: Any) -> None:
    idp.documents["/keys"] = document
    await rejected(jwks_verifier(idp), rsa_key.sign(), "signing keys cannot be fetched")


async def test_a_token_without_kid_is_tried_against_the_keys_of_its_algorithm(idp: IdP, rsa_key: Signer) -> None:
    other = rsa_signer(kid="rsa-0")
    idp.publish(rsa_key.jwk, other.jwk, {**other.jwk, "kid": "enc", "use": "enc"})
    verifier = jwks_verifier(idp)
    assert (await verifier.verify(jwt.encode(payload(), rsa_key.private, algorithm="RS256"))).principal == "alice"
    stranger = rsa_signer(kid="x")
    await rejected(verifier, jwt.encode(payload(), stranger.private, algorithm="RS256"), "signature does not verify")


# -- OIDC discovery ----------------------------------------------------------------------------------


async def test_discovery_gives_the_jwks_uri_and_the_issuer(idp: IdP, ec_key: Signer) -> None:
    idp.publish(ec_key.jwk)
    idp.discovery(issuer=idp.url)
    url = f"{idp.url}/.well-known/openid-configuration"
    discovered = make_verifier(JwtSettings(oidc_discovery_url=url, audience=[AUDIENCE]), clock=Clock())
    assert (await discovered.verify(ec_key.sign(iss=idp.url))).principal == "alice"
    await rejected(discovered, ec_key.sign(iss="https://idp.example"), "issuer is not accepted")
    assert idp.hits == {"/.well-known/openid-configuration": 1, "/keys": 1}
    assert discovered.security_scheme() == {"openIdConnectSecurityScheme": {"openIdConnectUrl": url}}

    configured = make_verifier(JwtSettings(oidc_discovery_url=url, issuer="https://idp.example"), clock=Clock())
    assert await configured.verify(ec_key.sign(iss="https://idp.example"))  # the configured issuer wins
    await rejected(configured, ec_key.sign(iss=idp.url), "issuer is not accepted")


async def test_discovery_without_jwks_uri(idp: IdP, ec_key: Signer) -> None:
    idp.documents["/.well-known/openid-configuration"] = {"issuer": idp.url}
    url = f"{idp.url}/.well-known/openid-configuration"
    await rejected(make_verifier(JwtSettings(oidc_discovery_url=url), clock=Clock()), ec_key.sign(iss=idp.url),
                   "signing keys cannot be fetched")
    assert idp.hits["/keys"] == 0


# -- settings and the card -------------------------------------------------------------------------------


def test_settings_that_cannot_work_fail_at_construction(idp: IdP) -> None:
    with pytest.raises(ValueError, match="the environment variable PARLEY_JWT_SECRET is not set"):
        JwtVerifier(JwtSettings(secret_env="PARLEY_JWT_SECRET"), env={})
    with pytest.raises(ValueError, match="PARLEY_JWT_SECRET"):
        JwtVerifier(JwtSettings(secret_env="PARLEY_JWT_SECRET"), env={"PARLEY_JWT_SECRET": ""})
    with pytest.raises(ValueError, match="exactly one of"):
        JwtVerifier(JwtSettings())
    with pytest.raises(ValueError, match="exactly one of"):
        JwtVerifier(JwtSettings(secret_env="S", jwks_url=f"{idp.url}/keys"), env={"S": SECRET})
    with pytest.raises(ValueError, match='"none" is never accepted'):
        jwks_verifier(idp, algorithms=["RS256", "none"])
    with pytest.raises(ValueError, match="RS256 needs jwks_url"):
        hs_verifier(algorithms=["HS256", "RS256"])
    with pytest.raises(ValueError, match="not supported"):
        jwks_verifier(idp, algorithms=["RS257"])


def test_a_short_hmac_secret_fails_at_construction() -> None:
    """Issue 28, item 14: an HMAC secret shorter than 32 bytes is refused with one line naming the setting and the
    variable, never the secret (parley serve exits 2 with it: test_serve_refusals)."""
    for short in ("Q7", "s" * 31, "é" * 15):  # bytes, not characters: 15 x 2 bytes is 30
        with pytest.raises(UnsafeSettingError, match="auth.jwt.secret_env: the secret in S is") as refused:
            JwtVerifier(JwtSettings(secret_env="S"), env={"S": short})
        assert short not in str(refused.value)
    assert JwtVerifier(JwtSettings(secret_env="S"), env={"S": "é" * 16}).algorithms == {"HS256"}  # 32 bytes


def test_security_scheme_for_a_jwks_or_a_secret(idp: IdP) -> None:
    bearer = {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}
    assert jwks_verifier(idp).security_scheme() == bearer
    assert hs_verifier().security_scheme() == bearer


def test_default_algorithms() -> None:
    assert hs_verifier().algorithms == {"HS256"}
    assert make_verifier(JwtSettings(jwks_url="http://127.0.0.1:9/keys")).algorithms == {"RS256", "ES256", "EdDSA"}
