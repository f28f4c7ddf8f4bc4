"""End-to-end fixtures for the real Kilo Code CLI binary, offline, against a scripted model.

Kilo Code's CLI (`@kilocode/cli`, the `kilo` binary) is built on OpenCode: the fixtures are
OpenCode's (opencode_env.py) with Kilo's names. Each test gets a fresh project with
memory-governor installed by its own installer (`python -m governor install kilo --project DIR`,
which writes OpenCode's plugin into `.kilo/plugin/memory-governor.js`), a project `kilo.json`
naming the Chat Completions stand-in as a custom provider and the Engram-shaped MCP server, a
throwaway HOME and XDG folders, and its own ledger. `kilo run --format json PROMPT` runs it.

Offline: KILO_DISABLE_MODELS_FETCH / _AUTOUPDATE / _LSP_DOWNLOAD, and `@kilocode/plugin` listed
in the project's `.kilo` and in Kilo's config folder (else Kilo installs it there at each start:
with npm pointed at a closed port that costs ~20 s a run). $PWD is the project: Kilo takes its
project folder from $PWD before its working directory.

The pinned package is installed once into the e2e cache (tests/e2e/npm.py): 7.7.7, the newest
whose platform package (`@kilocode/cli-linux-x64`) the registry serves (7.8.1's is missing, so
`npm install @kilocode/cli@7.8.1` installs no binary). No node/npm, or a failed install: the tests
are skipped with the reason, except when CI=true, where they fail.
A test module uses these fixtures with `pytest_plugins = ["kilo_env"]`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import npm
import pytest
from fake_chat import FakeChat
from opencode_env import OpenCodeHarness, OpenCodeTools
from sandbox import fresh, governed, short_state

# The pin: change it here only.
KILO_PACKAGE = "@kilocode/cli"
KILO_VERSION = npm.pin(KILO_PACKAGE, "7.7.7")


class KiloTools(OpenCodeTools):
    BINARY, VERSION = "kilo", KILO_VERSION


def install_kilo() -> KiloTools:
    return KiloTools(npm.install("kilo", {KILO_PACKAGE: KILO_VERSION}, lambda folder: KiloTools(folder).ready()))


class KiloHarness(OpenCodeHarness):
    """A project with memory-governor installed for Kilo Code, and `kilo run` in it."""

    HARNESS, FOLDER, CONFIG, ENV, CONFIG_FILE = "kilo", ".kilo", "kilo", "KILO", "kilo.json"
    PLUGIN_PACKAGE = ("@kilocode/plugin", KILO_VERSION)

    def __init__(self, tmp: Path, tools: KiloTools, model: FakeChat, warm_server: bool = False) -> None:
        super().__init__(tmp, tools, model, warm_server)
        self.env["PWD"] = str(self.project)


@pytest.fixture(scope="session")
def kilo_tools() -> KiloTools:
    return install_kilo()


@pytest.fixture(scope="session")
def kilo_chat_server() -> Iterator[FakeChat]:
    with FakeChat() as model:
        yield model


@pytest.fixture
def kilo_chat(kilo_chat_server: FakeChat) -> Iterator[FakeChat]:
    yield from fresh(kilo_chat_server)


@pytest.fixture
def kc(tmp_path: Path, kilo_tools: KiloTools, kilo_chat: FakeChat) -> Iterator[KiloHarness]:
    """The plugin with the warm server off: every message goes to a hook process."""
    yield from governed(KiloHarness(tmp_path, kilo_tools, kilo_chat))


@pytest.fixture
def kc_warm(tmp_path: Path, kilo_tools: KiloTools, kilo_chat: FakeChat) -> Iterator[KiloHarness]:
    """The default install: the warm server on (a short state path, as a user's)."""
    yield from short_state(KiloHarness(tmp_path, kilo_tools, kilo_chat, warm_server=True), "mg-kc-")
