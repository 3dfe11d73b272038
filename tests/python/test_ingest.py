"""Svix Ingest's API through the official Python SDK (`svix.ingest`): sources of a
signing type and generic ones, their `ingestUrl` with its rotating token, and
ingest endpoints that receive what a source admitted once, signed with their own
secret (checked with `standardwebhooks`), whatever the copies and forgeries."""
import json
import time
import urllib.error
import urllib.request
import uuid
from datetime import datetime, timezone

import pytest
import standardwebhooks
from svix.api import (
    IngestEndpointHeadersIn,
    IngestEndpointIn,
    IngestEndpointSecretIn,
    IngestEndpointUpsertIn,
    IngestSourceIn,
    SvixConfig,
)
from svix.models import CronConfig
from svix.api.ingest_source import IngestSourceListOptions
import typing
from svix.exceptions import HttpError, HTTPValidationError
from svix.webhooks import Webhook

import openapi_check
from conftest import raw_call

SENDER_SECRET = "whsec_" + "c2VuZGVyLXNlY3JldC1mb3ItaW5nZXN0LXRlc3Rz"


def post_to(url: str, body: bytes, headers: dict) -> int:
    req = urllib.request.Request(url, data=body, method="POST")
    req.add_header("content-type", "application/json")
    for k, v in headers.items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return res.status
    except urllib.error.HTTPError as e:
        return e.code


def post_for_duplicate(url: str, body: bytes, headers: dict) -> tuple:
    """The status and the `Hookgate-Duplicate` answer of one post."""
    req = urllib.request.Request(url, data=body, method="POST")
    req.add_header("content-type", "application/json")
    for k, v in headers.items():
        req.add_header(k, v)
    with urllib.request.urlopen(req, timeout=10) as res:
        return res.status, res.headers.get("Hookgate-Duplicate")


def signed(body: bytes, msg_id: str, secret: str = SENDER_SECRET) -> dict:
    """What a Svix-signing sender (Clerk, Resend, …) sends, signed by Svix's own library."""
    now = datetime.now(tz=timezone.utc)
    sig = Webhook(secret).sign(msg_id, now, body.decode())
    return {"svix-id": msg_id, "svix-timestamp": str(int(now.timestamp())), "svix-signature": sig}


def test_ingest_sources_are_created_found_by_uid_listed_upserted_and_deleted(svix, hookgate, tenant):
    made = svix.ingest.source.create(
        IngestSourceIn(name="Clerk", uid="clerk-main", type="clerk", config=SvixConfig(secret=SENDER_SECRET))
    )
    assert made.id.startswith("src_") and made.type == "clerk" and made.uid == "clerk-main"
    assert made.ingest_url and made.ingest_url.endswith("/" + made.ingest_url.rsplit("/", 1)[1])
    assert svix.ingest.source.get("clerk-main").id == made.id
    generic = svix.ingest.source.create(IngestSourceIn(name="Anything", type="generic-webhook", metadata={"a": "b"}))
    assert generic.metadata == {"a": "b"} and generic.config == {}
    # One store, two views: the source API shows it too, its door being the ingestUrl.
    status, _, shown = raw_call(hookgate, "GET", f"/api/v1/source/{generic.id}", tenant["apiKey"])
    assert status == 200 and json.loads(shown)["url"] == generic.ingest_url
    assert json.loads(shown)["ingestType"] == "generic-webhook"

    page = svix.ingest.source.list(IngestSourceListOptions(limit=1))
    rest = svix.ingest.source.list(IngestSourceListOptions(limit=10, iterator=page.iterator))
    assert len(page.data) == 1 and not page.done
    assert {s.id for s in page.data + rest.data} == {made.id, generic.id}

    renamed = svix.ingest.source.upsert(
        made.id, IngestSourceIn(name="Clerk 2", uid="clerk-main", type="clerk", config=SvixConfig(secret=SENDER_SECRET))
    )
    assert (renamed.id, renamed.name, renamed.ingest_url) == (made.id, "Clerk 2", made.ingest_url), "the URL stays"
    put_made = svix.ingest.source.upsert("by-put", IngestSourceIn(name="Put", type="generic-webhook"))
    assert put_made.uid == "by-put" and put_made.id.startswith("src_")

    # A type the SDK does not list is refused by name.
    status, _, answer = raw_call(
        hookgate, "POST", "/ingest/api/v1/source", tenant["apiKey"], {"name": "S", "type": "stripe2", "config": {}}
    )
    assert status == 422 and b"stripe2" in answer, answer
    # A signing type without its secret is refused, naming the field.
    # (The SDK refuses that itself; sent as another client would.)
    status, _, answer = raw_call(
        hookgate, "POST", "/ingest/api/v1/source", tenant["apiKey"], {"name": "S", "type": "stripe", "config": {}}
    )
    assert status == 422 and b"config.secret" in answer, answer

    svix.ingest.source.delete(made.id)
    with pytest.raises(HttpError) as e:
        svix.ingest.source.get(made.id)
    assert e.value.status_code == 404
    assert post_to(made.ingest_url, b"{}", signed(b"{}", "msg_gone")) == 404, "a deleted source's URL is gone"


