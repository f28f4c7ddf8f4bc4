"""A policy change takes effect only if it tightens; a loosening waits for the user.

An agent can write files: `.memory-governor/policy.yaml` with higher limits, or a subagent
definition that declares itself search-capable. So the governor enforces the policy a person
accepted, and a change takes effect on its own only when it tightens that policy in every
respect. A change that loosens anything (or changes it in a way that is neither) is held
back as a whole: the accepted policy stays in force, and the user is told once per session
what was held and that `memory-governor policy accept` applies it.

One record per project in the state directory (`accepted/<key>.json`): the accepted compiled
policy, when it was accepted, and the shipped default it was accepted over. It is kept in the
default state directory too when MEMORY_GOVERNOR_STATE_DIR moves the state elsewhere, and a
directory with no record of its own starts from that one: an `env` entry pointing the variable
at a fresh directory does not make the policy files "first seen". With the ledger on Redis
(MEMORY_GOVERNOR_LEDGER_URL) the record is kept there instead (governor.engine.redis_acceptance),
so every host that shares the ledger shares it: a policy accepted on one host is accepted on
all, and a loosening held back on one is held back on all. A project with no
record starts from its policy files as committed at git HEAD (governor.policy.committed): what
the working tree changed since is held back if it loosens them. Outside git, the first policy a
project is seen with, at a session's first event in a folder never seen (before the model acts:
governor.policy.projects), is accepted as it is (the user installed it); a record missing later
(deleted, or a state directory redirected) falls back to the shipped default. An upgrade of
memory-governor that changes the shipped default is accepted when the package's version changed,
its shipped default is the file it was built with (the sha256 in rules/memory-budget.sha256) and
no policy file of the project changed since the last acceptance. A shipped default edited in
place (site-packages is the user's, so the model's) is no upgrade: what it loosens is held back,
and the user is told to reinstall.

A subagent definition file changed since the last acceptance (its inode change time, which
no tool can set back, is later) may not declare a tier looser than the policy's default:
engine.tiers holds it back (CompiledPolicy.accepted_at) and says so.

Hot path: reads one small JSON file; the comparison runs only when the policy changed.
"""

from __future__ import annotations

import os
import time

from governor import jsonio
from governor.policy import history
from governor.state import ensure_dir, read_regular, write_atomic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from governor.engine.rules import CompiledPolicy
    from governor.policy.sources import Sources

FOLDER = "accepted"
SHOWN = 3  # changes named in the notice
# Keys whose change loosens no limit, in force at once: whether a warm server or each hook decides.
NEUTRAL = ("runtime.warm_server",)


def project_key(project: str) -> str:
    from zlib import crc32

    return f"{crc32(os.path.abspath(project).encode('utf-8', 'surrogatepass')):08x}"


def record_path(state: str, project: str) -> str:
    """The small record (digest, when, shipped default); the accepted policy sits beside it."""
    return os.path.join(state, FOLDER, f"{project_key(project)}.json")


def _stored(state: str, project: str, url: str | None, policy: bool) -> Any:
    """The record (or, `policy`, the accepted policy) as stored: in the state directory, or with a
    ledger URL on that Redis, where every host that shares the ledger shares it. None: not there
    or unreadable; a Redis that does not answer raises LedgerUnavailable (its message masked)."""
    if url:
        from governor.engine.redis_acceptance import read_acceptance

        text = read_acceptance(url, project_key(project), policy)
        data = text.encode("utf-8", "surrogatepass") if text is not None else None
    else:
        path = record_path(state, project)
        try:
            data = read_regular(path[: -len(".json")] + ".policy.json" if policy else path)
        except OSError:
            data = None
    try:
        return jsonio.loads(data) if data is not None else None
    except ValueError:
        return None


def read(state: str, project: str, url: str | None = None) -> dict[str, Any] | None:
    """The project's acceptance record, or None when there is none (or it is unreadable)."""
    record = _stored(state, project, url, policy=False)
    return record if isinstance(record, dict) and isinstance(record.get("digest"), str) else None


def accepted_blob(state: str, project: str, url: str | None = None) -> dict[str, Any] | None:
    """The compiled policy a person accepted for the project (read only when it differs)."""
    blob = _stored(state, project, url, policy=True)
    return blob if isinstance(blob, dict) and isinstance(blob.get("policy"), dict) else None


def write(state: str, sources: Sources, blob: dict[str, Any], accepted_at: float) -> None:
    """Record `blob` as the project's accepted policy (the policy first, then the record): on the
    Redis of the ledger when there is one, for every host at once; else in the state directory
    and, when MEMORY_GOVERNOR_STATE_DIR moved that, in the default one too."""
    record = {"project": sources.project, "digest": blob.get("digest"), "accepted_at": accepted_at,
              "shipped": _shipped(sources)}  # fmt: skip
    if sources.ledger_url:
        from governor.engine.redis_acceptance import write_acceptance

        write_acceptance(sources.ledger_url, project_key(sources.project), jsonio.dumps(record),
                         jsonio.dumps(blob))  # fmt: skip
        return
    for folder in dict.fromkeys([state, sources.anchor]):
        path = record_path(folder, sources.project)
        try:
            ensure_dir(os.path.dirname(path))
            write_atomic(path[: -len(".json")] + ".policy.json", jsonio.dumps(blob).encode())
            write_atomic(path, jsonio.dumps(record).encode())
        except OSError:
            if folder == state:
                raise
    history.remember(state, blob)


