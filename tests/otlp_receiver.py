"""Receivers of the OTLP wire format, for tests: what a collector would be sent, decoded with the
`opentelemetry-proto` messages.

- HttpReceiver: OTLP/HTTP with protobuf bodies (POST /v1/metrics, /v1/logs), as a collector's
  otlphttp receiver answers it; it keeps every request body exactly as it arrived.
- GrpcReceiver: a real grpcio server with the proto package's MetricsService and LogsService.
- a closed port (`closed_port`) stands for a collector that is down; `SilentReceiver` for one
  that accepts connections and never answers.

`Received` waits on what arrived (a condition, not a sleep) and reads it back: the latest
cumulative value of each metric series (per sending process), and every log record.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
from collections.abc import Callable
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


def value(any_value: AnyValue) -> Any:
    kind = any_value.WhichOneof("value")
    return None if kind is None else getattr(any_value, kind)


def attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


class Received:
    """Every request one receiver got: raw bodies and decoded messages."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.raw: list[bytes] = []
        self.metrics: list[metrics_service_pb2.ExportMetricsServiceRequest] = []
        self.logs: list[logs_service_pb2.ExportLogsServiceRequest] = []

    def add(self, raw: bytes, message: Any) -> None:
        with self.changed:
            self.raw.append(raw)
            if isinstance(message, metrics_service_pb2.ExportMetricsServiceRequest):
                self.metrics.append(message)
            else:
                self.logs.append(message)
            self.changed.notify_all()

    def wait(self, ready: Callable[[Received], bool], timeout: float = 90.0) -> bool:
        """Until `ready(self)` holds (checked on every arrival), or `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while not ready(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(left)
            return True

    def series(self, name: str) -> dict[tuple[tuple[str, Any], ...], float]:
        """Metric `name`: the sum over sending processes of each series' latest cumulative value
        (a histogram's count), by its attributes."""
        latest: dict[tuple[str, tuple[tuple[str, Any], ...]], float] = {}
        with self.changed:
            requests = list(self.metrics)
        for request in requests:
            for resource_metrics in request.resource_metrics:
                instance = str(attributes(resource_metrics.resource.attributes).get("service.instance.id"))
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        if metric.name != name:
                            continue
                        kind = metric.WhichOneof("data")
                        for point in getattr(metric, kind).data_points:
                            key = tuple(sorted(attributes(point.attributes).items()))
                            latest[(instance, key)] = float(point.count if kind == "histogram" else point.as_double
                                                            or point.as_int)  # fmt: skip
        out: dict[tuple[tuple[str, Any], ...], float] = {}
        for (_, key), number in latest.items():
            out[key] = out.get(key, 0.0) + number
        return out

    def total(self, name: str, **where: Any) -> float:
        return sum(n for key, n in self.series(name).items() if all(dict(key).get(k) == v for k, v in where.items()))

    def metric_names(self) -> set[str]:
        with self.changed:
            return {m.name for r in self.metrics for rm in r.resource_metrics for sm in rm.scope_metrics
                    for m in sm.metrics}  # fmt: skip

    def metric_units(self) -> dict[str, str]:
        with self.changed:
            return {m.name: m.unit for r in self.metrics for rm in r.resource_metrics for sm in rm.scope_metrics
                    for m in sm.metrics}  # fmt: skip

    def records(self) -> list[dict[str, Any]]:
        """Every log record: its event name, body, attributes and resource attributes."""
        out = []
        with self.changed:
            requests = list(self.logs)
        for request in requests:
            for resource_logs in request.resource_logs:
                resource = attributes(resource_logs.resource.attributes)
                for scope_logs in resource_logs.scope_logs:
                    for record in scope_logs.log_records:
                        out.append({"event_name": record.event_name, "body": value(record.body),
                                    "attributes": attributes(record.attributes), "resource": resource,
                                    "time": record.time_unix_nano, "scope": scope_logs.scope.name})  # fmt: skip
        return out

    def resources(self) -> list[dict[str, Any]]:
        with self.changed:
            return [attributes(rm.resource.attributes) for r in self.metrics for rm in r.resource_metrics] + [
                attributes(rl.resource.attributes) for r in self.logs for rl in r.resource_logs
            ]

    def everything(self) -> bytes:
        with self.changed:
            return b"".join(self.raw)


class HttpReceiver:
    """OTLP/HTTP (protobuf) on a free loopback port; `delay`: seconds before each answer (a slow
    collector, within the exporters' timeout)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.received = Received()
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                time.sleep(delay)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = gzip.decompress(raw) if self.headers.get("Content-Encoding") == "gzip" else raw
                if self.path == "/v1/metrics":
                    message: Any = metrics_service_pb2.ExportMetricsServiceRequest.FromString(body)
                    reply = metrics_service_pb2.ExportMetricsServiceResponse()
                elif self.path == "/v1/logs":
                    message = logs_service_pb2.ExportLogsServiceRequest.FromString(body)
                    reply = logs_service_pb2.ExportLogsServiceResponse()
                else:
                    self.send_error(404)
                    return
                received.add(body, message)
                data = reply.SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class GrpcReceiver:
    """OTLP/gRPC: a grpcio server with the proto package's service stubs."""

    def __init__(self) -> None:
        import grpc

        self.received = Received()
        received = self.received

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                received.add(request.SerializeToString(), request)
                return metrics_service_pb2.ExportMetricsServiceResponse()

        class Logs(logs_service_pb2_grpc.LogsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                received.add(request.SerializeToString(), request)
                return logs_service_pb2.ExportLogsServiceResponse()

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), self.server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"http://127.0.0.1:{port}"
        self.server.start()

    def stop(self) -> None:
        self.server.stop(grace=None)


class SilentReceiver:
    """A collector that accepts connections and never answers (a slow one, past any timeout)."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(64)
        self.endpoint = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self.held: list[socket.socket] = []
        self.stopping = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stopping:
            try:
                conn, _ = self.socket.accept()
            except OSError:
                return
            self.held.append(conn)

    def stop(self) -> None:
        self.stopping = True
        self.socket.close()
        for conn in self.held:
            conn.close()


def closed_port() -> str:
    """An endpoint nothing listens on: a collector that is down."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return f"http://127.0.0.1:{port}"
