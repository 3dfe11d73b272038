"""Every provider preset, signed as the provider signs (provider_signers.py says how, and with
which of the provider's libraries): admitted once, a copy answered as a duplicate, a one-byte
change to the body or the signature refused with 401 `invalid_signature`, the old and the new key
both valid through a rotation; and the providers' handshakes answered without admitting."""
import base64
import hashlib
import hmac
import json
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import call, free_port, post, Hookgate, fresh_database
import provider_signers as ps

# Schemes whose signature does not cover the body: a changed body still passes (documented).
UNSIGNED_BODY = {"basic-auth", "gitlab", "mailgun"}


def flip(text: str) -> str:
    """The text with one character changed, in the middle, to a digit: a digit differs
    in value from every other character in hex (which ignores case) and in base64."""
    i = len(text) // 2
    return text[:i] + ("0" if text[i] != "0" else "1") + text[i + 1:]


def events(hookgate, tenant, src):
    status, _, page = call(hookgate, "GET", f"/api/v1/source/{src['id']}/event", tenant["apiKey"])
    assert status == 200, page
    return page["data"]


@pytest.mark.parametrize("provider", sorted(ps.SIGNERS))
def test_each_preset_admits_once_refuses_a_changed_byte_and_survives_rotation(hookgate, tenant, wired, provider):
    make_key, sign, sig_header, event_type = ps.SIGNERS[provider]
    source, _ = wired
    key, secret = make_key()
    src = source(provider, secret=secret)
    url = src["url"]

    body, headers = sign(key, 1, url)
    status, h, first = post(hookgate, src, body, headers)
    assert (status, first.get("status")) == (200, "accepted"), first
    status, _, again = post(hookgate, src, body, headers)
    assert (status, again["status"], again["eventId"]) == (200, "duplicate", first["eventId"])
    [evt] = events(hookgate, tenant, src)
    assert evt["eventType"] == event_type

    body2, headers2 = sign(key, 2, url)
    if provider not in UNSIGNED_BODY:
        changed = body2[:-2] + bytes([body2[-2] ^ 1]) + body2[-1:]
        status, _, err = post(hookgate, src, changed, headers2)
        assert (status, err["code"]) == (401, "invalid_signature"), err
    if sig_header:
        forged = dict(headers2, **{sig_header: flip(headers2[sig_header])})
        status, _, err = post(hookgate, src, body2, forged)
        assert (status, err["code"]) == (401, "invalid_signature"), err
    assert len(events(hookgate, tenant, src)) == 1, "nothing refused was stored"

    # Rotation: the new key is current, the old one still valid for its grace period.
    new_key, new_secret = make_key()
    status, _, rotated = call(hookgate, "POST", f"/api/v1/source/{src['id']}/secret/rotate", tenant["apiKey"],
                              {"key": new_secret, "gracePeriodSeconds": 3600})
    assert status == 200, rotated
    for n, k in ((3, key), (4, new_key)):
        body, headers = sign(k, n, url)
        status, _, res = post(hookgate, src, body, headers)
        assert (status, res.get("status")) == (200, "accepted"), (n, res)
    other_key, _ = make_key()
    body, headers = sign(other_key, 5, url)
    status, _, err = post(hookgate, src, body, headers)
    assert (status, err["code"]) == (401, "invalid_signature"), "a third key is refused"


def test_a_captured_request_replayed_with_new_unsigned_ids_is_a_duplicate(hookgate, tenant, wired):
    source, _ = wired
    mg = source("mailgun", secret="mg-key")
    body, headers = ps.mailgun_sign("mg-key", 1, None)
    first = post(hookgate, mg, body, headers)[2]
    assert first["status"] == "accepted", first
    forged = json.loads(body)
    forged["event-data"] = {"id": "forged-1", "event": "failed"}
    again = post(hookgate, mg, json.dumps(forged).encode(), headers)[2]
    assert (again["status"], again["eventId"]) == ("duplicate", first["eventId"]), "Mailgun signs the token, not the event"
    tw = source("twilio", secret="tw-token")
    body, headers = ps.twilio_sign("tw-token", 1, tw["url"])
    first = post(hookgate, tw, body, headers)[2]
    replay = post(hookgate, tw, body, dict(headers, **{"I-Twilio-Idempotency-Token": "fresh"}))[2]
    assert (replay["status"], replay["eventId"]) == ("duplicate", first["eventId"])
    resplit = body.replace(b"&MessageStatus=", b"&&MessageStatus=")  # signs the same params
    assert post(hookgate, tw, resplit, headers)[2]["status"] == "duplicate"
    for src in (mg, tw):
        assert len(events(hookgate, tenant, src)) == 1