def _anchored(state: str, sources: Sources) -> dict[str, Any] | None:
    """No record in a state directory MEMORY_GOVERNOR_STATE_DIR points at: the one kept in the
    default state directory, copied in, so a fresh directory does not start from "first seen"."""
    if sources.ledger_url or os.path.abspath(sources.anchor) == os.path.abspath(state):
        return None  # on Redis the record is shared, not per directory
    record, blob = read(sources.anchor, sources.project), accepted_blob(sources.anchor, sources.project)
    if record is None or blob is None:
        return None
    path = record_path(state, sources.project)
    ensure_dir(os.path.dirname(path))
    write_atomic(path[: -len(".json")] + ".policy.json", jsonio.dumps(blob).encode())
    write_atomic(path, jsonio.dumps(record).encode())
    return record


def _shipped(sources: Sources) -> dict[str, Any]:
    """The shipped default a record was written over: the package version and the file's sha256."""
    from governor import __version__
    from governor.policy.sources import file_digest

    return {"version": __version__, "sha256": file_digest(sources.shipped)}


def _upgraded(before: Any, now: dict[str, Any]) -> bool:
    """A new memory-governor: another version than the record's, shipping the file it was built with."""
    from governor.policy.sources import built_digest

    was = before.get("version") if isinstance(before, dict) else None  # a record from before versions: any
    return was != now["version"] and now["sha256"] is not None and now["sha256"] == built_digest()


def _tampered(now: dict[str, Any]) -> bool:
    from governor.policy.sources import built_digest

    built = built_digest()
    return built is not None and now["sha256"] != built


def _files_changed_since(sources: Sources, moment: float) -> bool:
    """Did a team or local policy file appear, change or go away since `moment`?"""
    for path in sources.watched[1:4]:
        try:
            if os.stat(path).st_ctime > moment:
                return True
        except FileNotFoundError:
            continue
        except OSError:
            return True
    folder = os.path.join(sources.project, ".memory-governor")
    try:
        return os.stat(folder).st_ctime > moment  # a file removed from it
    except OSError:
        return False


def enforced(policy: CompiledPolicy, notices: list[str], sources: Sources, state: str, first: bool = True
             ) -> tuple[CompiledPolicy, list[str]]:  # fmt: skip
    """The policy to enforce: `policy` (what the files say now) if it was accepted or only
    tightens what was; otherwise the accepted one, with a notice of what is held back.

    With no record yet, the baseline is what the team committed (git HEAD) and, outside git, at
    a session's `first` event only, the files as they are; else the shipped default."""
    from governor.engine.rules import CompiledPolicy

    url = sources.ledger_url
    try:
        record = read(state, sources.project, url) or _anchored(state, sources)
        if record is None:
            record = _first_record(policy, sources, state, first)
            if record is None:
                policy.accepted_at = time.time()
                return policy, notices
    except _unusable():
        # No usable state directory, or the ledger's Redis is gone: nothing to compare with. Every
        # governed call then meets the same unusable ledger, and gets on_error (the user is told).
        return policy, notices
    accepted_at = float(record.get("accepted_at") or 0.0)
    policy.accepted_at = accepted_at
    if record.get("digest") == policy.digest:
        return policy, notices
    shipped = _shipped(sources)
    if _upgraded(record.get("shipped"), shipped) and not _files_changed_since(sources, accepted_at):
        _keep(state, sources, policy.blob, accepted_at)  # a new memory-governor, the files as accepted
        return policy, notices
    try:
        blob = accepted_blob(state, sources.project, url) or _shipped_blob(sources)  # gone: the shipped default
    except _unusable()[1:]:
        return policy, notices
    held = held_changes(blob, policy)
    if not held:
        _keep(state, sources, policy.blob, accepted_at)  # only tightened: in force at once
        return policy, notices
    if blob.get("version") != policy.blob.get("version"):
        blob = _recompiled(blob) or policy.blob  # an accepted policy from older code: compiled again
    enforcing = CompiledPolicy(blob)
    enforcing.accepted_at = accepted_at
    named = "; ".join(str(c).split("  (")[0].strip() for c in held[:SHOWN])
    more = f" and {len(held) - SHOWN} more" if len(held) > SHOWN else ""
    if not _tampered(shipped):
        enforcing.held = (named + more, policy.digest)  # told once per session (held_notice), whose it is
        return enforcing, notices
    notice = (
        f"memory-governor: the shipped default policy {sources.shipped} is not the file memory-governor "
        f"{shipped['version']} was built with (its sha256 differs), so it is no upgrade: what it loosens "
        f"({named}{more}) is held back and the accepted policy stays in force. Reinstall memory-governor to "
        f"restore the file; a policy of your own goes in .memory-governor/policy.yaml."
    )
    return enforcing, [*notices, notice]


