"""Endpoint replays through the official Svix Python SDK: `replay-missing` and
`bulk-replay` run as background tasks (`background_task.get` / `list`), each message
going out with its original id and signed for the endpoint, as `standardwebhooks`
verifies; a task survives its process being killed mid-way."""
import json
import os
import signal
import time
from datetime import datetime, timedelta, timezone

import pytest
import standardwebhooks
from svix.api import (
    ApplicationIn,
    BackgroundTaskListOptions,
    BulkReplayIn,
    EndpointIn,
    EndpointPatch,
    MessageIn,
    RecoverIn,
    ReplayIn,
)
from svix.exceptions import HttpError, HTTPValidationError

from conftest import Hookgate, Sink, call, event_types, eventually, fresh_database, free_port


def finished(svix, task_id, timeout=30.0):
    """The task, once it is no longer running."""
    def done():
        t = svix.background_task.get(task_id)
        return t if t.status != "running" else None
    return eventually(done, timeout=timeout)


def ids_of(received):
    return [r["headers"]["webhook-id"] for r in received]


def verified(received, secret):
    """Every request verifies with the endpoint's secret over the body as sent."""
    wh = standardwebhooks.Webhook(secret)
    for r in received:
        wh.verify(r["body"], {k: r["headers"][k] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")})
    return True


def publish(svix, app_id, n, event_type, **extra):
    return [svix.message.create(app_id, MessageIn(event_type=event_type, payload={"n": i}, **extra)).id
            for i in range(n)]


def test_replay_missing_sends_a_later_endpoint_exactly_what_it_missed_once_with_the_original_ids(svix):
    first, later = Sink(), Sink()
    try:
        since = datetime.now(timezone.utc) - timedelta(minutes=1)
        app = svix.application.create(ApplicationIn(name="replay"))
        svix.endpoint.create(app.id, EndpointIn(url=first.url))
        created = publish(svix, app.id, 3, "order.created")
        paid = publish(svix, app.id, 3, "order.paid")
        first.wait_for(6)
        # Created after the messages, subscribed to one of the two types.
        event_types(svix, "order.paid")
        ep = svix.endpoint.create(app.id, EndpointIn(url=later.url, event_types=["order.paid"]))
        secret = svix.endpoint.get_secret(app.id, ep.id).key

        out = svix.endpoint.replay_missing(app.id, ep.id, ReplayIn(since=since))
        assert out.task == "endpoint.replay" and out.id.startswith("qtask_")
        task = finished(svix, out.id)
        assert task.status == "finished", task
        assert task.data["messagesSent"] == 3
        got = later.wait_for(3)
        assert sorted(ids_of(got)) == sorted(paid), "the later endpoint got what its filter takes, with the original ids"
        assert not set(ids_of(got)) & set(created)
        assert verified(got, secret)

        # Again: it has had them all now, so nothing is sent twice.
        again = finished(svix, svix.endpoint.replay_missing(app.id, ep.id, ReplayIn(since=since)).id)
        assert again.status == "finished" and again.data["messagesSent"] == 0
        # The first endpoint got everything when it was made: nothing is missing there either.
        first_ep = [e for e in svix.endpoint.list(app.id).data if e.id != ep.id][0]
        none = finished(svix, svix.endpoint.replay_missing(app.id, first_ep.id, ReplayIn(since=since)).id)
        assert none.data["messagesSent"] == 0
        time.sleep(1.0)
        assert len(later.received) == 3 and len(first.received) == 6

        listed = svix.background_task.list(BackgroundTaskListOptions(task="endpoint.replay", limit=10))
        assert {out.id, again.id, none.id} <= {t.id for t in listed.data}
        assert [t.id for t in listed.data] == sorted((t.id for t in listed.data), reverse=True), "newest first"
    finally:
        first.server.shutdown()
        later.server.shutdown()


def test_replay_missing_sends_what_a_disabled_endpoint_missed_and_only_in_the_window(svix):
    sink = Sink()
    try:
        app = svix.application.create(ApplicationIn(name="disabled"))
        ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
        before = publish(svix, app.id, 2, "a.b")
        sink.wait_for(2)
        svix.endpoint.patch(app.id, ep.id, EndpointPatch(disabled=True))
        # A disabled endpoint is refused: the replay would end its deliveries unsent.
        with pytest.raises(HttpError) as refused:
            svix.endpoint.replay_missing(app.id, ep.id, ReplayIn(since=datetime.now(timezone.utc) - timedelta(hours=1)))
        assert refused.value.status_code == 409
        start = datetime.now(timezone.utc)
        missed = publish(svix, app.id, 4, "a.b")
        time.sleep(0.05)
        end = datetime.now(timezone.utc)
        after = publish(svix, app.id, 1, "a.b")
        svix.endpoint.patch(app.id, ep.id, EndpointPatch(disabled=False))
        task = finished(svix, svix.endpoint.replay_missing(app.id, ep.id, ReplayIn(since=start, until=end)).id)
        assert task.status == "finished" and task.data["messagesSent"] == 4
        got = sink.wait_for(6)
        time.sleep(1.0)
        assert sorted(ids_of(sink.received)) == sorted(before + missed), "the window's missed messages, none after it"
        assert after[0] not in ids_of(sink.received)
    finally:
        sink.server.shutdown()


def test_bulk_replay_resends_what_its_filter_matches_and_nothing_else(svix):
    sink = Sink()
    try:
        since = datetime.now(timezone.utc) - timedelta(minutes=1)
        app = svix.application.create(ApplicationIn(name="bulk"))
        ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
        secret = svix.endpoint.get_secret(app.id, ep.id).key
        match = publish(svix, app.id, 3, "invoice.paid", channels=["eu"], tags=["vip"])
        other_type = publish(svix, app.id, 2, "invoice.void", channels=["eu"], tags=["vip"])
        other_channel = publish(svix, app.id, 2, "invoice.paid", channels=["us"], tags=["vip"])
        untagged = publish(svix, app.id, 2, "invoice.paid", channels=["eu"])
        total = len(match + other_type + other_channel + untagged)
        sink.wait_for(total)

        out = svix.endpoint.bulk_replay(app.id, ep.id, BulkReplayIn(
            since=since, event_types=["invoice.paid"], channel="eu", tag="vip", status=0, status_code_class=200))
        assert out.task == "endpoint.bulk-replay"
        task = finished(svix, out.id)
        assert task.status == "finished" and task.data["messagesSent"] == 3
        got = sink.wait_for(total + 3)
        time.sleep(1.0)
        again = sink.received[total:]
        assert sorted(ids_of(again)) == sorted(match), "only the filter's messages, with their original ids"
        assert verified(again, secret)
        assert sorted(json.loads(r["body"])["n"] for r in again) == [0, 1, 2], "delivery order is not promised"

        # A status the deliveries do not have matches nothing.
        none = finished(svix, svix.endpoint.bulk_replay(app.id, ep.id, BulkReplayIn(since=since, status=2)).id)
        assert none.data["messagesSent"] == 0
        # No filter: everything the endpoint was sent in the window, once more.
        everything = finished(svix, svix.endpoint.bulk_replay(app.id, ep.id, BulkReplayIn(since=since)).id)
        assert everything.data["messagesSent"] == total
        sink.wait_for(2 * total + 3)
    finally:
        sink.server.shutdown()


def test_replays_refuse_bad_input_by_name_and_tasks_are_the_tenants_own(hookgate, svix, tenant):
    sink = Sink()
    try:
        app = svix.application.create(ApplicationIn(name="edges"))
        ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
        base = f"/api/v1/app/{app.id}/endpoint/{ep.id}"
        key = tenant["apiKey"]
        since = (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat()
        for body, word in [
            ({"since": since, "eventType": ["x"]}, "eventType"),  # misspelt: refused, not ignored
            ({"since": since, "status": 7}, "status"),
            ({"since": since, "statusCodeClass": 250}, "statusCodeClass"),
            ({"since": since, "until": since}, "until"),
            ({}, "since"),
            ({"since": (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat()}, "future"),
        ]:
            status, _, res = call(hookgate, "POST", f"{base}/bulk-replay", key, body)
            assert status == 422 and word in json.dumps(res), (body, status, res)
        status, _, res = call(hookgate, "POST", f"{base}/replay-missing", key, {"since": "year zero"})
        assert status == 422, res

        out = svix.endpoint.replay_missing(app.id, ep.id, ReplayIn(since=datetime.now(timezone.utc) - timedelta(hours=1)))
        other = hookgate.admin("POST", "/admin/v1/tenant", {"name": "other"})
        status, _, _ = call(hookgate, "GET", f"/api/v1/background-task/{out.id}", other["apiKey"])
        assert status == 404, "another tenant's task is not found"
        status, _, listed = call(hookgate, "GET", "/api/v1/background-task", other["apiKey"])
        assert status == 200 and listed["data"] == []
        status, _, res = call(hookgate, "GET", "/api/v1/background-task?status=sleeping", key)
        assert status == 422 and "status" in json.dumps(res)
    finally:
        sink.server.shutdown()


@pytest.fixture
def stepping(hookgate):
    """A Hookgate of its own whose replays take one message a step, so a test can
    kill it mid-task; its database outlives it."""
    env = dict(hookgate.env)
    env.update({
        "DATABASE_URL": fresh_database(),
        "HOOKGATE_LISTEN": f"127.0.0.1:{free_port()}",
        "HOOKGATE_METRICS_LISTEN": f"127.0.0.1:{free_port()}",
        "HOOKGATE_REPLAY_BATCH": "1",
        "HOOKGATE_REDIS_PREFIX": "py-steps-" + str(os.getpid()) + ":",
    })
    procs = [Hookgate(env)]
    yield procs
    for p in procs:
        if p.proc.poll() is None:
            p.stop()


def test_replays_survive_their_process_killed_mid_task(stepping):
    from svix.api import Svix, SvixOptions

    hg = stepping[0]
    tenant = hg.admin("POST", "/admin/v1/tenant", {"name": "restart"})
    svix = Svix(tenant["apiKey"], SvixOptions(server_url=hg.url, retry_schedule=[]))
    first, later = Sink(), Sink()
    try:
        since = datetime.now(timezone.utc) - timedelta(minutes=1)
        app = svix.application.create(ApplicationIn(name="restart"))
        a = svix.endpoint.create(app.id, EndpointIn(url=first.url))
        n = 300
        sent = publish(svix, app.id, n, "big.batch")
        first.wait_for(n, timeout=60)
        b = svix.endpoint.create(app.id, EndpointIn(url=later.url))
        missing = svix.endpoint.replay_missing(app.id, b.id, ReplayIn(since=since))
        bulk = svix.endpoint.bulk_replay(app.id, a.id, BulkReplayIn(since=since))

        # Killed once both tasks are under way and neither has ended.
        def midway():
            ts = [svix.background_task.get(t.id) for t in (missing, bulk)]
            return all(t.status == "running" and 0 < t.data["messagesSent"] < n for t in ts)
        eventually(midway, timeout=30)
        hg.proc.send_signal(signal.SIGKILL)
        hg.proc.wait(timeout=10)
        stepping.append(Hookgate(hg.env))

        for t in (missing, bulk):
            done = finished(svix, t.id, timeout=90)
            assert done.status == "finished", done
            assert done.data["messagesSent"] == n, "each message made due once, none lost and none twice"
        got_b = later.wait_for(n, timeout=60)
        got_a = first.wait_for(2 * n, timeout=60)
        time.sleep(1.0)
        assert set(ids_of(later.received)) == set(sent)
        assert set(ids_of(first.received[n:])) == set(sent)
        # A request in flight when the process died may go again (at least once);
        # nothing else does.
        assert len(later.received) - n <= 64 and len(first.received) - 2 * n <= 64
    finally:
        first.server.shutdown()
        later.server.shutdown()


def test_recover_is_a_background_task_that_resends_only_the_failed(svix):
    sink = Sink()
    try:
        since = datetime.now(timezone.utc) - timedelta(minutes=1)
        app = svix.application.create(ApplicationIn(name="recover"))
        ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
        ok = publish(svix, app.id, 2, "a.ok")
        sink.wait_for(2)
        sink.status = 500
        failing = publish(svix, app.id, 3, "a.failing")
        # The test server's schedule is two retries a second apart: three tries each.
        eventually(lambda: svix.endpoint.get_stats(app.id, ep.id).fail == 3, timeout=30)
        sink.status = 200
        before = len(sink.received)
        out = svix.endpoint.recover(app.id, ep.id, RecoverIn(since=since))
        task = finished(svix, out.id)
        assert task.task == "endpoint.recover" and task.status == "finished"
        assert task.data["messagesSent"] == 3
        got = sink.wait_for(before + 3)
        time.sleep(1.0)
        assert sorted(ids_of(sink.received[before:])) == sorted(failing), "the failed ones, not the delivered"
        assert not set(ids_of(sink.received[before:])) & set(ok)
    finally:
        sink.server.shutdown()
