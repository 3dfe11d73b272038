"""Svix's poller tokens (`…/auth/app/{app}/poller/{endpoint}/token`, `…/token/rotate`): a
token that polls one polling endpoint and does nothing else, used with the official SDK's
poller as a customer's poller would, rotated with a grace for the token before."""
import time

from svix.api import (
    ApplicationIn,
    DestinationIn,
    MessageIn,
    MessagePollerConsumerPollOptions,
    MessagePollerPollOptions,
    Svix,
    SvixOptions,
)

from conftest import call


def polling_endpoint(svix):
    app = svix.application.create(ApplicationIn(name="polled")).id
    sink = svix.destination.create(app, DestinationIn(type="pollingEndpoint", config={})).id
    return app, sink


def as_client(hookgate, token):
    return Svix(token, SvixOptions(server_url=hookgate.url, retry_schedule=[]))


def test_a_poller_token_polls_its_endpoint_through_the_sdk_and_reaches_nothing_else(hookgate, tenant, svix):
    app, sink = polling_endpoint(svix)
    _, other = polling_endpoint(svix)
    other_sink = svix.destination.create(app, DestinationIn(type="pollingEndpoint", config={})).id
    made = svix.message.create(app, MessageIn(event_type="order.paid", payload={"n": 1})).id
    status, _, out = call(hookgate, "GET", f"/api/v1/auth/app/{app}/poller/{sink}/token", key=tenant["apiKey"])
    assert status == 200, out
    again = call(hookgate, "GET", f"/api/v1/auth/app/{app}/poller/{sink}/token", key=tenant["apiKey"])[2]
    assert again["token"] == out["token"], "GET answers the current token, the same until a rotation"
    assert out["scopes"] == [f"poller:{sink}"] and out["expiresAt"]

    poller = as_client(hookgate, out["token"])
    assert [m.id for m in poller.message.poller.poll(app, sink, MessagePollerPollOptions()).data] == [made]
    assert [m.id for m in poller.message.poller.consumer_poll(
        app, sink, "mine", MessagePollerConsumerPollOptions()).data] == [made]

    token = out["token"]
    for method, path, body in [
        ("GET", f"/api/v1/app/{app}/poller/{other_sink}", None),
        ("GET", f"/api/v1/app/{app}/msg", None),
        ("POST", f"/api/v1/app/{app}/msg", {"eventType": "x", "payload": {}}),
        ("GET", f"/api/v1/app/{app}/endpoint", None),
        ("GET", f"/api/v1/app/{app}", None),
        ("GET", f"/api/v1/auth/app/{app}/poller/{sink}/token", None),
        ("POST", f"/api/v1/auth/app/{app}/poller/{sink}/token/rotate", {}),
    ]:
        status, _, _ = call(hookgate, method, path, key=token, body=body)
        assert status == 403, f"{method} {path} answered {status}"
    assert call(hookgate, "GET", f"/api/v1/app/{other}/poller/{sink}", key=token)[0] == 404


def test_a_rotation_makes_a_new_token_and_the_one_before_works_for_its_grace_only(hookgate, tenant, svix):
    app, sink = polling_endpoint(svix)
    first = call(hookgate, "GET", f"/api/v1/auth/app/{app}/poller/{sink}/token", key=tenant["apiKey"])[2]["token"]
    poll = f"/api/v1/app/{app}/poller/{sink}"
    status, _, second = call(hookgate, "POST", f"/api/v1/auth/app/{app}/poller/{sink}/token/rotate",
                             key=tenant["apiKey"], body={"oldTokenExpiry": 2})
    assert status == 201 and second["token"] != first
    assert call(hookgate, "GET", poll, key=second["token"])[0] == 200
    assert call(hookgate, "GET", poll, key=first)[0] == 200, "the token before works during its grace"
    time.sleep(2.5)
    assert call(hookgate, "GET", poll, key=first)[0] == 401, "and not after"
    assert call(hookgate, "GET", f"/api/v1/auth/app/{app}/poller/{sink}/token", key=tenant["apiKey"])[2]["token"] == second["token"]

    status, _, third = call(hookgate, "POST", f"/api/v1/auth/app/{app}/poller/{sink}/token/rotate",
                            key=tenant["apiKey"], body={"oldTokenExpiry": 0})
    assert status == 201
    assert call(hookgate, "GET", poll, key=second["token"])[0] == 401, "oldTokenExpiry 0 ends it at once"
    assert call(hookgate, "GET", poll, key=third["token"])[0] == 200


