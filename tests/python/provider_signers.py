"""How each provider signs a request, for tests/python/test_provider_catalogue.py.

Where the provider's own library signs (Twilio's RequestValidator, HubSpot's Signature, Svix),
it signs here. Where the library only verifies (Square, Paddle, SendGrid, Discord, Mailgun), the
request is signed as the provider documents and the provider's library must accept it before
Hookgate sees it: so Hookgate is checked against the provider's code either way. The rest have
no library (GitLab, Bitbucket, Intercom, Linear, Typeform, Calendly, WooCommerce, basic auth,
Zoom, Standard Webhooks `v1a`); they are signed as the provider's documentation describes.

A signer is `key()` -> (signing key, the source's `secret`) and
`sign(key, n, url)` -> (body, headers) for a unique event number `n`.
"""
import base64
import hashlib
import hmac
import json
import secrets
import time
from types import SimpleNamespace

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from nacl.signing import SigningKey


def _hmac(key: str, msg: bytes, algo=hashlib.sha256) -> bytes:
    return hmac.new(key.encode(), msg, algo).digest()


def _shared():
    s = "sec_" + secrets.token_hex(12)
    return s, s


def _now() -> int:
    return int(time.time())


# --- Providers whose own library signs --------------------------------------------------------

def twilio_sign(token, n, url):
    from twilio.request_validator import RequestValidator
    params = {"MessageSid": f"SM{n:032d}", "MessageStatus": "delivered", "To": "+15005550006"}
    body = "&".join(f"{k}={v}".replace("+", "%2B") for k, v in params.items()).encode()
    sig = RequestValidator(token).compute_signature(url, params)
    return body, {"X-Twilio-Signature": sig, "I-Twilio-Idempotency-Token": f"idem-{n}",
                  "Content-Type": "application/x-www-form-urlencoded"}


def hubspot_sign(secret, n, url):
    from hubspot.utils.signature import Signature
    body = json.dumps([{"eventId": n, "subscriptionType": "contact.creation", "objectId": 7}])
    ts = str(int(time.time() * 1000))
    sig = Signature.get_signature(secret, body, "v3", http_uri=url, http_method="POST", timestamp=ts)
    return body.encode(), {"X-HubSpot-Signature-v3": sig, "X-HubSpot-Request-Timestamp": ts,
                           "Content-Type": "application/json"}


def svix_key():
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    return secret, secret


def svix_sign(secret, n, url):
    from datetime import datetime, timezone
    from svix.webhooks import Webhook
    body = json.dumps({"type": "user.created", "data": {"id": n}})
    now = datetime.now(timezone.utc)
    sig = Webhook(secret).sign(f"msg_{n}", now, body)
    return body.encode(), {"svix-id": f"msg_{n}", "svix-timestamp": str(int(now.timestamp())),
                           "svix-signature": sig, "Content-Type": "application/json"}


# --- Signed as documented, accepted by the provider's own verifier first ----------------------

def square_sign(key, n, url):
    from square.utils.webhooks_helper import verify_signature
    body = json.dumps({"merchant_id": "M", "type": "payment.updated", "event_id": f"ev-{n}"})
    sig = base64.b64encode(_hmac(key, (url + body).encode())).decode()
    assert verify_signature(request_body=body, signature_header=sig, signature_key=key, notification_url=url)
    return body.encode(), {"x-square-hmacsha256-signature": sig, "Content-Type": "application/json"}


def paddle_sign(secret, n, url):
    from paddle_billing.Notifications import Secret, Verifier
    body = json.dumps({"event_id": f"evt_{n}", "event_type": "transaction.completed", "data": {}}).encode()
    ts = _now()
    h1 = hmac.new(secret.encode(), f"{ts}:".encode() + body, hashlib.sha256).hexdigest()
    header = f"ts={ts};h1={h1}"
    assert Verifier().verify(SimpleNamespace(headers={"Paddle-Signature": header}, body=body), Secret(secret))
    return body, {"Paddle-Signature": header, "Content-Type": "application/json"}


