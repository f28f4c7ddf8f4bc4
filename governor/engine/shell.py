"""A shell command as the shell would run it: the normalised forms a route is judged on.

A route pattern written for `engram search` must also see `"engram" search`, `e''ngram search`,
`P=engram; $P search`, `env FOO=1 /usr/local/bin/engram search`, `bash -c 'engram search'`,
`setsid -f script -qec 'engram search'`, `echo $(engram search x)`, and a path the shell would
open after `cd ~/.engram` or a glob (`sqlite3 eng*.db`, `~/.engr*/*.db`). `read()` lexes a
command with the standard library's POSIX shell lexer (`shlex`: quotes, escapes and operators
as the shell reads them), splits it into simple commands, and makes of each word what bash
would: line continuations joined, `$'…'` decoded, braces expanded (`{a,b}`, `{1..3}`), `~`,
`$NAME` and `${NAME…}` (defaults, alternates, lengths, slices, prefix and suffix removal)
from assignments earlier in the line and the environment, `$((…))` on integers, and globs
matched on disk; wrapper words (`env`, `sudo`, `nohup`, `setsid`, `timeout`, `xargs`, …)
dropped, the program by its base name; recursing into `$(…)`, backticks, `<(…)`, `bash -c`,
`script -c`, `eval` and any argument that is itself a command line.

What cannot be decided here (a command substitution's output, an unknown variable, an
arithmetic on one, a glob too wide to match in bounds, `cd` to any of those) is kept as an
undecided part, `UNDECIDED`: the word is a pattern that can be anything there. A route judges
the files a command may write (`Reading.writes`) and the commands it may run (`Reading.runs`)
as such patterns against the targets it protects (`could_be`), so a protected target that an
undecided spelling could name is refused, not passed.

This is a normaliser, not a sandbox: a program that builds paths from its own input (a script,
a decoder) is not followed, and docs/reliability.md says so. Everything here is bounded (input
length, recursion depth, number of forms, brace results and glob work), so a pathological
command costs little and never waits on the ledger's lock.

Hot path: standard library only.
"""

from __future__ import annotations

import os
import re
import shlex

