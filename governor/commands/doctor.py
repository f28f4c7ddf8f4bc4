"""`memory-governor doctor`: is everything in place, and if not, what to do about it."""

from __future__ import annotations

import json
import os
import time

import click

from governor import harnesses, install_extra
from governor.harnesses import installs
from governor.harnesses.checks import BAD, INFO, OK, WARN, Check
from governor.policy import compiled
from governor.policy.sources import Sources
from governor.state import default_state_dir, state_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from governor.commands.policy import Managed
    from governor.engine.rules import CompiledPolicy


class Report:
    def __init__(self) -> None:
        self.rows: list[Check] = []

    def add(self, status: str, what: str, detail: str, fix: str = "") -> None:
        self.rows.append(Check(status, what, detail, fix))

    @property
    def failed(self) -> bool:
        return any(row.status == BAD for row in self.rows)


def _installs(report: Report, project: str, policy: dict[str, object]) -> None:
    """Each harness checks its own install; nothing installed anywhere is a failure."""
    found = False
    for name in harnesses.names():
        setup = harnesses.part(name, "setup")
        if setup is None:
            continue
        checks = setup.doctor(project, policy)
        found = found or bool(checks)
        report.rows.extend(checks)
        states = [state_dir(os.environ), default_state_dir(os.environ)]
        for notice in installs.changed(states, name, project):  # hooks switched off never say so themselves
            report.add(WARN, f"{name} (since install)", notice.removeprefix("memory-governor: "),
                       f"memory-governor install {name}")  # fmt: skip
    if not found:
        names = harnesses.names()  # Claude Code first: the harness most projects install
        first, *others = sorted(names, key=lambda name: name != "claude-code")
        fix = f"memory-governor install {first}" + (f"  (or: {', '.join(others)})" if others else "")
        report.add(BAD, "install", "no harness settings here have memory-governor's hooks", fix)


def _tiktoken_beside(unit: str, table: str) -> str:
    """What the warm server counts `unit` with besides the table, as a clause ('' for a unit
    tiktoken does not count); loading it is the server's business, importing it is checked here."""
    from governor.engine.tokens import TIKTOKEN_UNITS, UnitUnavailable, tiktoken_version

    if unit not in TIKTOKEN_UNITS:
        return ""
    try:
        return f" ({table}; the warm server's tiktoken {tiktoken_version()})"
    except UnitUnavailable as err:
        raise UnitUnavailable(f"{err} (hooks count with the table; the warm server cannot)") from None


