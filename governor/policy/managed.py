"""The managed install: the policy in force is the administrator's, full stop.

`install <harness> --scope managed` (the harness's setup, governor.harnesses) puts the hooks in
the harness's managed settings and the policy in CONFIG_DIR, both root-owned, and the hook
command names that folder (`entry.py <harness> --managed /etc/memory-governor`). A hook run so
enforces CONFIG_DIR/policy.yaml over the shipped default and nothing else: no project or user
policy file, no local override, no acceptance record (nothing to accept), no compiled cache in
the user's state directory (the install compiles it into CONFIG_DIR/policy.json), no warm server
(its socket is in the user's state directory), and no MEMORY_GOVERNOR_* variable (but the nesting
marker, which can only charge a session more), XDG folder or HOME from the environment (the state
directory is the user's own, found from the password database), and no tokenizer table but the install's in CONFIG_DIR (governor.engine.tokens,
load_quickly with build=False). What the user's files can still change is their own ledger, and
it holds grants (armed triggers, surfaced ids) as well as counts: see docs/reliability.md.
The variables a managed hook does get are the administrator's: CONFIG_DIR/environment.json
(root-owned, written by the install), only those in SETTABLE (the ledger's Redis).

Managed mode is chosen by the hook command only (`enter`), never by the environment, so a
variable a model sets cannot make an ordinary hook read a policy of its choosing.

Hot path: standard library only.
"""

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    from governor.engine.rules import CompiledPolicy

CONFIG_DIR = "/etc/memory-governor"
POLICY_NAME = "policy.yaml"
COMPILED_NAME = "policy.json"
ENVIRONMENT_NAME = "environment.json"
SERVICE_NAME = "service.json"  # there under the wall: where the hooks find the decision service (runtime.service)
# What the administrator may set for every managed hook (`install --scope managed --ledger-url`).
LEDGER_URL = "MEMORY_GOVERNOR_LEDGER_URL"
SETTABLE = (LEDGER_URL,)
FLAG = "--managed"
# Set in the environment a managed hook decides in, so a notice can say which mode it is in.
MARK = "MEMORY_GOVERNOR_MANAGED"

_config: str | None = None
_walled = False  # this hook asks the decision service: it writes nothing in the user's state directory


def enter(config_dir: str) -> None:
    """This process runs a managed hook: its policy is the one in `config_dir`."""
    global _config
    _config = os.path.abspath(config_dir)


def behind_wall() -> None:
    """This managed hook asks the decision service (runtime.service): the user's state directory
    is not its to write, even for the policy's history."""
    global _walled
    _walled = True


def active() -> str | None:
    """The managed configuration folder this process enforces, or None (an ordinary install)."""
    return _config


def environment(env: "Mapping[str, str]", config_dir: str | None = None, uid: int | None = None) -> dict[str, str]:
    """The environment a managed hook decides in: nothing in it the model could have set chooses
    the state directory, the policy, the ledger, telemetry or the warm server. (`config_dir`: the
    managed folder, when not this process's own: the review tools, which say what a hook does;
    `uid`: whose hook it is, when not this process's: the decision service, runtime.service.)"""
    import pwd

    try:
        home = pwd.getpwuid(os.getuid() if uid is None else uid).pw_dir or "/"
    except KeyError:  # a uid with no entry: a state directory of its own under /tmp is no boundary
        home = env.get("HOME") or "/"
    from governor.engine.nesting import MARKER  # kept: it can only charge a session more (governor.engine.nesting)

    dropped = ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "HOME")
    out = {k: v for k, v in env.items() if (not k.startswith("MEMORY_GOVERNOR") or k == MARKER) and k not in dropped}
    out["HOME"] = home
    out["MEMORY_GOVERNOR_WARM_SERVER"] = "off"
    out[MARK] = config_dir or _config or CONFIG_DIR
    out.update(settings(out[MARK]))
    return out


def settings(config_dir: str) -> dict[str, str]:
    """The variables the administrator set for every managed hook (environment.json in the managed
    folder), only those in SETTABLE; {} when there is none or it cannot be read."""
    try:
        with open(environment_path(config_dir), "rb") as handle:
            from governor import jsonio

            data = jsonio.loads(handle.read(65536))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if k in SETTABLE and isinstance(v, str) and v}


def service(config_dir: str) -> dict[str, object] | None:
    """CONFIG/service.json (root-owned, written by a managed install unless --no-service): the
    decision service's socket and uid; None when the install put up no wall, {} when it is there but cannot be read (the hooks
    then refuse governed calls: a file that cannot be read does not take the wall down)."""
    try:
        with open(os.path.join(config_dir, SERVICE_NAME), "rb") as handle:
            from governor import jsonio

            data = jsonio.loads(handle.read(65536))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def environment_path(config_dir: str) -> str:
    return os.path.join(config_dir, ENVIRONMENT_NAME)