def sendgrid_key():
    priv = ec.generate_private_key(ec.SECP256R1())
    public = priv.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return priv, base64.b64encode(public).decode()


def sendgrid_sign(priv, n, url):
    from sendgrid.helpers.eventwebhook import EventWebhook
    body = json.dumps([{"email": "a@example.com", "event": "delivered", "sg_event_id": f"e{n}"}]) + "\r\n"
    ts = str(_now())
    sig = base64.b64encode(priv.sign((ts + body).encode(), ec.ECDSA(hashes.SHA256()))).decode()
    public = base64.b64encode(priv.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).decode()
    assert EventWebhook(public).verify_signature(body, sig, ts)
    return body.encode(), {"X-Twilio-Email-Event-Webhook-Signature": sig,
                           "X-Twilio-Email-Event-Webhook-Timestamp": ts, "Content-Type": "application/json"}


def discord_key():
    sk = SigningKey.generate()
    return sk, sk.verify_key.encode().hex()


def discord_sign(sk, n, url, body=None):
    from discord_interactions import verify_key
    body = body or json.dumps({"version": 1, "application_id": "1", "type": 1,
                               "event": {"type": "APPLICATION_AUTHORIZED", "timestamp": str(n), "data": {}}}).encode()
    ts = str(_now())
    sig = sk.sign(ts.encode() + body).signature.hex()
    assert verify_key(body, sig, ts, sk.verify_key.encode().hex())
    return body, {"X-Signature-Ed25519": sig, "X-Signature-Timestamp": ts, "Content-Type": "application/json"}


def mailgun_sign(key, n, url):
    from mailgun.security import SecurityGuard
    ts, token = str(_now()), secrets.token_hex(25)
    sig = hmac.new(key.encode(), (ts + token).encode(), hashlib.sha256).hexdigest()
    assert SecurityGuard.verify_webhook(key, token, ts, sig)
    body = json.dumps({"signature": {"timestamp": ts, "token": token, "signature": sig},
                       "event-data": {"id": f"mg-{n}", "event": "delivered"}})
    return body.encode(), {"Content-Type": "application/json"}


# --- Signed as the provider's documentation describes -----------------------------------------

def standard_v1a_key():
    sk = SigningKey.generate()
    return sk, "whpk_" + base64.b64encode(sk.verify_key.encode()).decode()


def standard_v1a_sign(sk, n, url):
    body = json.dumps({"type": "invoice.paid", "data": {"n": n}}).encode()
    ts = str(_now())
    sig = base64.b64encode(sk.sign(f"msg_{n}.{ts}.".encode() + body).signature).decode()
    return body, {"webhook-id": f"msg_{n}", "webhook-timestamp": ts, "webhook-signature": f"v1a,{sig}",
                  "Content-Type": "application/json"}


def basic_key():
    s = "postmark:" + secrets.token_hex(8)
    return s, s


def basic_sign(creds, n, url):
    body = json.dumps({"RecordType": "Delivery", "MessageID": f"m-{n}"}).encode()
    return body, {"Authorization": "Basic " + base64.b64encode(creds.encode()).decode(),
                  "Content-Type": "application/json"}


def gitlab_sign(token, n, url):
    body = json.dumps({"object_kind": "push", "after": f"{n:040x}"}).encode()
    return body, {"X-Gitlab-Token": token, "X-Gitlab-Event": "Push Hook", "Idempotency-Key": f"gl-{n}",
                  "X-Gitlab-Event-UUID": f"uuid-{n}", "Content-Type": "application/json"}


def bitbucket_sign(secret, n, url):
    body = json.dumps({"push": {"changes": [n]}}).encode()
    return body, {"X-Hub-Signature": "sha256=" + _hmac(secret, body).hex(), "X-Event-Key": "repo:push",
                  "X-Request-UUID": f"bb-{n}", "Content-Type": "application/json"}


