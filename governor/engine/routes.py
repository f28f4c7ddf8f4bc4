"""Other ways to the memory than its tools, and to the governor's own files, judged on what a
call does.

A shell command is read once into what it does (governor.engine.programs: the commands it runs,
the files it reads, lists, writes and removes, the addresses it connects to, the code it hands
an interpreter); a file tool's path fields and a fetch tool's URL are what it opens. A route is
taken when
- its `pattern` is found in something the call opens, connects to or runs as code (never in
  what it only passes along: a commit message, a search pattern, printed text);
- a file the call writes, creates or removes (or a folder above one, removed or moved) can be
  one of its `writes` (governor.engine.words.could_be: a part decided only at run time reaches a
  target only through what the command wrote around it);
- a command it runs can be one of its `runs`, its program named by what the command wrote.

A pattern is compiled and searched only in a text that holds one of its required words (the
compiled policy's index), so a command that names nothing protected costs no regular expression.
A command whose reading runs out of its budget (governor.engine.shell.Budget) is judged on its
literal text: refused when that text names a protected program, folder, port or file, allowed
otherwise; never let through because its check could not finish.

Hot path: standard library only; `re` only for a pattern whose words are in the call.
"""

from __future__ import annotations

import os
import unicodedata

from governor.engine.fields import roles
from governor.engine.rules import PLACE_WORDS
from governor.engine.shell import Budget, Unfinished
from governor.engine.words import ANY, HERE, PART, PLACED, could_be, decided, matches, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from governor.engine.effects import Effects
    from governor.engine.events import Decision, Event
    from governor.engine.rules import CompiledPolicy

CHECK_SECONDS = 1.5  # wall-clock time a command's reading may take (the harnesses wait 10 s or more)
UNSURE = "If that part is not meant to name it, write the path or command out plainly."


class Call:
    """What one call opens, runs and writes, as the routes judge it."""

    __slots__ = ("addresses", "code", "literal", "opened", "removes", "runs", "under", "writes")

    def __init__(self) -> None:
        self.opened: list[str] = []  # paths it reads, lists or writes (absolute, run-time parts marked)
        self.addresses: list[str] = []
        self.code: list[str] = []
        self.runs: list[str] = []
        self.writes: list[str] = []
        self.removes: list[str] = []
        self.under: list[str] = []  # folders anything may be written under
        self.literal = ""  # the command's own text, when its reading could not finish

    def unfinished(self, command: Any, why: str) -> None:
        self.literal += "\n" + (command if isinstance(command, str) else " ".join(map(str, command)))
        self.runs.append(f"{PART}unfinished:{why}")

    def add(self, found: Effects) -> None:
        reads = [path for path, _ in found.reads] + [path + "/" for path, whole in found.reads if whole]
        self.opened += reads + found.writes + found.removes  # opened: a name only listed is not
        self.under += found.under
        self.addresses += found.addresses
        self.code += found.code
        self.runs += found.runs
        self.writes += found.writes
        self.removes += found.removes


def read_call(tool_input: Any, fields: list[str] | None, cwd: str, env: Mapping[str, str] | None = None) -> Call:
    """What the call does, from its fields (`fields`: only those)."""

    from governor.engine.effects import startup

    call = Call()
    by_role = roles(tool_input, fields)
    base = cwd or os.getcwd()
    folder = next((text for text in by_role["path"] if text.startswith("/") and len(by_role["shell"]) == 1), None)
    home = (env or os.environ).get("HOME") or os.path.expanduser("~")
    for command in by_role["shell"]:
        found = reading(command, folder or base, env, home)
        if isinstance(found, str):
            call.unfinished(command, found)
        else:
            call.add(found)
    paths = by_role["path"] + [os.path.join(p, g) for p in by_role["path"][:1] or [base] for g in by_role["glob"]]
    for text in paths:
        path = home + text[1:] if text == "~" or text.startswith("~/") else text
        path = os.path.normpath(path if path.startswith("/") else os.path.join(base, path))
        real = os.path.realpath(path)  # through a symbolic link: the file it opens
        call.opened += [text, path, path + "/", real] if real != path else [text, path, path + "/"]
        if not by_role["shell"]:  # a file tool's path (a shell tool's is the folder it runs in)
            call.writes += [path, real] if real != path else [path]
            if startup(path, home):  # a shell's startup file: what is written into it runs later
                call.code += [
                    text for name in ("content", "new_string", "new_str") for text in _texts(tool_input, name)
                ]
    call.addresses += by_role["address"]
    call.code += by_role["data"]  # fields a route names that hold no path: searched as written
    return call


_readings: list[tuple[object, str, object, str, Effects | str]] = []  # the last few commands read, by this process


