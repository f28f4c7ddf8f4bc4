"""How the programs that are more than options and operands use their words: tools whose verb runs
a command, shells and interpreters, copies and links, find, tar, git, cd, assignments and the rest.

`Kinds` is the part of the command walk (governor.engine.effects) that holds them: a method
`kind_NAME` for each program kind the table (governor.engine.programs) names.

Hot path: standard library only, no `re`.
"""

from __future__ import annotations

import os

from governor.engine.code import writes_files
from governor.engine.expansion import MAX_ALTERNATIVES, resolve
from governor.engine.programs import _GIT, _GIT_OPTIONS, Given, base, options_of, spec
from governor.engine.words import ANY, HERE, PART, QUERY, STAR, decided

TYPE_CHECKING = False
if TYPE_CHECKING:
    from governor.engine.shell import Script

# Tools whose verb runs the rest as a command, and options of theirs that take a value.
_RUN_VERBS = {"uv": ("run", "tool"), "poetry": ("run",), "pipenv": ("run",), "pdm": ("run",), "hatch": ("run",),
              "pixi": ("run", "exec"), "conda": ("run",), "mamba": ("run",), "micromamba": ("run",),
              "npm": ("exec", "x"), "pnpm": ("exec", "dlx"), "yarn": ("exec", "dlx"), "bun": ("x",),
              "bundle": ("exec",), "mise": ("exec", "x"), "asdf": ("exec",), "direnv": ("exec",),
              "nix": ("develop", "shell"), "devbox": ("run",), "rye": ("run",)}  # fmt: skip
_VALUED = frozenset(("-n", "--name", "-p", "--prefix", "--with", "--python", "--from", "--env", "-e", "--directory",
                     "--project", "-C", "--cwd", "--package", "--group", "--extra", "-E", "--environment",
                     "--frozen-lockfile", "-w", "--workspace", "--filter", "-F"))  # fmt: skip
# git settings that name a command it runs
_GIT_RUNS = frozenset(("core.pager", "core.editor", "core.sshcommand", "sequence.editor", "diff.external",
                       "core.fsmonitor", "core.hookspath"))  # fmt: skip


class Run:
    """One command being judged: its words, sorted by its program, where and with what input it runs."""

    __slots__ = ("argv", "assigned", "depth", "flags", "given", "state", "stdin")

    def __init__(self, argv: list[str], given: Given, assigned: list[tuple[str, str]], flags: set[str],
                 state: State, stdin: list[str] | None, depth: int) -> None:  # fmt: skip
        self.argv, self.given, self.assigned, self.flags = argv, given, assigned, flags
        self.state, self.stdin, self.depth = state, stdin, depth


class State:
    __slots__ = ("cwd", "env")

    def __init__(self, cwd: str, env: dict[str, list[str]]) -> None:
        self.cwd, self.env = cwd, env

    def copy(self) -> State:
        return State(self.cwd, dict(self.env))