def test_an_ingest_endpoint_receives_a_signed_event_once_and_a_forgery_never(svix, sink, hookgate):
    src = svix.ingest.source.create(IngestSourceIn(name="Resend", type="resend", config=SvixConfig(secret=SENDER_SECRET)))
    ep = svix.ingest.endpoint.create(
        src.id, IngestEndpointIn(url=sink.url + "/resend", uid="ops", headers={"X-Team": "ops"}, metadata={"k": "v"})
    )
    assert svix.ingest.endpoint.get(src.id, "ops").id == ep.id
    assert [e.id for e in svix.ingest.endpoint.list(src.id).data] == [ep.id]
    secret = svix.ingest.endpoint.get_secret(src.id, ep.id).key
    assert secret.startswith("whsec_")

    body = json.dumps({"type": "email.sent", "data": {"id": "em_1"}}).encode()
    headers = signed(body, "msg_resend_1")
    assert post_to(src.ingest_url, body, headers) == 200
    assert post_to(src.ingest_url, body, headers) == 200, "a copy is answered, not admitted again"
    forged = signed(body.replace(b"em_1", b"em_2"), "msg_resend_2", "whsec_" + "Zm9yZ2VkLXNlY3JldC1mb3ItaW5nZXN0LXRlc3Rz")
    assert post_to(src.ingest_url, body.replace(b"em_1", b"em_2"), forged) == 401
    base, token = src.ingest_url.rsplit("/", 1)
    assert post_to(base, body, headers) == 404, "an ingest source opens only with its token"
    assert post_to(base + "/" + "0" * len(token), body, headers) == 404, "and only with its own"

    sink.wait_for(1)
    time.sleep(1.0)
    assert len(sink.received) == 1, "one event, one delivery"
    got = sink.received[0]
    assert got["path"].endswith("/resend") and got["headers"]["x-team"] == "ops"
    payload = standardwebhooks.Webhook(secret).verify(got["body"], got["headers"])
    assert payload["data"]["id"] == "em_1"

    assert svix.ingest.endpoint.get_headers(src.id, ep.id).headers == {"X-Team": "ops"}
    svix.ingest.endpoint.set_headers(src.id, ep.id, IngestEndpointHeadersIn(headers={"X-Team": "billing"}))
    assert svix.ingest.endpoint.get_headers(src.id, ep.id).headers == {"X-Team": "billing"}
    svix.ingest.endpoint.rotate_secret(src.id, ep.id, IngestEndpointSecretIn(grace_period_seconds=60))
    assert svix.ingest.endpoint.get_secret(src.id, ep.id).key != secret
    upserted = svix.ingest.endpoint.upsert(src.id, ep.id, IngestEndpointUpsertIn(url=sink.url + "/v2", description="d"))
    assert (upserted.id, upserted.url, upserted.description) == (ep.id, sink.url + "/v2", "d")
    svix.ingest.endpoint.delete(src.id, ep.id)
    assert svix.ingest.endpoint.list(src.id).data == []


def test_a_rotated_token_keeps_the_old_url_open_for_its_grace_and_three_rotations_at_most(svix):
    src = svix.ingest.source.create(IngestSourceIn(name="Hook", type="generic-webhook"))
    urls = [src.ingest_url]
    for _ in range(3):
        urls.append(svix.ingest.source.rotate_token(src.id).ingest_url)
    assert len(set(urls)) == 4
    assert svix.ingest.source.get(src.id).ingest_url == urls[-1]
    for n, url in enumerate(urls):
        body = json.dumps({"n": n, "id": str(uuid.uuid4())}).encode()
        assert post_to(url, body, {}) == 200, f"token {n} opens the source within its grace"
    with pytest.raises(HttpError) as e:
        svix.ingest.source.rotate_token(src.id)
    assert e.value.status_code == 409


