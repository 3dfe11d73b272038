"""FIFO and polling endpoints through the official Svix Python SDK: a `fifoEndpoint` gets
its messages in strict order, in signed batches of at most `batchSize`, the next batch only
after the one before succeeded (its receiver failing at first); a `pollingEndpoint` is read
page by page without gaps, by named consumers that keep their own positions and can seek back."""
import json
import time
import uuid
from datetime import datetime, timedelta, timezone

import pytest
import standardwebhooks
from svix.api import (
    ApplicationIn,
    DestinationIn,
    EndpointSecretRotateIn,
    MessageIn,
    MessagePollerConsumerPollOptions,
    MessagePollerPollOptions,
    PollingEndpointConsumerSeekIn,
)
from svix.exceptions import HttpError

from conftest import Sink, call, eventually


def publish(svix, app_id, n, event_type="order.paid", **extra):
    return [svix.message.create(app_id, MessageIn(event_type=event_type, payload={"n": i}, **extra)).id
            for i in range(n)]


def test_a_fifo_endpoint_gets_signed_batches_in_strict_order_each_only_after_the_last_succeeded(
        hookgate, tenant, svix):
    sink = Sink()
    sink.fail_first = 2  # every batch fails twice, then succeeds (the schedule allows three tries)
    try:
        app = svix.application.create(ApplicationIn(name="fifo"))
        dest = svix.destination.create(app.id, DestinationIn(
            type="fifoEndpoint", config={"url": sink.url, "headers": {"X-Team": "ops"}},
            batch_size=3, max_wait_secs=1))
        assert dest.type == "fifoEndpoint" and dest.batch_size == 3
        secret = svix.destination.rotate_secret(app.id, dest.id, EndpointSecretRotateIn()).key
        sent = publish(svix, app.id, 10)

        def all_delivered():
            """Every message in a batch that got its third (successful) try."""
            with sink._lock:
                done = [r for r in sink.received if sink._tries[r["headers"]["webhook-id"]] >= 3]
                ids = {m["id"] for r in done for m in json.loads(r["body"])["data"]}
                return list(sink.received) if ids == set(sent) else None
        received = eventually(all_delivered, timeout=60)
        # Requests grouped by batch, in the order they came: one batch's tries all come
        # before the next batch's first (it waits until the one before succeeded).
        order = []
        for r in received:
            wid = r["headers"]["webhook-id"]
            if not order or order[-1] != wid:
                assert wid not in order, f"batch {wid} came back after the next one began"
                order.append(wid)
        batches = []
        for wid in order:
            tries = [r for r in received if r["headers"]["webhook-id"] == wid]
            assert len(tries) == 3, "two failures, then the success"
            bodies = {r["body"] for r in tries}
            assert len(bodies) == 1, "a retry sends the same batch"
            data = json.loads(tries[0]["body"])["data"]
            assert 1 <= len(data) <= 3 and tries[0]["headers"]["webhook-batch-size"] == str(len(data))
            assert wid == data[0]["id"]
            for t in tries:
                standardwebhooks.Webhook(secret).verify(t["body"], {k: t["headers"][k] for k in (
                    "webhook-id", "webhook-timestamp", "webhook-signature")})
            assert tries[0]["headers"]["x-team"] == "ops"
            batches.append(data)
        ids = [m["id"] for b in batches for m in b]
        assert ids == sent, "every message once, in the order it was created"
        assert [m["payload"]["n"] for b in batches for m in b] == list(range(10))
        # Attempts are recorded per message, with the receiver's answer.
        attempts = svix.message_attempt.list_by_endpoint(app.id, dest.id).data
        assert len(attempts) >= 10 and {a.msg_id for a in attempts} <= set(sent)
        with pytest.raises(HttpError) as e:
            svix.message_attempt.resend(app.id, sent[0], dest.id)
        assert e.value.status_code == 409
        # Counted in the tenant's usage as any attempt is: per message, the bytes once a request.
        def usage():
            days = call(hookgate, "GET", "/api/v1/usage", tenant["apiKey"])[2]["data"]
            day = days[-1] if days else {}
            return day if day.get("attemptsSucceeded") == 10 and day.get("attemptsFailed") == 20 else None
        day = eventually(usage, timeout=15)
        assert day["bytesOut"] >= sum(len(r["body"]) for r in received), day
        # Its stats count messages by their attempts (it makes no deliveries): all 10 delivered.
        stats = svix.endpoint.get_stats(app.id, dest.id)
        assert (stats.success, stats.fail) == (10, 0), stats
    finally:
        sink.server.shutdown()


