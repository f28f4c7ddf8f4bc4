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

from governor.engine.expansion import MAX_ALTERNATIVES, Expansion, glob_chars, home_of, printed, resolve
from governor.engine.programs import _GIT, _GIT_OPTIONS, Given, base, operands_of, options_of, spec, without
from governor.engine.shell import Budget, Command, Script, Unfinished, parse
from governor.engine.words import ANY, HERE, PART, QUERY, STAR, decided, glob_match

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

MAX_MATCHES = 32  # paths one glob may add
MAX_LISTINGS = 64  # folders one command line's globs may list
MAX_USES = 512  # paths, addresses and code texts one command line may add
_PRINTERS = frozenset(("echo", "printf", "cat", "tee"))  # what they print is known from their words or input
_GIT_RUNS = frozenset(
    (
        "core.pager",
        "core.editor",
        "core.sshcommand",
        "sequence.editor",
        "diff.external",
        "core.fsmonitor",
        "core.hookspath",
    )
)  # git settings that name a command it runs
# A file a shell runs when it starts: what is written into it is a script, run later.
_STARTUP = (".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv", ".zprofile",
            ".zlogin", ".kshrc", ".mkshrc", ".config/fish/config.fish")  # fmt: skip
# What inline code calls when it writes a file: its string literals that look like paths are then written.
_WRITES_IN_CODE = ("'w'", '"w"', "'a'", '"a"', "'wb'", '"wb"', "'ab'", '"ab"', "'x'", '"x"', "'w+'", '"w+"',
                   "'r+'", '"r+"', "mode=", "write_text", "write_bytes", "writeFile", "appendFile", "createWriteStream",
                   "unlink", "remove(", "rmtree", "rmdir", "rename", "replace(", "move(", "copy", "symlink", "chmod",
                   "truncate", "mkdir", "makedirs", "File.write", "IO.write", "File.open", "file_put_contents",
                   "fopen", "rm_rf", "rm_r", ">>")  # fmt: skip


class Effects:
    """What a command line does. Paths are absolute, with run-time parts (governor.engine.words);
    `runs`: each command as its program's base name and the words it is given (data left out),
    and as written when the program was named by a path."""

    __slots__ = ("addresses", "code", "listings", "lists", "reads", "removes", "runs", "writes")

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.reads: list[tuple[str, bool]] = []  # (path, whether the folder tree under it is read)
        self.lists: list[str] = []
        self.writes: list[str] = []
        self.removes: list[str] = []  # removed or moved away (a folder: what is under it too)
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


class _Run:
    """One command being judged: its words, sorted by its program, where and with what input it runs."""

    __slots__ = ("argv", "assigned", "depth", "flags", "given", "state", "stdin")

    def __init__(self, argv: list[str], given: Given, assigned: list[tuple[str, str]], flags: set[str],
                 state: _State, stdin: list[str] | None, depth: int) -> None:  # fmt: skip
        self.argv, self.given, self.assigned, self.flags = argv, given, assigned, flags
        self.state, self.stdin, self.depth = state, stdin, depth


class _State:
    __slots__ = ("cwd", "env")

    def __init__(self, cwd: str, env: dict[str, list[str]]) -> None:
        self.cwd, self.env = cwd, env

    def copy(self) -> _State:
        return _State(self.cwd, dict(self.env))


def effects(command: object, cwd: str, env: Mapping[str, str] | None = None, budget: Budget | None = None,
            home: str | None = None) -> Effects:  # fmt: skip
    """What `command` (a command line, or a program and its arguments) does when bash runs it
    from `cwd` with `env` (default: this process's). Raises Unfinished past `budget`."""
    env = dict(os.environ if env is None else env)
    walk = _Walk(Effects(), budget or Budget(), home or home_of(env))
    state = _State((cwd or os.getcwd()).rstrip("/") + HERE, {k: [v] for k, v in env.items()})
    if isinstance(command, list):
        walk.run([str(w) for w in command], state, None, 0)
    elif isinstance(command, str) and command.strip():
        walk.script(parse(command, walk.budget), state, 0)
    return walk.effects