def test_a_cron_source_is_created_with_its_schedule_shown_back_and_no_ingest_url(svix):
    made = svix.ingest.source.create(
        IngestSourceIn(name="Nightly", type="cron", config=CronConfig(schedule="0 3 * * *", payload='{"run": "nightly"}'))
    )
    assert made.ingest_url is None
    assert (made.config.schedule, made.config.payload) == ("0 3 * * *", '{"run": "nightly"}')
    assert svix.ingest.source.get(made.id).config.schedule == "0 3 * * *"
    with pytest.raises(HTTPValidationError) as e:
        svix.ingest.source.create(
            IngestSourceIn(name="Too often", type="cron", config=CronConfig(schedule="* * * * * *", payload="{}"))
        )
    assert "config.schedule" in str(e.value)


def test_a_tenant_has_at_most_a_hundred_cron_sources(svix, hookgate, tenant):
    body = {"name": "c", "type": "cron", "config": {"schedule": "@daily", "payload": "{}"}}
    for _ in range(100):
        status, _, answer = raw_call(hookgate, "POST", "/ingest/api/v1/source", tenant["apiKey"], body)
        assert status == 201, answer
    status, _, answer = raw_call(hookgate, "POST", "/ingest/api/v1/source", tenant["apiKey"], body)
    assert status == 422 and b"at most 100 cron sources" in answer, answer


def test_an_upsert_keeps_the_secret_and_what_the_source_api_set_and_the_app_quota_holds(svix, hookgate, tenant, sink):
    key = tenant["apiKey"]
    src = svix.ingest.source.create(IngestSourceIn(name="Clerk", type="clerk", config=SvixConfig(secret=SENDER_SECRET)))
    svix.ingest.endpoint.create(src.id, IngestEndpointIn(url=sink.url))
    # Set through the source API: an idempotency rule of its own.
    status, _, _ = raw_call(hookgate, "PATCH", f"/api/v1/source/{src.id}", key, {"idempotency": {"header": "X-Event"}})
    assert status == 200
    # A read-modify-write through the ingest API sends no secret back (answers show none).
    status, _, answer = raw_call(
        hookgate, "PUT", f"/ingest/api/v1/source/{src.id}", key, {"name": "Clerk renamed", "type": "clerk", "config": {}}
    )
    assert status == 200, answer
    status, _, shown = raw_call(hookgate, "GET", f"/api/v1/source/{src.id}", key)
    assert json.loads(shown)["idempotency"] == {"header": "X-Event"}, "the rule the source API set stays"
    body = b'{"type": "user.created"}'
    headers = {**signed(body, "msg_kept"), "X-Event": "e-1"}
    assert post_to(src.ingest_url, body, headers) == 200, "the stored secret still verifies"
    assert post_to(src.ingest_url, body, {**signed(body, "msg_kept_2"), "X-Event": "e-1"}) == 200
    sink.wait_for(1)
    time.sleep(0.5)
    assert len(sink.received) == 1, "keyed by the rule: the same X-Event is one event"

    # A moved door is refused: an ingest source is signed at its ingestUrl.
    status, _, answer = raw_call(hookgate, "PATCH", f"/api/v1/source/{src.id}", key, {"publicUrl": "https://x.test/in"})
    assert status == 422 and b"publicUrl" in answer
    # Deleting it through the source API erases its application too.
    app_id = json.loads(shown)["appId"]
    status, _, _ = raw_call(hookgate, "DELETE", f"/api/v1/source/{src.id}", key)
    assert status == 204
    status, _, _ = raw_call(hookgate, "GET", f"/api/v1/app/{app_id}", key)
    assert status == 404

    # Each ingest source's application counts against appsPerTenant.
    apps = json.loads(raw_call(hookgate, "GET", "/api/v1/app?limit=250", key)[2])["data"]
    cap = len(apps) + 1
    shown = hookgate.admin("PATCH", f"/admin/v1/tenant/{tenant['id']}", {"quotas": {"appsPerTenant": cap}})
    assert shown["quotas"]["appsPerTenant"] == cap
    time.sleep(1.5)  # quotas are cached for a second
    status, _, _ = raw_call(hookgate, "POST", "/ingest/api/v1/source", key, {"name": "last", "type": "generic-webhook"})
    assert status == 201
    status, _, answer = raw_call(hookgate, "POST", "/ingest/api/v1/source", key, {"name": "over", "type": "generic-webhook"})
    assert status == 422 and b"appsPerTenant" in answer, answer