def test_a_fifo_batch_is_retried_whole_under_its_id_when_batch_size_is_lowered_meanwhile(hookgate, tenant, svix):
    from svix.api import DestinationPatch

    sink = Sink()
    sink.status = 500  # refuses until told otherwise
    try:
        app = svix.application.create(ApplicationIn(name="fifo-shrink"))
        dest = svix.destination.create(app.id, DestinationIn(
            type="fifoEndpoint", config={"url": sink.url}, batch_size=3, max_wait_secs=2))
        sent = publish(svix, app.id, 3)
        first = eventually(lambda: [r for r in sink.wait_for(1) if len(json.loads(r["body"])["data"]) == 3], timeout=30)[0]
        wid = first["headers"]["webhook-id"]
        svix.destination.patch(app.id, dest.id, DestinationPatch(type="fifoEndpoint", config={"url": sink.url}, batch_size=1))
        sink.status = 200
        def retried():
            with sink._lock:
                ok = [r for r in sink.received[1:] if r["headers"]["webhook-id"] == wid]
            return ok[-1] if ok else None
        again = eventually(retried, timeout=30)
        assert [m["id"] for m in json.loads(again["body"])["data"]] == sent, "the same three, under the same id"
        assert again["headers"]["webhook-batch-size"] == "3"
    finally:
        sink.server.shutdown()


def test_a_polling_endpoint_is_read_without_gaps_and_consumers_keep_their_own_positions(hookgate, tenant, svix):
    app = svix.application.create(ApplicationIn(name="poll"))
    sink = svix.destination.create(app.id, DestinationIn(type="pollingEndpoint", config={}))
    assert sink.type == "pollingEndpoint"
    paid = publish(svix, app.id, 13, "order.paid")
    made = publish(svix, app.id, 4, "order.made", channels=["eu"])
    everything = paid + made

    # Page by page, following the iterator: every message once, in order.
    got, it = [], None
    for _ in range(10):
        page = svix.message.poller.poll(app.id, sink.id, MessagePollerPollOptions(limit=5, iterator=it))
        got += [m.id for m in page.data]
        it = page.iterator
        if page.done:
            break
    assert got == everything
    assert svix.message.poller.poll(app.id, sink.id, MessagePollerPollOptions(iterator=it)).data == []
    late = publish(svix, app.id, 2, "order.paid")
    assert [m.id for m in svix.message.poller.poll(
        app.id, sink.id, MessagePollerPollOptions(iterator=it)).data] == late, "what came after the last read"
    page = svix.message.poller.poll(app.id, sink.id, MessagePollerPollOptions(event_type="order.made"))
    assert [m.id for m in page.data] == made and page.data[0].payload == {"n": 0}
    assert [m.id for m in svix.message.poller.poll(
        app.id, sink.id, MessagePollerPollOptions(channel="eu")).data] == made

    # Two named consumers, each with its own position kept by the server.
    def read(consumer, n):
        return [m.id for m in svix.message.poller.consumer_poll(
            app.id, sink.id, consumer, MessagePollerConsumerPollOptions(limit=n)).data]
    assert read("billing", 10) == everything[:10]
    assert read("audit", 4) == everything[:4]
    assert read("billing", 10) == (everything + late)[10:20]
    assert read("audit", 4) == everything[4:8]
    # Seek: back to just after the third message.
    third = svix.message.poller.poll(app.id, sink.id, MessagePollerPollOptions(limit=3)).data[-1]
    out = svix.message.poller.consumer_seek(app.id, sink.id, "billing",
                                            PollingEndpointConsumerSeekIn(after=third.timestamp))
    assert out.iterator
    assert read("billing", 2) == everything[3:5]

    # No deliveries: nothing is pushed; bad input is refused, another kind is not a poller.
    assert svix.message_attempt.list_by_endpoint(app.id, sink.id).data == []
    key = tenant["apiKey"]
    status, _, body = call(hookgate, "GET", f"/api/v1/app/{app.id}/poller/{sink.id}?iterator=nope", key)
    assert status == 422 and "iterator" in json.dumps(body)
    status, _, _ = call(hookgate, "GET", f"/api/v1/app/{app.id}/poller/{sink.id}?limit=0", key)
    assert status == 422
    http = call(hookgate, "POST", f"/api/v1/app/{app.id}/endpoint", key, {"url": "http://127.0.0.1:9/x"})[2]
    status, _, _ = call(hookgate, "GET", f"/api/v1/app/{app.id}/poller/{http['id']}", key)
    assert status == 404