COMMITTED, UNCOMMITTED = "committed", "uncommitted"


def whose(sources: Sources, state: str, digest: str) -> str | None:
    """Whose change the policy files with `digest` are: COMMITTED (as at git HEAD: the team's, a
    lead's change reaching this clone), UNCOMMITTED (only in the working tree: nobody's yet, maybe
    an agent's), or None outside git. Runs git: cold path."""
    from governor.policy.content import compile_committed

    committed = compile_committed(state, sources)
    if committed is None:
        return None
    return COMMITTED if committed["digest"] == digest else UNCOMMITTED


def held_notice(sources: Sources, state: str, held: tuple[str, str]) -> str:
    """What the person is told of a loosening held back (CompiledPolicy.held), and what to do."""
    named, digest = held
    try:
        found = whose(sources, state, digest)
    except Exception:  # whose it is cannot be told (git, the committed files): the notice says what it can
        found = None
    if found == COMMITTED:
        return (
            f"memory-governor: the team committed a policy change that loosens the policy accepted here ({named}); "
            f"until you accept it, it is held back and the accepted policy stays in force. Review it (git log -p "
            f".memory-governor/), then run `memory-governor policy accept` in your own terminal in {sources.project}."
        )
    where = "in the working tree (not committed)" if found == UNCOMMITTED else ""
    undo = " If not (an agent can write files), restore them: git checkout -- .memory-governor/" if where else ""
    return (
        f"memory-governor: the policy files changed {where}{' ' if where else ''}in a way that loosens the accepted "
        f"policy ({named}); the change is held back and the accepted policy stays in force. If you made it, run "
        f"`memory-governor policy accept` in your own terminal in {sources.project}.{undo}"
    )


def _first_record(policy: CompiledPolicy, sources: Sources, state: str, first: bool) -> dict[str, Any] | None:
    """No record for the project: write the baseline it starts from. None: `policy` itself was
    accepted (what is committed, or first seen before the model acted); else the new record."""
    from governor.policy.content import compile_committed

    now = time.time()
    committed = compile_committed(state, sources)
    as_committed = committed is not None and committed["digest"] == policy.digest
    if as_committed or (committed is None and first):
        write(state, sources, policy.blob, now)
        return None
    write(state, sources, committed or _shipped_blob(sources), now)  # a change since: held against it
    return read(state, sources.project, sources.ledger_url) or {"digest": "", "accepted_at": now,
                                                                 "shipped": _shipped(sources)}  # fmt: skip


def held_changes(accepted: dict[str, Any], policy: CompiledPolicy) -> list[Any]:
    """Every change from the accepted compiled policy to `policy` that does not tighten it."""
    from governor.policy.diff import TIGHTENED, compare

    return [c for c in compare(accepted["policy"], policy.data)
            if c.kind != TIGHTENED and not c.path.startswith(NEUTRAL)]  # fmt: skip


def held_definitions(subagents: dict[str, Any], folders: list[str], since: float) -> list[tuple[str, str]]:
    """(path, tier) of each subagent definition changed after `since` that declares a tier
    looser than the default: what engine.tiers holds back."""
    import glob

    from governor.engine.tiers import declared_tier, looser

    out = []
    for folder in folders:
        pattern = folder.replace("{name}", "*") if "{name}" in folder else os.path.join(folder, "*.md")
        for path in sorted(glob.glob(pattern)):
            try:
                if os.stat(path).st_ctime <= since:
                    continue
                text = read_regular(path, 65536, follow=True).decode("utf-8", "replace")
                tier = declared_tier(text, subagents["front_matter_key"])
            except OSError:
                continue
            if tier is not None and tier in subagents["tiers"] and looser(tier, subagents["default_tier"],
                                                                          subagents["tiers"]):  # fmt: skip
                out.append((path, tier))
    return out


def _keep(state: str, sources: Sources, blob: dict[str, Any], accepted_at: float) -> None:
    try:
        write(state, sources, blob, accepted_at)
    except _unusable():
        pass


def _unusable() -> tuple[type[Exception], ...]:
    """The errors of a state directory or ledger that cannot be used (an `except` clause names them
    only once one is raised: the SQLite module is not loaded for a hook that never meets one)."""
    from governor.engine.ledger import LedgerError

    return (OSError, LedgerError)


def _shipped_blob(sources: Sources) -> dict[str, Any]:
    from governor import with_site_packages

    with_site_packages()
    from governor.policy.files import compile_sources

    blob, problems = compile_sources(sources, only_default=True)
    if blob is None:
        raise RuntimeError(f"the shipped policy does not compile: {problems[:1]}")
    return blob


def _recompiled(blob: dict[str, Any]) -> dict[str, Any] | None:
    from governor import with_site_packages

    with_site_packages()
    from governor.policy.files import compile_data

    return compile_data(blob["policy"])