def test_keys_the_provider_makes_must_be_given_and_well_formed(hookgate, tenant):
    assert call(hookgate, "POST", "/api/v1/app", tenant["apiKey"], {"name": "in", "uid": "in"})[0] == 201
    small_order = "01" + "00" * 31  # the identity point: it would verify forgeries
    for provider, bad in (("discord", "xyz"), ("discord", small_order), ("sendgrid", "AAAA"),
                          ("paypal", "not an id!"), ("standard-webhooks", "whpk_AAAA"),
                          ("standard-webhooks", "whpk_" + base64.b64encode(bytes(32)).decode()),
                          ("basic-auth", "nocolon")):
        status, _, err = call(hookgate, "POST", "/api/v1/source", tenant["apiKey"],
                              {"name": "x", "provider": provider, "appId": "in", "secret": bad})
        assert status == 422 and "secret" in json.dumps(err), (provider, err)
    for provider in ("discord", "sendgrid", "paypal"):
        status, _, err = call(hookgate, "POST", "/api/v1/source", tenant["apiKey"],
                              {"name": "x", "provider": provider, "appId": "in"})
        assert status == 422 and "secret" in json.dumps(err), (provider, err)
    status, _, err = call(hookgate, "POST", "/api/v1/source", tenant["apiKey"],
                          {"name": "x", "provider": "stripe", "appId": "in", "publicUrl": "https://h.example/in/x"})
    assert status == 422 and "publicUrl" in json.dumps(err), err


def test_twilio_signs_the_public_url_and_its_json_form(hookgate, tenant, wired):
    from twilio.request_validator import RequestValidator
    source, _ = wired
    src = source("twilio", secret="twilio-token")
    public = f"https://hooks.example.com/in/{src['id']}"
    assert src["publicUrl"] is None
    status, _, patched = call(hookgate, "PATCH", f"/api/v1/source/{src['id']}", tenant["apiKey"], {"publicUrl": public})
    assert (status, patched["publicUrl"]) == (200, public), patched
    body, headers = ps.twilio_sign("twilio-token", 1, public)
    assert post(hookgate, src, body, headers)[0] == 200
    body, headers = ps.twilio_sign("twilio-token", 2, src["url"])  # signed for the URL Hookgate shows
    assert post(hookgate, src, body, headers)[0] == 401
    # A JSON body: the URL carries its hash and is signed alone, query included.
    body = b'{"property": "value", "boolean": true}'
    query = "?bodySHA256=" + hashlib.sha256(body).hexdigest()
    sig = RequestValidator("twilio-token").compute_signature(public + query, {})
    assert RequestValidator("twilio-token").validate(public + query, body.decode(), sig)
    status, _, res = post(hookgate, src, body, {"X-Twilio-Signature": sig, "I-Twilio-Idempotency-Token": "j1",
                                                "Content-Type": "application/json"}, query=query)
    assert (status, res.get("status")) == (200, "accepted"), res
    status, _, _ = post(hookgate, src, body + b" ", {"X-Twilio-Signature": sig, "I-Twilio-Idempotency-Token": "j2"},
                        query=query)
    assert status == 401


