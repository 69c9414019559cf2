"""The inspector over gRPC with TLS (docs/dashboard.md, "Inspect any agent"): a card's GRPC interface at
`grpcs://host:port` (A2A 1.0 section 10; section 7.1: production deployments use TLS) is called over TLS at the
address the SSRF guard pinned, the certificate checked against the card's host name and the roots gRPC trusts
(its own, or the file `GRPC_DEFAULT_SSL_ROOTS_FILE_PATH` names). An agent whose certificate is not trusted is
refused, saying so.

Real parts: a grpc.aio server with a certificate for `localhost` issued by a test CA, a card served over HTTP on
127.0.0.1, and the dashboard in a `parley serve` subprocess (gRPC reads its roots once per process)."""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from support import ServeProcess, UvicornThread, free_port

grpc = pytest.importorskip("grpc")
x509 = pytest.importorskip("cryptography.x509")

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from parley.grpc import a2a_pb2 as pb
from parley.grpc import a2a_pb2_grpc


def _issue(subject: str, key: ec.EllipticCurvePrivateKey, issuer: tuple[str, ec.EllipticCurvePrivateKey] | None,
           *, ca: bool) -> x509.Certificate:
    """A certificate for `subject` (a CA, or a server certificate for the DNS name `subject`), self-signed when
    `issuer` is None."""
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, signing_key = issuer if issuer is not None else (subject, key)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_name)]))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(hours=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False)
    return builder.sign(signing_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


class Pki:
    """A test CA and a `localhost` server certificate it issued (PEM bytes); `ca_file` holds the CA."""

    def __init__(self, folder: Path) -> None:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        self.ca = _pem(_issue("Parley test CA", ca_key, None, ca=True))
        server_key = ec.generate_private_key(ec.SECP256R1())
        self.cert = _pem(_issue("localhost", server_key, ("Parley test CA", ca_key), ca=False))
        self.key = server_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption())
        self.ca_file = folder / "ca.pem"
        self.ca_file.write_bytes(self.ca)


class Tasks(a2a_pb2_grpc.A2AServiceServicer):
    """GetTask answers a working task with the id asked for (what the test reads back)."""

    async def GetTask(self, request, context):
        return pb.Task(id=request.id, context_id="c1", status=pb.TaskStatus(state=pb.TASK_STATE_WORKING))


@asynccontextmanager
async def tls_agent(pki: Pki) -> AsyncIterator[str]:
    """A gRPC agent over TLS on 127.0.0.1 with the `localhost` certificate; its card's URL (HTTP, 127.0.0.1),
    whose GRPC interface is `grpcs://localhost:PORT`."""
    port = free_port()
    server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(Tasks(), server)
    assert server.add_secure_port(f"127.0.0.1:{port}", grpc.ssl_server_credentials([(pki.key, pki.cert)])) == port
    await server.start()

    async def card(request: Request) -> Response:
        return JSONResponse({"name": "TLS agent", "version": "1.0.0", "description": "gRPC over TLS",
                             "supportedInterfaces": [{"url": f"grpcs://localhost:{port}", "protocolBinding": "GRPC",
                                                      "protocolVersion": "1.0"}]})

    web = UvicornThread(Starlette(routes=[Route("/.well-known/agent-card.json", card)]),
                        label="the TLS agent's card server").start()
    try:
        yield web.url
    finally:
        web.stop()
        await server.stop(None)


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path)


@pytest.fixture
def dashboards(tmp_path: Path, pki: Pki) -> Iterator[tuple[str, str]]:
    """Two `parley serve` dashboards whose inspector may reach loopback: (one trusting the test CA through
    GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, one with gRPC's own roots)."""
    (tmp_path / "parley.toml").write_text('[server]\nbuiltin_agents = true\n\n[server.dashboard]\ninspect_allow = ["127.0.0.0/8"]\n')
    started: list[ServeProcess] = []
    try:
        for name, extra in (("trusting", {"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(pki.ca_file)}), ("plain", {})):
            env = {k: v for k, v in os.environ.items() if k != "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"} | extra
            started.append(ServeProcess(name, ["--memory", "--config", str(tmp_path / "parley.toml")],
                                        cwd=tmp_path, env=env))
        for sp in started:
            sp.wait_ready()
        yield started[0].url, started[1].url
    finally:
        for sp in started:
            sp.close()


async def inspect_get_task(dashboard: str, card_url: str, grpc_url: str) -> httpx.Response:
    """The inspector's GetTask over the card's gRPC interface, as the console posts it (session, CSRF token)."""
    async with httpx.AsyncClient(base_url=dashboard, timeout=60) as http:
        page = await http.get("/ui/inspect", params={"url": card_url})
        assert page.status_code == 200, page.text
        assert f'value="GRPC 1.0 {grpc_url}"' in page.text, page.text  # the interface is offered, TLS and all
        token = re.search(r'name="csrf-token" content="([^"]+)"', page.text).group(1)
        return await http.post("/ui/inspect/call", headers={"X-CSRF-Token": token},
                               json={"url": card_url, "endpoint": f"GRPC 1.0 {grpc_url}", "method": "GetTask",
                                     "params": {"id": "tls-1"}})


async def test_a_grpcs_interface_is_called_over_tls_and_an_untrusted_certificate_is_refused(
        pki: Pki, dashboards: tuple[str, str]) -> None:
    trusting, plain = dashboards
    async with tls_agent(pki) as card_url:
        async with httpx.AsyncClient() as http:
            grpc_url = (await http.get(f"{card_url}/.well-known/agent-card.json")).json()[
                "supportedInterfaces"][0]["url"]
        answer = await inspect_get_task(trusting, card_url, grpc_url)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["status"] == "OK", body
        (frame,) = body["frames"]
        assert frame["valid"], [c["what"] for c in frame["checks"] if not c["ok"]]
        assert frame["body"]["id"] == "tls-1"
        refused = await inspect_get_task(plain, card_url, grpc_url)  # gRPC's own roots do not know the test CA
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error.startswith(f"cannot reach localhost:{grpc_url.rsplit(':', 1)[1]} over gRPC"), error
