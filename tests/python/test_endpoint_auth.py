"""Endpoint authentication beyond the signature, as Svix's API sets it (`…/oauth`, `…/mtls`,
`…/ca`): an OAuth 2 token server on loopback that counts its requests and checks how the
client authenticated (HTTP Basic, the body, or an RS256 JWT verified with `cryptography`), and
a TLS receiver on loopback (Python's `ssl`) that demands a client certificate signed by its CA,
its own certificate signed by a CA only the endpoint's `…/ca` names."""
import base64
import datetime
import ipaddress
import json
import os
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID
from svix.api import ApplicationIn, EndpointIn, MessageIn

from conftest import Hookgate, call, eventually, free_port


class TokenServer:
    """An OAuth 2 token endpoint on 127.0.0.1: answers `answer(form, headers)` (a status and
    a JSON body) and records every request."""

    def __init__(self, answer):
        self.requests = []
        self.answer = answer
        self.issued = {}
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0))).decode()
                form = dict(urllib.parse.parse_qsl(body))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with server._lock:
                    server.requests.append({"form": form, "headers": headers})
                    status, out = server.answer(form, headers)
                    if "access_token" in out:
                        server.issued[out["access_token"]] = time.time() + float(out.get("expires_in", 3600))
                data = json.dumps(out).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/oauth/token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def token_server():
    made = []

    def make(answer):
        made.append(TokenServer(answer))
        return made[-1]

    yield make
    for s in made:
        s.server.shutdown()


def counted_tokens(lifetime=3600, **extra):
    n = [0]

    def answer(form, headers):
        n[0] += 1
        return 200, {"access_token": f"tok-{n[0]}-{uuid.uuid4().hex[:6]}", "token_type": "Bearer",
                     "expires_in": lifetime, **extra}

    return answer


def endpoint(svix, url):
    app = svix.application.create(ApplicationIn(name="auth"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=url))
    return app.id, ep.id


def attempts(hookgate, tenant, app, msg):
    status, _, body = call(hookgate, "GET", f"/api/v1/app/{app}/attempt/msg/{msg}", key=tenant["apiKey"])
    assert status == 200, body
    return body["data"]


