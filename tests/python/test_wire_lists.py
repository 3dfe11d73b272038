"""Svix's lists as its own server tests them: paging back with `prevIterator`, `order`,
malformed iterators, attempt filters, deleted endpoints and `sending` in a message's
destinations. Through the official SDK where it has the call."""
import time

import pytest
from svix.api import (
    ApplicationIn,
    ApplicationListOptions,
    EndpointIn,
    EndpointListOptions,
    EventTypeIn,
    MessageAttemptListByEndpointOptions,
    MessageIn,
    Ordering,
)
from svix.exceptions import HTTPValidationError

from conftest import call, eventually


def test_paging_back_with_prev_iterator_returns_the_earlier_page_in_order(svix):
    made = []
    for i in range(10):
        made.append(svix.application.create(ApplicationIn(name=f"page-{i}")).id)
        time.sleep(0.002)
    everything = svix.application.list(ApplicationListOptions(limit=50)).data
    ids = [a.id for a in everything]
    assert ids == sorted(ids) and ids == made, "applications list oldest first, as Svix"

    first = svix.application.list(ApplicationListOptions(limit=6))
    assert len(first.data) == 6 and not first.done
    assert first.prev_iterator == "-" + made[0], "before, prevIterator was always null"
    second = svix.application.list(ApplicationListOptions(limit=6, iterator=first.iterator))
    assert [a.id for a in second.data] == made[6:] and second.done
    back = svix.application.list(ApplicationListOptions(limit=3, iterator=second.prev_iterator))
    # Before, `-app_…` paged forwards from the start (or looped): now the three before made[6].
    assert [a.id for a in back.data] == made[3:6]
    assert not back.done, "more comes before made[3]"
    start = svix.application.list(ApplicationListOptions(limit=3, iterator=back.prev_iterator))
    assert [a.id for a in start.data] == made[:3] and start.done


def test_endpoints_list_newest_first_and_order_turns_them(svix, sink):
    app = svix.application.create(ApplicationIn(name="eps"))
    made = []
    for i in range(5):
        made.append(svix.endpoint.create(app.id, EndpointIn(url=f"{sink.url}/{i}")).id)
        time.sleep(0.002)
    newest = svix.endpoint.list(app.id, EndpointListOptions(limit=2))
    # Before, endpoints listed oldest first whatever `order` said.
    assert [e.id for e in newest.data] == [made[4], made[3]] and not newest.done
    nxt = svix.endpoint.list(app.id, EndpointListOptions(limit=2, iterator=newest.iterator))
    assert [e.id for e in nxt.data] == [made[2], made[1]]
    back = svix.endpoint.list(app.id, EndpointListOptions(iterator=nxt.prev_iterator))
    assert [e.id for e in back.data] == [made[4], made[3]] and back.done
    asc = svix.endpoint.list(app.id, EndpointListOptions(limit=3, order=Ordering.ASCENDING))
    assert [e.id for e in asc.data] == made[:3]
    asc2 = svix.endpoint.list(app.id, EndpointListOptions(limit=3, order=Ordering.ASCENDING, iterator=asc.iterator))
    assert [e.id for e in asc2.data] == made[3:] and asc2.done
    desc = svix.application.list(ApplicationListOptions(limit=1, order=Ordering.DESCENDING))
    assert desc.data[0].id == app.id, "applications take order too"


def test_an_iterator_that_is_no_id_of_the_list_is_refused(hookgate, tenant, svix):
    key = tenant["apiKey"]
    app = svix.application.create(ApplicationIn(name="bad-iter"))
    for path in ["/api/v1/app", f"/api/v1/app/{app.id}/endpoint", f"/api/v1/app/{app.id}/msg", "/api/v1/event-type"]:
        # Before, 200 and a page from the start.
        status, _, body = call(hookgate, "GET", f"{path}?limit=6&iterator=BAD-$$$ITERATOR", key)
        assert status == 422 and "iterator" in body["detail"][0]["msg"], (path, body)
    status, _, body = call(hookgate, "GET", f"/api/v1/app?iterator={app.id.replace('app_', 'ep_')}", key)
    assert status == 422, "an endpoint id does not page applications"
    with pytest.raises(HTTPValidationError):
        svix.application.list(ApplicationListOptions(iterator="nope"))


def test_attempts_of_an_endpoint_filter_by_channel_tag_and_event_type(svix, sink):
    app = svix.application.create(ApplicationIn(name="filters"))
    for name in ["a.one", "a.two"]:
        svix.event_type.create(EventTypeIn(name=name, description=name))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    svix.message.create(app.id, MessageIn(event_type="a.one", payload={"n": 1}, channels=["red"], tags=["t1"]))
    svix.message.create(app.id, MessageIn(event_type="a.two", payload={"n": 2}, channels=["blue"]))
    sink.wait_for(2)

    def attempts(**kw):
        return svix.message_attempt.list_by_endpoint(app.id, ep.id, MessageAttemptListByEndpointOptions(**kw)).data

    eventually(lambda: len(attempts()) == 2)
    # Before, `channel` was ignored here: both attempts came back.
    red = attempts(channel="red")
    assert len(red) == 1 and red[0].msg_id == attempts(event_types=["a.one"])[0].msg_id
    assert [a.msg_id for a in attempts(tag="t1")] == [red[0].msg_id]
    assert len(attempts(channel="green")) == 0
    assert len(attempts(event_types=["a.two"])) == 1