def test_a_keyed_fifo_endpoint_keeps_order_per_key_while_keys_proceed_side_by_side(hookgate, svix):
    sink = Sink()
    sink.fail_first = 2  # every batch fails twice, then succeeds
    try:
        app = svix.application.create(ApplicationIn(name="fifo-keyed"))
        dest = svix.destination.create(app.id, DestinationIn(
            type="fifoEndpoint", config={"url": sink.url, "key": "customer.id"}, batch_size=1, max_wait_secs=0))
        assert dest.config.url == sink.url
        sent = {"a": [], "b": []}
        for i in range(3):
            for c in ("a", "b"):
                sent[c].append(svix.message.create(app.id, MessageIn(
                    event_type="order.paid", payload={"customer": {"id": c}, "n": i})).id)

        def done():
            with sink._lock:
                ok = {json.loads(r["body"])["data"][0]["id"] for r in sink.received
                      if sink._tries[r["headers"]["webhook-id"]] >= 3}
                return list(sink.received) if ok == set(sent["a"] + sent["b"]) else None
        received = eventually(done, timeout=60)
        for c in ("a", "b"):
            mine = [r for r in received if r["headers"]["webhook-order-key"] == c]
            assert all(json.loads(r["body"])["data"][0]["payload"]["customer"]["id"] == c for r in mine)
            # Per key: each message's three tries before the next message's first.
            firsts = []
            for r in mine:
                mid = r["headers"]["webhook-id"]
                if mid not in firsts:
                    assert not firsts or sink._tries[firsts[-1]] >= 3
                    firsts.append(mid)
            assert firsts == sent[c], f"key {c} in order"
        # Side by side: b's first message went while a's first was still being retried.
        a_first = [i for i, r in enumerate(received) if r["headers"]["webhook-id"] == sent["a"][0]]
        b_first = [i for i, r in enumerate(received) if r["headers"]["webhook-id"] == sent["b"][0]]
        assert b_first[0] < a_first[-1], "key b did not wait for key a"
    finally:
        sink.server.shutdown()


def delivered_ids(sink):
    """The message ids a FIFO sink received, batch by batch, in order."""
    with sink._lock:
        return [m["id"] for r in sink.received for m in json.loads(r["body"])["data"]]


def test_messages_sent_while_a_fifo_or_polling_endpoint_is_disabled_arrive_once_it_is_enabled_again(hookgate, svix):
    """Svix's DestinationIn: a disabled destination gets nothing "until it is reenabled"; it then
    catches up. Before, the fan-out left disabled sinks out of the log, so what was sent meanwhile
    was lost (and replay-missing answers 409 for these types)."""
    from svix.api import DestinationPatch

    sink = Sink()
    try:
        app = svix.application.create(ApplicationIn(name="paused"))
        fifo = svix.destination.create(app.id, DestinationIn(
            type="fifoEndpoint", config={"url": sink.url}, batch_size=10))
        poller = svix.destination.create(app.id, DestinationIn(type="pollingEndpoint", config={}))

        def consumer():
            return [m.id for m in svix.message.poller.consumer_poll(
                app.id, poller.id, "c", MessagePollerConsumerPollOptions(limit=50)).data]
        before = publish(svix, app.id, 2)
        eventually(lambda: delivered_ids(sink) == before)
        assert consumer() == before

        def status(s):
            for d, config in ((fifo, {"url": sink.url}), (poller, {})):
                out = svix.destination.patch(app.id, d.id, DestinationPatch(type=d.type, config=config, status=s))
                assert out.status == s
        status("disabled")
        during = publish(svix, app.id, 3)
        time.sleep(2)
        assert delivered_ids(sink) == before, "a disabled FIFO endpoint is sent nothing"
        assert consumer() == [], "a disabled polling endpoint reads nothing"
        assert svix.message.poller.poll(app.id, poller.id).data == []

        status("enabled")
        assert eventually(lambda: delivered_ids(sink) == before + during, timeout=20)
        assert consumer() == during, "the consumer reads on from where it was, what came meanwhile included"
    finally:
        sink.server.shutdown()