def test_one_token_request_serves_many_deliveries_each_sent_with_its_bearer_token(hookgate, tenant, svix, sink, token_server):
    tokens = token_server(counted_tokens())
    app, ep = endpoint(svix, sink.url)
    config = {"grantType": "clientCredentials", "authMethod": "clientSecretBasic", "clientId": "hook gate",
              "clientSecret": "s3cr:et", "tokenUrl": tokens.url, "scopes": ["read", "write"],
              "extraParams": {"audience": "orders"}, "extraHeaders": {"X-Tenant": "acme"}}
    status, _, body = call(hookgate, "PUT", f"/api/v1/app/{app}/endpoint/{ep}/oauth", key=tenant["apiKey"], body=config)
    assert status == 204, body

    for i in range(8):
        svix.message.create(app, MessageIn(event_type="order.paid", payload={"i": i}))
    got = sink.wait_for(8)
    assert len(tokens.requests) == 1, f"one token for every delivery, not {len(tokens.requests)} requests"
    issued = next(iter(tokens.issued))
    assert {g["headers"]["authorization"] for g in got} == {f"Bearer {issued}"}
    asked = tokens.requests[0]
    assert asked["form"] == {"grant_type": "client_credentials", "scope": "read write", "audience": "orders"}
    # RFC 6749 §2.3.1: each part form-encoded, then base64.
    assert asked["headers"]["authorization"] == "Basic " + base64.b64encode(b"hook+gate:s3cr%3Aet").decode()
    assert asked["headers"]["x-tenant"] == "acme"

    status, _, shown = call(hookgate, "GET", f"/api/v1/app/{app}/endpoint/{ep}/oauth", key=tenant["apiKey"])
    assert status == 200 and shown["clientId"] == "hook gate" and shown["tokenUrl"] == tokens.url
    assert "clientSecret" not in shown and "s3cr:et" not in json.dumps(shown), "the secret is never answered"
    assert shown["extraHeaders"] == {"X-Tenant": ""}, "extra headers by name only: they may be credentials"
    status, _, st = call(hookgate, "GET", f"/api/v1/app/{app}/endpoint/{ep}/oauth-config", key=tenant["apiKey"])
    assert status == 200 and st["enabled"] is True and st["config"]["scopes"] == ["read", "write"]
    # Recorded attempts name the header, never its value.
    atts = attempts(hookgate, tenant, app, got[0]["headers"]["webhook-id"])
    status, _, hdrs = call(hookgate, "GET", f"/api/v1/app/{app}/msg/{got[0]['headers']['webhook-id']}/attempt/{atts[0]['id']}/headers",
                           key=tenant["apiKey"])
    assert status == 200 and issued not in json.dumps(hdrs)

    # At rest: neither the client secret nor the token is readable in the database.
    dump = subprocess.run(["psql", hookgate.env["DATABASE_URL"], "-Atc", "SELECT t::text FROM endpoint_auth t"],
                          capture_output=True, text=True, check=True).stdout
    assert dump.strip(), "the settings are stored"
    assert "s3cr:et" not in dump and issued not in dump and "acme" not in dump

    status, _, _ = call(hookgate, "DELETE", f"/api/v1/app/{app}/endpoint/{ep}/oauth", key=tenant["apiKey"])
    assert status == 204
    status, _, _ = call(hookgate, "GET", f"/api/v1/app/{app}/endpoint/{ep}/oauth", key=tenant["apiKey"])
    assert status == 404
    svix.message.create(app, MessageIn(event_type="order.paid", payload={"after": "delete"}))
    assert "authorization" not in sink.wait_for(9)[8]["headers"], "no token once OAuth is removed"


def successes(instance, tenant_id):
    """Successful attempts this process made for the tenant, from its own /metrics."""
    with urllib.request.urlopen(instance.metrics_url, timeout=10) as res:
        text = res.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("hookgate_delivery_attempts_total{") and f'tenant="{tenant_id}"' in line
               and 'outcome="success"' in line)


def test_two_processes_share_one_token_rather_than_each_fetching_its_own(hookgate, tenant, svix, sink, token_server):
    tokens = token_server(counted_tokens())
    app, ep = endpoint(svix, sink.url)
    config = {"grantType": "clientCredentials", "authMethod": "clientSecretBasic", "clientId": "c",
              "clientSecret": "s", "tokenUrl": tokens.url}
    assert call(hookgate, "PUT", f"/api/v1/app/{app}/endpoint/{ep}/oauth", key=tenant["apiKey"], body=config)[0] == 204
    second = Hookgate({**hookgate.env, "HOOKGATE_LISTEN": f"127.0.0.1:{free_port()}",
                       "HOOKGATE_METRICS_LISTEN": f"127.0.0.1:{free_port()}"})
    try:
        # Published through both, so that each process's workers deliver some (a process
        # claims the deliveries it published first).
        for i in range(30):
            instance = (hookgate, second)[i % 2]
            status, _, body = call(instance, "POST", f"/api/v1/app/{app}/msg", key=tenant["apiKey"],
                                   body={"eventType": "x", "payload": {"i": i}})
            assert status == 202, body
        got = sink.wait_for(30)
        assert eventually(lambda: successes(hookgate, tenant["id"]) + successes(second, tenant["id"]) == 30)
        assert successes(hookgate, tenant["id"]) > 0 and successes(second, tenant["id"]) > 0, "both processes delivered"
        assert len(tokens.requests) == 1, f"{len(tokens.requests)} token requests from two processes"
        assert len({g["headers"]["authorization"] for g in got}) == 1
    finally:
        second.stop()


