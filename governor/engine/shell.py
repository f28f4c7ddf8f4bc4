"""A shell command as the shell would run it: the normalised forms a route is judged on.

A route pattern written for `engram search` must also see `"engram" search`, `e''ngram search`,
`P=engram; $P search`, `env FOO=1 /usr/local/bin/engram search`, `bash -c 'engram search'`,
`echo $(engram search x)`, and a path the shell would open after `cd ~/.engram` or a glob
(`sqlite3 eng*.db`, `~/.engr*/*.db`). `forms()` lexes a command with the standard library's
POSIX shell lexer (`shlex`: quotes, escapes and operators as the shell reads them), splits it
into simple commands, and gives for each the words the shell would run (quotes removed,
`$NAME` / `${NAME}` / `~` expanded from assignments earlier in the line and the environment,
wrapper words such as `env`, `command`, `exec`, `sudo`, `nohup`, `time`, `timeout` dropped,
the program by its base name), recursing into `$(…)`, backticks, `<(…)`, `bash -c`, `sh -c`
and `eval`; then every path-like word as the absolute path it names, and what a glob in it
matches on disk now.

This is a normaliser, not a sandbox: a command that builds its words at run time (decoded,
read from a file, computed by another program) is not resolved, and docs/reliability.md says
so. Everything here is bounded (input length, recursion depth, number of forms and of glob
matches), so a pathological command costs little and never waits on the ledger's lock.

Hot path: standard library only.
"""

from __future__ import annotations

import os
import re
import shlex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

MAX_TEXT = 32 * 1024  # characters of a command lexed (a longer one: its two ends)
MAX_DEPTH = 4  # nested $(…), bash -c, eval
MAX_FORMS = 96
MAX_MATCHES = 32  # paths one glob may add
MAX_PATHS = 48  # path-like words resolved per command line

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
_SEPARATORS = ("&&", "||", ";;", ";", "|", "&", "\n", "(", ")", "|&")
_REDIRECTS = ("<", ">", ">>", "<<", "<<<", ">&", "<&", "&>", "&>>", ">|", "<>")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\+)?=")
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?:[:#%/^,][^}]*)?\}|([A-Za-z_][A-Za-z0-9_]*))")
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "fish", "busybox"})
# Words that run the rest of the line as a command: the wrapper, and how many option words it
# takes a value for (their values are skipped with them).
_WRAPPERS = {
    "env": ("-u", "--unset", "-C", "--chdir", "-S", "--split-string"),
    "command": (), "builtin": (), "exec": ("-a",), "nohup": (), "time": ("-f", "-o"),
    "sudo": ("-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U"), "doas": ("-u",),
    "nice": ("-n",), "ionice": ("-c", "-n"), "timeout": ("-s", "-k", "--signal", "--kill-after"),
    "stdbuf": ("-i", "-o", "-e"), "xargs": ("-I", "-n", "-P", "-d", "-E", "-L", "-s", "-a"),
    "setsid": (), "unbuffer": (), "chronic": (), "watch": ("-n", "-d"), "strace": ("-e", "-o", "-p"),
    "ltrace": ("-e", "-o"), "flock": ("-w", "-E", "-c"), "caffeinate": (), "script": ("-c",),
}  # fmt: skip
_TAKES_DURATION = frozenset({"timeout"})  # a first positional word before the command
_PATHLIKE = re.compile(r"(?:~[\w.-]*|\.{1,2}|[\w.*?\[\]@+:-]+)?/[\w.*?\[\]@+:/~-]*|[\w.-]*[*?][\w.*?\[\]-]*")
_GLOB = re.compile(r"[*?\[]")