class Kinds:
    """The walk's handlers for program kinds; the walk (governor.engine.effects._Walk) gives the rest."""

    __slots__ = ()
    written: dict[str, list[str]]
    links: dict[str, str]
    home: str

    if TYPE_CHECKING:

        def run(self, argv: list[str], state: State, stdin: list[str] | None, depth: int) -> None: ...
        def roles(self, words: list[tuple[str, str]], state: State, depth: int, flags: set[str] = ...,
                  kind: str = "") -> None: ...  # fmt: skip
        def word(self, word: str, role: str, state: State, depth: int) -> None: ...
        def use(self, role: str, path: str) -> None: ...
        def script(self, script: Script | str, state: State, depth: int) -> None: ...
        def code(self, text: str, state: State, depth: int = 0) -> None: ...

    def kind_tool(self, r: Run) -> None:
        """A tool whose verb runs a command (`uv run`, `poetry run`, `npm exec`, `direnv exec DIR`, …)."""
        program, words = base(r.argv[0]), [w for w, _ in r.assigned]
        verbs = _RUN_VERBS.get(program, ())
        if not words or words[0] not in verbs:
            self.roles([(w, role) for w, role, _ in r.given] + r.assigned, r.state, r.depth, r.flags)
            return
        at = r.argv.index(words[0], 1)  # what follows the verb is the command's, options and all
        given = options_of(r.argv[1:at], spec(program)[0], "tool")[0]
        for word, role, _ in given:
            self.word(word, role.rstrip("!"), r.state, r.depth)
        rest = r.argv[at + 1 :]
        if program == "nix":  # `nix develop -c CMD`, `nix shell PKG --command CMD`
            at = next((n for n, w in enumerate(rest) if w in ("-c", "--command")), len(rest))
            rest = rest[at + 1 :]
        elif program in ("direnv", "uv") and rest[:1] != ["--"]:  # `direnv exec DIR CMD`, `uv tool run CMD`
            rest = rest[1:] if program == "direnv" or rest[:1] == ["run"] else rest
        while rest and rest[0].startswith("-"):
            dropped = 2 if rest[0] in _VALUED and len(rest) > 1 else 1
            rest = rest[dropped:] if rest[0] != "--" else rest[1:]
        if rest:
            self.run(rest, r.state, r.stdin, r.depth + 1)

    def kind_tmux(self, r: Run) -> None:
        for word, _ in r.assigned:  # `tmux new -d 'cmd'`, `tmux send-keys 'cmd' Enter`: a line a shell runs
            if " " in word:
                self.script(word, r.state.copy(), r.depth + 1)

    def kind_command(self, r: Run) -> None:
        if not r.flags & {"-v", "-V"}:  # `command -v x` only looks x up
            self.roles(r.assigned, r.state, r.depth)

    def kind_env(self, r: Run) -> None:
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

    def kind_xargs(self, r: Run) -> None:
        marker = next((w for w, _, o in r.given if o in ("-I", "-i", "--replace")), None)
        for word, role, _ in r.given:
            self.word(word, role, r.state, r.depth)
        rest = [w for w, _ in r.assigned] or ["echo"]
        given = {option: word for word, _, option in r.given}
        cut = "\0" if "-0" in r.flags or "--null" in r.flags else given.get("-d", given.get("--delimiter"))
        cut = ("\n" if cut == "\\n" else cut[:1]) if cut else cut  # `-d '\n'`, `-d ,`
        items = [i for text in r.stdin or () for i in (text.split(cut) if cut else text.splitlines() if marker
                                                        else text.split()) if i.strip()][:64]  # fmt: skip
        if not items or len(items) > MAX_ALTERNATIVES:
            items = [PART]  # what it reads is not known here
        if marker and any(marker in w for w in rest):
            for item in items:
                self.run([w.replace(marker, item) for w in rest], r.state, None, r.depth + 1)
        else:
            self.run([*rest, *items], r.state, None, r.depth + 1)

    def kind_shell(self, r: Run) -> None:
        operands = [w for w, _ in r.assigned]
        inner = r.state.copy()
        if operands and any(f[:1] == "-" and f[1:2] != "-" and "c" in f for f in r.flags):
            _positional(inner, operands[1:])  # `sh -c 'rm -rf "$1"' _ PATH`
            self.script(operands[0], inner, r.depth + 1)
        elif operands and "-s" not in r.flags and operands[0] not in ("-", "/dev/stdin"):
            self.word(operands[0], "r", r.state, r.depth)
            _positional(inner, operands)
            for text in self._written(operands[0], r.state):  # a script this command line wrote first: code
                self.code(text, r.state, r.depth)
                self.script(text, inner, r.depth + 1)
        else:
            for text in r.stdin or ():
                self.script(text, inner, r.depth + 1)

    def kind_eval(self, r: Run) -> None:
        self.script(" ".join(r.argv[1:]), r.state, r.depth + 1)

    def kind_su(self, r: Run) -> None:
        for word, role, _ in r.given:
            self.word(word, role, r.state, r.depth)
        if not any(role == "S" for _, role, _ in r.given):
            for text in r.stdin or ():
                self.script(text, r.state.copy(), r.depth + 1)

    def kind_watch(self, r: Run) -> None:
        if r.assigned:
            self.script(" ".join(w for w, _ in r.assigned), r.state.copy(), r.depth + 1)

    def kind_interpreter(self, r: Run) -> None:
        program = base(r.argv[0])
        in_place = program.startswith(("perl", "ruby")) and "-i" in r.flags
        for word, role, _ in r.given:
            self.word(word, role, r.state, r.depth)
        operands = [w for w, _ in r.assigned]
        code = [w for w, role, _ in r.given if role == "x"]
        if not code and not any(option == "-m" for _, _, option in r.given):
            if not operands or operands[0] in ("-", "/dev/stdin"):
                for text in r.stdin or ():
                    self.code(text, r.state, r.depth)
                return
            script = operands.pop(0)
            self.word(script, "r", r.state, r.depth)  # the script, and its code where this line wrote it
            code = self._written(script, r.state)
            for text in code:
                self.code(text, r.state, r.depth)
        done = "w" if in_place else max((writes_files(text) for text in code), default="", key=len)
        for word in operands:  # its arguments: files it may read (`sys.argv[1]`), write or remove where the code does
            self.word(word, done or "r", r.state, r.depth)

    def kind_copy(self, r: Run) -> None:
        program = base(r.argv[0])
        recurse = bool({"-r", "-R", "-a", "--recursive", "--archive"} & r.flags) or program == "rsync"
        moves = program == "mv" or "--remove-source-files" in r.flags
        source = "m" if moves else "_" if program == "ln" else "R" if recurse else "r"
        if program == "ln" and {"-n", "-T", "--no-target-directory", "--no-dereference"} & r.flags and r.assigned:
            self.word(r.assigned[-1][0], "m", r.state, r.depth)  # `ln -sfn X .claude`: the folder replaced
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
                if program == "ln":  # a link made here, followed by what this line does after
                    self._link(resolve(folder, r.state.cwd), sources[0], r.state)
                return
        for word in sources:
            if not _remote(word, program):
                self.word(word, source, r.state, r.depth)
        if folder is None or _remote(folder, program):
            return
        if program == "ln" and len(sources) == 1:  # a link made here, followed by what this line does after
            link = resolve(folder.rstrip("/") + "/" + sources[0].rstrip("/").rsplit("/", 1)[-1], r.state.cwd)
            self._link(link, sources[0], r.state)
        self.word(folder, "u" if recurse and program != "ln" else "s", r.state, r.depth)  # a tree copied in: anything
        for word in sources:  # the file it makes there: named by the source, never a glob of its own
            name = word.rstrip("/").rsplit("/", 1)[-1] or PART
            self.word(folder.rstrip("/") + "/" + name.replace(STAR, PART).replace(QUERY, PART), "w", r.state, r.depth)

    def _written(self, word: str, state: State) -> list[str]:
        """The text this command line wrote into the file `word` names, when it wrote it."""
        return self.written.get(resolve(word, state.cwd).replace(HERE, ""), [])

    def _link(self, made: str, source: str, state: State) -> None:
        """A symbolic link this line made at `made`, to `source`: later paths through it are its target's."""
        if decided(made) and decided(resolve(source, state.cwd)):
            self.links[made.replace(HERE, "")] = resolve(source, state.cwd)

    def _folder(self, word: str, state: State) -> bool:
        """Could `word` be a folder (an existing one, or one named at run time)?"""
        path = resolve(word, state.cwd, folder=True).replace(HERE, "")
        return not decided(path) or os.path.isdir(path)

    def kind_find(self, r: Run) -> None:
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
        every = True  # no test before the first action narrows what it finds: the whole tree is acted on
        typed, deep = "", True  # `-type f` and `-type d` still find every file, or every folder
        i = 0
        while i < len(words):
            word, value = words[i], words[i + 1] if i + 1 < len(words) else ""
            if word in ("-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-lname", "-ilname"):
                names.append(value)
            if word in ("-type", "-maxdepth", "-mindepth"):
                typed = value if word == "-type" else typed
                deep = deep and word != "-maxdepth"
                every = every and typed in ("", "f", "d") and (deep or typed != "f")  # files near the top: not all
                i += 1
            elif word not in _ACTIONS and word not in ("-depth", "-xdev", "-mount", "-follow", "-noleaf"):
                every = False
            if word in ("-exec", "-execdir", "-ok", "-okdir"):
                end = i + 1
                while end < len(words) and words[end] not in (";", "+"):
                    end += 1
                found, where = (roots[0] if every and len(roots) == 1 else _found(roots, names)), r.state
                if word.endswith("dir"):  # run in the found file's folder, with `./name` for {}
                    where = State(found.rsplit("/", 1)[0], r.state.env)
                    found = "./" + found.rsplit("/", 1)[1]
                if end > i + 1:
                    self.run([w.replace("{}", found) for w in words[i + 1 : end]], where, None, r.depth + 1)
                i = end
            elif word == "-delete":  # a folder only once it is empty: the tree when all of it is reached
                for path in roots if every and deep and typed != "d" else [_found(roots, names)]:
                    self.use("m", path)
            elif word in ("-fprint", "-fprint0", "-fls", "-fprintf"):
                self.word(value, "w", r.state, r.depth)
            elif word in ("-newer", "-anewer", "-cnewer", "-samefile"):
                self.word(value, "r", r.state, r.depth)
            i += 1

    def kind_tar(self, r: Run) -> None:
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
        inside = State(folder, r.state.env)
        for word, _ in r.assigned:
            self.word(word, "R" if creates else "_", inside, r.depth)
        if not creates and ("x" in letters or {"--extract", "--get"} & r.flags):
            self.use("u", folder)

    def kind_extract(self, r: Run) -> None:
        self.roles([(w, role) for w, role, _ in r.given] + r.assigned[:1], r.state, r.depth)
        if not any(role == "u" for _, role, _ in r.given):
            self.use("u", r.state.cwd)  # unzip without -d: anything under the folder it runs in

    def kind_dd(self, r: Run) -> None:
        for word, _ in r.assigned:
            key, _, value = word.partition("=")
            if key in ("if", "of"):
                self.word(value, "r" if key == "if" else "w", r.state, r.depth)

    def kind_curl(self, r: Run) -> None:
        for word, _, option in r.given:  # a config file this line wrote, or its input: the URLs it names
            if option in ("-K", "--config"):
                for text in self._written(word, r.state) if word != "-" else r.stdin or ():
                    for line in text.splitlines():
                        key, _, value = line.strip().partition("=" if "=" in line else " ")
                        if key.strip().lstrip("-") in ("url", "proxy", "connect-to", "resolve"):
                            self.use("a", value.strip().strip('"'))
        for word, role, _ in r.given:
            self.word(word[1:] if role == "d" and word.startswith("@") else word, "r" if word[:1] == "@" else role,
                      r.state, r.depth)  # fmt: skip
        self.roles(r.assigned, r.state, r.depth)
        if "-O" in r.flags or "--remote-name" in r.flags or "--remote-name-all" in r.flags:
            self.use("w", resolve(PART, r.state.cwd))

    def kind_address(self, r: Run) -> None:
        for word, role, _ in r.given:
            self.word(word, role, r.state, r.depth)
        if r.assigned:  # `nc HOST PORT`: one address
            self.use("a", " ".join(w for w, _ in r.assigned))

    def kind_sqlite(self, r: Run) -> None:
        for text in [w for w, role in r.assigned if role == "x"] + list(r.stdin or ()):  # `.output FILE`, `.save FILE`
            for line in text.splitlines():
                words = line.split()
                if len(words) > 1 and words[0] in (".output", ".once", ".save", ".backup", ".log"):
                    self.word(words[-1], "w", r.state, r.depth)
        if "-readonly" in r.flags and r.assigned:
            r.assigned = [(r.assigned[0][0], "r"), *r.assigned[1:]]
        self.roles([(w, role) for w, role, _ in r.given] + r.assigned, r.state, r.depth)
        for text in r.stdin or ():
            self.code(text, r.state, r.depth)

    def kind_ssh(self, r: Run) -> None:
        for word, role, _ in r.given:
            self.word(word, role, r.state, r.depth)
        if r.assigned:
            self.use("a", r.assigned[0][0])
        if len(r.assigned) > 1:
            self.script(" ".join(w for w, _ in r.assigned[1:]), r.state.copy(), r.depth + 1)

    def kind_git(self, r: Run) -> list[str] | None:
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

    def kind_cd(self, r: Run) -> None:
        target = r.assigned[0][0] if r.assigned else self.home + HERE
        r.state.cwd = ANY if target == "-" else resolve(target, r.state.cwd, folder=True)
        self.use("l", r.state.cwd)

    def kind_assign(self, r: Run) -> None:
        for word, _ in r.assigned:
            name, eq, value = word.partition("=")
            if eq and name.removesuffix("+").isidentifier():
                r.state.env[name.removesuffix("+")] = [value]

    def kind_unset(self, r: Run) -> None:
        for word, _ in r.assigned:
            r.state.env.pop(word, None)

    def kind_read(self, r: Run) -> None:
        names = [w for w, _ in r.assigned] or ["REPLY"]
        line = r.stdin[0].split("\n", 1)[0] if r.stdin and len(r.stdin) == 1 else None
        values = line.split(None, len(names) - 1) if line is not None else []
        for n, name in enumerate(names):  # `read a <<< engram`: what it reads, where known
            r.state.env[name] = [values[n] if n < len(values) else "" if line is not None else PART]

    def kind_set(self, r: Run) -> None:
        if r.argv[1:2] == ["--"]:  # `set -- a b c`: the positional parameters
            _positional(r.state, ["", *r.argv[2:]])


def _positional(state: State, words: list[str]) -> None:
    """$0, $1, … and $@ as `words` make them (the first is $0)."""
    for n, word in enumerate(words[:10]):
        state.env[str(n)] = [word]
    state.env["@"] = state.env["*"] = [" ".join(words[1:])]
    state.env["#"] = [str(max(0, len(words) - 1))]


_ACTIONS = frozenset(("-exec", "-execdir", "-ok", "-okdir", "-delete", "-print", "-print0", "-printf", "-ls",
                      "-fprint", "-fprint0", "-fls", "-fprintf"))  # fmt: skip


def _found(roots: list[str], names: list[str]) -> str:
    """What `find` hands an action: a path under its start, named as its -name says when it does."""
    root = roots[0] if len(roots) == 1 else ANY
    name = names[-1] if names and "/" not in names[-1] else PART
    return root.rstrip("/") + "/" + ANY + "/" + (name.replace("*", PART).replace("?", PART) or PART)


def _remote(word: str, program: str) -> bool:
    return program in ("rsync", "scp") and ":" in word.split("/", 1)[0]
