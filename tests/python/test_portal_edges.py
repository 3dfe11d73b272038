"""The portal's routes at their edges: hostile dates answer 4xx, custom header
values stay out of the attempt log, and a test event needs a live endpoint."""

from svix.api import ApplicationIn, EndpointHeadersIn, EndpointIn, EndpointPatch, MessageIn

from conftest import call, eventually


def test_dates_the_store_cannot_keep_answer_422_on_every_route_that_takes_one(hookgate, tenant, svix, sink):
    app = svix.application.create(ApplicationIn(name="dates"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    key = tenant["apiKey"]
    base = f"/api/v1/app/{app.id}"
    for path in [
        f"{base}/endpoint/{ep.id}/stats/hourly?until=-262143-01-01T00:00:00Z",
        f"{base}/endpoint/{ep.id}/stats/hourly?since=-5000-01-01T00:00:00Z&until=-5000-01-01T01:00:00Z",
        f"{base}/endpoint/{ep.id}/stats?since=-5000-01-01T00:00:00Z",
        f"{base}/msg?before=-5000-01-01T00:00:00Z",
        f"{base}/attempt/endpoint/{ep.id}?after=-5000-01-01T00:00:00Z",
    ]:
        status, _, body = call(hookgate, "GET", path, key)
        assert status == 422, (path, status, body)
        assert "1970" in str(body["detail"]), body
    status, _, body = call(hookgate, "POST", f"{base}/endpoint/{ep.id}/recover", key,
                           {"since": "-262143-01-01T00:00:00Z"})
    assert status == 422, body
    # The server is still there and answers a sane window.
    status, _, body = call(hookgate, "GET", f"{base}/endpoint/{ep.id}/stats/hourly", key)
    assert status == 200 and body["data"] == [], body


def test_a_custom_headers_value_reaches_the_endpoint_but_not_the_attempt_log(hookgate, tenant, svix, sink):
    app = svix.application.create(ApplicationIn(name="headers"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    svix.endpoint.set_headers(app.id, ep.id, EndpointHeadersIn(headers={"X-Webhook-Token": "s3cret-token"}))
    msg = svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"n": 1}))
    got = sink.wait_for(1)[0]
    assert got["headers"]["x-webhook-token"] == "s3cret-token"
    key = tenant["apiKey"]

    def attempt():
        status, _, body = call(hookgate, "GET", f"/api/v1/app/{app.id}/attempt/msg/{msg.id}", key)
        assert status == 200 and body["data"], body
        return body["data"][0]

    shown = eventually(attempt)["requestHeaders"]
    assert shown["x-webhook-token"] == "[redacted]", shown
    assert shown["webhook-id"] == msg.id, "Hookgate's own headers are shown as sent"
    assert "s3cret-token" not in str(shown)
    status, _, body = call(hookgate, "PUT", f"/api/v1/app/{app.id}/endpoint/{ep.id}/headers", key,
                           {"headers": {"X-Big": "x" * 5000}})
    assert status == 422 and "X-Big" in str(body["detail"]), body


def test_a_test_event_to_a_disabled_endpoint_is_refused_in_words(hookgate, tenant, svix, sink):
    app = svix.application.create(ApplicationIn(name="disabled"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    svix.endpoint.patch(app.id, ep.id, EndpointPatch(disabled=True))
    status, _, body = call(hookgate, "POST", f"/api/v1/app/{app.id}/endpoint/{ep.id}/send-example",
                           tenant["apiKey"], {})
    assert status == 422 and "disabled" in str(body["detail"]), body