def reading(command: Any, cwd: str, env: Mapping[str, str] | None, home: str) -> Effects | str:
    """What `command` does, or why its reading could not finish (judged once per decision: the
    routes, and an adapter's look for kept results, ask for the same command)."""
    from governor.engine.effects import effects

    for seen, where, environment, at_home, found in _readings:
        if seen == command and where == cwd and environment is env and at_home == home:
            return found
    try:
        result: Effects | str = effects(command, cwd, env, Budget(seconds=CHECK_SECONDS), home)
    except (Unfinished, RecursionError, MemoryError) as err:
        result = str(err) or "its reading ran too deep"
    except Exception as err:  # the reading's own failure: the command is judged on its text, never let through
        result = f"its reading failed: {type(err).__name__}"
    _readings[:] = [*_readings[-3:], (command, cwd, env, home, result)]
    return result


def _texts(tool_input: Any, name: str) -> list[str]:
    value = tool_input.get(name) if isinstance(tool_input, dict) else None
    return [value] if isinstance(value, str) else []


def route_of(event: Event, policy: CompiledPolicy, state: str, ledger: str, env: Mapping[str, str] | None = None
             ) -> dict[str, Any] | None:  # fmt: skip
    """The route a non-memory tool's call takes, if any (judged without the ledger)."""
    return route_taken(event.tool_input, policy.routes_for(event.tool_name), policy.route_words(event.tool_name),
                       state, ledger, event.cwd or event.project or "", event.project or "", env)  # fmt: skip


def refusal(route: dict[str, Any], tool_name: str, instead: str | None = None) -> Decision:
    """The refusal of a call that takes `route` (with its `why`), as the model reads it."""
    from governor.engine.events import DENY, Decision

    name, why = route["name"], route.get("why") or ""
    which = f"route '{name}'" + (f": {why}" if why else "")
    if route.get("reason"):
        said = f"{route['reason']} ({which})"
    else:
        instead = instead or f"Use the memory server's {route.get('use') or 'mem_search'} tool instead."
        said = (f"this {tool_name} call reads the memory outside its tools ({which}), where this turn's memory "
                f"limits cannot count it. {instead}")  # fmt: skip
    return Decision(DENY, f"route:{name}", f"memory-governor: {said}")


def route_taken(tool_input: Any, routes: list[dict[str, Any]], needs: list[list[str] | None] | None = None,
                state: str = "", ledger: str = "", cwd: str = "", project: str = "",
                env: Mapping[str, str] | None = None) -> dict[str, Any] | None:  # fmt: skip
    """The first of `routes` the call takes, with `why` (what it does that reaches the target),
    or None. `needs`: each route's required words (the compiled policy's); `{state}` in a route
    is the state directory `state`, `{ledger}` the Redis the ledger is on (`ledger`)."""
    places = _Places(state, cwd, project, env)
    calls: dict[tuple[str, ...] | None, Call] = {}
    for number, route in enumerate(routes):
        fields = route.get("fields")
        key = tuple(fields) if fields else None
        if key not in calls:
            calls[key] = read_call(tool_input, fields, cwd, env)
        call = calls[key]
        words = needs[number] if needs is not None and number < len(needs) else None
        why = (_unfinished(call, route, words, places, state, ledger) if call.literal else None) or _taken(
            call, route, words, places, state, ledger
        )
        if why is not None:
            return {**route, "why": why}
    return None


def _taken(call: Call, route: dict[str, Any], words: list[str] | None, places: _Places, state: str,
           ledger: str) -> str | None:  # fmt: skip
    """What the call does that takes `route`, or None."""
    pattern = route.get("pattern")
    if pattern and pattern != "(?!)":
        texts = [*call.opened, *call.addresses, *call.code]
        if not all(t.isascii() for t in texts):  # a name a resolver or a decoder reads as its plain form
            import unicodedata

            texts += [unicodedata.normalize("NFKC", t) for t in texts if not t.isascii()]
        found = _search(pattern, [shown(t) for t in texts], words, state, ledger)
        if found is not None:
            return f"it reaches `{_quoted(found)}`"
    if not (call.removes or call.writes or call.under):  # nothing written: no target to fill in
        return _runs(call, route)
    targets = [one for target in route.get("writes") or () for one in places.fill(target)]
    for path in call.removes:  # a target, or a folder above one, removed or moved: the target goes with it
        for target in targets:
            plain = target.rstrip("/")  # a target ending in / is a folder: removed or moved, not made
            if could_be(path, plain) and not _none_named(path, plain):
                return _writes(path, plain, "removes or moves")
            if _above(path, plain) and not _none_named(path, plain):
                return _writes(path, plain, "removes or moves", above=True)
    for path in call.writes:
        for target in targets:
            if not target.endswith("/") and could_be(path, target) and not _none_named(path, target):
                return _writes(path, target, "writes")
    for path in call.under:  # what is unpacked or mounted there is not known: a protected folder, or one in it
        for target in targets:
            folder = target.removesuffix("/*").rstrip("/")
            if target.endswith(("/", "/*")) and could_be(path.rstrip("/") + "/" + PART, folder + "/*"):
                return _writes(path, folder, "may write anything under")
    return _runs(call, route)