def test_a_token_is_refreshed_before_it_expires_so_no_delivery_carries_an_expired_one(hookgate, tenant, svix, sink, token_server):
    tokens = token_server(counted_tokens(lifetime=4))
    app, ep = endpoint(svix, sink.url)
    config = {"grantType": "clientCredentials", "authMethod": "clientSecretPost", "clientId": "c1",
              "clientSecret": "s1", "tokenUrl": tokens.url}
    assert call(hookgate, "PUT", f"/api/v1/app/{app}/endpoint/{ep}/oauth", key=tenant["apiKey"], body=config)[0] == 204
    sent = 0
    started = time.time()
    while time.time() - started < 7:
        svix.message.create(app, MessageIn(event_type="tick", payload={"n": sent}))
        sent += 1
        time.sleep(0.4)
    got = sink.wait_for(sent)
    assert tokens.requests[0]["form"] == {"grant_type": "client_credentials", "client_id": "c1", "client_secret": "s1"}
    for g in got:
        token = g["headers"]["authorization"].removeprefix("Bearer ")
        assert token in tokens.issued
        # Each token was used only while valid: received before its expiry.
        assert g["at"] < tokens.issued[token], f"a delivery carried a token {g['at'] - tokens.issued[token]:.1f} s past its expiry"
    assert 2 <= len(tokens.requests) <= 5, f"{len(tokens.requests)} token requests for {sent} deliveries over 7 s"
    assert len({g["headers"]["authorization"] for g in got}) >= 2, "a new token was fetched as the first aged"


def test_a_failing_token_server_fails_the_attempt_with_its_reason_and_is_not_asked_at_every_attempt(hookgate, tenant, svix, sink, token_server):
    refusing = [True]

    def answer(form, headers):
        if refusing[0]:
            return 401, {"error": "invalid_client"}
        return 200, {"access_token": "good-token", "expires_in": 600}

    tokens = token_server(answer)
    app, ep = endpoint(svix, sink.url)
    config = {"grantType": "clientCredentials", "authMethod": "clientSecretBasic", "clientId": "c",
              "clientSecret": "wrong", "tokenUrl": tokens.url}
    assert call(hookgate, "PUT", f"/api/v1/app/{app}/endpoint/{ep}/oauth", key=tenant["apiKey"], body=config)[0] == 204
    msg = svix.message.create(app, MessageIn(event_type="x", payload={}))
    # The schedule is 1 s, 1 s: three attempts, all within the pause after the first failure.
    atts = eventually(lambda: (a := attempts(hookgate, tenant, app, msg.id)) and len(a) == 3 and a)
    for a in atts:
        assert a["responseStatusCode"] == 0 and "OAuth token server answered 401" in a["response"], a
        assert "invalid_client" in a["response"]
    assert len(tokens.requests) == 1, "after a failure the token server is left alone for a while"
    assert sink.received == [], "no request goes without its token"

    refusing[0] = False
    time.sleep(5.5)
    status, _, _ = call(hookgate, "POST", f"/api/v1/app/{app}/msg/{msg.id}/endpoint/{ep}/resend", key=tenant["apiKey"])
    assert status == 202
    assert sink.wait_for(1)[0]["headers"]["authorization"] == "Bearer good-token"


def test_a_refresh_token_grant_uses_the_refresh_token_the_server_rotated_last(hookgate, tenant, svix, sink, token_server):
    seen = []

    def answer(form, headers):
        seen.append(form.get("refresh_token"))
        n = len(seen)
        return 200, {"access_token": f"a{n}", "expires_in": 2, "refresh_token": f"r{n + 1}"}

    tokens = token_server(answer)
    app, ep = endpoint(svix, sink.url)
    config = {"grantType": "refreshToken", "authMethod": "clientSecretPost", "clientId": "c",
              "clientSecret": "s", "refreshToken": "r1", "tokenUrl": tokens.url}
    assert call(hookgate, "PUT", f"/api/v1/app/{app}/endpoint/{ep}/oauth", key=tenant["apiKey"], body=config)[0] == 204
    for i in range(3):
        svix.message.create(app, MessageIn(event_type="x", payload={"i": i}))
        sink.wait_for(i + 1)
        time.sleep(2.2)
    assert seen[:3] == ["r1", "r2", "r3"], seen
    assert tokens.requests[0]["form"]["grant_type"] == "refresh_token"


