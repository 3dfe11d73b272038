"""Every response the Python suite receives from Hookgate is checked against the OpenAPI
document the binary serves (`/openapi.json`): its status must be documented for the
operation (every operation lists `4XX` and `5XX` with the `Failure` body), its content
type listed, and a JSON body must match the schema strictly (no undocumented fields).
Both ways a test talks to Hookgate are watched: `urllib.request.urlopen` (`raw_call`,
and the tests' own requests) and httpx's `Client` (the official Svix SDK); a client in
another process (the JavaScript SDK) talks through a `CheckingProxy`.

A mismatch raises in the test that received it, and is also recorded: a test that
catches assertion errors and retries (`eventually`) cannot swallow it, as the autouse
fixture in conftest.py fails the test at its end. Responses to paths the document does
not describe (the fallback 404) are checked as errors; the page's own files (Swagger
UI under `/docs/`) are not operations."""
import copy
import io
import json
import re
import threading
import urllib.error
import urllib.parse
import urllib.request

import httpx

from jsonschema import Draft202012Validator

_lock = threading.Lock()
# Every mismatch seen, in order: conftest's autouse fixture fails the test that saw one.
MISMATCHES = []
# Which of them a test has reported (the rest, seen outside any test, fail the session).
REPORTED = set()
# The running instances' base URLs: only their answers are checked (not the sinks').
BASES = set()
_doc = None
_routes = None
_validators = {}
# The unwatched urlopen: fetching the document itself is not checked against it.
_urlopen = urllib.request.urlopen
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def document(base_url):
    """The served document, fetched once (every instance runs the same binary)."""
    global _doc, _routes
    with _lock:
        if _doc is None:
            with _urlopen(base_url + "/openapi.json", timeout=10) as res:
                _doc = json.loads(res.read())
            _routes = []
            for template in _doc["paths"]:
                # Matched as written, a trailing slash included (the page is `/docs/`).
                parts = template.split("/")
                pattern = "^" + "/".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts) + "$"
                literal = sum(1 for p in parts if p and not p.startswith("{"))
                _routes.append((re.compile(pattern), literal, template))
            # The most literal template wins (`/msg/precheck` before `/msg/{msg_id}`).
            _routes.sort(key=lambda r: -r[1])
        return _doc


def template_of(doc, path, method):
    """The documented template `path` falls under for `method`, or None."""
    # As the server reads it (crates/gateway/src/paths.rs): slashes made one and a
    # trailing one dropped, but under the page's directory.
    # An encoded slash stays inside its segment, as actix reads it.
    path = re.sub(r"/+", "/", urllib.parse.unquote(re.sub("%2[fF]", "%252F", path.split("?", 1)[0])))
    if len(path) > 1 and not path.startswith("/docs/"):
        path = path.rstrip("/")
    for pattern, _, template in _routes:
        if pattern.match(path) and method in doc["paths"][template]:
            return template
    return None


def resolve(doc, node):
    """`node` with every local `$ref` replaced by what it points at."""
    if isinstance(node, dict):
        if "$ref" in node:
            target = doc
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            return resolve(doc, target)
        return {k: resolve(doc, v) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve(doc, v) for v in node]
    return node


def strict(schema):
    """A copy of `schema` in which an object with `properties` and no
    `additionalProperties` allows nothing else."""
    schema = copy.deepcopy(schema)

    def walk(s):
        if isinstance(s, list):
            return [walk(x) for x in s]
        if not isinstance(s, dict):
            return s
        s = {k: walk(v) for k, v in s.items()}
        parts = s.get("allOf")
        if parts and all(isinstance(p, dict) and ("properties" in p or p.get("type") == "object") for p in parts):
            # `#[serde(flatten)]`: one object of every part's properties.
            merged = {"type": "object", "properties": {}, "required": []}
            for part in parts:
                merged["properties"].update(part.get("properties", {}))
                merged["required"] += [r for r in part.get("required", []) if r not in merged["required"]]
            merged["properties"].update(s.get("properties", {}))
            merged["required"] += [r for r in s.get("required", []) if r not in merged["required"]]
            s = {**{k: v for k, v in s.items() if k != "allOf"}, **merged}
        if "properties" in s and "additionalProperties" not in s and "allOf" not in s:
            s["additionalProperties"] = False
        return s

    return walk(schema)


