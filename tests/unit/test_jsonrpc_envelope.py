"""JSON-RPC envelope parsing and A2A version negotiation (sans-IO)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from parley.protocol import v0_3, v1_0, v1_1
from parley.protocol.errors import (
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    ParseError,
    VersionNotSupportedError,
)
from parley.protocol.jsonrpc import (
    SUPPORTED_VERSIONS,
    VERSION_HEADER,
    EnvelopeError,
    RpcRequest,
    failure,
    failure_obj,
    negotiate_version,
    parse_request,
    success,
    success_obj,
)
from parley.protocol.operations import Operation


def body(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def envelope(method: str = "message/send", rid: Any = 1, params: Any = None, **extra: Any) -> bytes:
    data: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method, **extra}
    if params is not None:
        data["params"] = params
    return json.dumps(data).encode()


def parse_error(raw: bytes, header: str | None = None) -> EnvelopeError:
    with pytest.raises(EnvelopeError) as info:
        parse_request(raw, header)
    return info.value


# --- malformed envelopes -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "cls", "code", "rid"),
    [
        (b"{not json", ParseError, -32700, None),
        (b"", ParseError, -32700, None),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "x"', ParseError, -32700, None),
        (b"[]", InvalidRequestError, -32600, None),
        (b"[" + envelope() + b"]", InvalidRequestError, -32600, None),  # a batch
        (b'"a string"', InvalidRequestError, -32600, None),
        (b"42", InvalidRequestError, -32600, None),
        (b"null", InvalidRequestError, -32600, None),
        (body(id=7, method="message/send"), InvalidRequestError, -32600, 7),  # no jsonrpc
        (body(jsonrpc="1.0", id="r1", method="message/send"), InvalidRequestError, -32600, "r1"),
        (body(jsonrpc=2.0, id=3, method="message/send"), InvalidRequestError, -32600, 3),
        (body(jsonrpc="2.0", method="message/send"), InvalidRequestError, -32600, None),  # notification
        (body(jsonrpc="2.0", id=1.5, method="message/send"), InvalidRequestError, -32600, None),
        (body(jsonrpc="2.0", id=True, method="message/send"), InvalidRequestError, -32600, None),
        (body(jsonrpc="2.0", id=[1], method="message/send"), InvalidRequestError, -32600, None),
        (body(jsonrpc="2.0", id={"a": 1}, method="message/send"), InvalidRequestError, -32600, None),
        (body(jsonrpc="2.0", id=5), InvalidRequestError, -32600, 5),  # no method
        (body(jsonrpc="2.0", id=5, method=""), InvalidRequestError, -32600, 5),
        (body(jsonrpc="2.0", id="x", method=12), InvalidRequestError, -32600, "x"),
        (body(jsonrpc="2.0", id=9, method="message/send", params=[1, 2]), InvalidParamsError, -32602, 9),
        (body(jsonrpc="2.0", id=9, method="message/send", params="p"), InvalidParamsError, -32602, 9),
        (body(jsonrpc="2.0", id=9, method="message/send", params=3), InvalidParamsError, -32602, 9),
        (envelope("no/such/method", rid=11), MethodNotFoundError, -32601, 11),
        (envelope("sendMessage", rid="s"), MethodNotFoundError, -32601, "s"),
    ],
)
def test_malformed_envelopes(raw: bytes, cls: type, code: int, rid: Any) -> None:
    exc = parse_error(raw)
    assert type(exc.error) is cls
    assert exc.error.code == code
    assert exc.request_id == rid
    assert exc.error.message


def test_envelope_error_reads_as_its_message() -> None:
    exc = parse_error(envelope("tasks/explode", rid=3))
    assert str(exc) == exc.error.message


def test_a_batch_is_refused_as_a_batch() -> None:
    """A batch gets its own message, not the generic one for a body that is not an object."""
    assert "batch" in parse_error(b"[" + envelope() + b"]").error.message
    assert "batch" not in parse_error(b"42").error.message


def test_unknown_method_names_the_method() -> None:
    exc = parse_error(envelope("tasks/explode"))
    assert "tasks/explode" in exc.error.message


def test_null_id_is_accepted() -> None:
    req = parse_request(envelope(rid=None), None)
    assert req.id is None


@pytest.mark.parametrize("rid", [0, 1, -3, 2**40, "", "abc"])
def test_valid_ids_are_kept(rid: Any) -> None:
    assert parse_request(envelope(rid=rid), None).id == rid


def test_params_may_be_omitted_or_null() -> None:
    assert parse_request(envelope(params=None), None).params is None
    assert parse_request(body(jsonrpc="2.0", id=1, method="tasks/get", params=None), None).params is None
    req = parse_request(envelope(params={"id": "t"}), None)
    assert req.params == {"id": "t"}


def test_parsed_request_fields() -> None:
    req = parse_request(envelope("tasks/get", rid="q", params={"id": "t1"}), None)
    assert isinstance(req, RpcRequest)
    assert (req.id, req.method, req.op, req.dialect, req.params) == ("q", "tasks/get", Operation.GET, v0_3,
                                                                    {"id": "t1"})


def test_envelope_error_comes_before_version_error() -> None:
    # A broken envelope is reported as such even when the version header is also bad.
    exc = parse_error(body(jsonrpc="2.0", id=1, method=""), "9.9")
    assert type(exc.error) is InvalidRequestError


def test_version_error_keeps_request_id() -> None:
    exc = parse_error(envelope("message/send", rid="v"), "2.0")
    assert type(exc.error) is VersionNotSupportedError
    assert exc.error.code == -32009
    assert exc.request_id == "v"


# --- version negotiation -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "version"),
    [(None, "0.3"), ("", "0.3"), ("   ", "0.3"), ("0.3", "0.3"), ("0.3.0", "0.3"), ("1.0", "1.0"),
     ("1.0.3", "1.0"), (" 1.0 ", "1.0"), ("1", "1.0"), (" 1 ", "1.0")],
)
def test_negotiate_version(header: str | None, version: str) -> None:
    assert negotiate_version(header) == version


@pytest.mark.parametrize("header", ["2.0", "0.2", "1.2", "abc", "v1.0", "1.x", "0.4"])
def test_unsupported_versions(header: str) -> None:
    with pytest.raises(VersionNotSupportedError) as info:
        negotiate_version(header)
    assert info.value.code == -32009
    assert header in info.value.message


@pytest.mark.parametrize("space", ["\t", "\n", "\r\n", "\u00a0", "\u2003", "\u3000", "\x1c", "\x1f"])
def test_the_header_is_stripped_of_any_surrounding_whitespace(space: str) -> None:
    # Everything str.isspace() calls whitespace, which is more than int() skips (\x1c-\x1f).
    assert negotiate_version(f"{space}1.0{space}") == "1.0"
    assert negotiate_version(f"{space}0.3{space}") == "0.3"
    assert negotiate_version(f"1{space}") == "1.0"
    assert negotiate_version(space) == "0.3"


@pytest.mark.parametrize("header", ["abc", "v1.0", "1.x", "x.0", "1.0x", ".", "1..0"])
def test_malformed_versions_are_not_versions(header: str) -> None:
    with pytest.raises(VersionNotSupportedError) as info:
        negotiate_version(header)
    assert "is not a version" in info.value.message
    assert "supported: 0.3, 1.0, 1.1" in info.value.message


@pytest.mark.parametrize("header", ["2.0", "0.2", "1.2", "0", "2", "0.4.1"])
def test_well_formed_unsupported_versions_say_so(header: str) -> None:
    with pytest.raises(VersionNotSupportedError) as info:
        negotiate_version(header)
    assert "is not supported" in info.value.message
    assert "supported: 0.3, 1.0, 1.1" in info.value.message


def test_version_header_and_supported_versions() -> None:
    assert VERSION_HEADER == "A2A-Version"  # the header name of the A2A specification
    assert SUPPORTED_VERSIONS == ("0.3", "1.0", "1.1")  # 1.1: the dev-1.1 draft (generation)


@pytest.mark.parametrize("method", sorted(v1_0.METHODS))
def test_v1_methods_need_v1(method: str) -> None:
    for header in (None, "", "0.3"):
        exc = parse_error(envelope(method, rid=4), header)
        assert type(exc.error) is VersionNotSupportedError
        assert exc.request_id == 4
        assert "`A2A-Version: 1.0`" in exc.error.message
    for header in ("1.0", "1.0.3"):
        req = parse_request(envelope(method), header)
        assert req.dialect is v1_0
        assert req.op is v1_0.METHODS[method]
    for header in ("1.1", "1.1.0"):  # the A2A 1.1 draft: the 1.0 methods, the 1.1 dialect (generation)
        req = parse_request(envelope(method), header)
        assert req.dialect is v1_1 and req.dialect.VERSION == "1.0"
        assert req.op is v1_0.METHODS[method]


@pytest.mark.parametrize("method", sorted(v0_3.METHODS))
def test_v03_methods_are_accepted(method: str) -> None:
    for header in (None, "0.3", "1.0"):
        req = parse_request(envelope(method), header)
        assert req.dialect is v0_3
        assert req.op is v0_3.METHODS[method]


@pytest.mark.parametrize("header", ["2.0", "abc"])
def test_unsupported_header_fails_every_method(header: str) -> None:
    for method in ("message/send", "SendMessage"):
        exc = parse_error(envelope(method), header)
        assert type(exc.error) is VersionNotSupportedError


def test_every_operation_has_a_method_in_each_version() -> None:
    # CARD (0.3 HTTP+JSON `GET /v1/card`), TRACE and PUSH_LOG (Parley's trace and push-log endpoints) are
    # HTTP-only operations.
    json_rpc = set(Operation) - {Operation.CARD, Operation.TRACE, Operation.PUSH_LOG}
    assert set(v0_3.METHODS.values()) == json_rpc
    assert set(v1_0.METHODS.values()) == json_rpc


# --- response envelopes ---------------------------------------------------------------------------------------


def test_success_and_failure_bodies() -> None:
    assert json.loads(success(3, {"a": 1})) == {"jsonrpc": "2.0", "id": 3, "result": {"a": 1}}
    assert json.loads(success("x", None)) == {"jsonrpc": "2.0", "id": "x", "result": None}
    err = json.loads(failure(None, MethodNotFoundError("Method not found: 'x'")))
    assert err == {"jsonrpc": "2.0", "id": None, "error": {"code": -32601, "message": "Method not found: 'x'"}}


def test_response_objects_for_sse_frames() -> None:
    assert success_obj(7, {"a": 1}) == {"jsonrpc": "2.0", "id": 7, "result": {"a": 1}}
    assert success_obj(None, None) == {"jsonrpc": "2.0", "id": None, "result": None}
    error = VersionNotSupportedError("nope")
    assert failure_obj("r", error) == {"jsonrpc": "2.0", "id": "r", "error": {"code": -32009, "message": "nope"}}