def test_poller_tokens_are_only_for_polling_endpoints_and_sane_settings(hookgate, tenant, svix, sink):
    app, polling = polling_endpoint(svix)
    ep = call(hookgate, "POST", f"/api/v1/app/{app}/endpoint", key=tenant["apiKey"], body={"url": sink.url})[2]["id"]
    assert call(hookgate, "GET", f"/api/v1/auth/app/{app}/poller/{ep}/token", key=tenant["apiKey"])[0] == 404
    rotate = f"/api/v1/auth/app/{app}/poller/{polling}/token/rotate"
    assert call(hookgate, "POST", rotate, key=tenant["apiKey"], body={"expiry": 0})[0] == 422
    assert call(hookgate, "POST", rotate, key=tenant["apiKey"], body={"oldTokenExpiry": 86401})[0] == 422
    portal = call(hookgate, "POST", f"/api/v1/auth/app-portal-access/{app}", key=tenant["apiKey"], body={})[2]["token"]
    assert call(hookgate, "GET", f"/api/v1/auth/app/{app}/poller/{polling}/token", key=portal)[0] == 403


def test_a_rotation_body_is_read_whatever_its_content_type_and_a_bad_one_is_refused(hookgate, tenant, svix):
    """Before, a body without `Content-Type: application/json`, or of the wrong shape, was
    read as no body: `oldTokenExpiry: 0` left the old token working five minutes."""
    import urllib.request
    app, sink = polling_endpoint(svix)
    first = call(hookgate, "GET", f"/api/v1/auth/app/{app}/poller/{sink}/token", key=tenant["apiKey"])[2]["token"]
    rotate = f"/api/v1/auth/app/{app}/poller/{sink}/token/rotate"
    req = urllib.request.Request(hookgate.url + rotate, data=b'{"oldTokenExpiry": 0}', method="POST")
    req.add_header("Authorization", f"Bearer {tenant['apiKey']}")
    req.add_header("Content-Type", "text/plain")
    with urllib.request.urlopen(req, timeout=10) as res:
        assert res.status == 201
    assert call(hookgate, "GET", f"/api/v1/app/{app}/poller/{sink}", key=first)[0] == 401
    for bad in ({"expiry": "60"}, {"old_token_expiry": 0}, {"expiry": 1e40}):
        assert call(hookgate, "POST", rotate, key=tenant["apiKey"], body=bad)[0] == 422, bad


def test_tokens_fetched_at_once_are_one_token_and_expire_all_gets_a_working_one_next(hookgate, tenant, svix):
    """Before, two GETs of a new endpoint's token each made a generation, the second
    ending the first's at once; and after expire-all, GET kept answering the dead token."""
    from concurrent.futures import ThreadPoolExecutor
    app, sink = polling_endpoint(svix)
    path = f"/api/v1/auth/app/{app}/poller/{sink}/token"
    with ThreadPoolExecutor(4) as pool:
        tokens = list(pool.map(lambda _: call(hookgate, "GET", path, key=tenant["apiKey"])[2]["token"], range(4)))
    poll = f"/api/v1/app/{app}/poller/{sink}"
    for t in tokens:
        assert call(hookgate, "GET", poll, key=t)[0] == 200
    assert call(hookgate, "POST", f"/api/v1/auth/app/{app}/expire-all", key=tenant["apiKey"], body={})[0] == 204
    assert call(hookgate, "GET", poll, key=tokens[0])[0] == 401
    fresh = call(hookgate, "GET", path, key=tenant["apiKey"])[2]["token"]
    assert fresh != tokens[0] and call(hookgate, "GET", poll, key=fresh)[0] == 200
