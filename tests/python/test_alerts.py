"""Alerts for people, read from a real SMTP server on loopback (aiosmtpd, with
STARTTLS required and AUTH) and a loopback chat-webhook receiver: an endpoint
disabled after failing is told once by e-mail to each address and once in chat,
and not again within the window when it is disabled a second time."""
import datetime
import email
import email.policy
import ipaddress
import json
import ssl
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from svix.api import ApplicationIn, EndpointIn, EndpointPatch, MessageIn, Svix, SvixOptions

from conftest import Sink, call, eventually, free_port
from test_operational_webhooks import own_hookgate

USER, PASSWORD = "alerts@agency", "p@ss w0rd"


def _certificate(cn, key, issuer, issuer_key, ca=False):
    now = datetime.datetime.now(datetime.timezone.utc)
    name = lambda n: x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, n)])
    b = (x509.CertificateBuilder().subject_name(name(cn)).issuer_name(name(issuer))
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
    else:
        b = b.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                            critical=False)
    return b.sign(issuer_key, hashes.SHA256())


class SmtpServer:
    """aiosmtpd on 127.0.0.1: STARTTLS required before anything, AUTH required
    (over TLS), every message recorded with whether TLS and AUTH were used."""

    def __init__(self, directory: Path):
        ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
        ca = _certificate("alerts test ca", ca_key, "alerts test ca", ca_key, ca=True)
        cert = _certificate("smtp", key, "alerts test ca", ca_key)
        self.ca_file = directory / "ca.pem"
        self.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        (directory / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (directory / "key.pem").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(directory / "cert.pem", directory / "key.pem")
        self.messages = []
        self.refused_logins = 0
        server = self

        class Handler:
            async def handle_DATA(self, smtp, session, envelope):
                server.messages.append({
                    "from": envelope.mail_from, "to": list(envelope.rcpt_tos),
                    "tls": session.ssl is not None, "login": session.auth_data if session.authenticated else None,
                    "mail": email.message_from_bytes(envelope.content, policy=email.policy.default),
                })
                return "250 OK"

        def authenticate(smtp, session, envelope, mechanism, data):
            ok = isinstance(data, LoginPassword) and (data.login.decode(), data.password.decode()) == (USER, PASSWORD)
            if not ok:
                server.refused_logins += 1
            return AuthResult(success=ok, auth_data=data.login.decode() if ok else None)

        self.port = free_port()
        self.controller = Controller(
            Handler(), hostname="127.0.0.1", port=self.port, tls_context=ctx, require_starttls=True,
            authenticator=authenticate, auth_required=True, auth_require_tls=True,
        )
        self.controller.start()

    def stop(self):
        self.controller.stop()


@pytest.fixture
def smtp():
    with tempfile.TemporaryDirectory() as d:
        s = SmtpServer(Path(d))
        yield s
        s.stop()


@pytest.fixture
def alerting(hookgate, smtp):
    """A Hookgate of its own that sends e-mail through `smtp` and disables an endpoint failing for a second."""
    hg = own_hookgate(
        hookgate,
        HOOKGATE_DISABLE_AFTER_SECS="1",
        # The user and password percent-encoded, as a URL carries them.
        HOOKGATE_SMTP_URL=f"smtp://alerts%40agency:p%40ss%20w0rd@127.0.0.1:{smtp.port}",
        HOOKGATE_SMTP_CA_FILE=str(smtp.ca_file),
        HOOKGATE_ALERT_FROM="Hookgate Alerts <alerts@agency.example>",
    )
    yield hg
    hg.stop()


def test_an_endpoint_disabled_after_failures_sends_one_email_to_each_address_and_one_chat_alert_within_the_window(
    alerting, smtp
):
    hg = alerting
    tenant = hg.admin("POST", "/admin/v1/tenant", {"name": "agency-client"})
    key = tenant["apiKey"]
    svix = Svix(key, SvixOptions(server_url=hg.url, retry_schedule=[]))
    failing, chat = Sink(), Sink()
    failing.status = 500
    try:
        status, _, shown = call(hg, "PATCH", "/api/v1/alert-settings", key=key, body={
            "email": "oncall@agency.example", "chatUrl": chat.url, "events": ["endpoint.disabled"],
        })
        assert status == 200, shown
        assert shown["smtpConfigured"] is True and shown["email"] == "oncall@agency.example"
        app = svix.application.create(ApplicationIn(name="Acme Shop", uid="acme"))
        # Svix's per-application alert e-mail.
        status, _, _ = call(hg, "PATCH", f"/api/v1/app/{app.id}/alert-email", key=key,
                            body={"email": "client@customer.example"})
        assert status == 204
        ep = svix.endpoint.create(app.id, EndpointIn(url=failing.url, uid="acme-orders"))
        svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"n": 1}))

        def told():
            to = sorted(a for m in smtp.messages for a in m["to"])
            return to == ["client@customer.example", "oncall@agency.example"] and len(chat.received) == 1
        eventually(told, timeout=30)
        assert svix.endpoint.get(app.id, ep.id).disabled is True
        for m in smtp.messages:
            assert m["tls"] and m["login"] == USER, "STARTTLS, then AUTH"
            assert m["from"] == "alerts@agency.example"
            mail = m["mail"]
            assert mail["From"] == "Hookgate Alerts <alerts@agency.example>"
            assert mail["Subject"] == f"[Hookgate] Endpoint disabled: {failing.url}", mail["Subject"]
            body = mail.get_content()
            assert "Acme Shop" in body and ep.id in body and "acme-orders" in body, body
            assert tenant["id"] not in body, "a tenant's reader is not told its own id"
        text = json.loads(chat.received[0]["body"])["text"]
        assert text.startswith(f"*[Hookgate] Endpoint disabled: {failing.url}*"), text
        assert smtp.refused_logins == 0

        # Enabled again, it fails and is disabled again within the window: no second alert.
        svix.endpoint.patch(app.id, ep.id, EndpointPatch(disabled=False))
        assert svix.endpoint.get(app.id, ep.id).disabled is False
        svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"n": 2}))
        eventually(lambda: svix.endpoint.get(app.id, ep.id).disabled, timeout=30)
        time.sleep(3)
        assert len(smtp.messages) == 2, [m["to"] for m in smtp.messages]
        assert len(chat.received) == 1

        with urllib.request.urlopen(hg.metrics_url, timeout=5) as r:
            metrics = r.read().decode()
        line = 'hookgate_alerts_total{channel="email",condition="endpoint.disabled",outcome="sent"} '
        assert any(l.startswith(line) and float(l[len(line):]) == 2 for l in metrics.splitlines()), metrics
    finally:
        for s in (failing, chat):
            s.server.shutdown()
