"""AWS on loopback for the destination tests: moto's standalone server, never a real AWS address.

`Moto` starts `moto_server` (PyPI's moto[server]) on 127.0.0.1 and a free port, in a session of
its own so that `stop()` ends it whole. One server answers every service on that one port: it
tells them apart by the service name in the SigV4 Authorization header's credential scope
(sqs, sns, events, s3), not by the Host, so Hookgate's SDK clients and the boto3 clients here
all use the same `endpoint_url`. moto keeps everything in memory and checks no signature; any
access key works, and all of them share the one account 123456789012.

The boto3 clients are built from nothing but what is passed here: endpoint, region and the
fixed test credentials, with no profile, no ~/.aws file, no AWS_* variable, no instance
metadata and no proxy, so that a developer's own AWS settings can never send a request out.
The helpers create SQS queues, an SNS topic or an EventBridge bus delivering into a queue,
and S3 buckets, and read back what Hookgate published. The `aws` session fixture is meant for
`pytest_plugins = [..., "aws"]` in conftest.py, like `rabbitmq` in brokers.py: imported into
test modules instead, it would start one server per module.
"""
import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import boto3
import botocore.session
import pytest
from botocore.config import Config

VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class SqsMessage:
    body: str
    message_id: str
    # Message attributes by name: StringValue (String, Number) or BinaryValue (Binary).
    attributes: dict = field(default_factory=dict)
    # FIFO queues only.
    group_id: str | None = None
    deduplication_id: str | None = None
    raw: dict = field(default_factory=dict)

    def json(self):
        return json.loads(self.body)


