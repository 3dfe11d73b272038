"""Svix's poller v2 (`v1.message.pollerv2.*`) on the wire: named consumers of a polling
endpoint that commit offsets; a poll leases what it hands out, and while the lease lasts
a poll of the same consumer hands out the same messages again (at least once, even with
two pollers sharing a consumer id); commits are idempotent."""
import uuid

from svix.api import ApplicationIn, DestinationIn, MessageIn

from conftest import call, eventually


def publish(svix, app_id, n):
    return [svix.message.create(app_id, MessageIn(event_type="order.paid", payload={"n": i})).id for i in range(n)]


def poller(hookgate, svix, tenant, name):
    app = svix.application.create(ApplicationIn(name=name))
    sink = svix.destination.create(app.id, DestinationIn(type="pollingEndpoint", config={}))
    base = f"/api/v1/app/{app.id}/polling-endpoint/{sink.id}/consumer"

    def poll(consumer, **q):
        qs = "&".join(f"{k}={v}" for k, v in q.items())
        status, _, page = call(hookgate, "GET", f"{base}/{consumer}?{qs}", tenant["apiKey"])
        assert status == 200, page
        return page

    def commit(consumer, offset):
        return call(hookgate, "POST", f"{base}/{consumer}/commit", tenant["apiKey"], {"offset": offset})
    return app, base, poll, commit


def test_a_poller_v2_consumer_gets_leased_messages_again_until_it_commits_their_offsets(hookgate, tenant, svix):
    key = tenant["apiKey"]
    app, base, poll, commit = poller(hookgate, svix, tenant, "pollerv2")
    sent = publish(svix, app.id, 5)

    page = eventually(lambda: (lambda p: p if len(p["data"]) == 2 else None)(poll("a", limit=2, lease_duration_ms=0)))
    assert [m["id"] for m in page["data"]] == sent[:2] and page["done"] is False
    assert page["data"][0]["payload"] == {"n": 0} and page["data"][0]["eventType"] == "order.paid"
    # Without a lease and without a commit, the same messages come again.
    again = poll("a", limit=2, lease_duration_ms=0)
    assert [m["id"] for m in again["data"]] == sent[:2]
    # Committing the second message's offset acknowledges the first two.
    leased = poll("a", limit=2, lease_duration_ms=60000)
    assert [m["id"] for m in leased["data"]] == sent[:2]
    status, _, _ = commit("a", leased["data"][1]["offset"])
    assert status == 204
    status, _, body = commit("a", 123456789)
    assert status == 422 and "offset" in str(body["detail"]), body
    after = poll("a", limit=2, lease_duration_ms=60000)
    assert [m["id"] for m in after["data"]] == sent[2:4]
    status, _, _ = commit("a", after["data"][1]["offset"])
    assert status == 204
    rest = poll("a", limit=10, lease_duration_ms=0)
    assert [m["id"] for m in rest["data"]] == sent[4:] and rest["done"] is True
    # Each consumer has its own position; `latest` starts a new one at the end.
    assert [m["id"] for m in poll("b", limit=10)["data"]] == sent
    assert poll("c", starting_position="latest")["data"] == []
    later = publish(svix, app.id, 1)
    assert [m["id"] for m in eventually(lambda: poll("c")["data"])] == later
    # Bad input names what is wrong; an HTTP endpoint is no polling endpoint.
    status, _, body = call(hookgate, "GET", f"{base}/a?limit=0", key)
    assert status == 422 and "limit" in str(body["detail"]), body
    status, _, body = call(hookgate, "GET", f"{base}/a?starting_position=middle", key)
    assert status in (400, 422), body
    other = hookgate.admin("POST", "/admin/v1/tenant", {"name": "other-" + uuid.uuid4().hex[:6]})
    status, _, _ = call(hookgate, "GET", f"{base}/a", other["apiKey"])
    assert status == 404


def test_a_poll_during_a_live_lease_hands_out_the_same_range_so_a_second_poller_loses_nothing(
        hookgate, tenant, svix):
    """Before, a poll within the lease went on after it (and renewed the lease): poller B of
    the same consumer got m3-m4 while A held m1-m2; A died, B committed m4, and m1-m2 were
    never handed out again."""
    app, _, poll, commit = poller(hookgate, svix, tenant, "pollerv2-lease")
    sent = publish(svix, app.id, 4)
    a = eventually(lambda: (lambda p: p if len(p["data"]) == 2 else None)(
        poll("shared", limit=2, lease_duration_ms=60000)))
    assert [m["id"] for m in a["data"]] == sent[:2]
    # B, same consumer, within A's lease: the same two again (not m3-m4), however many it asks for.
    b = poll("shared", limit=10, lease_duration_ms=60000)
    assert [m["id"] for m in b["data"]] == sent[:2], b
    assert b["done"] is False, "more is logged after the leased range"
    assert [m["offset"] for m in b["data"]] == [m["offset"] for m in a["data"]]
    # A "dies"; B commits what it got: everything up to m2 is acknowledged, nothing passed over.
    status, _, body = commit("shared", b["data"][1]["offset"])
    assert status == 204, body
    nxt = poll("shared", limit=10, lease_duration_ms=0)
    assert [m["id"] for m in nxt["data"]] == sent[2:], nxt


def test_a_commit_repeated_or_overtaken_answers_204_and_changes_nothing(hookgate, tenant, svix):
    """Before, a second commit of the same offset answered 422 (the lease it named was gone)."""
    app, _, poll, commit = poller(hookgate, svix, tenant, "pollerv2-commit")
    sent = publish(svix, app.id, 3)
    page = eventually(lambda: (lambda p: p if len(p["data"]) == 3 else None)(
        poll("c1", limit=3, lease_duration_ms=60000)))
    offsets = [m["offset"] for m in page["data"]]
    assert commit("c1", offsets[1])[0] == 204
    status, _, body = commit("c1", offsets[1])
    assert status == 204, body
    status, _, body = commit("c1", offsets[0])
    assert status == 204, ("an offset before the committed one", body)
    # Nothing moved back: the next poll starts after the second message, during the rest of the lease.
    rest = poll("c1", limit=10, lease_duration_ms=0)
    assert [m["id"] for m in rest["data"]] == sent[2:], rest
    # An offset never handed out to this consumer is still refused, naming it.
    status, _, body = commit("c1", 123456789)
    assert status == 422 and "123456789" in str(body["detail"]), body