from governor.engine.words import (
    _NAME,
    _UNLITERAL,
    GLOB,
    MAX_BRACES,
    MAX_PATTERN,
    UNDECIDED,
    braces,
    parameters,
    prepare,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

MAX_TEXT = 32 * 1024  # characters of a command lexed (a longer one: its two ends)
MAX_DEPTH = 4  # nested $(…), bash -c, eval
MAX_FORMS = 96
MAX_MATCHES = 32  # paths one glob may add
MAX_PATHS = 48  # path-like words resolved per command line
MAX_LISTINGS = 64  # folders one command's globs may list


# A command that reads a whole folder tree, whatever is under it: naming a folder above a file to it
# is naming the file ("grep -r X ~" reads a spilled result; "ls ~" and "cd ~" do not).
RECURSIVE_READ = re.compile(
    r"\b(?:[ezf]?grep|zgrep)\b[^|;&\n]*\s(?:-[a-zA-Z]*[rR][a-zA-Z]*|--recursive|--dereference-recursive)\b|"
    r"\b(?:rg|ag|ack|find|tar|zip|rsync|strings|du -a)\b|\bcp\s+-[a-zA-Z]*[rRa]|\bcat\b[^|;&\n]*\*"
)


def reads_trees(text: str, tool_input: dict[str, object]) -> bool:
    """A grep tool's call (a pattern and no command), or a command that reads a folder tree whole."""
    return ("pattern" in tool_input and "command" not in tool_input) or bool(RECURSIVE_READ.search(text))


_OPERATORS = frozenset(";&|()<>\n")
_WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&", "&>|"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\+)?=")
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "fish", "busybox", "mksh", "yash"})
# Words that run the rest of the line as a command: the wrapper, and its options that take a value
# (skipped with it); `_SCRIPT_OPTIONS` are the letters of an option whose value is a command line.
_WRAPPERS = {
    "env": ("-u", "--unset", "-C", "--chdir", "-S", "--split-string"),
    "command": (), "builtin": (), "exec": ("-a",), "nohup": (), "time": ("-f", "-o"),
    "sudo": ("-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U"), "doas": ("-u",),
    "nice": ("-n",), "ionice": ("-c", "-n"), "timeout": ("-s", "-k", "--signal", "--kill-after"),
    "stdbuf": ("-i", "-o", "-e"), "xargs": ("-I", "-n", "-P", "-d", "-E", "-L", "-s", "-a"),
    "setsid": (), "unbuffer": (), "chronic": (), "watch": ("-n", "-d"), "strace": ("-e", "-o", "-p"),
    "ltrace": ("-e", "-o"), "flock": ("-w", "-E"), "caffeinate": (), "script": ("-E", "-O", "-I", "-T", "-t"),
    "su": ("-s", "-g", "-G"), "runuser": ("-u", "-g", "-G", "-s"), "chroot": (), "unshare": (),
    "systemd-run": ("-p", "-u", "--unit", "--property"), "firejail": (), "faketime": (), "torsocks": (),
    "proxychains": (), "ssh-agent": (), "dbus-run-session": (), "xvfb-run": ("-a", "-s", "-n"),
    "catchsegv": (), "valgrind": (), "busybox": (), "coproc": (), "then": (), "do": (), "else": (),
    "if": (), "while": (), "until": (), "!": (), "{": (),
}  # fmt: skip
_SCRIPT_OPTIONS = {"script": "c", "su": "c", "runuser": "c", "flock": "c", "sudo": "", "env": "S"}
_TAKES_DURATION = frozenset({"timeout"})  # a first positional word before the command
_TAKES_FOLDER = frozenset({"chroot", "flock"})
_PATHLIKE = re.compile(r"(?:~[\w.-]*|\.{1,2}|[\w.*?\[\]@+:-]+)?/[\w.*?\[\]@+:/~-]*|[\w.-]*[*?][\w.*?\[\]-]*")
_GLOB = re.compile(r"[*?\[]")
# Programs that read the files they name and write none of them (any other program's words may
# name a file it writes); and programs whose plain words are names, not files (a package, a verb).
_READERS = frozenset(
    [
        "cat",
        "tac",
        "head",
        "tail",
        "less",
        "more",
        "grep",
        "egrep",
        "fgrep",
        "zgrep",
        "rg",
        "ag",
        "ack",
        "ls",
        "dir",
        "wc",
        "stat",
        "file",
        "diff",
        "cmp",
        "echo",
        "printf",
        "test",
        "[",
        "[[",
        "true",
        "false",
        ":",
        "which",
        "type",
        "whence",
        "realpath",
        "readlink",
        "basename",
        "dirname",
        "pwd",
        "date",
        "sleep",
        "cut",
        "tr",
        "nl",
        "od",
        "xxd",
        "hexdump",
        "strings",
        "md5sum",
        "sha1sum",
        "sha256sum",
        "sha512sum",
        "b2sum",
        "cksum",
        "du",
        "df",
        "tree",
        "jq",
        "yq",
        "column",
        "fold",
        "fmt",
        "expand",
        "look",
        "id",
        "whoami",
        "uname",
        "hostname",
        "env",
        "printenv",
        "man",
        "help",
        "history",
        "jobs",
        "wait",
        "kill",
        "ps",
        "pgrep",
        "top",
        "free",
        "uptime",
        "lsof",
        "cd",
        "pushd",
        "popd",
    ]
)
_NAMES = frozenset(["pip", "pip3", "pipx", "uv", "npm", "npx", "pnpm", "yarn", "bun", "apt", "apt-get", "brew", "cargo", "go", "docker", "podman", "kubectl", "systemctl", "journalctl", "gem", "conda", "mamba", "poetry", "make"])  # fmt: skip
_REMOVERS = frozenset(
    ["rm", "rmdir", "mv", "unlink", "shred", "chmod", "chown", "chgrp", "rsync", "trash", "trash-put", "srm"]
)
_INTO_FOLDER = frozenset({"cp", "mv", "ln", "install", "rsync"})


class Reading:
    """What a command line may do, as judged: `forms` the texts a route pattern is searched in
    (undecided parts left out), `writes` the absolute paths it may create, change or remove and
    `removes` those it may remove or move (patterns: UNDECIDED any text, GLOB any text within a
    path component), `runs` each simple command as a pattern of its program's base name and words."""

    __slots__ = ("choices", "cwd", "env", "forms", "listings", "paths", "removes", "runs", "writes")

    def __init__(self, cwd: str, env: dict[str, str]) -> None:
        self.cwd = cwd
        self.env = env
        self.forms: list[str] = []
        self.writes: list[str] = []
        self.removes: list[str] = []
        self.runs: list[str] = []
        self.paths = 0
        self.listings = 0
        self.choices: dict[str, list[str]] = {}