@click.command("doctor")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def command(fmt: str) -> int:
    """Check install, policy, ledger, tokenizer, warm server and telemetry; say what to fix."""
    from governor.commands.policy import IGNORED, managed_install
    from governor.policy.files import build
    from governor.policy.managed import service as managed_service

    report = Report()
    env: Mapping[str, str] = os.environ
    from governor import described_version

    report.add(INFO, "memory-governor", f"{described_version()} in {os.path.dirname(os.path.dirname(__file__))}")
    sources = Sources(env, os.getcwd())
    managed = managed_install()
    enforced = managed.sources if managed else sources
    eff = build(enforced.layers())
    layers = " < ".join(kind for kind, _ in enforced.layers())
    if managed is not None:
        layers = layers.replace("managed", managed.says())
    if eff.ok:
        report.add(OK, "policy", f"valid ({layers})")
    else:
        report.add(BAD, "policy", f"{len(eff.problems)} problem(s), first: {eff.problems[0]}",
                   "memory-governor policy check")  # fmt: skip
    written, _ = compiled.from_files(sources, state_dir(env))  # what install covers: the files, held back or not
    if managed is not None:
        policy = _managed_policy(report, managed)
        if managed.ignored:
            report.add(INFO, "policy (not in force)", f"{', '.join(managed.ignored)}: {IGNORED}")
        report.add(OK, "accepted policy", f"nothing to accept: the managed hooks enforce {managed.policy} as "
                   "installed and read no acceptance")  # fmt: skip
        env = managed.env  # the state directory, ledger and telemetry its hooks use
    else:
        policy, _ = compiled.load(env, os.getcwd(), state_dir(env))
        _held(report, sources, policy)
    _installs(report, sources.project, written.data)
    state = state_dir(env)
    _ledger(report, env, state, policy)
    try:
        from governor.engine.tokens import build as fresh_counter
        from governor.engine.tokens import load_quickly

        table = "the table in the state directory"
        if managed is not None:  # its hooks count with the install's table alone
            load_quickly(managed.config, build=False)
            table = f"the install's table in {managed.config}"
        started = time.perf_counter()
        fresh_counter(policy.unit).count("doctor")  # a fresh load, as a hook deciding alone loads it (its table)
        took = (time.perf_counter() - started) * 1000
        report.add(
            OK, "tokenizer", f"{policy.unit} loads offline in {took:.0f} ms{_tiktoken_beside(policy.unit, table)}"
        )
    except Exception as err:
        report.add(BAD, "tokenizer", str(err), "see the message; or set token_counter: chars in the policy")
    threshold = policy.data["memory_needs"]["model_threshold"]
    if threshold >= 1:
        report.add(INFO, "memory-need model", "off by policy (memory_needs.model_threshold: 1)")
    else:
        from governor.engine import need_model

        try:
            started = time.perf_counter()
            with open(need_model.WEIGHTS, "rb") as handle:  # a fresh load, not the cached one
                model = need_model.parse(handle.read())
            took = (time.perf_counter() - started) * 1000
            report.add(
                OK,
                "memory-need model",
                f"{len(model.keys)} features, {len(model.classes)} classes; loads in {took:.0f} ms",
            )
        except Exception as err:
            report.add(BAD, "memory-need model", f"{need_model.WEIGHTS}: {err}",
                       "reinstall memory-governor; until then cue words and the default classify what no pattern matches")  # fmt: skip
    from governor.runtime.server import running_pid

    pid = running_pid(dict(env))
    mode = policy.data["runtime"]["warm_server"]
    if managed is not None:  # which tier: the wall (the service answers) or the seatbelt
        report.rows.extend(_service_checks())
        if managed_service(managed.config) is None:
            report.add(INFO, "warm server", "off under the managed install: every hook decides in its own process")
    elif mode == "off":
        report.add(INFO, "warm server", "off by policy: every hook decides in its own process")
    else:
        detail = f"running (pid {pid})" if pid else "not running: the next hook starts it"
        report.add(INFO, "warm server", detail)
    if managed is not None:
        report.add(INFO, "telemetry", "a managed hook never sends (no warm server) and reads no telemetry variable; "
                   "with the ledger on Redis (install --ledger-url), one sender the administrator runs beside it "
                   "sends every user's decisions (docs/teams.md)")  # fmt: skip
    else:
        _telemetry(report, env, policy)
    if fmt == "json":
        click.echo(json.dumps([row.as_dict() for row in report.rows], indent=2))
    else:
        for row in report.rows:
            click.echo(f"{row.status:4}  {row.what:18} {row.detail}")
            if row.fix:
                click.echo(f"{'':24} fix: {row.fix}")
    return 1 if report.failed else 0


def _service_checks() -> list[Check]:
    """The managed install's tier: under the wall the decision service answers, and its unit is
    enabled where systemd runs; without it, the seatbelt, and how to put the wall up."""
    from governor.harnesses.claude_code import managed
    from governor.runtime.service import service_checks

    return list(service_checks("decision service", managed.ROOT))


def _managed_policy(report: Report, managed: Managed) -> CompiledPolicy:
    """The policy the managed hooks enforce (the shipped default when not even it compiles there)."""
    found, notices = managed.load()
    for notice in notices:
        report.add(WARN, "policy", notice.removeprefix("memory-governor: "))
    if found is None:
        from governor.engine.rules import CompiledPolicy
        from governor.policy.files import compile_sources

        blob, _ = compile_sources(managed.sources, only_default=True)
        found = CompiledPolicy(blob or {})
    return found


