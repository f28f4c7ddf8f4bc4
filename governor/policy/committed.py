"""The project's policy files as committed at git HEAD: what the team agreed on.

A policy file the working tree has changed (or added) since the last commit is what someone,
or the model, wrote since; the version at HEAD went through the team's review. So when a project
has no accepted policy yet, the committed files are the baseline it starts from
(governor.policy.acceptance), and a working-tree change that loosens them waits for the user.

`git show HEAD:<file>` in the project, bounded: 2 s, the policy byte cap, no pager, no fsmonitor,
no GIT_* variable from the environment (a GIT_DIR could point anywhere). Cold path: run only
when a project has no acceptance record.
"""

from __future__ import annotations

import os
import subprocess

from governor.policy.sources import LOCAL_NAME, MAX_BYTES, PROJECT_DIR_NAME, TEAM_NAME, Sources

TIMEOUT = 2.0
NOT_IN_GIT = object()  # the project is no git work tree (or git is not there): no baseline
MISSING = object()  # not committed at HEAD


def at_head(project: str, path: str) -> str | object:
    """The text of `path` as committed at HEAD, else MISSING, else NOT_IN_GIT."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    rel = os.path.relpath(path, project)
    command = ["git", "-C", project, "-c", "core.fsmonitor=false", "--no-pager", "show", f"HEAD:./{rel}"]
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env)  # fmt: skip
    except OSError:
        return NOT_IN_GIT
    try:
        assert proc.stdout is not None and proc.stderr is not None
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return NOT_IN_GIT
    if proc.returncode != 0:
        return NOT_IN_GIT if b"not a git repository" in err else MISSING
    if len(out) > MAX_BYTES:
        return MISSING  # too large to be a policy: nothing the team could have agreed on
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        return MISSING


def committed_layers(sources: Sources) -> tuple[list[tuple[str, str]], dict[str, str]] | None:
    """The layers (kind, path) as committed, and the committed texts of the project's files; None
    when the project is not in git."""
    team = os.path.join(sources.project, PROJECT_DIR_NAME, TEAM_NAME)
    local = os.path.join(sources.project, PROJECT_DIR_NAME, LOCAL_NAME)
    texts: dict[str, str] = {}
    for path in (team, local):
        text = at_head(sources.project, path)
        if text is NOT_IN_GIT:
            return None
        if isinstance(text, str):
            texts[path] = text
    layers = [("default", sources.shipped)]
    if sources.team_origin == "MEMORY_GOVERNOR_POLICY" and sources.team:
        layers.append(("team", sources.team))  # set outside the project: as it is
    elif team in texts:
        layers.append(("team", team))
    elif os.path.isfile(sources.watched[2]):
        layers.append(("team", sources.watched[2]))  # the user's own policy, outside the project
    if local in texts:
        layers.append(("local", local))
    return layers, texts