def read(command: str, *, cwd: str = "", env: Mapping[str, str] | None = None) -> Reading:
    """`command` judged as bash would run it from `cwd` (the harness's working directory) with
    `env` (the environment it inherits; default: this process's)."""
    base = cwd or os.getcwd()
    state = Reading(base, dict(os.environ if env is None else env))
    state.env["PWD"] = base
    if isinstance(command, str) and command.strip():
        if len(command) > MAX_TEXT:
            command = command[: MAX_TEXT // 2] + "\n" + command[-MAX_TEXT // 2 :]
        _line(command.replace(UNDECIDED, "").replace(GLOB, ""), state, 0)
    state.forms = _unique([f.replace(UNDECIDED, "").replace(GLOB, "*") for f in state.forms])[:MAX_FORMS]
    state.writes = _unique(state.writes)
    state.removes = _unique(state.removes)
    state.runs = _unique(state.runs)
    return state


def forms(command: str, *, cwd: str = "", env: Mapping[str, str] | None = None) -> list[str]:
    """The texts a route pattern is judged on for `command`: each simple command as the words
    the shell would run, joined by single spaces, then each path it names as an absolute path
    (and what its globs match)."""
    return read(command, cwd=cwd, env=env).forms


def _unique(texts: list[str]) -> list[str]:
    seen: set[str] = set()
    return [t for t in texts if t and not (t in seen or seen.add(t))]  # type: ignore[func-returns-value]


def _line(text: str, state: Reading, depth: int) -> None:
    """Judge a command line (a list of simple commands)."""
    if depth > MAX_DEPTH or len(state.forms) >= MAX_FORMS:
        return
    text, bodies = prepare(text, state.env)
    for body in bodies:
        _line(body, state, depth + 1)
    for words, written in _simple_commands(_lex(text)):
        _simple(words, written, state, depth)
        if len(state.forms) >= MAX_FORMS:
            return


def _lex(text: str) -> list[str]:
    """The shell's words and operators of `text`; an unclosed quote is closed at the end, as a
    model's half-written command would be read."""
    for attempt in (text, text + '"', text + "'"):
        lexer = shlex.shlex(attempt, posix=True, punctuation_chars=";&|()<>\n")
        lexer.whitespace = " \t\r"
        lexer.commenters = ""
        lexer.whitespace_split = True
        lexer.escape = ""  # escapes were read by _prepare
        try:
            return list(lexer)
        except ValueError:
            continue
    return text.split()


def _simple_commands(tokens: list[str]) -> Iterator[tuple[list[str], set[int]]]:
    """Split a token list on the shell's command separators; a redirection's target stays a
    word of its command (the file it names is judged as a path), and is marked written when
    the redirection writes it."""
    words: list[str] = []
    written: set[int] = set()
    pending = False
    for token in tokens:
        if token and all(c in _OPERATORS for c in token):
            if token.startswith(("<", ">")) or token.rstrip("&|") in ("<", ">", ">>") or token.startswith("&>"):
                pending = token.lstrip("0123456789") in _WRITE_REDIRECTS or ">" in token
                continue
            if words:
                yield words, written
            words, written, pending = [], set(), False
            continue
        if pending and not (token.isdigit() or token == "-"):
            written.add(len(words))
        pending = False
        words.append(token)
    if words:
        yield words, written


def _words(word: str, state: Reading) -> list[str]:
    """What the shell makes of one lexed word: brace expansion, then `~` and parameters (literal
    characters given back; undecided parts kept). Globs are matched later, as paths."""
    out = []
    for name, items in state.choices.items():
        if f"${name}" in word or f"${{{name}" in word:
            return [w for item in items for w in _words(word.replace(f"${name}", item).replace(
                f"${{{name}}}", item), state)][:MAX_BRACES]  # fmt: skip
    for one in braces(word) if "{" in word else [word]:
        if one.startswith("~") and (len(one) == 1 or one[1] == "/"):
            one = (state.env.get("HOME") or os.path.expanduser("~")) + one[1:]
        if "$" in one:
            one = parameters(one, state.env)
        out.append(one)
    return out


def _simple(lexed: list[str], written: set[int], state: Reading, depth: int) -> None:
    """Judge one simple command: its run words, the paths its words name, the files it may write."""
    words: list[str] = []
    writes: set[int] = set()
    for number, word in enumerate(lexed):
        for one in _words(word, state):
            if number in written:
                writes.add(len(words))
            words.append(one)
    words = [w.translate(_UNLITERAL) for w in words]
    i = 0
    while i < len(words) and _ASSIGNMENT.match(words[i]):
        name, _, value = words[i].partition("=")
        state.env[name.rstrip("+")] = value
        i += 1
    start = i
    if len(words) > i + 2 and words[i] == "for" and words[i + 2] == "in" and _NAME.fullmatch(words[i + 1]):
        items = [p for w in words[i + 3 :] for p in (_glob(_absolute(w, state), state) or [w]
                 if _GLOB.search(w) else [w])]  # fmt: skip
        if len(items) <= MAX_BRACES and not any(UNDECIDED in item for item in items):
            state.choices[words[i + 1]] = items  # each word the loop's variable takes, in turn
        return
    run, skipped = _unwrap(words[i:], state, depth)
    start += skipped
    program = ""
    if run:
        program = run[0].rstrip("/").rsplit("/", 1)[-1] or run[0]
        state.forms.append(" ".join([program, *run[1:]]))
        state.runs.append(" ".join([program, *run[1:]])[:MAX_PATTERN])
        if program != run[0]:
            state.forms.append(" ".join(run))
        if program in ("export", "declare", "typeset", "local", "readonly"):
            for word in run[1:]:
                if _ASSIGNMENT.match(word):
                    name, _, value = word.partition("=")
                    state.env[name.rstrip("+")] = value
        elif program in ("cd", "pushd"):
            target = run[1] if len(run) > 1 and not run[1].startswith("-") else None
            home = state.env.get("HOME", state.cwd)
            state.cwd = os.path.normpath(os.path.join(state.cwd, target)) if target else home
            state.env["PWD"] = state.cwd
            state.forms.append(state.cwd)
        elif program in _SHELLS or program == "eval":
            body = _script(run, program)
            if body:
                _line(body, state, depth + 1)
        for word in run[1:]:
            if (" " in word or "\n" in word or ";" in word) and depth < MAX_DEPTH and program not in _READERS:
                _maybe_line(word, state, depth + 1)
    for word in words:
        _paths(word, state)
    for word in run[1:]:
        if "/" not in word and not word.startswith("-") and state.paths < MAX_PATHS and word not in (".", ".."):
            state.paths += 1
            path = os.path.join(state.cwd, word)
            if UNDECIDED not in path and os.path.lexists(path):
                state.forms.append(os.path.realpath(path))
    _writes(words, writes, start, run, program, state)


def _maybe_line(text: str, state: Reading, depth: int) -> None:
    """An argument that may be a command line another program runs (`ssh host "…"`, `watch "…"`)
    or may be data (a message, a file's text): judged as a line, but only what it decides
    plainly counts. Its globs and undecided parts stand for nothing here: data is not expanded,
    and a program that ran it as a line would be a wrapper judged as one (`_unwrap`)."""
    guess = Reading(state.cwd, dict(state.env))
    guess.listings = MAX_LISTINGS  # no folder listed for a guess: its globs stay unmatched
    _line(text, guess, depth)
    plain = [t for t in (*guess.writes, *guess.removes, *guess.runs) if UNDECIDED in t or GLOB in t]
    state.forms += guess.forms
    state.writes += [w for w in guess.writes if w not in plain]
    state.removes += [r for r in guess.removes if r not in plain]
    state.runs += [r for r in guess.runs if r not in plain]


def _writes(words: list[str], redirected: set[int], start: int, run: list[str], program: str,
            state: Reading) -> None:  # fmt: skip
    """Add the files the simple command may write: its redirections' targets, and the words of a
    program not known to write none (as absolute paths; a word into a folder: its file there)."""
    targets = [words[n] for n in sorted(redirected)]
    if run and program not in _READERS and not (program in _SHELLS or program == "eval"):
        for word in run[1:]:
            if word.startswith("-"):
                word = word.partition("=")[2] if "=" in word else ""
            elif "=" in word and "/" not in word.partition("=")[0]:
                word = word.partition("=")[2] or word
            if word and not (program in _NAMES and "/" not in word):
                targets.append(word)
    removes = program in _REMOVERS
    if program in _INTO_FOLDER and len(run) > 2:
        folder = run[-1]
        sources = [w for w in run[1:-1] if not w.startswith("-")]
        resolved = _absolute(folder, state)
        if folder.endswith("/") or (UNDECIDED not in resolved and os.path.isdir(resolved)) or UNDECIDED in folder:
            targets += [folder.rstrip("/") + "/" + s.rstrip("/").rsplit("/", 1)[-1] for s in sources]
    for word in targets[:MAX_PATHS]:
        if not word.strip(UNDECIDED + "/. "):
            continue  # a word computed whole at run time: nothing of it is known here
        for path in _expanded(word, state):
            state.writes.append(path)
            if removes:
                state.removes.append(path)


def _absolute(word: str, state: Reading) -> str:
    if word.startswith(UNDECIDED):
        return word  # it may be an absolute path, or any relative one
    return os.path.normpath(word if word.startswith("/") else os.path.join(state.cwd, word))


def _expanded(word: str, state: Reading) -> list[str]:
    """The absolute paths `word` may name: its glob's matches when they are known in bounds, or
    the word as a pattern. An undecided part before a `/` may climb out with `..`: then only
    what follows it is known."""
    path = _absolute(word, state)
    if _GLOB.search(path):
        matches = _glob(path, state)
        path = path if matches is not None else re.sub(r"\[[^]/]*\]|[*?]", GLOB, path)
        found = [path, *(matches or [])]
    else:
        found = [path]
        if UNDECIDED not in path and os.path.lexists(os.path.dirname(path)):
            real = os.path.realpath(path)  # through a symbolic link: the file it writes
            found += [real] if real != path else []
    out = []
    for one in found:
        cut = one.rfind(UNDECIDED, 0, one.rfind("/") + 1 if "/" in one else 0)
        out.append(UNDECIDED + one[cut + 1 :] if cut >= 0 else one)
    return [o[-MAX_PATTERN:] for o in out]


def _glob(pattern: str, state: Reading) -> list[str] | None:
    """What a glob matches now (at most MAX_MATCHES), or None when that is not known in bounds
    (too many folders to list, or an undecided part)."""
    from fnmatch import fnmatchcase

    if UNDECIDED in pattern or not pattern.startswith("/"):
        return None
    found = ["/"]
    for part in [p for p in pattern.split("/") if p]:
        if not _GLOB.search(part):
            found = [os.path.join(f, part) for f in found]
            continue
        following = []
        for folder in found:
            state.listings += 1
            if state.listings > MAX_LISTINGS:
                return None
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            hidden = part.startswith(".")
            following += [os.path.join(folder, name) for name in sorted(names)
                          if fnmatchcase(name, part) and (hidden or not name.startswith("."))]  # fmt: skip
            if len(following) > MAX_MATCHES * 4:
                return None
        found = following
    return [f for f in found if os.path.lexists(f)][:MAX_MATCHES]


def _unwrap(words: list[str], state: Reading, depth: int) -> tuple[list[str], int]:
    """`words` without the wrapper commands in front of the program they run (a wrapper's
    command line option, `script -c LINE`, is judged as a line), and how many words went."""
    dropped = 0
    for _ in range(12):
        if not words:
            return words, dropped
        program = words[0].rsplit("/", 1)[-1]
        if program not in _WRAPPERS:
            return words, dropped
        takes = _WRAPPERS[program]
        letters = _SCRIPT_OPTIONS.get(program, "")
        i = 1
        while i < len(words):
            word = words[i]
            if program == "env" and _ASSIGNMENT.match(word):
                name, _, value = word.partition("=")
                state.env[name] = value
            elif program == "env" and word in ("-C", "--chdir") and i + 1 < len(words):
                state.cwd = os.path.normpath(os.path.join(state.cwd, words[i + 1]))
                i += 1
            elif (letters and word.startswith("-") and not word.startswith("--") and letters in word[1:] \
                    and i + 1 < len(words)) or (word in ("--command", "--split-string") and i + 1 < len(words)):  # fmt: skip
                _line(words[i + 1], state, depth + 1)
                i += 1
            elif word in takes:
                i += 1
            elif not word.startswith("-") or word == "-":
                break
            i += 1
        if program in _TAKES_DURATION | _TAKES_FOLDER and i < len(words):
            i += 1
        words = words[i:]
        dropped += i
    return words, dropped


def _script(run: list[str], program: str) -> str:
    """The text a shell runs from its arguments (`bash -c TEXT`, `eval WORDS…`)."""
    if program == "eval":
        return " ".join(run[1:])
    for i, word in enumerate(run[1:], 1):
        if word.startswith("-") and not word.startswith("--") and "c" in word[1:] and i + 1 < len(run):
            return run[i + 1]
    return ""


def _paths(word: str, state: Reading) -> None:
    """Each path-like part of `word` as the absolute path it names, and what its glob matches."""
    for found in _PATHLIKE.findall(word.replace(UNDECIDED, ""))[:8]:
        if state.paths >= MAX_PATHS or len(state.forms) >= MAX_FORMS:
            return
        state.paths += 1
        path = found
        if path == "~" or path.startswith("~/"):
            path = (state.env.get("HOME") or os.path.expanduser("~")) + path[1:]
        if not path.startswith("/"):
            path = os.path.join(state.cwd.replace(UNDECIDED, ""), path)
        path = os.path.normpath(path)
        state.forms.append(path)
        if _GLOB.search(path):
            state.forms.extend(_glob(path, state) or [])
        elif os.path.islink(path) or os.path.islink(os.path.dirname(path)):
            state.forms.append(os.path.realpath(path))