def intercom_sign(secret, n, url):
    body = json.dumps({"type": "notification_event", "id": f"notif_{n}", "topic": "conversation.user.created"}).encode()
    return body, {"X-Hub-Signature": "sha1=" + _hmac(secret, body, hashlib.sha1).hex(),
                  "Content-Type": "application/json"}


def linear_sign(secret, n, url):
    body = json.dumps({"action": "create", "type": "Issue", "data": {"n": n},
                       "webhookTimestamp": int(time.time() * 1000)}).encode()
    return body, {"Linear-Signature": _hmac(secret, body).hex(), "Linear-Delivery": f"ln-{n}",
                  "Linear-Event": "Issue", "Content-Type": "application/json"}


def typeform_sign(secret, n, url):
    body = json.dumps({"event_id": f"tf-{n}", "event_type": "form_response", "form_response": {}}).encode()
    return body, {"Typeform-Signature": "sha256=" + base64.b64encode(_hmac(secret, body)).decode(),
                  "Content-Type": "application/json"}


def calendly_sign(secret, n, url):
    body = json.dumps({"event": "invitee.created", "created_at": str(n), "payload": {"n": n}}).encode()
    ts = str(_now())
    sig = hmac.new(secret.encode(), ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    return body, {"Calendly-Webhook-Signature": f"t={ts},v1={sig}", "Content-Type": "application/json"}


def woocommerce_sign(secret, n, url):
    body = json.dumps({"id": n, "status": "processing"}).encode()
    return body, {"X-WC-Webhook-Signature": base64.b64encode(_hmac(secret, body)).decode(),
                  "X-WC-Webhook-Topic": "order.created", "X-WC-Webhook-Delivery-ID": f"wc-{n}",
                  "Content-Type": "application/json"}


def zoom_sign(secret, n, url, body=None):
    body = body or json.dumps({"event": "meeting.started", "event_ts": n, "payload": {"object": {"id": n}}}).encode()
    ts = str(_now())
    sig = "v0=" + hmac.new(secret.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    return body, {"x-zm-signature": sig, "x-zm-request-timestamp": ts, "Content-Type": "application/json"}


# provider -> (key maker, signer, the header whose value a one-byte change must break, event type)
SIGNERS = {
    "twilio": (_shared, twilio_sign, "X-Twilio-Signature", "message.delivered"),
    "hubspot": (_shared, hubspot_sign, "X-HubSpot-Signature-v3", "contact.creation"),
    "svix": (svix_key, svix_sign, "svix-signature", "user.created"),
    "square": (_shared, square_sign, "x-square-hmacsha256-signature", "payment.updated"),
    "paddle": (_shared, paddle_sign, "Paddle-Signature", "transaction.completed"),
    "sendgrid": (sendgrid_key, sendgrid_sign, "X-Twilio-Email-Event-Webhook-Signature", "delivered"),
    "discord": (discord_key, discord_sign, "X-Signature-Ed25519", "APPLICATION_AUTHORIZED"),
    "mailgun": (_shared, mailgun_sign, None, "delivered"),
    "standard-webhooks": (standard_v1a_key, standard_v1a_sign, "webhook-signature", "invoice.paid"),
    "basic-auth": (basic_key, basic_sign, "Authorization", "basic-auth"),
    "gitlab": (_shared, gitlab_sign, "X-Gitlab-Token", "push"),
    "bitbucket": (_shared, bitbucket_sign, "X-Hub-Signature", "repo.push"),
    "intercom": (_shared, intercom_sign, "X-Hub-Signature", "conversation.user.created"),
    "linear": (_shared, linear_sign, "Linear-Signature", "Issue.create"),
    "typeform": (_shared, typeform_sign, "Typeform-Signature", "form_response"),
    "calendly": (_shared, calendly_sign, "Calendly-Webhook-Signature", "invitee.created"),
    "woocommerce": (_shared, woocommerce_sign, "X-WC-Webhook-Signature", "order.created"),
    "zoom": (_shared, zoom_sign, "x-zm-signature", "meeting.started"),
}