class _Walk:
    __slots__ = ("budget", "effects", "home", "written")

    def __init__(self, found: Effects, budget: Budget, home: str) -> None:
        self.effects, self.budget, self.home = found, budget, home
        self.written: dict[str, list[str]] = {}  # files this command line wrote, with the text it wrote

    def script(self, script: Script | str, state: _State, depth: int) -> None:
        """Judge a script (or a command line's text) in order; a pipe feeds what a command prints on."""
        if isinstance(script, str):
            script = parse(script, self.budget, depth)
        printed: list[str] | None = None
        for command in script.commands:
            printed = self.command(command, state, depth, printed if command.piped else None)

    def expansion(self, state: _State, depth: int) -> Expansion:
        return Expansion(state.env, state.cwd, self.home, self.budget, lambda s: self.output(s, state, depth))

    def command(self, command: Command, state: _State, depth: int, piped: list[str] | None) -> list[str] | None:
        """Judge one command; what it prints, when that is known."""
        expand = self.expansion(state, depth)
        if command.kind == "for":
            items = [w for word in command.words for fields in expand.word(word) for w in fields] or [PART]
            if len(items) > MAX_ALTERNATIVES:
                raise Unfinished("a loop takes too many values to check")
            state.env[command.name] = items
            return None
        values = [(name, [" ".join(f) for f in expand.word(word, split=False)]) for name, word in command.assigns]
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
        for path in self.effects.writes[before:] if output else ():
            self.written[path.replace(HERE, "")] = output
            if _startup(path, self.home):
                for text in output:  # written into a file the shell runs when it starts: code, a script
                    self.code(text, state)
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

    def redirect(self, redirect: object, expand: Expansion, state: _State) -> list[str] | None:
        """A redirection's file, read or written; its text when it is the command's input."""
        op, target, body = redirect.op, redirect.target, redirect.body  # type: ignore[attr-defined]
        if body is not None:
            return [" ".join(fields) for fields in expand.word(body, split=False)]
        for fields in expand.word(target) if target is not None else ():
            for word in fields:
                if op in ("<&", ">&") and (word.isdigit() or word == "-"):
                    continue  # a file descriptor, not a file
                self.word(word, "r" if op == "<" else "w", state, 0)
        return None

    def run(self, argv: list[str], state: _State, stdin: list[str] | None, depth: int) -> None:
        """Judge one command: what its program does with each of its words."""
        self.budget.spend(len(argv))
        if depth > 12:
            raise Unfinished("the command nests commands too deeply to check")
        program = base(argv[0])
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
            data += special(_Run(argv, given, assigned, flags, state, stdin, depth)) or []
        else:
            self.roles([(w, r) for w, r, _ in given] + assigned, state, depth, flags, kind)
        kept = [program, *without(words, data)]
        self.effects.add(self.effects.runs, " ".join(kept))
        if "/" in argv[0]:
            self.effects.add(self.effects.runs, " ".join([argv[0], *kept[1:]]))

    def roles(self, words: list[tuple[str, str]], state: _State, depth: int, flags: set[str] = frozenset(),  # type: ignore[assignment]
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

    def word(self, word: str, role: str, state: _State, depth: int) -> None:
        """What one word is used as: a path read, listed, written…, an address, code, a script."""
        if role in ("d", "_") or not word:
            return
        if role == "x":
            self.code(word, state)
        elif role == "a":
            self.effects.add(self.effects.addresses, word)
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
        e = self.effects
        if role in ("r", "R"):
            e.add(e.reads, (path, role == "R"))
        elif role == "l":
            e.add(e.lists, path)
        elif role in ("w", "u", "s"):
            e.add(e.writes, path)
            if role == "u":
                e.add(e.writes, path.rstrip("/") + "/" + ANY)
        elif role == "m":
            e.add(e.removes, path)
            e.add(e.writes, path)

    def paths(self, word: str, state: _State, role: str) -> list[str]:
        """The absolute paths `word` names from the current folder: a glob's matches where they are
        known in bounds, beside the word as a pattern."""
        if len(word) > 4096:
            return []
        path = resolve(word, state.cwd, folder=role in ("u", "s", "l"))
        if not glob_chars(path):
            return [path]
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

    def code(self, text: str, state: _State) -> None:
        """Inline code: kept for the routes' patterns; a literal path in it is written when the
        code writes files at all."""
        self.effects.add(self.effects.code, text)
        if any(call in text for call in _WRITES_IN_CODE):
            for literal in _literals(text):
                if literal.startswith("~"):
                    literal = self.home + literal[1:]
                if "/" in literal or literal.startswith("."):
                    self.use("w", resolve(literal, state.cwd))

    def output(self, script: Script, state: _State, depth: int) -> list[str]:
        """What a command substitution prints (its commands judged first), where that is known."""
        inner = state.copy()
        self.script(script, inner, depth + 1)
        commands = script.commands
        if len(commands) != 1 or commands[0].kind != "simple" or not commands[0].words:
            return [PART]
        expand = self.expansion(inner, depth + 1)
        stdin = next(([" ".join(f) for f in expand.word(r.body, split=False)] for r in commands[0].redirects
                      if r.body is not None), None)  # fmt: skip
        return [printed(argv, inner.cwd, stdin) for argv in self.argvs([expand.word(w) for w in commands[0].words])]

    # -- programs that are more than options and operands ----------------------------------------

    def kind_command(self, r: _Run) -> None:
        if not r.flags & {"-v", "-V"}:  # `command -v x` only looks x up
            self.roles(r.assigned, r.state, r.depth)

    def kind_env(self, r: _Run) -> None:
        inner = r.state.copy()
        for word, role, _ in r.given:
            if role == "c":
                inner.cwd = resolve(word, r.state.cwd, folder=True)
            self.word(word, role, inner, r.depth)
        rest = [w for w, _ in r.assigned]
        while rest and "=" in rest[0] and rest[0].partition("=")[0].isidentifier():
            name, _, value = rest.pop(0).partition("=")
            inner.env[name] = [value]
        if rest:
            self.run(rest, inner, r.stdin, r.depth + 1)

    def kind_xargs(self, r: _Run) -> None:
        marker = next((w for w, _, o in r.given if o in ("-I", "-i", "--replace")), None)
        for word, role, _ in r.given:
            self.word(word, role, r.state, r.depth)
        rest = [w for w, _ in r.assigned] or ["echo"]
        if marker and any(marker in w for w in rest):
            rest = [w.replace(marker, PART) for w in rest]
        else:
            rest.append(PART)
        self.run(rest, r.state, None, r.depth + 1)

    def kind_shell(self, r: _Run) -> None:
        operands = [w for w, _ in r.assigned]
        if operands and any(f[:1] == "-" and f[1:2] != "-" and "c" in f for f in r.flags):
            self.script(operands[0], r.state.copy(), r.depth + 1)
        elif operands and "-s" not in r.flags:
            self.word(operands[0], "r", r.state, r.depth)
            for text in self._written(operands[0], r.state):  # a script this command line wrote first
                self.script(text, r.state.copy(), r.depth + 1)
        else:
            for text in r.stdin or ():
                self.script(text, r.state.copy(), r.depth + 1)

    def kind_eval(self, r: _Run) -> None:
        self.script(" ".join(r.argv[1:]), r.state, r.depth + 1)

    def kind_su(self, r: _Run) -> None:
        for word, role, _ in r.given:
            self.word(word, role, r.state, r.depth)
        if not any(role == "S" for _, role, _ in r.given):
            for text in r.stdin or ():
                self.script(text, r.state.copy(), r.depth + 1)

    def kind_watch(self, r: _Run) -> None:
        if r.assigned:
            self.script(" ".join(w for w, _ in r.assigned), r.state.copy(), r.depth + 1)

    def kind_interpreter(self, r: _Run) -> None:
        program = base(r.argv[0])
        in_place = program.startswith(("perl", "ruby")) and "-i" in r.flags
        for word, role, _ in r.given:
            self.word(word, role, r.state, r.depth)
        operands = [w for w, _ in r.assigned]
        if not any(role == "x" or option == "-m" for _, role, option in r.given):
            if not operands or operands[0] == "-":
                for text in r.stdin or ():
                    self.code(text, r.state)
                return
            script = operands.pop(0)
            self.word(script, "r", r.state, r.depth)  # the script, and its code where this line wrote it
            for text in self._written(script, r.state):
                self.code(text, r.state)
        for word in operands:
            self.word(word, "w" if in_place else "_", r.state, r.depth)

    def kind_copy(self, r: _Run) -> None:
        program = base(r.argv[0])
        recurse = bool({"-r", "-R", "-a", "--recursive", "--archive"} & r.flags) or program == "rsync"
        source = "m" if program == "mv" else "_" if program == "ln" else "R" if recurse else "r"
        folder = next((w for w, role, _ in r.given if role == "s"), None)
        for word, role, _ in r.given:
            if role != "s":
                self.word(word, role, r.state, r.depth)
        sources = [w for w, _ in r.assigned]
        if folder is None and program == "ln" and len(sources) == 1:
            folder = "."  # `ln -s TARGET`: a link named for it, here
        elif folder is None and len(sources) >= 2:
            folder = sources.pop()
            if len(sources) == 1 and not folder.endswith("/") and not self._folder(folder, r.state):
                self.word(sources[0], source, r.state, r.depth)
                self.word(folder, "w", r.state, r.depth)  # one file, to a file
                return
        for word in sources:
            if not _remote(word, program):
                self.word(word, source, r.state, r.depth)
        if folder is None or _remote(folder, program):
            return
        self.word(folder, "s", r.state, r.depth)
        for word in sources:  # the file it makes there: named by the source, never a glob of its own
            name = word.rstrip("/").rsplit("/", 1)[-1] or PART
            self.word(folder.rstrip("/") + "/" + name.replace(STAR, PART).replace(QUERY, PART), "w", r.state, r.depth)

    def _written(self, word: str, state: _State) -> list[str]:
        """The text this command line wrote into the file `word` names, when it wrote it."""
        return self.written.get(resolve(word, state.cwd).replace(HERE, ""), [])

    def _folder(self, word: str, state: _State) -> bool:
        """Could `word` be a folder (an existing one, or one named at run time)?"""
        path = resolve(word, state.cwd, folder=True).replace(HERE, "")
        return not decided(path) or os.path.isdir(path)

    def kind_find(self, r: _Run) -> None:
        words = r.argv[1:]
        while words and words[0] in ("-H", "-L", "-P"):
            words.pop(0)
        starts = []
        while words and not words[0].startswith(("-", "(", "!")):
            starts.append(words.pop(0))
        roots = [resolve(s, r.state.cwd, folder=True) for s in starts or ["."]]
        for root in roots:
            self.use("l", root)
        names: list[str] = []
        i = 0
        while i < len(words):
            word, value = words[i], words[i + 1] if i + 1 < len(words) else ""
            if word in ("-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-lname", "-ilname"):
                names.append(value)
            elif word in ("-exec", "-execdir", "-ok", "-okdir"):
                end = i + 1
                while end < len(words) and words[end] not in (";", "+"):
                    end += 1
                found, where = _found(roots, names), r.state
                if word.endswith("dir"):  # run in the found file's folder, with `./name` for {}
                    where = _State(found.rsplit("/", 1)[0], r.state.env)
                    found = "./" + found.rsplit("/", 1)[1]
                if end > i + 1:
                    self.run([w.replace("{}", found) for w in words[i + 1 : end]], where, None, r.depth + 1)
                i = end
            elif word == "-delete":
                self.use("m", _found(roots, names))
            elif word in ("-fprint", "-fprint0", "-fls", "-fprintf"):
                self.word(value, "w", r.state, r.depth)
            elif word in ("-newer", "-anewer", "-cnewer", "-samefile"):
                self.word(value, "r", r.state, r.depth)
            i += 1

    def kind_tar(self, r: _Run) -> None:
        letters = "".join(f[1:] for f in r.flags if f[:1] == "-" and f[1:2] != "-")
        creates = any(c in letters for c in "cruA") or bool({"--create", "--append", "--update"} & r.flags)
        folder = r.state.cwd
        for word, role, option in r.given:
            if role == "c":
                folder = resolve(word, r.state.cwd, folder=True)
            elif option in ("-f", "--file"):
                self.word(word, "w" if creates else "r", r.state, r.depth)
            else:
                self.word(word, role, r.state, r.depth)
        inside = _State(folder, r.state.env)
        for word, _ in r.assigned:
            self.word(word, "R" if creates else "_", inside, r.depth)
        if not creates and ("x" in letters or {"--extract", "--get"} & r.flags):
            self.use("u", folder)

    def kind_extract(self, r: _Run) -> None:
        self.roles([(w, r) for w, r, _ in r.given] + r.assigned[:1], r.state, r.depth)
        if not any(role == "u" for _, role, _ in r.given):
            self.use("u", r.state.cwd)  # unzip without -d: anything under the folder it runs in

    def kind_dd(self, r: _Run) -> None:
        for word, _ in r.assigned:
            key, _, value = word.partition("=")
            if key in ("if", "of"):
                self.word(value, "r" if key == "if" else "w", r.state, r.depth)

    def kind_curl(self, r: _Run) -> None:
        for word, role, _ in r.given:
            self.word(word[1:] if role == "d" and word.startswith("@") else word, "r" if word[:1] == "@" else role,
                      r.state, r.depth)  # fmt: skip
        self.roles(r.assigned, r.state, r.depth)
        if "-O" in r.flags or "--remote-name" in r.flags or "--remote-name-all" in r.flags:
            self.use("w", resolve(PART, r.state.cwd))

    def kind_address(self, r: _Run) -> None:
        for word, role, _ in r.given:
            self.word(word, role, r.state, r.depth)
        if r.assigned:  # `nc HOST PORT`: one address
            self.effects.add(self.effects.addresses, " ".join(w for w, _ in r.assigned))

    def kind_sqlite(self, r: _Run) -> None:
        if "-readonly" in r.flags and r.assigned:
            r.assigned = [(r.assigned[0][0], "r"), *r.assigned[1:]]
        self.roles([(w, r) for w, r, _ in r.given] + r.assigned, r.state, r.depth)
        for text in r.stdin or ():
            self.code(text, r.state)

    def kind_ssh(self, r: _Run) -> None:
        for word, role, _ in r.given:
            self.word(word, role, r.state, r.depth)
        if r.assigned:
            self.effects.add(self.effects.addresses, r.assigned[0][0])
        if len(r.assigned) > 1:
            self.script(" ".join(w for w, _ in r.assigned[1:]), r.state.copy(), r.depth + 1)

    def kind_git(self, r: _Run) -> list[str] | None:
        inner = r.state.copy()
        for word, role, _ in r.given:
            if role == "c":
                inner.cwd = resolve(word, r.state.cwd, folder=True)
        if not r.assigned:
            return None
        for word, _, option in r.given:  # `-c alias.x='!cmd'`, `-c core.pager=cmd`: a command git runs
            key, _, value = word.partition("=")
            if option == "-c" and (key.lower() in _GIT_RUNS or (key.lower().startswith("alias.") and value[:1] == "!")):
                self.script(value.removeprefix("!"), inner.copy(), r.depth + 1)
        verb = r.assigned[0][0]
        options, operands, _ = options_of([w for w, _ in r.assigned[1:]], _GIT_OPTIONS, "")
        for word, role, _ in options:
            self.word(word, role, inner, r.depth)
        for word in operands:
            self.word(word, _GIT.get(verb, "_"), inner, r.depth)
        return [w for w, role, _ in options if role == "d"] + (operands if _GIT.get(verb) == "d" else [])

    def kind_cd(self, r: _Run) -> None:
        target = r.assigned[0][0] if r.assigned else self.home
        r.state.cwd = ANY if target == "-" else resolve(target, r.state.cwd, folder=True)
        self.use("l", r.state.cwd)

    def kind_assign(self, r: _Run) -> None:
        for word, _ in r.assigned:
            name, eq, value = word.partition("=")
            if eq and name.removesuffix("+").isidentifier():
                r.state.env[name.removesuffix("+")] = [value]

    def kind_unset(self, r: _Run) -> None:
        for word, _ in r.assigned:
            r.state.env.pop(word, None)

    def kind_read(self, r: _Run) -> None:
        for word, _ in r.assigned or [("REPLY", "_")]:
            r.state.env[word] = [PART]


_KINDS = frozenset(n[5:] for n in dir(_Walk) if n.startswith("kind_"))


def _found(roots: list[str], names: list[str]) -> str:
    """What `find` hands an action: a path under its start, named as its -name says when it does."""
    root = roots[0] if len(roots) == 1 else ANY
    name = names[-1] if names and "/" not in names[-1] else PART
    return root.rstrip("/") + "/" + ANY + "/" + (name.replace("*", PART).replace("?", PART) or PART)


def _remote(word: str, program: str) -> bool:
    return program in ("rsync", "scp") and ":" in word.split("/", 1)[0]


def _startup(path: str, home: str) -> bool:
    """Is `path` a file a shell runs when it starts (the user's profile, rc files)?"""
    plain = path.replace(HERE, "")
    return any(plain == f"{home}/{name}" for name in _STARTUP) or plain.startswith(("/etc/profile", "/etc/bash"))


def _literals(code: str) -> list[str]:
    """The short string literals in a piece of code ('…' or "…", one line each)."""
    out: list[str] = []
    i = 0
    while i < len(code) and len(out) < 64:
        c = code[i]
        if c in "'\"":
            end = code.find(c, i + 1)
            if end < 0:
                break
            text = code[i + 1 : end]
            if text and len(text) <= 1024 and "\n" not in text:
                out.append(text)
            i = end + 1
        else:
            i += 1
    return out
