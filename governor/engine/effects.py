"""What a command line does: the commands it runs, the files it opens, writes and removes, the
addresses it connects to and the code it hands an interpreter.

`effects(command, cwd, env)` parses the command once (governor.engine.shell) and walks it as bash
would run it: each command's words expanded (governor.engine.expansion) and given their roles by
what its program does with them (governor.engine.programs): an option and the value it takes, an
operand, a pattern or message (data: never judged), inline code, a command it runs in turn
(`sudo`, `xargs`, `find -exec`, `bash -c`, `ssh`). Redirections write or read their targets; a
heredoc or a pipe is its command's input: code for an interpreter, a script for a shell, and a
script too when it is written into a shell's startup file.

This is a reading of the command, not a sandbox: a program that builds a path from its own input
(a script file, a decoder) is not followed (docs/reliability.md says what that leaves).

Hot path: standard library only, no `re`.
"""

from __future__ import annotations

import os

from governor.engine.code import command_lines, written_paths
from governor.engine.expansion import MAX_ALTERNATIVES, Expansion, glob_chars, home_of, printed, resolve
from governor.engine.kinds import Kinds, Run, State
from governor.engine.programs import base, operands_of, options_of, spec, without
from governor.engine.shell import Budget, Command, Script, Unfinished, parse
from governor.engine.words import ANY, HERE, PART, decided, glob_match

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

MAX_MATCHES = 32  # paths one glob may add
MAX_LISTINGS = 64  # folders one command line's globs may list
MAX_USES = 512  # paths, addresses and code texts one command line may add
_MARKS = {c: "\ufffd" for c in range(7)}  # a character the reading uses as a mark, in the command: a plain one
_PRINTERS = frozenset(("echo", "printf", "cat", "tee"))  # what they print is known from their words or input
# Variables another program runs as a command, or as a script it sources.
_COMMAND_VARIABLES = frozenset(("PAGER", "GIT_PAGER", "MANPAGER", "EDITOR", "VISUAL", "GIT_EDITOR", "LESSOPEN",
                                "BASH_ENV", "ENV", "PROMPT_COMMAND", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF",
                                "SUDO_ASKPASS", "SSH_ASKPASS"))  # fmt: skip
# A file a shell runs when it starts: what is written into it is a script, run later.
_STARTUP = (".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".bash_aliases", ".bashrc.d", ".profile",
            ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zshrc.d", ".kshrc", ".mkshrc", ".config/fish",
            ".config/environment.d", ".pam_environment", ".xprofile", ".xsessionrc")  # fmt: skip


class Effects:
    """What a command line does. Paths are absolute, with run-time parts (governor.engine.words);
    `runs`: each command as its program's base name and the words it is given (data left out),
    and as written when the program was named by a path."""

    __slots__ = ("addresses", "code", "listings", "lists", "reads", "removes", "runs", "under", "writes")

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.reads: list[tuple[str, bool]] = []  # (path, whether the folder tree under it is read)
        self.lists: list[str] = []
        self.writes: list[str] = []
        self.removes: list[str] = []  # removed or moved away (a folder: what is under it too)
        self.under: list[str] = []  # folders anything may be written under, what is not known here
        self.addresses: list[str] = []
        self.code: list[str] = []
        self.listings = 0

    def paths(self) -> list[str]:
        return [*(p for p, _ in self.reads), *self.lists, *self.writes, *self.removes]

    def add(self, where: list, item: object) -> None:  # type: ignore[type-arg]
        if len(where) >= MAX_USES:
            raise Unfinished("the command does too many things to check")
        if item not in where:
            where.append(item)


def effects(command: object, cwd: str, env: Mapping[str, str] | None = None, budget: Budget | None = None,
            home: str | None = None) -> Effects:  # fmt: skip
    """What `command` (a command line, or a program and its arguments) does when bash runs it
    from `cwd` with `env` (default: this process's). Raises Unfinished past `budget`."""
    env = dict(os.environ if env is None else env)
    env.pop("IFS", None)  # bash sets its own
    walk = _Walk(Effects(), budget or Budget(), home or home_of(env))
    if isinstance(command, str):  # the reading's own marks never come from the command's text
        command = command.translate(_MARKS)
    elif isinstance(command, list):
        command = [str(w).translate(_MARKS) for w in command]
    state = State((cwd or os.getcwd()).rstrip("/") + HERE, {k: [v] for k, v in env.items()})
    if isinstance(command, list):
        walk.run([str(w) for w in command], state, None, 0)
    elif isinstance(command, str) and command.strip():
        walk.script(parse(command, walk.budget), state, 0)
    return walk.effects


