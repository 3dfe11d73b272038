"""Ingress verified against signatures made by the providers' own code: Stripe's
and GitHub's packages (through tests/node/sign.mjs), standardwebhooks, slack_sdk.
Forwarded deliveries are checked with the official standardwebhooks verifier."""
import json
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
import standardwebhooks
from slack_sdk.signature import SignatureVerifier

from conftest import post

NODE_SIGNER = Path(__file__).resolve().parents[1] / "node" / "sign.mjs"


def node_sign(provider: str, secret: str, body: bytes, timestamp: int = None) -> str:
    args = ["node", str(NODE_SIGNER), provider, secret] + ([str(timestamp)] if timestamp else [])
    return subprocess.run(args, input=body, capture_output=True, check=True).stdout.decode()


def test_stripe_signed_by_stripes_library_is_admitted_once(hookgate, wired, sink):
    source, ep_secret = wired
    src = source("stripe", secret="whsec_from_stripe_dashboard")
    body = json.dumps({"id": "evt_py_1", "type": "charge.succeeded", "data": {"object": {}}}).encode()
    sig = node_sign("stripe", "whsec_from_stripe_dashboard", body)
    headers = {"Stripe-Signature": sig, "Content-Type": "application/json"}
    status, h, first = post(hookgate, src, body, headers)
    assert (status, first["status"], h["hookgate-duplicate"]) == (200, "accepted", "false")
    status, h, again = post(hookgate, src, body, headers)
    assert (status, again["status"], again["eventId"]) == (200, "duplicate", first["eventId"])
    got = sink.wait_for(1)[0]
    assert got["body"] == body, "forwarded byte for byte"
    assert got["headers"]["idempotency-key"] == first["key"]
    forwarded = standardwebhooks.Webhook(ep_secret).verify(got["body"], got["headers"])
    assert forwarded["id"] == "evt_py_1"

    wrong = node_sign("stripe", "whsec_another", body)
    status, _, err = post(hookgate, src, body, {"Stripe-Signature": wrong})
    assert (status, err["code"]) == (401, "invalid_signature")
    stale = node_sign("stripe", "whsec_from_stripe_dashboard", body, int(time.time()) - 600)
    status, _, err = post(hookgate, src, body, {"Stripe-Signature": stale})
    assert (status, err["code"]) == (401, "timestamp_out_of_tolerance")


def test_github_signed_by_octokit_is_admitted_with_its_event_type(hookgate, wired, sink):
    source, _ = wired
    src = source("github", secret="gh-hook-secret")
    body = json.dumps({"action": "opened", "number": 7}).encode()
    headers = {
        "X-Hub-Signature-256": node_sign("github", "gh-hook-secret", body),
        "X-GitHub-Event": "pull_request",
        "X-GitHub-Hook-ID": "123",
        "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        "Content-Type": "application/json",
    }
    status, _, first = post(hookgate, src, body, headers)
    assert (status, first["status"]) == (200, "accepted")
    assert post(hookgate, src, body, headers)[2]["status"] == "duplicate"
    headers["X-GitHub-Delivery"] = "another-delivery"
    assert post(hookgate, src, body, headers)[2]["status"] == "accepted", "a redelivery id is a new event"
    got = sink.wait_for(2)
    assert got[0]["body"] == body


def test_standard_webhooks_signed_by_the_reference_library(hookgate, wired, sink):
    source, _ = wired
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    src = source("standard-webhooks", secret=secret)
    body = json.dumps({"type": "user.created", "data": {"id": 1}})
    wh = standardwebhooks.Webhook(secret)
    now = datetime.now(timezone.utc)
    headers = {
        "webhook-id": "msg_sw_1",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": wh.sign("msg_sw_1", now, body),
        "Content-Type": "application/json",
    }
    status, _, first = post(hookgate, src, body.encode(), headers)
    assert (status, first["status"]) == (200, "accepted")
    assert post(hookgate, src, body.encode(), headers)[2]["status"] == "duplicate"
    headers["webhook-signature"] = standardwebhooks.Webhook("whsec_" + "A" * 32).sign("msg_sw_1", now, body)
    status, _, err = post(hookgate, src, body.encode(), headers)
    assert (status, err["code"]) == (401, "invalid_signature")


def test_slack_signed_by_slack_sdk_json_and_form_bodies(hookgate, wired, sink):
    source, _ = wired
    signing_secret = "8f742231b10e8888abcd99yyyzzz85a5"
    verifier = SignatureVerifier(signing_secret)
    src = source("slack", secret=signing_secret)
    body = json.dumps({"event_id": "Ev123", "event": {"type": "app_mention"}})
    ts = str(int(time.time()))
    headers = {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": verifier.generate_signature(timestamp=ts, body=body),
        "Content-Type": "application/json",
    }
    status, _, first = post(hookgate, src, body.encode(), headers)
    assert (status, first["status"]) == (200, "accepted")
    assert post(hookgate, src, body.encode(), headers)[2]["status"] == "duplicate"

    # A slash command: form-encoded, no event id; keyed on the body.
    forms = source("slack", secret=signing_secret, idempotency={"body": True})
    form = "token=x&command=%2Fdeploy&text=now&trigger_id=1.2.3"
    headers = {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": verifier.generate_signature(timestamp=ts, body=form),
        "Content-Type": "application/x-www-form-urlencoded",
    }
    status, _, res = post(hookgate, forms, form.encode(), headers)
    assert (status, res["status"]) == (200, "accepted")
    got = sink.wait_for(2)
    form_delivery = [r for r in got if r["headers"]["content-type"] == "application/x-www-form-urlencoded"]
    assert form_delivery and form_delivery[0]["body"] == form.encode(), "non-JSON bodies are forwarded as they came"
