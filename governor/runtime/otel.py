"""The exporter: the audit trail, read after its cursor, handed to the OpenTelemetry SDK.

Runs in a long-lived process only (the warm server, the MCP proxy, an SDK integration), on a
thread of its own: each tick, under a lock in the state directory that one exporting process at a
time holds, it reads the audit rows after the cursor, records their metrics and emits their
decision events (governor.runtime.telemetry maps them), and moves the cursor past them. The
SDK's periodic metric reader and batch log processor send them, on their own threads, with the
official OTLP exporters (http/protobuf or grpc, as OTEL_EXPORTER_OTLP_PROTOCOL says) or the
console exporter. Nothing here runs on a hook's path or holds the ledger's write lock: a
collector that is down or slow costs its export threads time, never a decision.

What an exporter reports as failed is dropped and counted in the status `doctor` shows; while
log records are still in flight, no more rows are read (they wait in the audit trail).
Metric counters are cumulative: a failed export's totals go out with the next one.

Imports the OpenTelemetry SDK (the `telemetry` extra).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import IO, Any

from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    ConsoleLogRecordExporter,
    LogRecordExporter,
    LogRecordExportResult,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    ConsoleMetricExporter,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
    Sum,
)
from opentelemetry.sdk.resources import Resource

from governor import __version__, described_version
from governor.runtime import signals

TICK_SECONDS = 1.0
ROWS_PER_TICK = 500
HEARTBEAT_SECONDS = 60.0  # the cursor file is rewritten at least this often while an exporter runs


class _Tally:
    """Log records handed to the SDK and not yet exported or failed; counts for the status."""

    def __init__(self, state: str) -> None:
        self.state = state
        self.lock = threading.Lock()
        self.in_flight = 0
        self.closed = False  # counted as dropped at stop: what settles after is not counted again
        self.calls = 0  # governed calls handed to the `calls` counter
        self.covered: dict[int, float] = {}  # per metric exporter: calls its successful exports carried

    def carried(self, exporter: object, metrics: MetricsData) -> None:
        """A metric export succeeded: the calls its data carries (cumulative, or one delta more)."""
        total, delta = 0.0, False
        for resource in metrics.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == signals.CALLS and isinstance(metric.data, Sum):
                        delta = delta or metric.data.aggregation_temporality == AggregationTemporality.DELTA
                        total += sum(float(getattr(point, "value", 0)) for point in metric.data.data_points)
        with self.lock:
            before = self.covered.get(id(exporter), 0.0)
            self.covered[id(exporter)] = before + total if delta else max(before, total)

    def uncarried(self, exporters: int) -> int:
        """Calls counted that some metric exporter has not sent."""
        with self.lock:
            sent = [self.covered.get(key, 0.0) for key in self.covered] + [0.0] * (exporters - len(self.covered))
            return max(0, int(self.calls - min(sent, default=self.calls)))

    def emitted(self, count: int) -> None:
        with self.lock:
            self.in_flight += count

    def logs_settled(self, count: int, ok: bool) -> None:
        with self.lock:
            self.in_flight = max(0, self.in_flight - count)
            if self.closed:
                return
        if ok:
            signals.note(self.state, exported_events=count, exported_at=time.time())
        else:
            signals.note(self.state, dropped_events=count, dropped_at=time.time())

    def metrics_settled(self, ok: bool) -> None:
        if ok:
            signals.note(self.state, metric_exports=1, exported_at=time.time())
        else:
            signals.note(self.state, failed_metric_exports=1, dropped_at=time.time())


class _CountedLogs(LogRecordExporter):
    """The real exporter, with what it sent and what it dropped counted."""

    def __init__(self, inner: LogRecordExporter, tally: _Tally) -> None:
        self.inner, self.tally = inner, tally

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        try:
            result = self.inner.export(batch)
        except Exception:  # an exporter that raises has not sent the batch either
            result = LogRecordExportResult.FAILURE
        self.tally.logs_settled(len(batch), result == LogRecordExportResult.SUCCESS)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()  # type: ignore[no-untyped-call]

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


class _CountedMetrics(MetricExporter):
    def __init__(self, inner: MetricExporter, tally: _Tally) -> None:
        # The temporality and aggregation the real exporter prefers (OTLP reads them from the environment).
        super().__init__(preferred_temporality=inner._preferred_temporality,
                         preferred_aggregation=inner._preferred_aggregation)  # fmt: skip
        self.inner, self.tally = inner, tally

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        try:
            result = self.inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
        except Exception:
            result = MetricExportResult.FAILURE
        if result == MetricExportResult.SUCCESS:
            self.tally.carried(self, metrics_data)
        self.tally.metrics_settled(result == MetricExportResult.SUCCESS)
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.inner.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.inner.shutdown(timeout_millis=timeout_millis, **kwargs)


class _Problems(logging.Handler):
    """The SDK's own warnings (an export that failed, and why): the last one goes to the status."""

    def __init__(self, state: str) -> None:
        super().__init__(logging.WARNING)
        self.state = state
        self.last = 0.0

    def emit(self, record: logging.LogRecord) -> None:
        now = time.time()
        if now - self.last < 1.0:
            return  # a collector that is down says so on every retry
        self.last = now
        try:
            signals.note(self.state, problem=record.getMessage())
        except Exception:
            pass


