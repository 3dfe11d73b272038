"""Ed25519 endpoint signing (Svix's `whsk_` keys, Standard Webhooks' `v1a`) driven through
the official Svix Python SDK. Neither `svix.webhooks` nor `standardwebhooks` (1.1) verifies
`v1a` (both skip every entry but `v1`), so the signatures are checked with `cryptography`'s
Ed25519 verifier, against the `whpk_` public key the API shows."""
import base64
import json
import subprocess
import tempfile
import uuid

import pytest
import standardwebhooks
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from svix.api import ApplicationIn, EndpointIn, EndpointSecretRotateIn, MessageIn, Svix, SvixOptions
from svix.exceptions import HTTPValidationError

from conftest import BIN, Hookgate, call, free_port, fresh_database

RAW = (serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_pair():
    """A fresh key as Svix writes it (`whsk_` and base64 of the seed, then the public key)
    and the `whpk_` public key a receiver verifies with."""
    private = Ed25519PrivateKey.generate()
    seed = private.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                 serialization.NoEncryption())
    public = private.public_key().public_bytes(*RAW)
    return "whsk_" + base64.b64encode(seed + public).decode(), "whpk_" + base64.b64encode(public).decode()


def v1a_verifies(whpk: str, got: dict, prefix: str = "webhook") -> bool:
    """Whether any `v1a,` entry of the delivery's signature header verifies over
    `id.timestamp.body` with the `whpk_` key."""
    h = got["headers"]
    content = f"{h[prefix + '-id']}.{h[prefix + '-timestamp']}.".encode() + got["body"]
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(whpk.removeprefix("whpk_")))
    for entry in h[prefix + "-signature"].split(" "):
        version, _, sig = entry.partition(",")
        if version == "v1a":
            try:
                key.verify(base64.b64decode(sig), content)
                return True
            except InvalidSignature:
                pass
    return False


def test_an_endpoint_made_with_a_whsk_key_through_the_sdk_receives_v1a_signatures_its_whpk_key_verifies(svix, sink):
    whsk, whpk = key_pair()
    app = svix.application.create(ApplicationIn(name="A"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url, secret=whsk))
    shown = svix.endpoint.get_secret(app.id, ep.id).key
    assert shown == whpk, "the public key is shown, never the secret key"

    msg = svix.message.create(app.id, MessageIn(event_type="order.created", payload={"order": 7}))
    got = sink.wait_for(1)[0]
    assert got["headers"]["webhook-id"] == msg.id
    assert got["headers"]["webhook-signature"].startswith("v1a,")
    assert v1a_verifies(shown, got) and v1a_verifies(shown, got, prefix="svix")
    assert not v1a_verifies(shown, dict(got, body=got["body"] + b" ")), "a changed body does not verify"
    assert not v1a_verifies(key_pair()[1], got), "another key does not verify"


def test_a_malformed_whsk_key_is_refused_by_the_server_with_422_saying_what_is_wrong(svix):
    whsk, whpk = key_pair()
    seed_only = "whsk_" + base64.b64encode(base64.b64decode(whsk[5:])[:32]).decode()
    app = svix.application.create(ApplicationIn(name="A"))
    for bad, why in [(seed_only, "not of 32 bytes"), (whpk, "public key, which verifies but cannot sign")]:
        with pytest.raises(HTTPValidationError) as e:
            svix.endpoint.create(app.id, EndpointIn(url="http://127.0.0.1:9/", secret=bad))
        assert why in str(e.value), str(e.value)


