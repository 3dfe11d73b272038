"""A destination's operations as the review of Svix's remaining operations found them wanting:
header values hidden from portal links wherever the destination is read, a skip refusing a
position that is not in the endpoint's log, and force-retry shown to bring a retry forward."""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from svix.api import AppPortalAccessIn, ApplicationIn, DestinationIn, MessageIn

from conftest import Sink, call, eventually


def fifo(svix, app_id, url, **config):
    return svix.destination.create(app_id, DestinationIn(
        type="fifoEndpoint", config={"url": url, **config}, batch_size=1, max_wait_secs=0))


def test_a_portal_link_sees_a_destinations_header_names_only_on_get_list_and_headers(hookgate, tenant, svix):
    """Before, GET destination and the list showed every header value but the four
    credential-like ones (here `X-Team: ops`) to any portal link, while `…/headers` hid them."""
    key = tenant["apiKey"]
    sink = Sink()
    try:
        app = svix.application.create(ApplicationIn(name="portal-headers"))
        dest = fifo(svix, app.id, sink.url, headers={"X-Team": "ops", "Authorization": "Bearer s3cret"})
        base = f"/api/v1/app/{app.id}/destination"
        # The tenant's own key sees the value that is no credential.
        status, _, own = call(hookgate, "GET", f"{base}/{dest.id}", key)
        assert status == 200 and own["config"]["headers"]["headers"] == {"X-Team": "ops"}, own
        read_only = svix.authentication.app_portal_access(app.id, AppPortalAccessIn(read_only=True)).token
        names_only = {"headers": {}, "sensitive": ["Authorization", "X-Team"]}
        status, _, one = call(hookgate, "GET", f"{base}/{dest.id}", read_only)
        assert status == 200, one
        got = one["config"]["headers"]
        assert got["headers"] == {} and sorted(got["sensitive"]) == names_only["sensitive"], one
        status, _, page = call(hookgate, "GET", base, read_only)
        assert status == 200 and [d["id"] for d in page["data"]] == [dest.id], page
        got = page["data"][0]["config"]["headers"]
        assert got["headers"] == {} and sorted(got["sensitive"]) == names_only["sensitive"], page
        status, _, hdrs = call(hookgate, "GET", f"{base}/{dest.id}/headers", read_only)
        assert status == 200 and hdrs["headers"] == {} and sorted(hdrs["sensitive"]) == names_only["sensitive"]
        assert "ops" not in json.dumps([one, page, hdrs]) and "s3cret" not in json.dumps([one, page, hdrs])
    finally:
        sink.server.shutdown()


def test_skip_refuses_a_position_not_in_the_endpoints_log_and_the_endpoint_goes_on(hookgate, tenant, svix):
    """Before, any `{xid}.{seq}` was taken: `18446744073709551615.0` moved the position past
    every transaction id, and every later message was passed over, never sent."""
    key = tenant["apiKey"]
    sink = Sink()
    sink.status = 500
    try:
        app = svix.application.create(ApplicationIn(name="skip-bogus"))
        dest = fifo(svix, app.id, sink.url)
        base = f"/api/v1/app/{app.id}/destination/{dest.id}"
        svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"n": 0}))
        sink.wait_for(1)
        for bogus in ("18446744073709551615.0", "1.1", "0.0"):
            def refused():
                status, _, body = call(hookgate, "POST", f"{base}/skip", key, {"iterator": bogus})
                assert status != 409, body  # a batch in flight: asked again
                return status, body
            status, body = eventually(refused)
            assert status == 422 and bogus in str(body["detail"]) and "position" in str(body["detail"]), body
        # Nothing moved: the first message still waits, and the endpoint goes on once it answers.
        status, _, nxt = call(hookgate, "GET", f"{base}/next-event", key)
        assert status == 200 and json.loads(nxt["payload"]) == {"n": 0}, nxt
        sink.status = 200
        later = svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"n": 1})).id

        def delivered():
            with sink._lock:
                return any(json.loads(r["body"])["data"][0]["id"] == later for r in sink.received)
        eventually(delivered, timeout=30)
    finally:
        sink.server.shutdown()


class SlowRetrySink:
    """Answers the first request 503 with `Retry-After: 600` (a retry ten minutes out), then 200."""

    def __init__(self):
        self.received = []
        self._lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with sink._lock:
                    sink.received.append(body)
                    first = len(sink.received) == 1
                self.send_response(503 if first else 200)
                if first:
                    self.send_header("retry-after", "600")
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"no" if first else b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self):
        with self._lock:
            return len(self.received)


def test_force_retry_sends_at_once_what_waited_ten_minutes_for_its_retry(hookgate, tenant, svix):
    """Before, the test called force-retry with nothing waiting for a retry, so it showed nothing:
    here the retry is 600 s out (the receiver's Retry-After), and only force-retry brings it now."""
    key = tenant["apiKey"]
    sink = SlowRetrySink()
    try:
        app = svix.application.create(ApplicationIn(name="force-retry"))
        dest = fifo(svix, app.id, sink.url)
        base = f"/api/v1/app/{app.id}/destination/{dest.id}"
        msg = svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"n": 0})).id
        eventually(lambda: sink.count() >= 1)
        eventually(lambda: call(hookgate, "GET", f"{base}/attempt?status=2", key)[2]["data"])
        time.sleep(2)
        assert sink.count() == 1, "the retry waits ten minutes, not the schedule's second"

        def retried():
            status, _, body = call(hookgate, "POST", f"{base}/force-retry", key)
            assert status == 204, body
            return sink.count() >= 2
        eventually(retried, timeout=10)
        assert json.loads(sink.received[1])["data"][0]["id"] == msg

        def acked():
            status, _, last = call(hookgate, "GET", f"{base}/last-acked-event", key)
            return status == 200 and json.loads(last["payload"]) == {"n": 0}
        eventually(acked)
    finally:
        sink.server.shutdown()