def forms(command: str, *, cwd: str = "", env: Mapping[str, str] | None = None) -> list[str]:
    """The texts a route pattern is judged on for `command`: each simple command as the words
    the shell would run, joined by single spaces, then each path it names as an absolute path
    (and what its globs match). `cwd` is where the command starts (the harness's working
    directory); `env` the environment it inherits (default: this process's)."""
    if not isinstance(command, str) or not command.strip():
        return []
    if len(command) > MAX_TEXT:
        command = command[: MAX_TEXT // 2] + "\n" + command[-MAX_TEXT // 2 :]
    out: list[str] = []
    state = _State(cwd or os.getcwd(), dict(os.environ if env is None else env))
    _line(command, state, out, 0)
    seen: set[str] = set()
    unique = []
    for text in out:
        if text and text not in seen:
            seen.add(text)
            unique.append(text)
    return unique[:MAX_FORMS]


class _State:
    __slots__ = ("cwd", "env", "paths")

    def __init__(self, cwd: str, env: dict[str, str]) -> None:
        self.cwd = cwd
        self.env = env
        self.paths = 0


def _line(text: str, state: _State, out: list[str], depth: int) -> None:
    """Add the forms of a command line (a list of simple commands) to `out`."""
    if depth > MAX_DEPTH or len(out) >= MAX_FORMS:
        return
    text, bodies = _substitutions(text)
    for body in bodies:
        _line(body, state, out, depth + 1)
    for words in _simple_commands(_lex(text)):
        _simple(words, state, out, depth)
        if len(out) >= MAX_FORMS:
            return


def _substitutions(text: str) -> tuple[str, list[str]]:
    """`text` with each `$(…)`, `<(…)`, `>(…)` and backtick body replaced by a placeholder
    word, and the bodies (run by the shell even inside double quotes). Single-quoted text is
    left alone, as the shell leaves it."""
    bodies: list[str] = []
    kept: list[str] = []
    i, n = 0, len(text)
    quote = ""
    while i < n:
        c = text[i]
        if quote == "'":
            kept.append(c)
            if c == "'":
                quote = ""
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            kept.append(text[i : i + 2])
            i += 2
            continue
        if c == "'" and not quote:
            quote = "'"
        elif c == '"':
            quote = "" if quote == '"' else '"'
        if c in "$<>" and text.startswith("(", i + 1) and not text.startswith("((", i + 1):
            end = _closing(text, i + 2)
            bodies.append(text[i + 2 : end])
            kept.append(" __sub__ ")
            i = end + 1
            continue
        if c == "`":
            end = text.find("`", i + 1)
            end = n if end < 0 else end
            bodies.append(text[i + 1 : end])
            kept.append(" __sub__ ")
            i = end + 1
            continue
        kept.append(c)
        i += 1
    return "".join(kept), bodies


def _closing(text: str, start: int) -> int:
    """The index of the `)` that closes a `(` opened just before `start` (or the end)."""
    level, quote, i = 1, "", start
    while i < len(text):
        c = text[i]
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == "\\":
            i += 1
        elif c == "(":
            level += 1
        elif c == ")":
            level -= 1
            if level == 0:
                return i
        i += 1
    return len(text)


def _lex(text: str) -> list[str]:
    """The shell's words and operators of `text`; an unclosed quote is closed at the end, as a
    model's half-written command would be read."""
    for attempt in (text, text + '"', text + "'"):
        lexer = shlex.shlex(attempt, posix=True, punctuation_chars=";&|()<>\n")
        lexer.whitespace = " \t\r"
        lexer.commenters = ""
        lexer.whitespace_split = True
        try:
            return list(lexer)
        except ValueError:
            continue
    return text.split()


def _simple_commands(tokens: list[str]) -> Iterator[list[str]]:
    """Split a token list on the shell's command separators; a redirection's target stays a
    word of its command (the file it names is judged as a path)."""
    words: list[str] = []
    for token in tokens:
        if token and all(c in _OPERATORS for c in token):
            if token in _REDIRECTS or token.rstrip("&") in _REDIRECTS or token.startswith(("<", ">")):
                continue
            if words:
                yield words
            words = []
            continue
        words.append(token)
    if words:
        yield words


def _expand(word: str, state: _State) -> str:
    """`$NAME`, `${NAME}` (with or without an operator after it: its value) and a leading `~`."""
    if "$" in word:
        word = _VARIABLE.sub(lambda m: state.env.get(m.group(1) or m.group(2), ""), word)
    if word == "~" or word.startswith("~/"):
        word = (state.env.get("HOME") or os.path.expanduser("~")) + word[1:]
    return word


def _simple(words: list[str], state: _State, out: list[str], depth: int) -> None:
    """The forms of one simple command: its run words, and the paths its words name."""
    words = [_expand(w, state) for w in words]
    i = 0
    while i < len(words) and _ASSIGNMENT.match(words[i]):
        name, _, value = words[i].partition("=")
        state.env[name.rstrip("+")] = value
        i += 1
    run = _unwrap(words[i:], state, out, depth)
    if run:
        program = run[0].rstrip("/").rsplit("/", 1)[-1] or run[0]
        out.append(" ".join([program, *run[1:]]))
        if program != run[0]:
            out.append(" ".join(run))
        if program in ("export", "declare", "typeset", "local", "readonly"):
            for word in run[1:]:
                if _ASSIGNMENT.match(word):
                    name, _, value = word.partition("=")
                    state.env[name.rstrip("+")] = value
        elif program in ("cd", "pushd"):
            target = run[1] if len(run) > 1 and not run[1].startswith("-") else None
            home = state.env.get("HOME", state.cwd)
            state.cwd = os.path.normpath(os.path.join(state.cwd, target)) if target else home
            out.append(state.cwd)
        elif program in _SHELLS or program == "eval":
            body = _script(run, program)
            if body:
                _line(body, state, out, depth + 1)
    for word in words:
        _paths(word, state, out)
    for word in run[1:]:
        if "/" not in word and not word.startswith("-") and state.paths < MAX_PATHS and word not in (".", ".."):
            state.paths += 1
            path = os.path.join(state.cwd, word)
            if os.path.lexists(path):
                out.append(os.path.realpath(path))


def _unwrap(words: list[str], state: _State, out: list[str], depth: int) -> list[str]:
    """`words` without the wrapper commands in front of the program they run."""
    for _ in range(8):
        if not words:
            return words
        program = words[0].rsplit("/", 1)[-1]
        if program not in _WRAPPERS:
            return words
        takes = _WRAPPERS[program]
        i = 1
        while i < len(words):
            word = words[i]
            if program == "env" and _ASSIGNMENT.match(word):
                name, _, value = word.partition("=")
                state.env[name] = value
            elif program == "env" and word in ("-S", "--split-string") and i + 1 < len(words):
                _line(words[i + 1], state, out, depth + 1)
                i += 1
            elif word in takes:
                i += 1
            elif not word.startswith("-") or word == "-":
                break
            i += 1
        if program in _TAKES_DURATION and i < len(words):
            i += 1
        words = words[i:]
    return words


def _script(run: list[str], program: str) -> str:
    """The text a shell runs from its arguments (`bash -c TEXT`, `eval WORDS…`)."""
    if program == "eval":
        return " ".join(run[1:])
    for i, word in enumerate(run[1:], 1):
        if word.startswith("-") and not word.startswith("--") and "c" in word[1:] and i + 1 < len(run):
            return run[i + 1]
    return ""


def _paths(word: str, state: _State, out: list[str]) -> None:
    """Each path-like part of `word` as the absolute path it names, and what its glob matches."""
    from glob import iglob
    from itertools import islice

    for found in _PATHLIKE.findall(word)[:8]:
        if state.paths >= MAX_PATHS or len(out) >= MAX_FORMS:
            return
        state.paths += 1
        path = _expand(found, state)
        if not (path.startswith("/") or path.startswith("~")):
            path = os.path.join(state.cwd, path)
        path = os.path.normpath(path)
        out.append(path)
        if _GLOB.search(path) and sum(bool(_GLOB.search(part)) for part in path.split("/")) <= 2:
            out.extend(islice(iglob(path), MAX_MATCHES))
        elif os.path.islink(path) or os.path.islink(os.path.dirname(path)):
            out.append(os.path.realpath(path))