def test_a_deleted_endpoint_stays_in_the_messages_destinations(hookgate, tenant, svix, sink):
    app = svix.application.create(ApplicationIn(name="gone"))
    keep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    gone = svix.endpoint.create(app.id, EndpointIn(url=sink.url + "/gone"))
    msg = svix.message.create(app.id, MessageIn(event_type="x.y", payload={}))
    sink.wait_for(2)
    svix.endpoint.delete(app.id, gone.id)
    status, _, page = call(hookgate, "GET", f"/api/v1/app/{app.id}/msg/{msg.id}/endpoint", tenant["apiKey"])
    assert status == 200
    by_id = {d["id"]: d for d in page["data"]}
    # Before, the deleted endpoint was left out.
    assert set(by_id) == {keep.id, gone.id}
    assert by_id[gone.id]["url"] == sink.url + "/gone" and by_id[gone.id]["disabled"] is True
    assert by_id[gone.id]["statusText"] == "success"


def test_a_delivery_waiting_for_its_retry_reads_sending_with_its_next_attempt(hookgate, tenant, svix, sink):
    sink.status = 500
    app = svix.application.create(ApplicationIn(name="retrying"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    msg = svix.message.create(app.id, MessageIn(event_type="x.y", payload={}))
    sink.wait_for(1)

    def waiting():
        status, _, page = call(hookgate, "GET", f"/api/v1/app/{app.id}/msg/{msg.id}/endpoint", tenant["apiKey"])
        d = page["data"][0]
        return d if d["status"] == 3 else None

    # Before, status 1 (`pending`) while the retry waited.
    d = eventually(waiting)
    assert d["statusText"] == "sending" and d["id"] == ep.id


def test_an_endpoints_attempts_are_counted_with_the_lists_filters(hookgate, tenant, svix, sink):
    app = svix.application.create(ApplicationIn(name="count"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    for ch in ["red", "red", "blue"]:
        svix.message.create(app.id, MessageIn(event_type="c.x", payload={}, channels=[ch]))
    sink.wait_for(3)
    path = f"/api/v1/app/{app.id}/attempt/endpoint/{ep.id}/count"
    # Before, 404: the route was not served.
    eventually(lambda: call(hookgate, "GET", path, tenant["apiKey"])[2] == {"count": 3, "approximated": False})
    assert call(hookgate, "GET", path + "?channel=red", tenant["apiKey"])[2] == {"count": 2, "approximated": False}
    assert call(hookgate, "GET", path + "?status=2", tenant["apiKey"])[2]["count"] == 0


def test_a_list_filter_given_as_repeated_keys_reads_as_the_comma_separated_list_the_sdks_send(hookgate, tenant, svix):
    """Clients generated from Svix's OpenAPI send an array query parameter as repeated keys
    (`event_types=a&event_types=b`, OpenAPI's default form style); the official SDKs join it
    with commas. Before, the repeated form answered 422 `duplicate field`."""
    app = svix.application.create(ApplicationIn(name="repeated")).id
    for t in ("a.one", "b.two", "c.three"):
        svix.message.create(app, MessageIn(event_type=t, payload={}))
    key = tenant["apiKey"]
    status, _, body = call(hookgate, "GET", f"/api/v1/app/{app}/msg?event_types=a.one&limit=10&event_types=c.three", key=key)
    assert status == 200, body
    assert sorted(m["eventType"] for m in body["data"]) == ["a.one", "c.three"]
    status, _, joined = call(hookgate, "GET", f"/api/v1/app/{app}/msg?event_types=a.one,c.three&limit=10", key=key)
    assert status == 200 and [m["id"] for m in joined["data"]] == [m["id"] for m in body["data"]]
    status, _, body = call(hookgate, "GET", f"/api/v1/app/{app}/msg?limit=1&limit=2", key=key)
    assert status == 422, "a repeated scalar is still refused, naming it"


def test_a_list_filter_given_as_an_array_key_reads_as_the_bare_key(hookgate, tenant, svix):
    """Svix's own server tests ask `?event_types[]=…` (the bracket form PHP-style clients send);
    before, the key was not known and the filter was ignored: every message came back."""
    app = svix.application.create(ApplicationIn(name="bracketed")).id
    for t in ("a.one", "b.two", "c.three"):
        svix.message.create(app, MessageIn(event_type=t, payload={}))
    key = tenant["apiKey"]
    for query in ("event_types[]=a.one&event_types[]=c.three", "event_types%5B%5D=a.one&event_types%5B%5D=c.three"):
        status, _, body = call(hookgate, "GET", f"/api/v1/app/{app}/msg?{query}", key=key)
        assert status == 200, body
        assert sorted(m["eventType"] for m in body["data"]) == ["a.one", "c.three"], query
    status, _, one = call(hookgate, "GET", f"/api/v1/app/{app}/msg?event_types[]=b.two", key=key)
    assert status == 200 and [m["eventType"] for m in one["data"]] == ["b.two"]