def _hmac(secret: str, body: bytes, encoding: str) -> str:
    import base64
    import hashlib
    import hmac as hmac_lib

    digest = hmac_lib.new(secret.encode(), body, hashlib.sha256).digest()
    return digest.hex() if encoding == "hex" else base64.b64encode(digest).decode()


# Each sender's documented scheme, signed here with Python's hmac: the header, the
# encoding and the prefix, and an event id when the sender has one.
BODY_HMAC_SENDERS = [
    ("docusign", "DocusignConfig", "X-DocuSign-Signature-1", "b64", "", None),
    ("easypost", "EasypostConfig", "X-Hmac-Signature", "hex", "hmac-sha256-hex=", "id"),
    ("nango", "NangoConfig", "X-Nango-Hmac-Sha256", "hex", "", None),
    ("rutter", "RutterConfig", "X-Rutter-Signature", "b64", "sha256=", None),
    ("veriff", "VeriffConfig", "X-HMAC-SIGNATURE", "hex", "", None),
]


@pytest.mark.parametrize("kind,model,header,encoding,prefix,id_field", BODY_HMAC_SENDERS)
def test_a_body_hmac_sender_is_admitted_when_genuine_once_per_event_and_refused_when_forged(
    svix, sink, kind, model, header, encoding, prefix, id_field
):
    import svix.models as models

    secret = "sender-secret-" + kind
    src = svix.ingest.source.create(
        IngestSourceIn(name=kind, type=kind, config=getattr(models, model)(secret=secret))
    )
    svix.ingest.endpoint.create(src.id, IngestEndpointIn(url=sink.url))
    body = json.dumps({"id": "evt_" + kind, "type": "thing.done", "event": "done", "description": "x.y"}).encode()
    sign = lambda b, s=secret: {header: prefix + _hmac(s, b, "hex" if encoding == "hex" else "b64")}
    assert post_to(src.ingest_url, body, sign(body)) == 200
    assert post_to(src.ingest_url, body, sign(body, "not-the-secret")) == 401
    assert post_to(src.ingest_url, body, {}) == 401
    if id_field:
        # The same event id with another body is the same event.
        again = body.replace(b"x.y", b"x.z")
        assert post_to(src.ingest_url, again, sign(again)) == 200
    sink.wait_for(1)
    time.sleep(0.5)
    assert len(sink.received) == 1