def test_a_rotation_to_a_whsk_key_keeps_the_old_whsec_secret_signing_beside_it(svix, sink):
    app = svix.application.create(ApplicationIn(name="A"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    old = svix.endpoint.get_secret(app.id, ep.id).key
    whsk, whpk = key_pair()
    rotated = svix.endpoint.rotate_secret(app.id, ep.id, EndpointSecretRotateIn(key=whsk))
    assert rotated.key == whpk == svix.endpoint.get_secret(app.id, ep.id).key

    svix.message.create(app.id, MessageIn(event_type="order.created", payload={"order": 8}))
    got = sink.wait_for(1)[0]
    assert len(got["headers"]["webhook-signature"].split(" ")) == 2
    assert v1a_verifies(whpk, got), "the new Ed25519 key signs"
    # The official verifier finds the old secret's `v1` entry among the two.
    assert standardwebhooks.Webhook(old).verify(got["body"], got["headers"]) == {"order": 8}


def client(hookgate, tenant):
    return Svix(tenant["apiKey"], SvixOptions(server_url=hookgate.url, retry_schedule=[]))


def test_an_environment_export_carries_a_whsk_key_sealed_and_the_moved_endpoint_signs_with_it(
        svix, hookgate, tenant, sink):
    whsk, whpk = key_pair()
    app = svix.application.create(ApplicationIn(name="Acme", uid="acme"))
    svix.endpoint.create(app.id, EndpointIn(url=sink.url, uid="main", secret=whsk))
    status, _, doc = call(hookgate, "POST", "/api/v1/environment/export", tenant["apiKey"])
    assert status == 200 and whsk[5:] not in json.dumps(doc), "sealed for transit, never in clear"
    target = hookgate.admin("POST", "/admin/v1/tenant", {"name": "moved-ed"})
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(doc, f)
    done = subprocess.run([str(BIN), "import", "environment", "--file", f.name, "--tenant", target["id"]],
                          env=hookgate.env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    moved = client(hookgate, target)
    assert moved.endpoint.get_secret("acme", "main").key == whpk, "the same key, so receivers change nothing"
    moved.message.create("acme", MessageIn(event_type="order.created", payload={"moved": True}))
    assert v1a_verifies(whpk, sink.wait_for(1)[0])


def test_hookgate_import_svix_gives_an_ed25519_endpoint_a_new_key_and_reports_it(svix, hookgate, tenant, sink):
    """A Svix server shows an Ed25519 endpoint's public key only, which cannot sign."""
    whsk, whpk = key_pair()
    app = svix.application.create(ApplicationIn(name="Shop", uid="shop"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url, secret=whsk))
    target = hookgate.admin("POST", "/admin/v1/tenant", {"name": "from-svix-ed"})
    done = subprocess.run([str(BIN), "import", "svix", "--url", hookgate.url, "--token", tenant["apiKey"],
                           "--tenant", target["id"]], env=hookgate.env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert any(f"endpoint `{ep.id}`: its Ed25519 key" in n for n in report["notCarried"]), report
    assert report["endpoints"] == {"created": 1, "updated": 0}
    assert client(hookgate, target).endpoint.get_secret("shop", ep.id).key not in (whsk, whpk)


@pytest.fixture(scope="module")
def ed25519_hookgate(hookgate):
    """A second Hookgate, whose operator chose Ed25519 for the secrets it generates."""
    env = dict(hookgate.env, DATABASE_URL=fresh_database(), HOOKGATE_LISTEN=f"127.0.0.1:{free_port()}",
               HOOKGATE_METRICS_LISTEN=f"127.0.0.1:{free_port()}", HOOKGATE_DEFAULT_SIGNATURE_TYPE="ed25519")
    if "HOOKGATE_REDIS_PREFIX" in env:
        env["HOOKGATE_REDIS_PREFIX"] = "py-" + uuid.uuid4().hex[:8] + ":"
    hg = Hookgate(env)
    yield hg
    hg.stop()


def test_with_ed25519_the_operators_default_an_endpoint_made_without_a_secret_signs_v1a(ed25519_hookgate, sink):
    tenant = ed25519_hookgate.admin("POST", "/admin/v1/tenant", {"name": "ed-" + uuid.uuid4().hex[:6]})
    svix = client(ed25519_hookgate, tenant)
    app = svix.application.create(ApplicationIn(name="A"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    shown = svix.endpoint.get_secret(app.id, ep.id).key
    assert shown.startswith("whpk_") and len(base64.b64decode(shown[5:])) == 32
    svix.message.create(app.id, MessageIn(event_type="order.created", payload={"order": 9}))
    assert v1a_verifies(shown, sink.wait_for(1)[0])