def _ledger(report: Report, env: Mapping[str, str], state: str, policy: CompiledPolicy) -> None:
    """Which ledger is in force (a URL with its password masked), and whether it answers."""
    from governor.engine.ledger import URL_VARIABLE
    from governor.engine.redis_ledger import masked
    from governor.engine.stores import open_for
    from governor.policy.managed import MARK

    url = env.get(URL_VARIABLE)
    where = f"Redis at {masked(url)}" if url else f"SQLite file in {state}"
    try:
        started = time.perf_counter()
        ledger = open_for(env, policy.data["ledger"])
        try:
            ok, found = ledger.check()
        finally:
            ledger.close()
        took = (time.perf_counter() - started) * 1000
    except Exception as err:
        fix = (f"start that Redis, or unset {URL_VARIABLE} to use the SQLite file" if url
               else "make the state directory writable, or set MEMORY_GOVERNOR_STATE_DIR")  # fmt: skip
        if env.get(MARK):  # a managed hook's ledger is the administrator's to move
            fix = ("start that Redis (an administrator: sudo memory-governor install claude-code --scope managed "
                   "--ledger-url URL, or \"\" for each user's own file)" if url
                   else "make your state directory (~/.local/state/memory-governor) writable")  # fmt: skip
        report.add(BAD, "ledger", f"{where}: {err}", fix)
        return
    if ok:
        report.add(OK, "ledger", f"{where}: {found}" + (f"; answered in {took:.0f} ms" if url else ""))
    else:
        report.add(BAD, "ledger", f"{where}: {found}", "memory-governor gc, or move it aside")
    if ok and url:
        _redis_powers(report, env, url)


def _redis_powers(report: Report, env: Mapping[str, str], url: str) -> None:
    """A warning when the URL's Redis user can run administrative commands: any process that reads
    the URL (the model's shell, the hooks run as the user) can then pause, lock, flush or stop the
    ledger of every user on it, or rewrite the server's configuration."""
    from governor.engine.redis_access import ACL_RULES, administers
    from governor.engine.redis_ledger import RedisLedger, masked

    try:
        ledger = RedisLedger(state_dir(env), url)
        try:
            powerful = administers(ledger)
        finally:
            ledger.close()
    except Exception:
        return  # the ledger check above answered; this one says nothing it cannot tell
    if powerful:
        report.add(WARN, "ledger", f"Redis at {masked(url)}: its user can run administrative commands (it was "
                   "answered CONFIG GET), such as CLIENT PAUSE, CONFIG SET, SHUTDOWN, FLUSHALL: a process that reads "
                   "this URL can stop every user's ledger with one",
                   f"as the Redis administrator: ACL SETUSER memory-governor on >PASSWORD {ACL_RULES} ; then use "
                   "redis://memory-governor:PASSWORD@host:port/db")  # fmt: skip


def _held(report: Report, sources: Sources, policy: CompiledPolicy) -> None:
    """Say what the hooks hold back (a loosening nobody accepted), and how to put it in force."""
    from governor.engine.ledger import LedgerError
    from governor.policy import acceptance

    state = state_dir(os.environ)
    try:
        record = acceptance.read(state, sources.project, sources.ledger_url)
        accepted = acceptance.accepted_blob(state, sources.project, sources.ledger_url) if record else None
    except LedgerError as err:
        report.add(BAD, "accepted policy", f"cannot be read from the ledger's Redis: {err}",
                   "start that Redis, or unset MEMORY_GOVERNOR_LEDGER_URL")  # fmt: skip
        return
    if record is None:
        report.add(INFO, "accepted policy", "none recorded yet: the first hook takes the policy as committed "
                   "(git HEAD), else the files as they are")  # fmt: skip
        return
    current, _ = compiled.from_files(sources, state)
    held = acceptance.held_changes(accepted, current) if accepted and record.get("digest") != current.digest else []
    definitions = acceptance.held_definitions(current.data["subagents"], harnesses.agent_dirs(sources.project),
                                              float(record.get("accepted_at") or 0))  # fmt: skip
    if held or definitions:
        named = [str(c).split("  (")[0].strip() for c in held[:3]] + [path for path, _ in definitions[:3]]
        report.add(WARN, "accepted policy", f"{len(held) + len(definitions)} change(s) held back: {'; '.join(named)}",
                   _held_fix(sources, current.digest) if held else "if you made them: memory-governor policy accept")  # fmt: skip
    else:
        report.add(OK, "accepted policy", "the policy files are in force as written")


def _held_fix(sources: Sources, digest: str) -> str:
    """What to do about a held-back change: a committed one is the team's (a lead's change reaching
    this clone); one only in the working tree is nobody's yet, and may be an agent's."""
    from governor.policy import acceptance

    found = acceptance.whose(sources, state_dir(os.environ), digest)
    if found == acceptance.COMMITTED:
        return (
            "the files are as committed (git HEAD): a change the team committed. Review it (git log -p "
            ".memory-governor/), then accept it in your own terminal: memory-governor policy accept"
        )
    if found == acceptance.UNCOMMITTED:
        return (
            "the change is in the working tree, not committed: if you made it, memory-governor policy accept "
            "in your terminal; if not (an agent can write files), git checkout -- .memory-governor/"
        )
    return "if you made them: memory-governor policy accept  (in your own terminal)"