class Moto:
    region = "us-east-1"
    access_key_id = "testing"
    secret_access_key = "testing"

    def __init__(self):
        self.port = free_port()
        self.proc = None
        fd, output = tempfile.mkstemp(prefix="hookgate-moto-", suffix=".log")
        os.close(fd)
        self.output = Path(output)
        self._clients = {}
        atexit.register(self.close)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _env(self) -> dict:
        # None of the caller's AWS_* or MOTO_* settings (MOTO_ACCOUNT_ID would move every
        # resource to another account). Should moto ever use botocore itself, it finds only the
        # test credentials, no profile or config file, and no EC2 metadata address to probe.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MOTO_"))}
        env.update(
            AWS_EC2_METADATA_DISABLED="true",
            AWS_ACCESS_KEY_ID=self.access_key_id,
            AWS_SECRET_ACCESS_KEY=self.secret_access_key,
            AWS_DEFAULT_REGION=self.region,
            AWS_CONFIG_FILE=os.devnull,
            AWS_SHARED_CREDENTIALS_FILE=os.devnull,
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
        )
        return env

    def start(self, timeout: float = 30.0) -> float:
        assert self.proc is None, "already started"
        began = time.monotonic()
        script = VENV_BIN / "moto_server"
        cmd = [str(script)] if script.exists() else [sys.executable, "-m", "moto.server"]
        with open(self.output, "ab") as out:
            self.proc = subprocess.Popen(
                cmd + ["-H", "127.0.0.1", "-p", str(self.port)], env=self._env(),
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        # Not just an open port: moto's own API answering tells the server from anything else
        # that holds the port.
        deadline = began + timeout
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        why = None
        while True:
            try:
                with opener.open(f"{self.endpoint_url}/moto-api/data.json", timeout=2) as r:
                    if r.status == 200:
                        return time.monotonic() - began
            except OSError as e:
                why = e
            if self.proc.poll() is not None:
                self._fail(f"moto_server exited with status {self.proc.returncode}")
            if time.monotonic() > deadline:
                self._fail(f"no answer on {self.endpoint_url} in {timeout:.0f} s: {why!r}")
            time.sleep(0.1)

    def _fail(self, why: str):
        tail = "\n".join(self.output.read_text(errors="replace").splitlines()[-40:])
        self.stop()
        raise RuntimeError(f"moto server: {why}\n--- {self.output} (tail)\n{tail}")

    def stop(self, timeout: float = 10.0):
        """Stops the server (SIGTERM, then SIGKILL to its whole session); its data is lost."""
        proc, self.proc = self.proc, None
        self._clients.clear()
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()

    def close(self):
        self.stop()
        self.output.unlink(missing_ok=True)

    def reset(self):
        """Forgets every queue, topic, bus and bucket (moto's own reset API)."""
        req = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=10).close()

    def session(self) -> boto3.session.Session:
        # botocore's session variables with their environment variables taken out, and no
        # config or credentials file: nothing but what is passed here decides where requests go.
        # Explicit credentials and region also keep botocore off the instance metadata address.
        variables = {name: (config, None, default, convert) for name, (config, _env, default, convert)
                     in botocore.session.Session.SESSION_VARIABLES.items()}
        core = botocore.session.Session(session_vars=variables)
        core.set_config_variable("config_file", os.devnull)
        core.set_config_variable("credentials_file", os.devnull)
        core.set_config_variable("ignore_configured_endpoint_urls", True)
        return boto3.session.Session(
            aws_access_key_id=self.access_key_id, aws_secret_access_key=self.secret_access_key,
            region_name=self.region, botocore_session=core,
        )

    def client(self, service: str):
        """A boto3 client for `service` on this server; `proxies={}` ignores HTTP(S)_PROXY."""
        if service not in self._clients:
            config = Config(
                proxies={}, connect_timeout=5, read_timeout=15,
                # No retry: a retried ReceiveMessage would leave the first try's messages
                # invisible for the visibility timeout, and a moto error is worth seeing.
                retries={"total_max_attempts": 1},
                s3={"addressing_style": "path"},  # not bucket.127.0.0.1
            )
            self._clients[service] = self.session().client(
                service, endpoint_url=self.endpoint_url, region_name=self.region, config=config)
        return self._clients[service]

    # SQS

    def sqs_queue(self, name: str, fifo: bool = False) -> str:
        """Creates the queue (".fifo" is added to a FIFO queue's name) and returns its URL,
        http://127.0.0.1:PORT/123456789012/NAME: moto puts the request's own host in it."""
        attributes = {}
        if fifo:
            name = name if name.endswith(".fifo") else name + ".fifo"
            attributes["FifoQueue"] = "true"
        return self.client("sqs").create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]

    def queue_arn(self, queue_url: str) -> str:
        got = self.client("sqs").get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
        return got["Attributes"]["QueueArn"]

    def sqs_drain(self, queue_url: str, expect: int | None = None, timeout: float = 10.0) -> list[SqsMessage]:
        """Takes (and deletes) the queue's messages: with `expect`, waits until that many came,
        then also takes any already queued past it, so that duplicates show; without it,
        takes what is queued now."""
        sqs = self.client("sqs")
        got = []
        deadline = time.monotonic() + timeout
        while True:
            received = sqs.receive_message(
                QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"],
            ).get("Messages", [])
            for m in received:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
                system = m.get("Attributes", {})
                got.append(SqsMessage(
                    m["Body"], m["MessageId"],
                    {k: v.get("StringValue", v.get("BinaryValue"))
                     for k, v in m.get("MessageAttributes", {}).items()},
                    system.get("MessageGroupId"), system.get("MessageDeduplicationId"), m,
                ))
            if received:
                continue
            if expect is None or len(got) >= expect:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"queue {queue_url} gave {len(got)} of {expect} messages")
            time.sleep(0.1)

    # SNS and EventBridge, each delivering into a queue

    def sns_topic_to_queue(self, topic_name: str, queue_name: str) -> tuple[str, str]:
        """A topic with a queue subscribed in raw delivery: the queue gets the published
        message as its body, and the message attributes as SQS message attributes of the same
        DataType (FIFO when the topic's name ends in ".fifo"). moto needs no queue policy letting
        SNS send. moto 5.2.6 fails ReceiveMessage (500) on a Binary attribute that came this way."""
        fifo = topic_name.endswith(".fifo")
        queue_url = self.sqs_queue(queue_name, fifo=fifo)
        sns = self.client("sns")
        attributes = {"FifoTopic": "true"} if fifo else {}
        topic_arn = sns.create_topic(Name=topic_name, Attributes=attributes)["TopicArn"]
        sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=self.queue_arn(queue_url),
                      Attributes={"RawMessageDelivery": "true"}, ReturnSubscriptionArn=True)
        return topic_arn, queue_url

    def eventbridge_bus_to_queue(self, bus_name: str, queue_name: str) -> tuple[str, str]:
        """A custom bus whose one rule matches every event and targets a queue; the queue's
        message body is the whole event, {"id", "time", "version", "detail-type", "source",
        "region", "resources", "detail"}, with `detail` as a JSON object (moto leaves out the
        "account" that AWS puts in) and no message attributes."""
        queue_url = self.sqs_queue(queue_name)
        events = self.client("events")
        events.create_event_bus(Name=bus_name)
        # Every event has a source, and every string starts with "".
        events.put_rule(Name=f"{bus_name}-all", EventBusName=bus_name,
                        EventPattern=json.dumps({"source": [{"prefix": ""}]}))
        events.put_targets(Rule=f"{bus_name}-all", EventBusName=bus_name,
                           Targets=[{"Id": "queue", "Arn": self.queue_arn(queue_url)}])
        return bus_name, queue_url

    # S3

    def s3_bucket(self, name: str) -> str:
        # us-east-1 takes no LocationConstraint.
        self.client("s3").create_bucket(Bucket=name)
        return name

    def s3_objects(self, bucket: str, prefix: str = "") -> dict[str, bytes]:
        s3 = self.client("s3")
        keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
                for o in page.get("Contents", [])]
        return {k: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}


@pytest.fixture(scope="session")
def aws():
    server = Moto()
    server.start()
    yield server
    server.close()
