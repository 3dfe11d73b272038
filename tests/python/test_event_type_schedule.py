"""An event type's own retry schedule (Svix's `…/event-type/{name}/retry-schedule`)
replaces the operator's for its messages: here the default is two retries (`1,1`)."""
import time

from svix.api import ApplicationIn, EndpointIn, MessageIn

from conftest import call, event_types


def test_a_types_retry_schedule_changes_how_many_attempts_its_messages_get(hookgate, tenant, svix, sink):
    key = tenant["apiKey"]
    event_types(svix, "order.slow", "order.plain")
    path = "/api/v1/event-type/order.slow/retry-schedule"
    status, _, out = call(hookgate, "GET", path, key)
    assert (status, out) == (200, {"retrySchedule": None}), "no schedule of its own yet"
    four = [{"secs": 1, "nanos": 0}] * 4
    # Before, 404: the route was not served, and every type had the default.
    status, _, out = call(hookgate, "PUT", path, key, {"retrySchedule": four})
    assert (status, out) == (200, {"retrySchedule": four}), out
    assert call(hookgate, "GET", path, key)[2] == {"retrySchedule": four}

    sink.status = 500
    app = svix.application.create(ApplicationIn(name="schedules"))
    svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    slow = svix.message.create(app.id, MessageIn(event_type="order.slow", payload={"n": 1}))
    plain = svix.message.create(app.id, MessageIn(event_type="order.plain", payload={"n": 2}))
    sink.wait_for(1 + 4 + 1 + 2, timeout=30)
    time.sleep(3)  # time for any attempt past the schedule to show itself

    def tries(msg):
        return sum(1 for r in sink.received if r["headers"].get("webhook-id") == msg.id)

    assert (tries(slow), tries(plain)) == (5, 3), "four retries on its own schedule, two on the default"


def test_a_retry_schedule_is_checked_and_can_be_cleared(hookgate, tenant, svix):
    key = tenant["apiKey"]
    event_types(svix, "order.checked")
    path = "/api/v1/event-type/order.checked/retry-schedule"
    for bad in ([{"secs": 0, "nanos": 0}], [{"secs": 8 * 86400, "nanos": 0}], [{"secs": 1, "nanos": 0}] * 51,
                [{"secs": "x", "nanos": 0}]):
        status, _, out = call(hookgate, "PUT", path, key, {"retrySchedule": bad})
        assert status == 422, (bad, out)
    status, _, _ = call(hookgate, "PUT", "/api/v1/event-type/no.such/retry-schedule", key, {"retrySchedule": None})
    assert status == 404
    call(hookgate, "PUT", path, key, {"retrySchedule": [{"secs": 2, "nanos": 500_000_000}]})
    assert call(hookgate, "GET", path, key)[2] == {"retrySchedule": [{"secs": 2, "nanos": 500_000_000}]}
    assert call(hookgate, "PUT", path, key, {"retrySchedule": None})[2] == {"retrySchedule": None}
    other = hookgate.admin("POST", "/admin/v1/tenant", {"name": "other"})
    status, _, _ = call(hookgate, "GET", path, other["apiKey"])
    assert status == 404, "another tenant's type is not there"