def test_a_client_secret_jwt_is_an_rs256_assertion_the_clients_public_key_verifies(hookgate, tenant, svix, sink, token_server):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    checked = []

    def answer(form, headers):
        head, claims, sig = form["client_assertion"].split(".")
        pad = lambda s: s + "=" * (-len(s) % 4)  # noqa: E731
        key.public_key().verify(base64.urlsafe_b64decode(pad(sig)), f"{head}.{claims}".encode(),
                                padding.PKCS1v15(), hashes.SHA256())
        checked.append((json.loads(base64.urlsafe_b64decode(pad(head))), json.loads(base64.urlsafe_b64decode(pad(claims)))))
        return 200, {"access_token": "jwt-token", "expires_in": 600}

    tokens = token_server(answer)
    app, ep = endpoint(svix, sink.url)
    config = {"grantType": "clientCredentials", "authMethod": "clientSecretJwt", "clientId": "jwt-client",
              "tokenUrl": tokens.url, "jwtParams": {"secretBase64": base64.b64encode(pem).decode(),
                                                      "signingAlgorithm": "RS256", "secretId": "k1", "tokenExpirySecs": 60}}
    status, _, body = call(hookgate, "PUT", f"/api/v1/app/{app}/endpoint/{ep}/oauth", key=tenant["apiKey"], body=config)
    assert status == 204, body
    svix.message.create(app, MessageIn(event_type="x", payload={}))
    assert sink.wait_for(1)[0]["headers"]["authorization"] == "Bearer jwt-token"
    head, claims = checked[0]
    assert head == {"alg": "RS256", "typ": "JWT", "kid": "k1"}
    assert claims["iss"] == claims["sub"] == "jwt-client" and claims["aud"] == tokens.url
    assert claims["exp"] - claims["iat"] == 60
    form = tokens.requests[0]["form"]
    assert form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    assert "client_secret" not in form


def test_a_token_the_endpoint_refuses_with_401_is_dropped_and_the_retry_fetches_another(hookgate, tenant, svix, sink, token_server):
    tokens = token_server(counted_tokens())
    app, ep = endpoint(svix, sink.url)
    config = {"grantType": "clientCredentials", "authMethod": "clientSecretBasic", "clientId": "c",
              "clientSecret": "s", "tokenUrl": tokens.url}
    assert call(hookgate, "PUT", f"/api/v1/app/{app}/endpoint/{ep}/oauth", key=tenant["apiKey"], body=config)[0] == 204
    sink.status = 401
    svix.message.create(app, MessageIn(event_type="x", payload={}))
    sink.wait_for(1)
    sink.status = 200
    got = sink.wait_for(2)
    assert got[0]["headers"]["authorization"] != got[1]["headers"]["authorization"], "the refused token is not reused"
    assert len(tokens.requests) == 2