def test_a_polled_payload_that_is_not_a_json_object_reads_as_an_object_and_no_consumer_loses_a_page(
        hookgate, tenant, svix):
    """A form or array body a provider sent through ingress is polled as {"rawPayload": its text}, its
    content type in `headers`: the SDK's PollingEndpointMessageOut.payload is an object. Before, it was
    answered as a string or a list, poll and consumer_poll raised in the SDK, and consumer_poll had
    already kept the new position: the consumer skipped that page without knowing."""
    from slack_sdk.signature import SignatureVerifier

    app = svix.application.create(ApplicationIn(name="raw"))
    poller = svix.destination.create(app.id, DestinationIn(type="pollingEndpoint", config={}))
    secret = "8f742231b10e8888abcd99yyyzzz85a5"
    status, _, src = call(hookgate, "POST", "/api/v1/source", tenant["apiKey"], {
        "name": "slack", "provider": "slack", "appId": app.id, "secret": secret, "idempotency": {"body": True}})
    assert status == 201, src
    form = "token=x&command=%2Fdeploy&text=now&trigger_id=1.2.3"
    array = '[{"id": 1}, {"id": 2}]'
    for body, kind in ((form, "application/x-www-form-urlencoded"), (array, "application/json")):
        ts = str(int(time.time()))
        headers = {"X-Slack-Request-Timestamp": ts, "Content-Type": kind,
                   "X-Slack-Signature": SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)}
        status, _, res = call(hookgate, "POST", f"/in/{src['id']}", raw=body.encode(), headers=headers)
        assert (status, res["status"]) == (200, "accepted"), res
    page = eventually(lambda: (p := svix.message.poller.poll(app.id, poller.id)) and len(p.data) == 2 and p)
    assert [m.payload for m in page.data] == [{"rawPayload": form}, {"rawPayload": array}]
    assert [m.headers for m in page.data] == [{"content-type": "application/x-www-form-urlencoded"},
                                              {"content-type": "application/json"}]
    read = svix.message.poller.consumer_poll(app.id, poller.id, "c")
    assert [m.id for m in read.data] == [m.id for m in page.data], "the consumer reads the page it is given"
    assert svix.message.poller.consumer_poll(app.id, poller.id, "c").data == []


def test_empty_event_type_and_channel_lists_on_a_destination_filter_nothing(hookgate, svix):
    """DestinationIn: "An empty list (or null) will not filter out any events." Before, `[]` answered 422."""
    from svix.api import DestinationPatch

    app = svix.application.create(ApplicationIn(name="unfiltered"))
    poller = svix.destination.create(app.id, DestinationIn(
        type="pollingEndpoint", config={}, event_types=[], channels=[]))
    assert (poller.event_types, poller.channels) == (None, None)
    patched = svix.destination.patch(app.id, poller.id, DestinationPatch(
        type="pollingEndpoint", config={}, event_types=[], channels=[]))
    assert (patched.event_types, patched.channels) == (None, None)
    sent = publish(svix, app.id, 1, "a.b") + publish(svix, app.id, 1, "c.d", channels=["eu"])
    assert [m.id for m in svix.message.poller.poll(app.id, poller.id).data] == sent