def test_a_telnyx_source_checks_the_ed25519_signature_over_timestamp_and_body(svix, sink):
    import base64

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
    from svix.models import TelnyxConfig

    key = Ed25519PrivateKey.generate()
    public = base64.b64encode(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()
    src = svix.ingest.source.create(IngestSourceIn(name="Telnyx", type="telnyx", config=TelnyxConfig(public_key=public)))
    assert src.config.public_key == public, "the public key is shown back"
    svix.ingest.endpoint.create(src.id, IngestEndpointIn(url=sink.url))
    body = json.dumps({"data": {"id": "ev-1", "event_type": "call.initiated", "record_type": "event"}}).encode()

    def signed_by(k, ts, b):
        sig = base64.b64encode(k.sign(f"{ts}|".encode() + b)).decode()
        return {"telnyx-signature-ed25519": sig, "telnyx-timestamp": str(ts)}

    now = int(time.time())
    assert post_to(src.ingest_url, body, signed_by(key, now, body)) == 200
    assert post_to(src.ingest_url, body, signed_by(Ed25519PrivateKey.generate(), now, body)) == 401
    assert post_to(src.ingest_url, body, signed_by(key, now - 3600, body)) == 401, "an hour old"
    again = body.replace(b"record_type", b"recordType")
    assert post_to(src.ingest_url, again, signed_by(key, now, again)) == 200, "the same data.id: a duplicate"
    sink.wait_for(1)
    time.sleep(0.5)
    assert len(sink.received) == 1

    # A new public key through an upsert is the one that verifies from then on.
    new_key = Ed25519PrivateKey.generate()
    new_public = base64.b64encode(new_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()
    svix.ingest.source.upsert(src.id, IngestSourceIn(name="Telnyx", type="telnyx", config=TelnyxConfig(public_key=new_public)))
    time.sleep(1.2)  # the source cache of this instance is a second at most
    other = json.dumps({"data": {"id": "ev-2", "event_type": "call.answered"}}).encode()
    assert post_to(src.ingest_url, other, signed_by(key, now, other)) == 401, "the old key no longer verifies"
    assert post_to(src.ingest_url, other, signed_by(new_key, now, other)) == 200


def test_a_checkbook_source_accepts_checkbooks_documented_example_and_nothing_else(svix, sink):
    from svix.models import CheckbookConfig

    # docs.checkbook.io, "Webhooks": the published key, body, nonce and signature.
    src = svix.ingest.source.create(
        IngestSourceIn(name="Checkbook", type="checkbook", config=CheckbookConfig(secret="335b5728e25b47e88995fce207bff380"))
    )
    svix.ingest.endpoint.create(src.id, IngestEndpointIn(url=sink.url))
    body = b'{"status": "PAID", "id": "ed0af5fb335c47dd8eb53199ba50f5c4", "type": "CHECK"}'
    sig = "nonce=1243549809,signature=4ee9758fc0bceb3ca1a2fe397fbd125364cfffdb04296fa118dab9778a4b3ce3"
    assert post_to(src.ingest_url, body, {"signature": sig}) == 200
    assert post_to(src.ingest_url, body.replace(b"PAID", b"VOID"), {"signature": sig}) == 401
    # The same signed bytes split elsewhere (a digit of the nonce moved onto the body's end)
    # would be a body never seen, a new event: refused, as the body is no longer one JSON object.
    shifted = sig.replace("nonce=1243549809", "nonce=243549809")
    assert post_to(src.ingest_url, body + b"1", {"signature": shifted}) == 401
    got = sink.wait_for(1)
    assert got[0]["body"] == body


def _tailscale(secret, body, ts):
    return {"Tailscale-Webhook-Signature": f"t={ts},v1=" + _hmac(secret, f"{ts}.".encode() + body, "hex")}


def _airwallex(secret, body, ts):
    ms = str(ts * 1000 + 123)
    return {"x-timestamp": ms, "x-signature": _hmac(secret, ms.encode() + body, "hex")}


def _port(secret, body, ts):
    return {"x-port-timestamp": str(ts), "x-port-signature": "v1," + _hmac(secret, f"{ts}.".encode() + body, "b64")}


# Each sender's documented timestamped scheme, signed here with Python's hmac.
TIMESTAMPED_SENDERS = [
    ("tailscale", "TailscaleConfig", _tailscale),
    ("airwallex", "AirwallexConfig", _airwallex),
    ("port-io", "PortIoConfig", _port),
]


@pytest.mark.parametrize("kind,model,sign", TIMESTAMPED_SENDERS)
def test_a_timestamped_sender_is_admitted_when_genuine_and_fresh_and_refused_otherwise(svix, sink, kind, model, sign):
    import svix.models as models

    secret = "sender-secret-" + kind
    src = svix.ingest.source.create(IngestSourceIn(name=kind, type=kind, config=getattr(models, model)(secret=secret)))
    svix.ingest.endpoint.create(src.id, IngestEndpointIn(url=sink.url))
    body = json.dumps({"id": "evt_" + kind, "name": "thing.done"}).encode()
    now = int(time.time())
    assert post_to(src.ingest_url, body, sign(secret, body, now)) == 200
    assert post_to(src.ingest_url, body, sign("not-the-secret", body, now)) == 401
    assert post_to(src.ingest_url, body, sign(secret, body, now - 3600)) == 401, "an hour old"
    assert post_to(src.ingest_url, body, {}) == 401
    sink.wait_for(1)
    time.sleep(0.5)
    assert len(sink.received) == 1


def _merge(secret, body):
    import base64
    import hashlib
    import hmac as hmac_lib

    return {"X-Merge-Webhook-Signature": base64.urlsafe_b64encode(hmac_lib.new(secret.encode(), body, hashlib.sha256).digest()).decode()}


def _segment(secret, body):
    import hashlib
    import hmac as hmac_lib

    return {"X-Signature": hmac_lib.new(secret.encode(), body, hashlib.sha1).hexdigest()}


# Each sender as it documents itself: merge and segment sign the body, openclaw
# and vapi send a shared token as is.
OTHER_SENDERS = [
    ("merge", "MergeConfig", _merge),
    ("segment", "SegmentConfig", _segment),
    ("openclaw", "OpenClawConfig", lambda secret, body: {"Authorization": f"Bearer {secret}"}),
    ("vapi", "VapiConfig", lambda secret, body: {"x-vapi-secret": secret}),
]


@pytest.mark.parametrize("kind,model,sign", OTHER_SENDERS)
def test_a_sender_is_admitted_with_its_credential_and_refused_without(svix, sink, kind, model, sign):
    import svix.models as models

    secret = "sender-secret-" + kind
    src = svix.ingest.source.create(IngestSourceIn(name=kind, type=kind, config=getattr(models, model)(secret=secret)))
    svix.ingest.endpoint.create(src.id, IngestEndpointIn(url=sink.url))
    body = json.dumps({"messageId": "m-" + kind, "type": "track", "message": {"type": "status-update"}}).encode()
    assert post_to(src.ingest_url, body, sign(secret, body)) == 200
    assert post_to(src.ingest_url, body, sign("not-the-secret", body)) == 401
    assert post_to(src.ingest_url, body, {}) == 401
    sink.wait_for(1)
    time.sleep(0.5)
    assert len(sink.received) == 1


def get_from(url: str, headers: dict = None):
    req = urllib.request.Request(url, method="GET")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return res.status, {k.lower(): v for k, v in res.headers.items()}, res.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def test_a_meta_source_answers_the_subscription_check_and_verifies_the_app_secret(svix, sink, hookgate, tenant):
    import hashlib
    import hmac as hmac_lib

    from svix.models import MetaConfig

    src = svix.ingest.source.create(
        IngestSourceIn(name="WhatsApp", type="meta", config=MetaConfig(secret="app-secret", verify_token="vt-123"))
    )
    status, _, shown = raw_call(hookgate, "GET", f"/ingest/api/v1/source/{src.id}", tenant["apiKey"])
    assert status == 200 and json.loads(shown)["config"] == {}, "neither the secret nor the verify token is shown"
    svix.ingest.endpoint.create(src.id, IngestEndpointIn(url=sink.url))
    check = src.ingest_url + "?hub.mode=subscribe&hub.verify_token=vt-123&hub.challenge=1158201444"
    status, _, body = get_from(check)
    assert (status, body) == (200, b"1158201444")
    assert get_from(check.replace("vt-123", "vt-999"))[0] == 403
    # A read-modify-write keeps the verify token (answers never show it).
    status, _, _ = raw_call(hookgate, "PUT", f"/ingest/api/v1/source/{src.id}", tenant["apiKey"],
                            {"name": "WhatsApp 2", "type": "meta", "config": {}})
    assert status == 200
    assert get_from(check)[0] == 200

    payload = json.dumps({"object": "whatsapp_business_account", "entry": [{"id": "1"}]}).encode()
    sig = "sha256=" + hmac_lib.new(b"app-secret", payload, hashlib.sha256).hexdigest()
    assert post_to(src.ingest_url, payload, {"X-Hub-Signature-256": sig}) == 200
    assert post_to(src.ingest_url, payload + b" ", {"X-Hub-Signature-256": sig}) == 401
    got = sink.wait_for(1)
    assert got[0]["body"] == payload


def test_an_adobe_sign_source_checks_and_echoes_its_client_id(svix, sink):
    from svix.models import AdobeSignConfig

    src = svix.ingest.source.create(IngestSourceIn(name="Sign", type="adobe-sign", config=AdobeSignConfig(client_id="CID-1")))
    svix.ingest.endpoint.create(src.id, IngestEndpointIn(url=sink.url))
    status, headers, body = get_from(src.ingest_url, {"X-AdobeSign-ClientId": "CID-1"})
    assert status == 200 and headers["x-adobesign-clientid"] == "CID-1" and json.loads(body)["xAdobeSignClientId"] == "CID-1"
    assert get_from(src.ingest_url, {"X-AdobeSign-ClientId": "CID-2"})[0] == 403
    note = json.dumps({"webhookNotificationId": "n-1", "event": "AGREEMENT_ACTION_COMPLETED"}).encode()
    req = urllib.request.Request(src.ingest_url, data=note, method="POST")
    req.add_header("content-type", "application/json")
    req.add_header("X-AdobeSign-ClientId", "CID-1")
    with urllib.request.urlopen(req, timeout=10) as res:
        assert res.status == 200 and res.headers["X-AdobeSign-ClientId"] == "CID-1"
    assert post_to(src.ingest_url, note, {"X-AdobeSign-ClientId": "CID-2"}) == 401
    got = sink.wait_for(1)
    assert got[0]["body"] == note
    # A new client id through an upsert is the one checked from then on.
    svix.ingest.source.upsert(src.id, IngestSourceIn(name="Sign", type="adobe-sign", config=AdobeSignConfig(client_id="CID-2")))
    time.sleep(1.2)  # the source cache of this instance is a second at most
    assert get_from(src.ingest_url, {"X-AdobeSign-ClientId": "CID-2"})[0] == 200
    assert get_from(src.ingest_url, {"X-AdobeSign-ClientId": "CID-1"})[0] == 403


def test_meta_and_adobe_sign_sources_are_refused_outside_the_ingest_api(svix, hookgate, tenant):
    app = json.loads(raw_call(hookgate, "POST", "/api/v1/app", tenant["apiKey"], {"name": "a"})[2])["id"]
    for provider in ("meta", "adobe-sign"):
        status, _, answer = raw_call(hookgate, "POST", "/api/v1/source", tenant["apiKey"],
                                     {"name": "x", "provider": provider, "secret": "s", "appId": app})
        assert status == 422 and b"ingest" in answer, answer


def test_a_panda_doc_source_reads_the_signature_from_the_query(svix, sink):
    from svix.models import PandaDocConfig

    src = svix.ingest.source.create(IngestSourceIn(name="PandaDoc", type="panda-doc", config=PandaDocConfig(secret="pd-key")))
    svix.ingest.endpoint.create(src.id, IngestEndpointIn(url=sink.url))
    body = json.dumps([{"event": "document_state_changed", "data": {"id": "doc-1"}}]).encode()
    sig = _hmac("pd-key", body, "hex")
    assert post_to(src.ingest_url + "?signature=" + sig, body, {}) == 200
    assert post_to(src.ingest_url + "?signature=" + _hmac("other", body, "hex"), body, {}) == 401
    assert post_to(src.ingest_url, body, {}) == 401
    sink.wait_for(1)


def test_the_javascript_sdk_creates_an_ingest_source_whose_url_admits_a_signed_event_once(hookgate, tenant, sink):
    import os
    import subprocess

    node_dir = os.path.join(os.path.dirname(__file__), "..", "node")
    # Through a proxy that checks each answer the SDK reads against the API document.
    proxy = openapi_check.CheckingProxy(hookgate.url)
    try:
        out = subprocess.run(
            ["node", "ingest.mjs", proxy.url, tenant["apiKey"], sink.url, SENDER_SECRET],
            cwd=node_dir, capture_output=True, text=True, timeout=60,
        )
    finally:
        proxy.close()
    assert proxy.forwarded >= 6, proxy.forwarded  # create, get, rotate, endpoint create, list, secret
    assert out.returncode == 0, out.stderr
    made = json.loads(out.stdout.strip().splitlines()[-1])
    assert made["listed"] == [made["endpointId"]] and made["firstUrl"] != made["ingestUrl"]
    body = b'{"type": "user.created", "data": {"id": "user_js"}}'
    for url in (made["ingestUrl"], made["firstUrl"]):  # the rotated-out URL still opens it
        assert post_to(url, body, signed(body, "msg_js_1")) == 200
    got = sink.wait_for(1)
    time.sleep(0.5)
    assert len(sink.received) == 1
    assert standardwebhooks.Webhook(made["secret"]).verify(got[0]["body"], got[0]["headers"])["data"]["id"] == "user_js"


def rsa_key_pair():
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key, key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo).decode()


def test_every_source_type_the_sdk_lists_is_accepted_by_name_with_its_config_shape(svix):
    import base64

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    types = [a for arg in typing.get_args(IngestSourceIn.model_fields["type"].annotation) for a in (typing.get_args(arg) or [arg])]
    assert len(types) == 44 and "vgs" in types and "orum-io" in types, types
    ed25519 = base64.b64encode(Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))
    special = {
        "generic-webhook": {},
        "cron": {"schedule": "0 3 * * *", "payload": "{}"},
        "adobe-sign": {"clientId": "client-1"},
        "meta": {"secret": "app-secret", "verifyToken": "verify-me"},
        "telnyx": {"publicKey": ed25519.decode()},
        "orum-io": {"publicKey": rsa_key_pair()[1]},
    }
    made = {}
    for ty in types:
        config = special.get(ty, {"secret": SENDER_SECRET})
        # Through the SDK's own model, which shapes `config` per type as it sends it.
        src = svix.ingest.source.create(IngestSourceIn.model_validate({"name": ty, "type": ty, "config": config}))
        assert src.type == ty
        assert (src.ingest_url is None) == (ty == "cron"), ty
        made[src.id] = ty
    listed = {}
    page = svix.ingest.source.list(IngestSourceListOptions(limit=20))
    while True:
        listed.update({s.id: s.type for s in page.data})
        if page.done:
            break
        page = svix.ingest.source.list(IngestSourceListOptions(limit=20, iterator=page.iterator))
    assert listed == made