def test_handshakes_are_answered_after_verification_and_admit_nothing(hookgate, tenant, wired):
    source, _ = wired
    # Zoom's URL validation.
    zoom = source("zoom", secret="zoom-secret-token")
    body = json.dumps({"payload": {"plainToken": "qgg8vlvZRS6UYooatFL8Aw"}, "event_ts": 1,
                       "event": "endpoint.url_validation"}).encode()
    _, headers = ps.zoom_sign("zoom-secret-token", 0, None, body=body)
    status, _, answer = post(hookgate, zoom, body, headers)
    want = hmac.new(b"zoom-secret-token", b"qgg8vlvZRS6UYooatFL8Aw", hashlib.sha256).hexdigest()
    assert (status, answer) == (200, {"plainToken": "qgg8vlvZRS6UYooatFL8Aw", "encryptedToken": want})
    _, unsigned = ps.zoom_sign("another-token", 0, None, body=body)
    assert post(hookgate, zoom, body, unsigned)[0] == 401, "an unsigned challenge gets no answer"
    # Discord: an interaction PING gets a PONG; a bad signature gets 401, as Discord checks.
    sk, pk = ps.discord_key()
    discord = source("discord", secret=pk)
    ping = json.dumps({"id": "1", "application_id": "2", "type": 1, "token": "t", "version": 1}).encode()
    _, headers = ps.discord_sign(sk, 0, None, body=ping)
    status, _, pong = post(hookgate, discord, ping, headers)
    assert (status, pong) == (200, {"type": 1})
    bad = dict(headers, **{"X-Signature-Ed25519": flip(headers["X-Signature-Ed25519"])})
    assert post(hookgate, discord, ping, bad)[0] == 401
    # Slack's url_verification.
    slack = source("slack", secret="slack-signing")
    body = json.dumps({"token": "t", "challenge": "ch4llenge", "type": "url_verification"}).encode()
    ts = str(int(time.time()))
    sig = "v0=" + hmac.new(b"slack-signing", f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    status, _, answer = post(hookgate, slack, body, {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sig})
    assert (status, answer) == (200, {"challenge": "ch4llenge"})
    # WooCommerce's unsigned ping when a webhook is saved.
    woo = source("woocommerce", secret="wc-secret")
    status, _, answer = post(hookgate, woo, b"webhook_id=17", {"Content-Type": "application/x-www-form-urlencoded"})
    assert (status, answer) == (200, {"status": "ping"})
    assert post(hookgate, woo, b"webhook_id=17&x=1", {})[0] == 401, "only the exact ping passes unsigned"
    for src in (zoom, discord, slack, woo):
        assert events(hookgate, tenant, src) == [], src["provider"]


class CertServer:
    """Serves one PEM certificate on 127.0.0.1, counting fetches."""

    def __init__(self, pem: bytes):
        self.fetches = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                outer.fetches += 1
                if "missing" in self.path:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-pem-file")
                self.end_headers()
                self.wfile.write(pem)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def forge_crc32(prefix, suffix, target):
    """prefix + 64 chosen characters + suffix, with the CRC32 `target`: each
    character is 'a' or 'c' (one bit apart), and the CRC is affine in those bits,
    so 32 equations over GF(2) pick them. What one captured PayPal request allows."""
    import zlib

    def body(mask):
        return prefix + bytes(0x63 if mask >> i & 1 else 0x61 for i in range(64)) + suffix
    base = zlib.crc32(body(0))
    basis = {}
    for i in range(64):
        v, m = zlib.crc32(body(1 << i)) ^ base, 1 << i
        for bit in range(31, -1, -1):
            if v >> bit & 1:
                if bit in basis:
                    v, m = v ^ basis[bit][0], m ^ basis[bit][1]
                else:
                    basis[bit] = (v, m)
                    break
    want, mask = base ^ target, 0
    for bit in range(31, -1, -1):
        if want >> bit & 1:
            want, mask = want ^ basis[bit][0], mask ^ basis[bit][1]
    return body(mask)


def test_paypal_verifies_with_an_allow_listed_certificate_fetched_once(hookgate, tenant):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa
    from cryptography.x509.oid import NameOID
    import zlib

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "messageverificationcerts.test")])
    now = datetime.now(timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now - timedelta(days=1)).not_valid_after(now + timedelta(days=30))
            .sign(key, hashes.SHA256()))
    certs = CertServer(cert.public_bytes(serialization.Encoding.PEM))
    env = dict(hookgate.env, DATABASE_URL=fresh_database(), HOOKGATE_LISTEN=f"127.0.0.1:{free_port()}",
               HOOKGATE_METRICS_LISTEN=f"127.0.0.1:{free_port()}",
               HOOKGATE_PAYPAL_CERT_URLS=certs.url + "/v1/notifications/certs/")
    hg = Hookgate(env)
    try:
        t = hg.admin("POST", "/admin/v1/tenant", {"name": "paypal"})
        api_key = t["apiKey"]
        assert call(hg, "POST", "/api/v1/app", api_key, {"name": "in", "uid": "in"})[0] == 201
        status, _, src = call(hg, "POST", "/api/v1/source", api_key,
                              {"name": "pp", "provider": "paypal", "appId": "in", "secret": "1JE4291016473214C"})
        assert status == 201, src
        # No other key rule: one over the body (or none) would admit forged bodies as new events.
        for rule in ({"body": True}, {"disabled": True}, {"jsonPointer": "/id"}):
            status, _, err = call(hg, "POST", "/api/v1/source", api_key, {"name": "pp2", "provider": "paypal",
                                  "appId": "in", "secret": "1JE4291016473214C", "idempotency": rule})
            assert status == 422 and "idempotency" in json.dumps(err), (rule, err)

        def request(n, cert_url, webhook_id="1JE4291016473214C", at=None):
            body = json.dumps({"id": f"WH-{n}", "event_type": "PAYMENT.SALE.COMPLETED", "resource": {}}).encode()
            tid, when = f"tx-{n}", (at or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
            signed = f"{tid}|{when}|{webhook_id}|{zlib.crc32(body)}".encode()
            sig = base64.b64encode(key.sign(signed, padding.PKCS1v15(), hashes.SHA256())).decode()
            return body, {"PAYPAL-TRANSMISSION-ID": tid, "PAYPAL-TRANSMISSION-TIME": when,
                          "PAYPAL-TRANSMISSION-SIG": sig, "PAYPAL-CERT-URL": cert_url,
                          "PAYPAL-AUTH-ALGO": "SHA256withRSA", "Content-Type": "application/json"}

        allowed = certs.url + "/v1/notifications/certs/CERT-1"
        for n in (1, 2):
            body, headers = request(n, allowed)
            status, _, res = post(hg, src, body, headers)
            assert (status, res.get("status")) == (200, "accepted"), res
        assert post(hg, src, *request(1, allowed))[2]["status"] == "duplicate"
        assert certs.fetches == 1, "fetched once, then cached"
        # One captured request: a new event under its signature (same CRC32) is the same transmission.
        captured, captured_headers = request(6, allowed)
        assert post(hg, src, captured, captured_headers)[2]["status"] == "accepted"
        forged = forge_crc32(b'{"id": "WH-FORGED", "event_type": "PAYMENT.SALE.COMPLETED", "pad": "', b'"}',
                             zlib.crc32(captured))
        assert zlib.crc32(forged) == zlib.crc32(captured) and forged != captured
        status, _, res = post(hg, src, forged, captured_headers)
        assert (status, res.get("status")) == (200, "duplicate"), res
        # A capture replayed after the tolerance is refused before any certificate is fetched.
        status, _, err = post(hg, src, *request(7, allowed, at=datetime.now(timezone.utc) - timedelta(minutes=10)))
        assert (status, err["code"]) == (401, "timestamp_out_of_tolerance"), err
        body, headers = request(3, allowed, webhook_id="ANOTHERWEBHOOK")
        assert post(hg, src, body, headers)[0] == 401, "signed for another webhook"
        off_list = certs.url + "/elsewhere/CERT-1"
        status, _, err = post(hg, src, *request(4, off_list))
        assert (status, err["code"]) == (401, "invalid_signature") and "allowed" in err["detail"], err
        assert certs.fetches == 1, "a URL off the list is never fetched"
        # An allowed URL that fails: 503 (PayPal retries), and not fetched again at once.
        missing = certs.url + "/v1/notifications/certs/missing"
        for _ in range(2):
            status, _, err = post(hg, src, *request(5, missing))
            assert (status, err["code"]) == (503, "certificate_unavailable"), err
        assert certs.fetches == 2, "a failed URL waits before it is fetched again"
    finally:
        hg.stop()
        certs.server.shutdown()