def _runs(call: Call, route: dict[str, Any]) -> str | None:
    """What the call runs that can be a command of `route`'s `runs`, or None."""
    for line in call.runs:
        low = line.lower()  # names as a case-blind file system or pip has them
        plain = decided(low)
        for target in route.get("runs") or ():
            if matches(low.replace(HERE, ""), target) if plain else could_be(low, target, sep=" ", first=True):
                return f"it runs `{_quoted(line)}`" + ("" if plain else f", which can be `{target}`. {UNSURE}")
    return None


MAX_LISTED = 2000  # entries of a protected folder looked at for a file a search would change


def _none_named(path: str, target: str) -> bool:
    """A file found at run time under some folder (`find ~ -name core -exec rm {} +`) and a target
    that is anything in a known folder: is no file in that folder named so? Then the command
    cannot change one there. False when that cannot be told in bounds."""
    name = path.rsplit("/", 1)[-1]
    folder = target[:-2]
    if not target.endswith("/*") or "*" in folder or ANY not in path or not name or ANY in name:
        return False
    from governor.engine.words import STAR, glob_match

    pattern = name.replace(PART, STAR)
    seen = 0
    for _, folders, files in os.walk(folder):
        seen += len(folders) + len(files)
        if seen > MAX_LISTED:
            return False
        if any(glob_match(entry, pattern) for entry in (*folders, *files)):
            return False
    return True


def _writes(path: str, target: str, verb: str, above: bool = False) -> str:
    plain, target = path.replace(HERE, ""), target.replace(PLACED, "")
    if decided(plain):
        return f"it {verb} {plain}" + (f", and {target} in it" if above else "")
    return f"it {verb} `{_quoted(plain)}`, which can be {'a folder holding ' if above else ''}{target}. {UNSURE}"


def _above(path: str, target: str) -> bool:
    """Could removing or moving `path` take `target` with it (a folder above it)? Only for a target
    anchored at a known folder: `*/…` names no folder in particular. A decided path is above it
    wherever it was written from."""
    if target.startswith("*"):
        return False
    known = decided(path)
    plain = path.replace(HERE, "") if known else path
    return plain.rstrip("/") not in ("", ANY) and could_be(plain.rstrip("/") + "/" + ANY, target, pointed=known)


def _quoted(text: str) -> str:
    shown_text = text.replace(HERE, "").replace(ANY, "…").replace(PART, "…")
    shown_text = shown(shown_text)
    return shown_text if len(shown_text) <= 160 else shown_text[:150] + "…" + shown_text[-8:]


def _search(pattern: str, texts: list[str], words: list[str] | None, state: str, ledger: str) -> str | None:
    """The first of `texts` in which the route's `pattern` is found; the pattern is compiled only
    when a text holds one of its required `words`."""
    if words is not None:
        wanted = [_word(w, state, ledger) for w in words]
        if not any(w and w in text.lower() for text in texts for w in wanted):
            return None
    import re

    compiled = re.compile(pattern.replace("{state}", _spellings(state)).replace("{ledger}", _address(ledger)))
    return next((text for text in texts if compiled.search(text)), None)


def _word(word: str, state: str, ledger: str) -> str:
    """A required word with the placeholders it holds filled in for this machine ('' when it can
    name nothing here)."""
    if PLACE_WORDS["{state}"] in word:
        name = os.path.basename(os.path.abspath(state).rstrip("/")) if state else ""
        word = word.replace(PLACE_WORDS["{state}"], name.lower())
    if PLACE_WORDS["{ledger}"] in word:
        _, host, port = _redis(ledger)
        word = word.replace(PLACE_WORDS["{ledger}"], (port if host in LOOPBACK else host).lower()) if port else ""
    return word


def _redis(where: str) -> tuple[str, str, str]:
    """The scheme, host and port of a ledger URL."""
    scheme, _, rest = where.partition("://")
    host, _, port = rest.rpartition("@")[2].split("/", 1)[0].rpartition(":")
    return scheme, host, port