@pytest.mark.parametrize("change, says", [
    ({"tokenUrl": "not a url"}, "tokenUrl"),
    ({"tokenUrl": "http://127.0.0.2:9/token"}, "tokenUrl` is refused"),
    ({"grantType": "refreshToken"}, "refreshToken"),
    ({"authMethod": "clientSecretJwt"}, "jwtParams"),
    ({"authMethod": "clientSecretJwt", "jwtParams": {"secretBase64": "bm90IGEga2V5", "signingAlgorithm": "RS256"}}, "RSA private key"),
    ({"extraParams": {"grant_type": "password"}}, "grant_type"),
    ({"extraHeaders": {"Authorization": "x"}}, "Authorization"),
    ({"clientId": ""}, "clientId"),
    ({"scopes": ["a b"]}, "scope"),
    ({"clientSecret": None}, "clientSecret"),
    ({"authMethod": "clientSecretPost", "clientSecret": ""}, "clientSecret"),
    ({"tokenUrl": "http://user:pw@127.0.0.1:9/token"}, "user or password"),
    ({"extraHeaders": {"Proxy-Authorization": "Basic eA=="}}, "Proxy-Authorization"),
    ({"extraHeaders": {"X" * 300: "v"}}, "longer than"),
])
def test_oauth_settings_that_cannot_work_are_refused_with_422_naming_what_is_wrong(hookgate, tenant, svix, sink, change, says):
    app, ep = endpoint(svix, sink.url)
    config = {"grantType": "clientCredentials", "authMethod": "clientSecretBasic", "clientId": "c",
              "clientSecret": "s", "tokenUrl": "http://127.0.0.1:9/token", **change}
    status, _, body = call(hookgate, "PUT", f"/api/v1/app/{app}/endpoint/{ep}/oauth", key=tenant["apiKey"], body=config)
    assert status == 422 and says in json.dumps(body), body
    status, _, st = call(hookgate, "GET", f"/api/v1/app/{app}/endpoint/{ep}/oauth-config", key=tenant["apiKey"])
    assert (status, st) == (200, {"enabled": False, "config": None}), "nothing half-written"


def test_a_token_url_at_hookgates_own_database_is_refused_when_it_is_set(hookgate, tenant, svix, sink):
    port = urllib.parse.urlparse(os.environ["HOOKGATE_TEST_DATABASE_URL"]).port
    app, ep = endpoint(svix, sink.url)
    config = {"grantType": "clientCredentials", "authMethod": "clientSecretBasic", "clientId": "c",
              "clientSecret": "s", "tokenUrl": f"http://127.0.0.1:{port}/token"}
    status, _, body = call(hookgate, "PUT", f"/api/v1/app/{app}/endpoint/{ep}/oauth", key=tenant["apiKey"], body=config)
    assert status == 422 and "own database or Redis" in json.dumps(body), body


def test_two_endpoints_with_their_own_token_servers_each_get_their_own_token(hookgate, tenant, svix, token_server):
    from conftest import Sink
    sinks = [Sink(), Sink()]
    try:
        servers = [token_server(lambda f, h, n=n: (200, {"access_token": f"token-of-{n}", "expires_in": 600})) for n in (0, 1)]
        app = svix.application.create(ApplicationIn(name="two")).id
        for n in (0, 1):
            ep = svix.endpoint.create(app, EndpointIn(url=sinks[n].url)).id
            config = {"grantType": "clientCredentials", "authMethod": "clientSecretPost", "clientId": f"c{n}",
                      "clientSecret": "s", "tokenUrl": servers[n].url}
            assert call(hookgate, "PUT", f"/api/v1/app/{app}/endpoint/{ep}/oauth", key=tenant["apiKey"], body=config)[0] == 204
        for i in range(3):
            svix.message.create(app, MessageIn(event_type="x", payload={"i": i}))
        for n in (0, 1):
            assert {g["headers"]["authorization"] for g in sinks[n].wait_for(3)} == {f"Bearer token-of-{n}"}
            assert [r["form"]["client_id"] for r in servers[n].requests] == [f"c{n}"]
    finally:
        for s_ in sinks:
            s_.server.shutdown()