class _Walk(Kinds):
    __slots__ = ("budget", "effects", "home", "last", "links", "written")

    def __init__(self, found: Effects, budget: Budget, home: str) -> None:
        self.effects, self.budget, self.home = found, budget, home
        self.written: dict[str, list[str]] = {}  # files this command line wrote, with the text it wrote
        self.links: dict[str, str] = {}  # symbolic links this command line made, to what they name
        self.last: list[str] | None = None  # what the last command of the script last walked printed

    def script(self, script: Script | str, state: State, depth: int) -> None:
        """Judge a script (or a command line's text) in order; a pipe feeds what a command prints on."""
        if isinstance(script, str):
            script = parse(script, self.budget, depth)
        printed: list[str] | None = None
        self.last = None
        outer: list[State] = []  # the states a subshell's end goes back to
        for command in script.commands:
            if command.kind == "push":
                outer.append(state)
                state = state.copy()
            elif command.kind == "pop":
                state = outer.pop() if outer else state
            else:  # a command whose output goes to a pipe runs in a subshell of its own
                here = state.copy() if command.pipes else state
                printed = self.command(command, here, depth, printed if command.piped else None)
                self.last = printed

    def expansion(self, state: State, depth: int) -> Expansion:
        return Expansion(state.env, state.cwd, self.home, self.budget, lambda s: self.output(s, state, depth),
                         lambda s: self.pipe(s, state, depth))  # fmt: skip

    def pipe(self, script: Script, state: State, depth: int) -> str:
        """A process substitution `<(…)`: the pipe's name, with what it prints where that is known."""
        name = f"/dev/fd/{63 - len(self.written) % 32}"
        self.written[name] = [
            text for text in self.output(script, state, depth) if PART not in text and ANY not in text
        ]
        return name

    def command(self, command: Command, state: State, depth: int, piped: list[str] | None) -> list[str] | None:
        """Judge one command; what it prints, when that is known."""
        expand = self.expansion(state, depth)
        if command.kind == "for":
            items = [w for word in command.words for fields in expand.word(word) for w in fields] or [PART]
            if len(items) > MAX_ALTERNATIVES:
                raise Unfinished("a loop takes too many values to check")
            state.env[command.name] = items
            return None
        values = [(name, [" ".join(f) for f in expand.word(word, split=False)]) for name, word in command.assigns]
        for name, value in values:  # a variable that names a command another program runs (PAGER, BASH_ENV)
            for text in value if name in _COMMAND_VARIABLES else ():
                self.script(text, state.copy(), depth + 1)
        argvs = self.argvs([expand.word(word) for word in command.words])
        if command.kind == "test":
            return None
        if not argvs:
            for name, value in values:
                state.env[name] = value
        before = len(self.effects.writes)
        stdin = piped
        for redirect in command.redirects:
            stdin = self.redirect(redirect, expand, state) or stdin
        for argv in argvs:
            self.run(argv, state, stdin, depth)
        output = [printed(argv, state.cwd, stdin) for argv in argvs if base(argv[0]) in _PRINTERS]
        for path in self.effects.writes[before:]:
            if output:
                self.written[path.replace(HERE, "")] = output
            if startup(path, self.home):  # written into a file a shell runs when it starts: code, a script, later
                for text in output or stdin or [" ".join(argv) for argv in argvs]:
                    self.code(text, state, depth)
                    if output:
                        self.script(text, state.copy(), depth + 1)
        return output or None

    def argvs(self, words: list[list[list[str]]]) -> list[list[str]]:
        """The argument lists a command's words may make (at most MAX_ALTERNATIVES in all)."""
        if not words:
            return []
        out: list[list[str]] = [[]]
        for spellings in words:
            out = [argv + fields for argv in out for fields in spellings]
            if len(out) > MAX_ALTERNATIVES:
                raise Unfinished("a command has too many possible spellings to check")
        return [argv for argv in out if argv]

    def redirect(self, redirect: object, expand: Expansion, state: State) -> list[str] | None:
        """A redirection's file, read or written; its text when it is the command's input."""
        op, target, body = redirect.op, redirect.target, redirect.body  # type: ignore[attr-defined]
        if body is not None:
            text = [" ".join(fields) for fields in expand.word(body, split=False)]
            return text if redirect.fd in ("", "0") else None  # type: ignore[attr-defined]
        known: list[str] = []
        for fields in expand.word(target) if target is not None else ():
            for word in fields:
                if op in ("<&", ">&") and (word.isdigit() or word == "-"):
                    continue  # a file descriptor, not a file
                self.word(word, "r" if op == "<" else "w", state, 0)
                known += self._written(word, state) if op == "<" else []  # a file this line wrote, read back
        return known or None

    def run(self, argv: list[str], state: State, stdin: list[str] | None, depth: int) -> None:
        """Judge one command: what its program does with each of its words."""
        self.budget.spend(len(argv))
        if depth > 12:
            raise Unfinished("the command nests commands too deeply to check")
        program = base(argv[0])
        for text in self._written(argv[0], state) if "/" in argv[0] else ():  # `./s.sh` after writing it
            self.script(text, state.copy(), depth + 1)
        options, roles, repeat, kind = spec(program)
        words = argv[1:]
        if kind == "tar" and words and words[0].isalpha():
            words = ["-" + words[0], *words[1:]]  # `tar czf x.tgz src`: the first word's letters are options
        given, operands, flags = options_of(words, options, kind)
        if roles and roles[0].startswith("("):
            roles = roles[1:] if any(role.endswith("!") for _, role, _ in given) else [roles[0][1:-1], *roles[1:]]
        given = [(w, r.rstrip("!"), o) for w, r, o in given]
        assigned = operands_of(operands, roles, repeat, kind)
        data = [w for w, r, _ in given if r == "d"] + [w for w, r in assigned if r == "d"]
        special = getattr(self, "kind_" + kind, None) if kind in _KINDS else None
        if special is not None:
            data += special(Run(argv, given, assigned, flags, state, stdin, depth)) or []
        else:
            self.roles([(w, r) for w, r, _ in given] + assigned, state, depth, flags, kind)
        kept = [program, *without(words, data)]
        self.effects.add(self.effects.runs, " ".join(kept))
        if "/" in argv[0]:
            self.effects.add(self.effects.runs, " ".join([argv[0], *kept[1:]]))

    def roles(self, words: list[tuple[str, str]], state: State, depth: int, flags: set[str] = frozenset(),  # type: ignore[assignment]
              kind: str = "") -> None:  # fmt: skip
        recurse = kind == "recurse" and bool({"-r", "-R", "--recursive", "--dereference-recursive"} & flags)
        in_place = kind == "in-place" and any(f.startswith(("-i", "--in-place")) for f in flags)
        for at, (word, role) in enumerate(words):
            if role == "n":
                self.run([w for w, _ in words[at:]], state, None, depth + 1)
                return
            if role == "r" and (recurse or in_place):
                role = "w" if in_place else "R"
            self.word(word, role, state, depth)

    def word(self, word: str, role: str, state: State, depth: int) -> None:
        """What one word is used as: a path read, listed, written…, an address, code, a script."""
        if role in ("d", "_") or not word:
            return
        if role == "x":
            self.code(word, state, depth)
        elif role == "a":
            self.use("a", word)
        elif role == "S":
            self.script(word, state.copy(), depth + 1)
        elif role == "v":  # a container's volume, SOURCE:TARGET: the container may write its source
            self.word(word.split(":", 1)[0], "u", state, depth)
        else:
            if role == "c":
                role = "l"
            for path in self.paths(word, state, role):
                self.use(role, path)

    def use(self, role: str, path: str) -> None:
        """Keep `path` (an address, for role "a") as what `role` says the command does with it."""
        e = self.effects
        if role in ("r", "R"):
            e.add(e.reads, (path, role == "R"))
        elif role == "l":
            e.add(e.lists, path)
        elif role in ("w", "s"):
            e.add(e.writes, path)
        elif role == "u":  # a folder anything may be written under (an archive unpacked, a container's volume)
            e.add(e.under, path)
        elif role == "m":
            e.add(e.removes, path)
            e.add(e.writes, path)
        elif role == "a":
            e.add(e.addresses, path)

    def paths(self, word: str, state: State, role: str) -> list[str]:
        """The absolute paths `word` names from the current folder: a glob's matches where they are
        known in bounds, beside the word as a pattern."""
        if len(word) > 4096:
            return []
        path = resolve(word, state.cwd, folder=role in ("u", "s", "l"))
        plain = path.replace(HERE, "")
        for link, target in self.links.items():  # through a link this line made: what it names
            if plain == link or plain.startswith(link + "/"):
                path = target + plain[len(link) :]
        linked = []  # through links already there: the file it opens, beside the path it opens it by
        if decided(plain) and role != "l" and plain.rstrip("/"):
            folder, name = plain.rstrip("/").rsplit("/", 1)
            real = os.path.realpath(folder or "/").rstrip("/") + "/" + name if role == "m" else os.path.realpath(plain)
            linked += [real] if real != plain.rstrip("/") else []
        if not glob_chars(path):  # (a link removed or moved is the link, not what it names)
            return [path, *linked]
        return [path, *(self._glob(path.replace(HERE, "")) or [])]

    def _glob(self, pattern: str) -> list[str] | None:
        """What a glob matches now (at most MAX_MATCHES), or None when that is not known in bounds."""
        if not pattern.startswith("/") or ANY in pattern or PART in pattern:
            return None
        found = ["/"]
        for part in [p for p in pattern.split("/") if p]:
            if not glob_chars(part):
                found = [os.path.join(f, part) for f in found]
                continue
            following = []
            for folder in found:
                self.effects.listings += 1
                self.budget.spend(8)
                if self.effects.listings > MAX_LISTINGS:
                    return None
                try:
                    names = sorted(os.listdir(folder))
                except OSError:
                    continue
                hidden = part.startswith(".")
                following += [os.path.join(folder, n) for n in names
                              if glob_match(n, part) and (hidden or not n.startswith("."))]  # fmt: skip
                if len(following) > MAX_MATCHES * 4:
                    return None
            found = following
        return [f for f in found if os.path.lexists(f)][:MAX_MATCHES]

    def code(self, text: str, state: State, depth: int = 0) -> None:
        """Inline code: kept for the routes' patterns; the files its write calls name are written, and
        the command lines it hands a call that runs commands are judged as scripts."""
        self.effects.add(self.effects.code, text)
        for literal, removes in written_paths(text):
            path = resolve(self.home + HERE + literal[1:] if literal.startswith("~") else literal, state.cwd)
            self.use("m" if removes else "w", path)
        for line in command_lines(text):
            self.script(line, state.copy(), depth + 1)

    def output(self, script: Script, state: State, depth: int) -> list[str]:
        """What a command substitution prints (its commands judged first), where that is known."""
        inner = state.copy()
        self.script(script, inner, depth + 1)
        commands = script.commands
        if len(commands) > 1 and self.last and all(c.piped or c is commands[0] for c in commands):
            return self.last  # a pipeline whose last command prints what it was handed (`ls x/* | head -1`)
        if len(commands) != 1 or commands[0].kind != "simple" or not commands[0].words:
            return [PART]
        expand = self.expansion(inner, depth + 1)
        stdin = next(([" ".join(f) for f in expand.word(r.body, split=False)] for r in commands[0].redirects
                      if r.body is not None), None)  # fmt: skip
        argvs = self.argvs([expand.word(w) for w in commands[0].words])
        return [printed(argv, inner.cwd, stdin, inner.env) for argv in argvs]


_KINDS = frozenset(n[5:] for n in dir(Kinds) if n.startswith("kind_"))


def startup(path: str, home: str) -> bool:
    """Is `path` a file a shell (or the session) runs or reads when it starts: the user's profile and
    rc files, the folders they source, the session's environment?"""
    plain, home = path.replace(HERE, ""), home.replace(HERE, "")
    inside = any(plain == f"{home}/{name}" or plain.startswith(f"{home}/{name}/") for name in _STARTUP)
    direnv = plain.rsplit("/", 1)[-1] == ".envrc"  # what direnv loads in a folder the shell enters
    return inside or direnv or plain.startswith(("/etc/profile", "/etc/bash", "/etc/environment", "/etc/zsh"))