def test_an_orum_source_checks_the_rsa_signature_over_body_and_created_at(svix, sink):
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding
    from svix.models import OrumIoConfig

    key, public = rsa_key_pair()
    src = svix.ingest.source.create(IngestSourceIn(name="Orum", type="orum-io", config=OrumIoConfig(public_key=public)))
    assert src.config.public_key.strip() == public.strip(), "the public key is shown back"
    svix.ingest.endpoint.create(src.id, IngestEndpointIn(url=sink.url))

    def sign(k, b):
        created_at = json.loads(b)["created_at"]
        sig = k.sign(b + created_at.encode(), padding.PKCS1v15(), hashes.SHA256())
        return {"Signature": __import__("base64").b64encode(sig).decode()}

    def event(event_id, created_at):
        return json.dumps({"event_id": event_id, "event_type": "transfer_updated", "created_at": created_at,
                           "event_data": {"transfer": {"id": "t1"}}}).encode()

    now = datetime.now(tz=timezone.utc)
    body = event("ev-orum-1", now.isoformat(timespec="milliseconds").replace("+00:00", "Z"))
    other_key, _ = rsa_key_pair()
    assert post_to(src.ingest_url, body, sign(other_key, body)) == 401, "signed by another key"
    tampered = body.replace(b"t1", b"t2")
    assert post_to(src.ingest_url, tampered, sign(key, body)) == 401, "a changed body"
    stale = event("ev-orum-0", "2026-01-01T00:00:00.000Z")
    assert post_to(src.ingest_url, stale, sign(key, stale)) == 401, "older than Orum's day of retries"
    assert post_for_duplicate(src.ingest_url, body, sign(key, body)) == (200, "false")
    assert post_for_duplicate(src.ingest_url, body, sign(key, body)) == (200, "true"), "Orum's retry"
    sink.wait_for(1)
    time.sleep(0.5)
    assert len(sink.received) == 1
    assert json.loads(sink.received[0]["body"])["event_id"] == "ev-orum-1"

    # A key that is not an RSA public key is refused, naming the field.
    with pytest.raises(HTTPValidationError) as e:
        svix.ingest.source.create(IngestSourceIn(name="Orum", type="orum-io", config=OrumIoConfig(public_key="abc")))
    assert "config.publicKey" in str(e.value) and "RSA" in str(e.value)


def test_a_vgs_source_verifies_the_svix_scheme_with_its_whsec_secret(svix, sink):
    from svix.models import VgsConfig

    src = svix.ingest.source.create(IngestSourceIn(name="VGS", type="vgs", config=VgsConfig(secret=SENDER_SECRET)))
    svix.ingest.endpoint.create(src.id, IngestEndpointIn(url=sink.url))
    body = b'{"type":"card.created","data":{"id":"c1"}}'
    forged = signed(body, "msg_vgs_1", "whsec_" + "Zm9yZ2VkLXNlY3JldC1mb3ItdmdzLXRlc3Rz")
    assert post_to(src.ingest_url, body, forged) == 401
    assert post_for_duplicate(src.ingest_url, body, signed(body, "msg_vgs_1")) == (200, "false")
    assert post_for_duplicate(src.ingest_url, body, signed(body, "msg_vgs_1")) == (200, "true")
    sink.wait_for(1)
    time.sleep(0.5)
    assert len(sink.received) == 1
    with pytest.raises(HTTPValidationError):
        svix.ingest.source.create(IngestSourceIn(name="VGS", type="vgs", config=VgsConfig(secret="whsec_short")))
