"""`install codex --scope managed`: the hooks where the user's files cannot switch them off.

Codex reads admin-enforced requirements from /etc/codex/requirements.toml (Unix; no variable
moves it, CODEX_HOME included). Seen in 0.171.0: hooks in its `[hooks]` tables run as
"managed" without a trust entry; `allow_managed_hooks_only = true` there ignores every user,
project and session hook; and `[features] hooks = true` there keeps them on when the user's
config.toml, the project's .codex/config.toml or `-c features.hooks=false` turns hooks off
(without it each of those switches the managed hooks off too). A `[hooks.state."<key>"]
enabled = false` entry in the user's config.toml leaves a managed hook running.

The layout (every path root-owned, no level group- or world-writable), with the policy files
of governor.harnesses.managed:

  /etc/codex/requirements.toml             the hooks (merged: other keys and hooks kept),
                                           allow_managed_hooks_only = true, [features] hooks = true
  /etc/memory-governor/install-codex.json  what this install created or set, for the uninstall

Cold path.
"""

from __future__ import annotations

from typing import Any

from governor.harnesses import managed as shared
from governor.harnesses.settings import SettingsError, read_toml

ONLY_MANAGED = "allow_managed_hooks_only"


def read_requirements(path: str) -> dict[str, Any]:
    """requirements.toml as plain data ({} when absent); refuses a file that is not TOML."""
    return dict(read_toml(path).unwrap())


def toml_text(data: dict[str, Any]) -> str:
    import tomlkit

    return str(tomlkit.dumps(data))


GUARANTEES = (
    "managed: the hooks run whatever the user's or the project's config.toml, hooks.json, "
    "[hooks.state] entries, [features] hooks = false, -c overrides or CODEX_HOME say, only managed "
    "hooks run, and the policy in force is {policy} whatever the project's or the user's files say "
    "(nothing to accept); " + shared.LEDGER + ". Project and user installs: every protection holds "
    "only against the spellings the routes read, because the model can write the user's files"
)


class Layout(shared.Layout):
    """requirements.toml, with `[features] hooks = true` pinned beside allow_managed_hooks_only."""

    harness = "codex"
    settings = ("etc", "codex", "requirements.toml")
    record = "install-codex.json"
    only_managed = ONLY_MANAGED
    others = "user and project"
    installed = "managed hooks installed (allow_managed_hooks_only, [features] hooks = true)"
    guarantees = GUARANTEES

    def read(self, path: str) -> dict[str, Any]:
        return read_requirements(path)

    def text(self, data: Any) -> str:
        return toml_text(data)

    def pinned(self, path: str, after: dict[str, Any], record: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        features = after.get("features")
        if features is not None and not isinstance(features, dict):
            raise SettingsError(f"{path}: features is not a table; fix it by hand, nothing was "
                                "changed")  # fmt: skip
        set_feature = bool(record.get("set_hooks_feature")) or "hooks" not in (features or {})
        return {"set_hooks_feature": set_feature}, {"features": {**(features or {}), "hooks": True}}

    def unpinned(self, after: dict[str, Any], record: dict[str, Any]) -> None:
        if record.get("set_hooks_feature") and isinstance(after.get("features"), dict):
            after["features"] = {k: v for k, v in after["features"].items() if k != "hooks"}
            if not after["features"]:
                del after["features"]

    def pin_checks(self, label: str, path: str, settings: dict[str, Any], fix: str) -> list[Any]:
        from governor.harnesses.checks import BAD, Check

        features = settings.get("features")
        if isinstance(features, dict) and features.get("hooks") is True:
            return []
        return [Check(BAD, label, f"{path}: [features] hooks is not pinned to true, so a user's or project's "
                      "config.toml turns the managed hooks off", fix)]  # fmt: skip


LAYOUT = Layout()
paths = LAYOUT.paths
read_record = LAYOUT.read_record
doctor = LAYOUT.doctor
