"""A client generated from the served /openapi.json by a standard generator
(openapi-python-client, from PyPI) drives the send API: it creates an application, an
endpoint and a message, and the message reaches the endpoint signed. Nothing here is
written for Hookgate: the client is what a user would generate."""
import importlib
import json
import subprocess
import sys
import uuid

from standardwebhooks import Webhook

from conftest import ROOT, raw_call

GENERATOR = ROOT / "target" / "pyvenv" / "bin" / "openapi-python-client"


def generate(hookgate, tmp_path):
    status, _, raw = raw_call(hookgate, "get", "/openapi.json")
    assert status == 200
    spec = tmp_path / "openapi.json"
    spec.write_bytes(raw)
    out = tmp_path / "hookgate_client"
    run = subprocess.run([str(GENERATOR), "generate", "--path", str(spec), "--meta", "none", "--output-path",
                          str(out)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    sys.path.insert(0, str(tmp_path))
    return importlib.import_module("hookgate_client")


def test_a_client_generated_from_the_document_creates_an_application_an_endpoint_and_a_message(
        hookgate, tenant, sink, tmp_path):
    client_pkg = generate(hookgate, tmp_path)
    api = importlib.import_module("hookgate_client.api.application.v1_application_create")
    endpoint_api = importlib.import_module("hookgate_client.api.endpoint.v1_endpoint_create")
    secret_api = importlib.import_module("hookgate_client.api.endpoint.v1_endpoint_get_secret")
    message_api = importlib.import_module("hookgate_client.api.message.v1_message_create")
    get_message = importlib.import_module("hookgate_client.api.message.v1_message_get")
    models = importlib.import_module("hookgate_client.models")

    client = client_pkg.AuthenticatedClient(base_url=hookgate.url, token=tenant["apiKey"],
                                            raise_on_unexpected_status=True)
    app = api.sync(client=client, body=models.ApplicationIn(name="Generated", uid="gen-" + uuid.uuid4().hex[:8]))
    assert isinstance(app, models.ApplicationOut), app
    assert app.id.startswith("app_")

    ep = endpoint_api.sync(app.id, client=client, body=models.EndpointIn(url=sink.url))
    assert isinstance(ep, models.EndpointOut), ep
    secret = secret_api.sync(app.id, ep.id, client=client).key

    payload = models.MessageInPayload.from_dict({"order": 42})
    msg = message_api.sync(app.id, client=client, body=models.MessageIn(event_type="order.created", payload=payload))
    assert isinstance(msg, models.MessageOut), msg
    assert msg.id.startswith("msg_") and msg.event_type == "order.created"
    assert get_message.sync(app.id, msg.id, client=client).id == msg.id

    (request,) = sink.wait_for(1)
    assert json.loads(request["body"]) == {"order": 42}
    # The receiver verifies it with the secret the generated client read.
    headers = request["headers"]
    assert Webhook(secret).verify(request["body"], headers) == {"order": 42}
    assert headers["webhook-id"] == msg.id