def test_a_rotated_refresh_token_survives_a_ca_change_made_while_the_token_was_being_fetched(hookgate, tenant, svix, sink, token_server):
    """Before, any change of the endpoint's settings (a CA, a certificate) fenced off the
    token fetch in flight, and with it the refresh token the server had rotated: the next
    refresh sent the spent one."""
    seen = []

    def answer(form, headers):
        seen.append(form.get("refresh_token"))
        if len(seen) == 1:
            time.sleep(1.5)
        n = len(seen)
        return 200, {"access_token": f"a{n}", "expires_in": 2, "refresh_token": f"r{n + 1}"}

    tokens = token_server(answer)
    app, ep = endpoint(svix, sink.url)
    base = f"/api/v1/app/{app}/endpoint/{ep}"
    config = {"grantType": "refreshToken", "authMethod": "clientSecretPost", "clientId": "c",
              "clientSecret": "s", "refreshToken": "r1", "tokenUrl": tokens.url}
    assert call(hookgate, "PUT", base + "/oauth", key=tenant["apiKey"], body=config)[0] == 204
    svix.message.create(app, MessageIn(event_type="x", payload={"i": 0}))
    eventually(lambda: seen)
    k1 = ec.generate_private_key(ec.SECP256R1())
    assert call(hookgate, "PUT", base + "/ca", key=tenant["apiKey"], body={"cert": _pem(_cert("ca", k1, "ca", k1, ca=True))})[0] == 204
    assert call(hookgate, "PUT", base + "/ca", key=tenant["apiKey"], body={"cert": None})[0] == 204
    sink.wait_for(1)
    time.sleep(2.2)
    svix.message.create(app, MessageIn(event_type="x", payload={"i": 1}))
    sink.wait_for(2)
    assert seen[:2] == ["r1", "r2"], seen


def test_stored_settings_that_cannot_be_used_fail_the_attempt_rather_than_leaving_it_waiting(hookgate, tenant, svix, sink):
    """Before, a stored CA or seal that could not be used kept the delivery waiting a
    second at a time, forever, with no attempt."""
    app, ep = endpoint(svix, sink.url)
    k1 = ec.generate_private_key(ec.SECP256R1())
    base = f"/api/v1/app/{app}/endpoint/{ep}"
    assert call(hookgate, "PUT", base + "/ca", key=tenant["apiKey"], body={"cert": _pem(_cert("ca", k1, "ca", k1, ca=True))})[0] == 204
    subprocess.run(["psql", hookgate.env["DATABASE_URL"], "-qc",
                    f"UPDATE endpoint_auth SET server_ca = 'not pem' WHERE endpoint_id = '{ep}'"], check=True)
    msg = svix.message.create(app, MessageIn(event_type="x", payload={}))
    first = eventually(lambda: attempts(hookgate, tenant, app, msg.id))[0]
    assert first["responseStatusCode"] == 0 and "cannot be used" in first["response"], first
    assert sink.received == []


# --- mTLS and the server CA ---------------------------------------------------------------

def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject, key, issuer, issuer_key, ca=False, san=None, client=False):
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
    if san:
        b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
    if client:
        b = b.add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    elif not ca:
        b = b.add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _pem(obj):
    if isinstance(obj, x509.Certificate):
        return obj.public_bytes(serialization.Encoding.PEM).decode()
    return obj.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