def _metric_exporter(kind: str, settings: signals.Settings, console: IO[str]) -> MetricExporter:
    if kind == "console":
        return ConsoleMetricExporter(out=console)
    if settings.protocols["metrics"] == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as Grpc

        return Grpc()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as Http

    return Http()


def _log_exporter(kind: str, settings: signals.Settings, console: IO[str]) -> LogRecordExporter:
    if kind == "console":
        return ConsoleLogRecordExporter(out=console)
    if settings.protocols["logs"] == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as Grpc

        return Grpc()
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as Http

    return Http()


def adopt(env: Mapping[str, str]) -> None:
    """The SDK reads its settings from os.environ: give this process the OTEL_* variables of `env`."""
    if env is os.environ:
        return
    for name in [name for name in os.environ if name.startswith("OTEL_")]:
        if name not in env:
            del os.environ[name]
    for name, value in env.items():
        if name.startswith("OTEL_"):
            os.environ[name] = value


class Exporter:
    """Sends one state directory's audit trail from this process; `start`, then `stop`."""

    def __init__(self, env: Mapping[str, str], state: str, console: IO[str] | None = None,
                 quiet: bool = False) -> None:  # fmt: skip
        import sys

        adopt(env)
        self.state = state
        from governor.engine.ledger import URL_VARIABLE

        self.ledger_url = env.get(URL_VARIABLE) or None  # the Redis ledger the hooks write to, if they do
        self.settings = signals.Settings(os.environ)
        self.tally = _Tally(state)
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.floor: float | None = None  # rows decided before this are not sent (see BACKLOG_SECONDS)
        self.final_wait = 1.0  # how long the last tick waits for another process's (stop sets it)
        self.ledger: Any = None
        self.problems = _Problems(state)
        sdk_log = logging.getLogger("opentelemetry")
        sdk_log.addHandler(self.problems)
        if quiet:
            sdk_log.propagate = False
        for problem in self.settings.problems:
            signals.note(state, problem=problem)
        console = console or sys.stderr
        self.instance = str(uuid.uuid4())
        resource = Resource.create({"service.name": signals.SERVICE_NAME, "service.version": described_version(),
                                    "service.instance.id": self.instance})  # fmt: skip
        self.meters: MeterProvider | None = None
        self.logs: LoggerProvider | None = None
        self.instruments: dict[str, Any] = {}
        if self.settings.exporters["metrics"]:
            readers = [PeriodicExportingMetricReader(_CountedMetrics(_metric_exporter(kind, self.settings, console),
                                                                     self.tally))
                       for kind in self.settings.exporters["metrics"]]  # fmt: skip
            self.meters = MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False)
            meter = self.meters.get_meter(signals.SCOPE, __version__)
            for name, (kind, unit, description) in signals.METRICS.items():
                if kind == "counter":
                    self.instruments[name] = meter.create_counter(name, unit=unit, description=description)
                else:
                    self.instruments[name] = meter.create_histogram(
                        name, unit=unit, description=description,
                        explicit_bucket_boundaries_advisory=signals.DURATION_BUCKETS,
                    )  # fmt: skip
        self.queue = max(1, _number(os.environ.get("OTEL_BLRP_MAX_QUEUE_SIZE"), 2048))
        self.log_exporters = len(self.settings.exporters["logs"])  # each record is in flight once per exporter
        # The SDK's variable, else the one Claude Code documents for the same thing (the variables are shared).
        delay = _number(os.environ.get("OTEL_BLRP_SCHEDULE_DELAY") or os.environ.get("OTEL_LOGS_EXPORT_INTERVAL"), 1000)
        if self.log_exporters:
            self.logs = LoggerProvider(resource=resource, shutdown_on_exit=False)
            for kind in self.settings.exporters["logs"]:
                exporter = _CountedLogs(_log_exporter(kind, self.settings, console), self.tally)
                self.logs.add_log_record_processor(BatchLogRecordProcessor(exporter, max_queue_size=self.queue,
                                                                           schedule_delay_millis=delay))  # fmt: skip
            self.logger = self.logs.get_logger(signals.SCOPE, __version__)

    # -- the thread ------------------------------------------------------------------------------

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="memory-governor-telemetry", daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Send what was read, for at most `timeout` seconds: a collector that is down never holds
        the process up (what is not sent by then is counted as dropped, the rows stay in the trail)."""
        deadline = time.monotonic() + timeout
        self.final_wait = timeout / 2
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(max(0.0, deadline - time.monotonic()))
        closer = threading.Thread(target=self._shutdown, daemon=True)
        closer.start()
        closer.join(max(0.0, deadline - time.monotonic()))
        with self.tally.lock:
            unsent, self.tally.in_flight, self.tally.closed = self.tally.in_flight, 0, True
        if unsent:  # still with the SDK when the process ends (once per exporter that had not sent it)
            signals.note(self.state, dropped_events=unsent, dropped_at=time.time())
        uncounted = self.tally.uncarried(len(self.settings.exporters["metrics"])) if self.meters is not None else 0
        if uncounted:  # in the counters, never in a successful export: the collector will not see them
            signals.note(self.state, dropped_calls=uncounted, dropped_at=time.time(),
                         problem=f"stopped before the counts of {uncounted} call(s) were sent (the collector was "
                         f"slow or down); the audit trail (memory-governor report) keeps every decision")  # fmt: skip
        logging.getLogger("opentelemetry").removeHandler(self.problems)

    def _shutdown(self) -> None:
        for provider in (self.logs, self.meters):
            try:
                if provider is not None:
                    provider.shutdown()
            except Exception:
                pass

    def _run(self) -> None:
        while True:
            try:
                self.tick()
            except Exception as err:  # a ledger that cannot be read now may be readable next tick
                signals.note(self.state, problem=f"reading the audit trail: {type(err).__name__}: {err}")
                self._drop_ledger()
            if self.stopping.wait(TICK_SECONDS):
                break
        try:
            # The rows decided since the last tick, before the providers flush. Another process at
            # its own last tick may hold the lock (and have read before these rows were written).
            self.tick(wait=self.final_wait)
        except Exception:
            pass
        self._drop_ledger()  # in the thread that opened it (SQLite's rule)

    def _drop_ledger(self) -> None:
        if self.ledger is not None:
            try:
                self.ledger.close()
            except Exception:
                pass
            self.ledger = None

    def tick(self, wait: float = 0.0) -> int:
        """One pass over the rows after the cursor, if no other process is at it (waiting up to
        `wait` seconds for it to finish); how many rows were read."""
        import fcntl

        place = signals.folder(self.state)
        deadline = time.monotonic() + wait
        with open(os.path.join(place, "export.lock"), "a") as lock:
            while True:
                try:
                    fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError:
                    if time.monotonic() >= deadline:
                        return 0  # another process is exporting this trail now: it reads these rows too
                    time.sleep(0.02)
            return self._pass(os.path.join(place, signals.CURSOR))

    def _pass(self, path: str) -> int:
        now = time.time()
        saved = signals.read_json(path)
        cursor = str(saved.get("cursor") or "")
        if self.floor is None:
            alive = float(saved.get("alive") or 0)
            self.floor = now - signals.BACKLOG_SECONDS if now - alive > signals.BACKLOG_SECONDS else 0.0
            if self.floor and alive:
                self._skip_backlog(cursor, alive)
        waiting = signals.waiting_calls(saved.get("waiting"))
        room = ROWS_PER_TICK
        if self.logs is not None:
            room = min(room, max(0, min(1024, self.queue // 2) - self.tally.in_flight // self.log_exporters))
        rows: list[dict[str, Any]] = []
        if room:
            if self.ledger is None:
                from governor.engine.stores import open_ledger

                self.ledger = open_ledger(self.state, url=self.ledger_url)
            rows, cursor = self.ledger.audit_after(cursor, room, since=self.floor or None)
        out = signals.Observed()
        for row in rows:
            signals.observe(row, waiting, out)
        before = len(waiting)
        signals.expire(waiting, now, out)
        self._send(out)
        if rows or len(waiting) != before or out.events or now - float(saved.get("alive") or 0) > HEARTBEAT_SECONDS:
            signals.write_json(path, {"cursor": cursor, "alive": now, "waiting": waiting})
        return len(rows)

    def _skip_backlog(self, cursor: str, alive: float) -> None:
        """Rows decided while no exporter ran for longer than BACKLOG_SECONDS, older than that, are not
        sent (telemetry may have been off then): say how many, for doctor."""
        from governor.engine.stores import open_ledger

        if self.ledger is None:
            self.ledger = open_ledger(self.state, url=self.ledger_url)
        assert self.floor is not None
        rows, _ = self.ledger.audit_after(cursor, 100_000)
        old = sum(1 for row in rows if float(row["ts"]) < self.floor)
        if old:
            quiet = time.strftime("%Y-%m-%d %H:%M", time.localtime(alive))
            signals.note(self.state, skipped_rows=old, problem=f"{old} audit row(s) decided while no exporter ran "
                         f"(since {quiet}) and older than {signals.BACKLOG_SECONDS:.0f} s were not sent")  # fmt: skip

    def _send(self, out: signals.Observed) -> None:
        if self.meters is not None:
            with self.tally.lock:
                self.tally.calls += sum(1 for name, _, _ in out.points if name == signals.CALLS)
            for name, value, attributes in out.points:
                instrument = self.instruments[name]
                if name == signals.DURATION:
                    instrument.record(value, attributes)
                else:
                    instrument.add(value, attributes)
        if self.logs is not None and out.events:
            from opentelemetry._logs import SeverityNumber

            self.tally.emitted(len(out.events) * self.log_exporters)
            for event in out.events:
                self.logger.emit(
                    timestamp=int(event["ts"] * 1e9),
                    observed_timestamp=time.time_ns(),
                    severity_number=SeverityNumber.INFO,
                    severity_text="INFO",
                    body=signals.DECISION_EVENT,
                    attributes={"event.name": signals.DECISION_EVENT, **event["attributes"]},
                    event_name=signals.DECISION_EVENT,
                )


def _number(text: str | None, default: int) -> int:
    try:
        return int(text) if text else default
    except ValueError:
        return default