def _telemetry(report: Report, env: Mapping[str, str], policy: CompiledPolicy) -> None:
    """Is telemetry on here, can it be sent, and what the exporters sent, dropped and left."""
    import importlib.util

    from governor.runtime import signals, telemetry

    state = state_dir(env)
    status = signals.status(state)
    if telemetry.enabled(env):
        settings = signals.Settings(env)
        for problem in settings.problems:
            report.add(BAD, "telemetry", problem, "see docs/telemetry.md for the values memory-governor reads")
        try:
            installed = importlib.util.find_spec("opentelemetry.sdk") is not None
        except ImportError:
            installed = False
        if not installed:
            report.add(BAD, "telemetry", "on, but the OpenTelemetry SDK is not installed for this Python",
                       install_extra("telemetry"))  # fmt: skip
        sent = ", ".join(
            f"{signal} " + (" + ".join(f"{kind} ({settings.protocols[signal]})" if kind == "otlp" else kind
                                       for kind in chosen) or "none")
            for signal, chosen in settings.exporters.items()
        )  # fmt: skip
        report.add(
            OK if settings.sends else WARN, "telemetry", f"on: {sent}, to {settings.endpoint or 'the default endpoint'}"
        )
        if policy.data["runtime"]["warm_server"] == "off":
            report.add(WARN, "telemetry", "the warm server is off by policy: a hook never sends, so only an MCP proxy "
                       "or an SDK integration sends what the hooks decided", "runtime.warm_server: auto")  # fmt: skip
    elif not status:
        report.add(INFO, "telemetry", f"off ({telemetry.ENABLE} is not set here)")
        return
    if not status:
        report.add(INFO, "telemetry export", "nothing sent yet: the warm server starts sending at the next hook")
        return
    dropped, failed = int(status.get("dropped_events", 0)), int(status.get("failed_metric_exports", 0))
    uncounted, skipped = int(status.get("dropped_calls", 0)), int(status.get("skipped_rows", 0))
    parts = [f"{int(status.get('exported_events', 0))} decision event(s) and {int(status.get('metric_exports', 0))} "
             f"metric export(s) sent", f"{dropped} event(s) dropped", f"{failed} metric export(s) failed"]  # fmt: skip
    if uncounted:
        parts.append(f"{uncounted} call(s) never in a sent metric export (the sender stopped first)")
    if skipped:
        parts.append(f"{skipped} audit row(s) not sent (decided while no sender ran for over "
                     f"{signals.BACKLOG_SECONDS / 60:.0f} min)")  # fmt: skip
    backlog = _backlog(env, str(status.get("cursor", "")), policy)
    if backlog:
        parts.append(f"{backlog} audit row(s) not read yet (the next warm server sends them)")
    if status.get("waiting"):
        parts.append(
            f"{status['waiting']} call(s) waiting for their result (sent when it comes, or "
            f"{signals.OPEN_SECONDS / 60:.0f} min after the call)"
        )
    if status.get("problem"):
        parts.append(f"last problem ({_ago(float(status.get('problem_at', 0)))}): {status['problem']}")
    bad = dropped or failed or uncounted or skipped
    report.add(WARN if bad else OK, "telemetry export", "; ".join(parts),
               "is the collector up and reachable at OTEL_EXPORTER_OTLP_ENDPOINT? Dropped telemetry is not resent; "
               "the audit trail (memory-governor report) keeps every decision" if bad else "")  # fmt: skip


def _backlog(env: Mapping[str, str], position: str, policy: CompiledPolicy) -> str:
    try:
        from governor.engine.stores import open_for

        ledger = open_for(env, policy.data["ledger"])
        try:
            rows, _ = ledger.audit_after(position, 10_001)
        finally:
            ledger.close()
    except Exception:
        return ""
    return "over 10000" if len(rows) > 10_000 else str(len(rows)) if rows else ""


def _ago(ts: float) -> str:
    seconds = max(0, int(time.time() - ts))
    return (
        f"{seconds} s ago"
        if seconds < 120
        else f"{seconds // 60} min ago"
        if seconds < 7200
        else f"{seconds // 3600} h ago"
    )