def _response(doc, op, status):
    responses = op["responses"]
    for key in (str(status), f"{str(status)[0]}XX", "default"):
        if key in responses:
            return resolve(doc, responses[key])
    return None


def check(base_url, method, path, status, headers, raw):
    """Raises AssertionError if the response is not one the document describes; else
    says whether a JSON body was held to its schema (not a page's file, a HEAD, an
    answer of another content type)."""
    method = method.lower()
    if path.startswith("/docs/") and path.split("?", 1)[0] != "/docs/":
        return False  # the page's own files (Swagger UI), not operations
    doc = document(base_url)
    template = template_of(doc, path, method)
    where = f"{method.upper()} {path.split('?', 1)[0]}"
    if template is None:
        # Not a documented route: only the fallback's error may come back.
        if status < 400:
            _fail(f"{where} answered {status} but no documented route matches it")
        template, res = "(fallback)", {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Failure"}}}}
    else:
        where += f" ({template})"
        op = doc["paths"][template][method]
        res = _response(doc, op, status)
        if res is None:
            _fail(f"{where} answered {status}, which is not documented: {raw[:300]!r}")
    for name, described in res.get("headers", {}).items():
        described = resolve(doc, described)
        value = headers.get(name.lower())
        if value is None:
            # Only a header marked required is sent with every such answer (a replay
            # marker comes on replays only, Hookgate-Duplicate on admissions only).
            if described.get("required"):
                _fail(f"{where} {status}: the document says the header {name} is always sent, and it was not")
            continue
        schema = described.get("schema", {})
        kind = schema.get("type")
        if (kind == "integer" and not (re.fullmatch(r"-?[0-9]+", value) and int(value) >= schema.get("minimum", int(value)))) or (
                kind == "boolean" and value not in ("true", "false")):
            _fail(f"{where} {status}: the header {name} is documented as {schema} and was sent as {value!r}")
    if method == "head":
        return False  # no body comes with it
    content = res.get("content")
    if not content:
        if raw not in (b"", None):
            _fail(f"{where} {status} documents no body but sent {raw[:200]!r}")
        return False
    ctype = (headers.get("content-type") or "").split(";")[0].strip()
    media = next((m for t, m in content.items() if t in (ctype, "*/*")), None)
    if media is None:
        _fail(f"{where} {status}: content type {ctype!r} is not one of {list(content)}")
    if ctype != "application/json" or "schema" not in media:
        return False
    try:
        body = json.loads(raw)
    except ValueError:
        _fail(f"{where} {status} says JSON but sent {raw[:200]!r}")
    key = (template, method, status, ctype)
    with _lock:
        validator = _validators.get(key)
        if validator is None:
            validator = Draft202012Validator(strict(resolve(doc, media["schema"])),
                                             format_checker=Draft202012Validator.FORMAT_CHECKER)
            _validators[key] = validator
    errors = [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in validator.iter_errors(body)]
    if errors:
        _fail(f"{where} {status} does not match its documented schema:\n" + "\n".join(errors[:10])
              + f"\nbody: {json.dumps(body)[:800]}")
    return True


def record(message):
    """Records a mismatch (conftest fails the test that saw it) and returns it."""
    with _lock:
        MISMATCHES.append(message)
    return message


def _fail(message):
    raise AssertionError(record(message))


def check_kept(base_url, method, path, status, headers, raw):
    """`check`, for a caller that hands the answer on whatever it finds (a proxy, a
    browser's route): (whether a body was held to a schema, why the answer did not
    match or None). Every failure is recorded, a check that broke included."""
    try:
        return check(base_url, method, path, status, headers, raw), None
    except AssertionError as mismatch:
        return False, str(mismatch)
    except Exception as e:
        return False, record(f"{method} {path}: the check failed: {e!r}")


def _checked_send(send):
    def checked(self, request, *args, **kwargs):
        response = send(self, request, *args, **kwargs)
        base = f"{request.url.scheme}://{request.url.host}:{request.url.port}"
        if base in BASES:
            response.read()
            headers = {k.lower(): v for k, v in response.headers.items()}
            check(base, request.method, request.url.raw_path.decode(), response.status_code, headers, response.content)
        return response

    return checked


class _Answer(io.BytesIO):
    """A response already read (to be checked), read again by its caller."""

    def __init__(self, res, body):
        super().__init__(body)
        self.status, self.code, self.reason, self.headers, self.url = (
            res.status, res.status, res.reason, res.headers, res.url)

    def getcode(self):
        return self.status

    def getheader(self, name, default=None):
        return self.headers.get(name, default)

    def getheaders(self):
        return list(self.headers.items())


def final_path(url, asked, path):
    """The path an answer came from: after a followed redirect, the last address's."""
    final = urllib.parse.urlsplit(url or "")
    if final.path and final.path != asked.path:
        return final.path + (f"?{final.query}" if final.query else "")
    return path


def _checked_urlopen(urlopen):
    def checked(url, *args, **kwargs):
        full = url.full_url if isinstance(url, urllib.request.Request) else url
        method = url.get_method() if isinstance(url, urllib.request.Request) else (
            "POST" if (args and args[0] is not None) or kwargs.get("data") is not None else "GET")
        parts = urllib.parse.urlsplit(full)
        base = f"{parts.scheme}://{parts.netloc}"
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        try:
            res = urlopen(url, *args, **kwargs)
        except urllib.error.HTTPError as e:
            if base not in BASES:
                raise
            body = e.read()
            headers = {k.lower(): v for k, v in e.headers.items()}
            check(base, method, final_path(e.url, parts, path), e.code, headers, body)
            raise urllib.error.HTTPError(e.url, e.code, e.msg, e.headers, io.BytesIO(body)) from None
        if base not in BASES:
            return res
        path = final_path(res.url, parts, path)
        with res:
            body = res.read()
            answer = _Answer(res, body)
        check(base, method, path, answer.status, {k.lower(): v for k, v in res.headers.items()}, body)
        return answer

    return checked


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a 3xx comes back as it is (an HTTPError), for the client to follow


class CheckingProxy:
    """A loopback proxy in front of an instance, for clients this process cannot watch
    (the JavaScript SDK, run by node): each answer is checked like any other and given
    back as it came (a redirect too, for the client to follow). An answer that does
    not match, or a request the proxy could not pass on, is recorded (the test fails
    at its end) and given back as 502 naming why."""

    # Hop-by-hop headers, compression (the check reads the body as sent), and the
    # headers the proxy's own server writes.
    SKIP = {"host", "connection", "content-length", "transfer-encoding", "accept-encoding", "keep-alive",
            "date", "server"}

    def __init__(self, target):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        assert target in BASES, f"{target} is not a running instance: nothing would be checked"
        proxy = self
        self.forwarded = 0
        opener = urllib.request.build_opener(_NoRedirect)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def request_body(self):
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    body = b""
                    while (size := int(self.rfile.readline().split(b";")[0], 16)) > 0:
                        body += self.rfile.read(size)
                        self.rfile.readline()
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return body
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else None

            def forward(self):
                with _lock:
                    proxy.forwarded += 1
                req = urllib.request.Request(target + self.path, data=self.request_body(), method=self.command)
                for k, v in self.headers.items():
                    if k.lower() not in proxy.SKIP:
                        req.add_header(k, v)
                try:
                    try:
                        with opener.open(req, timeout=30) as res:
                            status, headers, raw = res.status, list(res.headers.items()), res.read()
                    except urllib.error.HTTPError as e:
                        status, headers, raw = e.code, list(e.headers.items()), e.read()
                except Exception as e:  # the proxy failed, not the answer: still the test's failure
                    why = record(f"{self.command} {self.path} through the checking proxy: {e!r}")
                else:
                    _, why = check_kept(target, self.command, self.path, status,
                                        {k.lower(): v for k, v in headers}, raw)
                if why:
                    status, headers, raw = 502, [("Content-Type", "text/plain")], why.encode()
                self.send_response(status)
                for k, v in headers:
                    if k.lower() not in proxy.SKIP:
                        self.send_header(k, v)
                if status not in (204, 304) and not 100 <= status < 200:
                    self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                if self.command != "HEAD" and raw:
                    self.wfile.write(raw)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = forward

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# The official SDK (and any test's own httpx client) goes through here, and every
# urllib request (raw_call's and the tests' own).
httpx.Client.send = _checked_send(httpx.Client.send)
urllib.request.urlopen = _checked_urlopen(urllib.request.urlopen)
