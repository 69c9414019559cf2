"""TokenExchanger against a real token endpoint on 127.0.0.1 (tests/security/token_endpoint.py): the request it
makes (RFC 8693 §2.1), the answer it accepts (§2.2.1), the errors it reports precisely (§2.2.2, RFC 6749 §5.2),
and how long it keeps what it was issued."""

from __future__ import annotations

from collections.abc import Iterator

import jwt
import pytest

from parley.security.token_exchange import (
    JWT_TOKEN_TYPE,
    ExchangeSettings,
    TokenExchangeError,
    TokenExchanger,
)
from support import free_port

from .token_endpoint import EXCHANGE, TokenEndpoint

TARGET = "https://billing.parley.test"
HUB = "https://hub.parley.test"


@pytest.fixture
def sts() -> Iterator[TokenEndpoint]:
    with TokenEndpoint(clients={"hub": "hub-secret"}, targets={TARGET}, ttl=300) as endpoint:
        yield endpoint


def exchanger(sts: TokenEndpoint, **overrides) -> TokenExchanger:
    fields = {"token_endpoint": sts.token_url, "client_id": "hub", "client_secret": "hub-secret",
              "audience": [TARGET]}
    clock = overrides.pop("clock", None)
    fields.update(overrides)
    return TokenExchanger(ExchangeSettings(**fields), **({"clock": clock} if clock else {}))


def claims_of(token: str) -> dict:
    return jwt.decode(token, options={"verify_signature": False})


async def test_the_issued_token_names_the_subject_the_target_and_the_actor(sts: TokenEndpoint) -> None:
    """§2.1: subject_token + actor_token (this client's, client credentials) -> a Bearer token for the target."""
    issued = await exchanger(sts, scope="a2a billing", subject_token_type=JWT_TOKEN_TYPE).exchange(
        sts.issue("alice", aud=HUB))
    assert issued.token_type == "Bearer" and issued.expires_in == 300
    claims = claims_of(issued.access_token)
    assert (claims["sub"], claims["aud"], claims["act"], claims["scope"]) == ("alice", TARGET, {"sub": "hub"},
                                                                              "a2a billing")
    seen = sts.seen(EXCHANGE)[0]
    assert seen.form["subject_token_type"] == [JWT_TOKEN_TYPE] and seen.form["scope"] == ["a2a billing"]
    assert seen.form["actor_token_type"] == ["urn:ietf:params:oauth:token-type:access_token"]
    assert claims_of(seen.form["actor_token"][0])["sub"] == "hub"


@pytest.mark.parametrize("case,fragment,code", [
    ("wrong secret", "(HTTP 401): invalid_client: unknown client or wrong secret", "invalid_client"),
    ("unknown target", "(HTTP 400): invalid_target: not a target of this server", "invalid_target"),
    ("forged subject", "(HTTP 400): invalid_grant: the subject_token is not valid", "invalid_grant"),
])
async def test_a_refusal_is_the_endpoints_error_named(sts: TokenEndpoint, case: str, fragment: str,
                                                      code: str) -> None:
    """§2.2.2: the RFC 6749 §5.2 error code and description, with the HTTP status."""
    subject = sts.issue("alice", aud=HUB)
    overrides: dict = {}
    if case == "wrong secret":
        overrides["client_secret"] = "not-it"
    elif case == "unknown target":
        overrides["audience"] = ["https://elsewhere.parley.test"]
    else:
        subject = subject[:-4] + ("AAAA" if not subject.endswith("AAAA") else "BBBB")
    with pytest.raises(TokenExchangeError) as info:
        await exchanger(sts, **overrides).exchange(subject)
    assert fragment in str(info.value) and info.value.error == code


@pytest.mark.parametrize("answer,fragment", [
    ((500, b"<html>oops</html>"), "answered the actor token request with HTTP 500 and no OAuth error response"),
    ((200, b'{"access_token": "x", "token_type": "N_A"}'), "of type 'N_A', not a Bearer token"),
    ((200, b'{"token_type": "Bearer"}'), "has no access_token"),
    ((400, b'{"error": "invalid_request", "error_description": "bad\\r\\nline"}'),
     "refused the actor token request (HTTP 400): invalid_request: bad line"),
])
async def test_a_malformed_or_failed_answer_is_an_error_saying_what(sts: TokenEndpoint, answer: tuple[int, bytes],
                                                                     fragment: str) -> None:
    sts.answer_next = answer
    with pytest.raises(TokenExchangeError) as info:
        await exchanger(sts).exchange(sts.issue("alice", aud=HUB))
    assert fragment in str(info.value)


async def test_an_exchange_answer_without_issued_token_type_is_refused(sts: TokenEndpoint) -> None:
    """§2.2.1: issued_token_type is REQUIRED in a token exchange response."""
    ex = exchanger(sts)
    await ex.actor_token()
    sts.answer_next = (200, b'{"access_token": "x", "token_type": "Bearer", "expires_in": 60}')
    with pytest.raises(TokenExchangeError, match="no issued_token_type"):
        await ex.exchange(sts.issue("alice", aud=HUB))


async def test_an_unreachable_endpoint_is_named() -> None:
    url = f"http://127.0.0.1:{free_port()}/token"
    ex = TokenExchanger(ExchangeSettings(token_endpoint=url, client_id="hub", client_secret="s", audience=[TARGET]))
    with pytest.raises(TokenExchangeError, match=f"cannot reach the token endpoint {url}"):
        await ex.exchange("whatever")


async def test_issued_tokens_are_kept_until_shortly_before_they_expire(sts: TokenEndpoint) -> None:
    """One exchange per caller token while the issued one is good; a new one `refresh_before_seconds` (30) before
    it expires (ttl 300 s here), read on an injected clock."""
    now = [1000.0]
    ex = exchanger(sts, clock=lambda: now[0])
    alice, bob = sts.issue("alice", aud=HUB), sts.issue("bob", aud=HUB)
    first = await ex.exchange(alice)
    assert (await ex.exchange(alice)).access_token == first.access_token
    assert claims_of((await ex.exchange(bob)).access_token)["sub"] == "bob"
    assert len(sts.seen(EXCHANGE)) == 2
    now[0] += 300 - 31
    await ex.exchange(alice)
    assert len(sts.seen(EXCHANGE)) == 2
    now[0] += 2  # within 30 s of the end: exchanged again (and the actor token renewed too)
    await ex.exchange(alice)
    assert len(sts.seen(EXCHANGE)) == 3 and len(sts.seen("client_credentials")) == 2


async def test_the_cache_is_bounded(sts: TokenEndpoint) -> None:
    ex = TokenExchanger(exchanger(sts).settings, max_cached=2)
    tokens = [sts.issue(f"user{i}", aud=HUB) for i in range(3)]
    for token in tokens:
        await ex.exchange(token)
    await ex.exchange(tokens[0])  # the oldest was dropped: exchanged again
    assert len(sts.seen(EXCHANGE)) == 4