def policy_path(config_dir: str) -> str:
    return os.path.join(config_dir, POLICY_NAME)


def compiled_path(config_dir: str) -> str:
    return os.path.join(config_dir, COMPILED_NAME)


def sources(env: "Mapping[str, str]", project: str, config_dir: str):  # type: ignore[no-untyped-def]
    from governor.policy.sources import Sources

    return Sources(env, project, project, managed=policy_path(config_dir))


_read: "tuple[tuple[str, int, int, int], Any, float] | None" = None  # the compiled file last read, by its stat


def _installed(path: str) -> "tuple[Any, float]":
    """The compiled policy the install wrote (parsed), and when it was written. Read again only when
    the file changed: the decision service answers every user's hooks with it (a hook reads it once)."""
    global _read
    with open(path, "rb") as handle:
        found = os.fstat(handle.fileno())
        key = (path, found.st_mtime_ns, found.st_size, found.st_ino)
        kept = _read
        if kept is not None and kept[0] == key:
            return kept[1], kept[2]
        from governor import jsonio

        blob = jsonio.loads(handle.read())
    _read = (key, blob, found.st_mtime)
    return blob, found.st_mtime


def load(env: "Mapping[str, str]", cwd: str | None, config_dir: str | None = None, state: str | None = None
         ) -> "tuple[CompiledPolicy | None, list[str]]":  # fmt: skip
    """The managed policy, as the install compiled it; compiled here (and said) when the files
    changed since (the package upgraded, the policy edited without a new install). None, and the
    problems, when not even the shipped default compiles. `config_dir`: as in `environment`;
    `state`: the user's state directory, where its limits are remembered for `report`."""
    from governor import with_site_packages
    from governor.engine.rules import CompiledPolicy

    config = config_dir or _config or CONFIG_DIR
    project = os.path.abspath(cwd or os.getcwd())
    found = sources(env, project, config)
    blob = None
    try:
        blob, installed_at = _installed(compiled_path(config))
    except (OSError, ValueError):
        installed_at = 0.0
    notices: list[str] = []
    if not (isinstance(blob, dict) and blob.get("signature") == found.signature() and "policy" in blob):
        with_site_packages()
        from governor.policy.files import compile_sources

        blob, problems = compile_sources(found)
        if blob is None:
            blob, _ = compile_sources(found, only_default=True)
            if blob is None:
                return None, problems
            notices.append(f"memory-governor: the managed policy {policy_path(config)} is invalid: {problems[0]}. "
                           "Enforcing the shipped default; an administrator runs `memory-governor install` "
                           "with `--scope managed` again.")  # fmt: skip
        else:
            notices.append(f"memory-governor: the managed policy in {config} changed since it was installed; it is "
                           "in force, compiled at every hook. An administrator runs `memory-governor install` with "
                           "`--scope managed` again.")  # fmt: skip
    if state is not None and not _walled:
        from governor.policy import history

        history.remember(state, blob)  # `report` shows each turn against the limits it was decided under
    policy = CompiledPolicy(blob)
    policy.project = project
    policy.accepted_at = installed_at  # a subagent definition written since may not widen its tier
    return policy, notices


def ownership_problems(paths: "Iterable[str]") -> list[str]:
    """What makes these paths writable by someone other than root: each path, what it resolves
    to, and every folder above either must be owned by root and not group- or world-writable.
    One exception, as the kernel sees it: a root-owned sticky folder (like /tmp) two or more
    levels up, whose root-owned entries no one else can rename or remove; a hook looks up no
    file in it by name (its own folder and the one above must still be root's alone)."""
    problems: list[str] = []
    strict: dict[str, bool] = {}  # each level checked, and whether without the sticky exception
    for path in paths:
        for chain in (_chain(os.path.abspath(path)), _chain(os.path.realpath(path))):
            for depth, level in enumerate(chain):
                sticky_ok = depth >= 2
                if level in strict and (strict[level] or sticky_ok):
                    continue
                first = level not in strict
                strict[level] = not sticky_ok
                try:
                    st = os.lstat(level)
                except OSError as err:
                    if first:
                        problems.append(f"{level}: {err.strerror}")
                    continue
                if stat.S_ISLNK(st.st_mode):
                    if st.st_uid != 0 and first:
                        problems.append(f"{level}: a symlink owned by uid {st.st_uid}, not root")
                    continue
                if st.st_uid != 0 and first:
                    problems.append(f"{level}: owned by uid {st.st_uid}, not root")
                if st.st_mode & 0o022 and not (sticky_ok and st.st_mode & stat.S_ISVTX and st.st_uid == 0):
                    problems.append(f"{level}: mode {stat.S_IMODE(st.st_mode):04o} is group- or world-writable")
    return list(dict.fromkeys(problems))


def _chain(path: str) -> list[str]:
    out = [path]
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return out
        out.append(parent)
        path = parent