def _unfinished(call: Call, route: dict[str, Any], words: list[str] | None, places: _Places, state: str,
                ledger: str) -> str | None:  # fmt: skip
    """A command whose reading could not finish, judged on its literal text: does it name what the
    route protects (a required word of its pattern, or the name a target or command is known by)?"""
    home = os.path.expanduser("~")
    text = unicodedata.normalize("NFKC", call.literal)  # all of it: a long command's middle too
    for quote in ("'", '"', "\\\n", "\\"):
        text = text.replace(quote, "")
    text = text.replace("${HOME}", home).replace("$HOME", home).replace("~/", home + "/").lower()
    names = [_word(w, state, ledger) for w in words or ()]
    for target in [t for one in route.get("writes") or () for t in places.fill(one)] + list(route.get("runs") or ()):
        names.append(max(target.split("*"), key=len).strip().lower())
    named = next((n for n in names if len(n) >= 4 and n in text), None)
    if named is None:
        return None
    return (f"its check could not finish in time ({call.runs[-1].partition(':')[2]}), and it names `{named}`. "
            "Split it into plainer commands")  # fmt: skip


LOOPBACK = ("localhost", "127.0.0.1", "[::1]", "::1")


class _Places:
    """What a target's placeholders stand for: `{state}` the state directory, `{home}` the home folder,
    `{project}` the project and each folder above it, `{path}` each folder on PATH, `{package}` the
    governor's installed package, `{prefix}` the environment (sys.prefix) its interpreter runs in,
    `{cwd}` the folder the call runs in, `{$NAME}` the variable NAME's value (a target whose variable
    is not set names nothing); each also through any symbolic link."""

    __slots__ = ("cwd", "env", "known", "project", "state")

    def __init__(self, state: str, cwd: str, project: str, env: Mapping[str, str] | None = None) -> None:
        self.env = os.environ if env is None else env
        self.state, self.cwd, self.project = state, cwd, project
        self.known: dict[str, list[str]] = {}  # filled in when a call writes something (`fill`)

    def _find(self) -> None:
        import sys

        state, cwd, project = self.state, self.cwd, self.project
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        prefix = os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))  # a venv: even under -S
        prefix = prefix if os.path.isfile(os.path.join(prefix, "pyvenv.cfg")) else sys.prefix
        here = cwd or os.getcwd()
        home = self.env.get("HOME") or os.path.expanduser("~")
        ancestors = [project or here]
        while len(ancestors) < 12 and os.path.dirname(ancestors[-1]) not in ("/", ancestors[-1]):
            ancestors.append(os.path.dirname(ancestors[-1]))
        path = [os.path.join(project or here, p).rstrip("/") for p in self.env.get("PATH", "").split(":")[:32]]
        self.known = {"{state}": [os.path.abspath(state) if state else "/nonexistent-state-directory"],
                      "{home}": [home.rstrip("/") or "/nonexistent-home"], "{package}": [package],
                      "{prefix}": [prefix], "{cwd}": [here], "{project}": ancestors,
                      "{path}": path or ["/nonexistent-path"]}  # fmt: skip
        for name, values in self.known.items():
            self.known[name] = _linked(values)

    def fill(self, target: str) -> list[str]:
        """`target` with its placeholders filled, with each of their values."""
        if not self.known and "{" in target:
            self._find()
        out = [target]
        while out and "{" in out[0]:
            start = out[0].index("{")
            end = out[0].find("}", start)
            name = out[0][start : end + 1] if end > 0 else out[0][start:]
            values = self.known.get(name)
            if values is None:
                value = self.env.get(name[2:-1], "") if name.startswith("{$") else ""
                values = self.known[name] = _linked([value.rstrip("/")]) if value.startswith("/") else []
            out = [t.replace(name, v + PLACED) for t in out for v in values]
        return out


def _linked(values: list[str]) -> list[str]:
    return list(dict.fromkeys([*values, *(os.path.realpath(v) for v in values)]))


def _spellings(path: str) -> str:
    """A regex for `path` as a command may write it: as it is, or under ~ or $HOME."""
    from governor.engine.patterns import escape

    path = os.path.abspath(path) if path else "/nonexistent-state-directory"
    forms = [escape(path)]
    home = os.path.expanduser("~")
    if home not in ("", "/") and path.startswith(home.rstrip("/") + "/"):
        rest = escape(path[len(home.rstrip("/")) :])
        forms += [f"~{rest}", rf"\$HOME{rest}", rf"\$\{{HOME\}}{rest}"]
    return "(?:" + "|".join(forms) + ")"


def _address(where: str) -> str:
    """A regex for the Redis a ledger URL names, as a command may write it: its host name, or, for
    a Redis on the loopback (whose name a command need not write), its port as a number of its
    own; one that never matches for a ledger that is a file."""
    from governor.engine.patterns import escape

    scheme, host, port = _redis(where)
    if not scheme.startswith("redis") or not host or not port.isdigit():
        return "(?!)"
    if host in LOOPBACK:
        return rf"(?<![\w.]){port}(?![\w.])"
    return rf"(?<![\w.-]){escape(host)}(?![\w.-])"