class TlsReceiver:
    """An HTTPS receiver on 127.0.0.1 that demands a client certificate its client CA signed."""

    def __init__(self, server_ca, server_ca_key, client_ca):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _cert("receiver", key, "server ca", server_ca_key, san=[x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
        self.dir = tempfile.mkdtemp()
        with open(f"{self.dir}/server.pem", "w") as f:
            f.write(_pem(cert) + _pem(key))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(f"{self.dir}/server.pem")
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(cadata=_pem(client_ca))
        self.received = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                peer = self.connection.getpeercert()
                receiver.received.append(dict(x[0] for x in peer["subject"])["commonName"])
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_an_endpoint_that_demands_a_client_certificate_is_reached_with_the_identity_and_ca_set_for_it(hookgate, tenant, svix):
    server_ca_key, client_ca_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    server_ca = _cert("server ca", server_ca_key, "server ca", server_ca_key, ca=True)
    client_ca = _cert("client ca", client_ca_key, "client ca", client_ca_key, ca=True)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _cert("hookgate-client", client_key, "client ca", client_ca_key, client=True)
    receiver = TlsReceiver(server_ca, server_ca_key, client_ca)
    try:
        app, ep = endpoint(svix, receiver.url)
        base = f"/api/v1/app/{app}/endpoint/{ep}"
        assert call(hookgate, "GET", base + "/ca", key=tenant["apiKey"])[2] == {"cert": None}
        assert call(hookgate, "GET", base + "/mtls", key=tenant["apiKey"])[0] == 404
        assert call(hookgate, "GET", base + "/mtls-config", key=tenant["apiKey"])[2] == {"enabled": False, "config": None}

        # The system's roots do not know the receiver's CA: the attempt fails on its certificate.
        m1 = svix.message.create(app, MessageIn(event_type="x", payload={"n": 1}))
        first = eventually(lambda: attempts(hookgate, tenant, app, m1.id))[0]
        assert first["responseStatusCode"] == 0 and "certificate" in first["response"].lower(), first

        assert call(hookgate, "PUT", base + "/ca", key=tenant["apiKey"], body={"cert": _pem(server_ca)})[0] == 204
        assert call(hookgate, "GET", base + "/ca", key=tenant["apiKey"])[2] == {"cert": _pem(server_ca)}
        # Its CA trusted, the receiver still wants a client certificate.
        m2 = svix.message.create(app, MessageIn(event_type="x", payload={"n": 2}))
        eventually(lambda: attempts(hookgate, tenant, app, m2.id))
        assert receiver.received == []

        identity = _pem(client_key) + _pem(client)
        status, _, body = call(hookgate, "PUT", base + "/mtls", key=tenant["apiKey"], body={"identity": identity})
        assert status == 204, body
        assert call(hookgate, "GET", base + "/mtls", key=tenant["apiKey"])[2] == {}
        assert call(hookgate, "GET", base + "/mtls-config", key=tenant["apiKey"])[2] == {"enabled": True, "config": {}}
        m3 = svix.message.create(app, MessageIn(event_type="x", payload={"n": 3}))
        eventually(lambda: receiver.received)
        assert receiver.received == ["hookgate-client"]
        # The attempt is recorded a moment after the receiver has answered it.
        eventually(lambda: any(a["responseStatusCode"] == 200 for a in attempts(hookgate, tenant, app, m3.id)))
        dump = subprocess.run(["psql", hookgate.env["DATABASE_URL"], "-Atc", "SELECT t::text FROM endpoint_auth t"],
                              capture_output=True, text=True, check=True).stdout
        key_body = _pem(client_key).splitlines()[1]
        assert key_body not in dump, "the client's private key is sealed at rest"
    finally:
        receiver.server.shutdown()


def test_client_certificates_and_cas_that_cannot_be_used_are_refused_with_422(hookgate, tenant, svix, sink):
    app, ep = endpoint(svix, sink.url)
    base = f"/api/v1/app/{app}/endpoint/{ep}"
    k1, k2 = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    cert1 = _cert("one", k1, "one", k1, ca=True)
    for identity, says in [("not pem", "identity"), (_pem(cert1), "identity"), (_pem(k2) + _pem(cert1), "identity")]:
        status, _, body = call(hookgate, "PUT", base + "/mtls", key=tenant["apiKey"], body={"identity": identity})
        assert status == 422 and says in json.dumps(body), (identity[:30], body)
    status, _, body = call(hookgate, "PUT", base + "/ca", key=tenant["apiKey"], body={"cert": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"})
    assert status == 422 and "cert" in json.dumps(body), body
    assert call(hookgate, "GET", base + "/mtls-config", key=tenant["apiKey"])[2] == {"enabled": False, "config": None}
    # `null` sets the system's roots back.
    assert call(hookgate, "PUT", base + "/ca", key=tenant["apiKey"], body={"cert": _pem(cert1)})[0] == 204
    assert call(hookgate, "PUT", base + "/ca", key=tenant["apiKey"], body={"cert": None})[0] == 204
    assert call(hookgate, "GET", base + "/ca", key=tenant["apiKey"])[2] == {"cert": None}
