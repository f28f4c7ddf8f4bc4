"""A shell command as bash reads it: one parse into commands and words, and what a word expands to.

`parse(text)` reads a command line the way bash's grammar does, into a `Script`: simple commands
(assignments, words, redirections, a heredoc's or here-string's text as their input, whether a
pipe feeds them), `for` loops and tests, in the order they run, through lists, pipelines,
subshells, groups, `if`/`while`/`case` and function bodies. A word keeps its parts as written:
literal text (quoted or not), parameter expansions with their operator, command and process
substitutions (parsed in turn), arithmetic. Nothing is matched against text here.

What a word expands to is governor.engine.expansion's.

Everything is bounded by a `Budget` of steps and wall-clock time; past it, `Unfinished` is
raised and the caller judges the command on its literal text instead (governor.engine.routes).

Hot path: standard library only, no `re`.
"""

from __future__ import annotations

import time

MAX_TEXT = 256 * 1024  # characters of a command read; a longer one is judged on its literal text
MAX_DEPTH = 12  # nested substitutions, `bash -c`, `eval`


class Unfinished(Exception):
    """The command's check ran out of its budget (steps, depth or time)."""


class Budget:
    """Bounded work: a number of steps and a wall-clock deadline."""

    __slots__ = ("deadline", "steps")

    def __init__(self, steps: int = 300_000, seconds: float = 1.0) -> None:
        self.steps = steps
        self.deadline = time.monotonic() + seconds

    def spend(self, steps: int = 1) -> None:
        self.steps -= steps
        if self.steps < 0:
            raise Unfinished("the command is too long or too deeply built to check in time")
        if self.steps & 0x3FF < steps and time.monotonic() > self.deadline:
            raise Unfinished("the command took too long to check")


# -- the tree ---------------------------------------------------------------------------------

LIT, PARAM, SUB, ARITH, PROC = range(5)  # a word's kinds of part


class Word:
    """A word as written: its parts, each (kind, value, quoted[, operator, argument])."""

    __slots__ = ("parts", "raw")

    def __init__(self, parts: list[tuple], raw: str) -> None:  # type: ignore[type-arg]
        self.parts = parts
        self.raw = raw

    def literal(self) -> str | None:
        """The word's text when it is one unquoted literal (a reserved word, an assignment's name)."""
        if len(self.parts) == 1 and self.parts[0][0] == LIT and not self.parts[0][2]:
            return str(self.parts[0][1])
        return None


class Redirect:
    """`op` (`>`, `>>`, `<`, `<<`, `<<<`, `&>`, …) and its target word, or its text (heredoc)."""

    __slots__ = ("body", "expands", "fd", "op", "target")

    def __init__(self, op: str, target: Word | None = None, fd: str = "") -> None:
        self.op = op
        self.fd = fd  # the file descriptor written before the operator (`2>`, `3<<`), if any
        self.target = target
        self.body: Word | None = None  # a heredoc's or here-string's text, as a word
        self.expands = True  # a heredoc whose delimiter was quoted is taken as it is written


class Command:
    """One simple command (kind "simple"), a loop's variable and words ("for"), a test ("test"), or
    the start and end of a subshell ("push", "pop": what it changes does not outlive it)."""

    __slots__ = ("assigns", "kind", "name", "piped", "pipes", "redirects", "words")

    def __init__(self, kind: str = "simple") -> None:
        self.kind = kind
        self.name = ""  # a for loop's variable
        self.assigns: list[tuple[str, Word]] = []
        self.words: list[Word] = []
        self.redirects: list[Redirect] = []
        self.piped = False  # its input is the output of the command before it
        self.pipes = False  # its output goes to the command after it (so it runs in a subshell)


class Script:
    __slots__ = ("commands",)

    def __init__(self, commands: list[Command]) -> None:
        self.commands = commands


def parse(text: str, budget: Budget, depth: int = 0) -> Script:
    """`text` as bash reads it."""
    if len(text) > MAX_TEXT or depth > MAX_DEPTH:
        raise Unfinished("the command is too long or too deeply nested to check")
    tokens, _ = _Scanner(text, budget, depth).tokens(0, "")
    return Script(_commands(tokens, budget))


# -- reading the text into tokens ----------------------------------------------------------------

_BLANK = " \t\r"
_QUOTING = "'\"\\$`"
_META = " \t\r\n;&|()<>"
_OPERATORS = ("&&", "||", ";;&", ";;", ";&", "|&", "|", "&", ";", "(", ")")
_REDIRECTS = ("&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", ">&", ">>", ">|", "<", ">")
_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
            "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}  # fmt: skip
_HEX = "0123456789abcdefABCDEF"


class _Scanner:
    """Tokens of a command line: words, operators, redirections (heredocs filled at their newline)."""

    __slots__ = ("budget", "depth", "text")

    def __init__(self, text: str, budget: Budget, depth: int) -> None:
        self.text, self.budget, self.depth = text, budget, depth

    def tokens(self, i: int, close: str) -> tuple[list[object], int]:
        """Tokens from `i` up to `close` (`)` of a substitution, or the end), and where they stop."""
        text, n = self.text, len(self.text)
        out: list[object] = []
        heredocs: list[tuple[Redirect, str, bool]] = []
        level = 0  # parentheses opened inside a substitution (a subshell, a case pattern)
        while i < n:
            self.budget.spend()
            c = text[i]
            if c in _BLANK:
                i += 1
            elif c == "\\" and text.startswith("\n", i + 1):
                i += 2
            elif c == "#":
                end = text.find("\n", i)
                i = n if end < 0 else end
            elif c == "\n":
                out.append("\n")
                i = self._heredocs(i + 1, heredocs)
                heredocs = []
            elif close == ")" and c == ")" and level == 0:
                return out, i + 1
            elif c in "<>" and text.startswith("(", i + 1):
                word, i = self.word(i, close)
                out.append(word)
            elif c in "<>&" or (c.isdigit() and self._redirect_at(i)):
                i = self._redirect(i, close, out, heredocs)
            elif c in ";|()":
                op = next(o for o in _OPERATORS if text.startswith(o, i))
                level += 1 if op == "(" else -1 if op == ")" else 0
                out.append(op)
                i += len(op)
            else:
                word, i = self.word(i, close)
                out.append(word)
        return out, n

    def _redirect_at(self, i: int) -> bool:
        j = i
        while j < len(self.text) and self.text[j].isdigit():
            j += 1
        return j < len(self.text) and self.text[j] in "<>" and not self.text.startswith("(", j + 1)

    def _redirect(self, i: int, close: str, out: list[object], heredocs: list[tuple[Redirect, str, bool]]) -> int:
        text, start = self.text, i
        while text[i].isdigit():
            i += 1
        fd = text[start:i]
        op = next((o for o in _REDIRECTS if text.startswith(o, i)), None)
        if op is None:  # a lone `&` or `&&`: an operator
            op = "&&" if text.startswith("&&", i) else "&"
            out.append(op)
            return i + len(op)
        i += len(op)
        while i < len(text) and text[i] in _BLANK:
            i += 1
        redirect = Redirect(op, fd=fd)
        if i < len(text) and text[i] not in _META:
            redirect.target, i = self.word(i, close)
        if op in ("<<", "<<-") and redirect.target is not None:
            raw = redirect.target.raw
            delimiter = raw.replace('"', "").replace("'", "").replace("\\", "")
            heredocs.append((redirect, delimiter, raw == delimiter))
        elif op == "<<<":
            redirect.body = redirect.target
        out.append(redirect)
        return i

    def _heredocs(self, i: int, waiting: list[tuple[Redirect, str, bool]]) -> int:
        """Read the bodies of the heredocs opened on the line just ended, from `i`."""
        text = self.text
        for redirect, delimiter, expands in waiting:
            strip = redirect.op == "<<-"
            lines: list[str] = []
            while i < len(text):
                end = text.find("\n", i)
                end = len(text) if end < 0 else end
                line = text[i:end]
                self.budget.spend(1 + len(line) // 64)
                i = end + 1
                if (line.lstrip("\t") if strip else line) == delimiter:
                    break
                lines.append(line.lstrip("\t") if strip else line)
            body = "\n".join(lines) + ("\n" if lines else "")
            redirect.expands = expands
            redirect.body = self.quoted_text(body) if expands else Word([(LIT, body, True)], body)
        return min(i, len(text))

    def quoted_text(self, body: str) -> Word:
        """A heredoc's text: expansions active, quotes not."""
        parts: list[tuple] = []  # type: ignore[type-arg]
        _Scanner(body, self.budget, self.depth + 1)._double(body, 0, parts, "")
        return Word(parts, body)

    def word(self, i: int, close: str, stop: str = _META) -> tuple[Word, int]:
        """The word starting at `i` (up to an unquoted character of `stop`)."""
        text, n = self.text, len(self.text)
        start = i
        parts: list[tuple] = []  # type: ignore[type-arg]
        if text[i] in "<>":  # a process substitution
            body, i = self.substitution(i + 2)
            parts.append((PROC, body, False))
        while i < n:
            self.budget.spend()
            c = text[i]
            if c in stop or (close == ")" and c == ")"):
                break
            if c == "'":
                end = text.find("'", i + 1)
                end = n if end < 0 else end
                parts.append((LIT, text[i + 1 : end], True))
                i = end + 1
            elif c == '"':
                i = self._double(text, i + 1, parts, '"')
            elif c == "\\":
                if text.startswith("\n", i + 1):
                    i += 2
                else:
                    parts.append((LIT, text[i + 1 : i + 2], True))
                    i += 2
            elif c == "$" and text.startswith("'", i + 1):
                decoded, i = ansi_c(text, i + 2)
                parts.append((LIT, decoded, True))
            elif c == "$" and text.startswith('"', i + 1):
                i = self._double(text, i + 2, parts, '"')
            elif c in "$`":
                i = self._dollar(i, parts, False)
            else:
                j = i + 1
                while (
                    j < n and text[j] not in stop and text[j] not in _QUOTING and not (close == ")" and text[j] == ")")
                ):
                    j += 1
                parts.append((LIT, text[i:j], False))
                self.budget.spend((j - i) // 16)
                i = j
        return Word(parts, text[start:i]), i

    def _double(self, text: str, i: int, parts: list[tuple], quote: str) -> int:  # type: ignore[type-arg]
        """Inside double quotes (or a heredoc's text, `quote` ""): the index after the closing one."""
        n = len(text)
        run: list[str] = []
        while i < n:
            self.budget.spend()
            c = text[i]
            if quote and c == quote:
                i += 1
                break
            if c == "\\" and i + 1 < n and text[i + 1] in '$`"\\\n':
                if text[i + 1] != "\n" and (quote or text[i + 1] != '"'):
                    run.append(text[i + 1])
                elif text[i + 1] == '"':
                    run.append('\\"')
                i += 2
            elif c in "$`" and (c == "`" or i + 1 < n):
                if run:
                    parts.append((LIT, "".join(run), True))
                    run = []
                i = self._dollar(i, parts, True)
            else:
                run.append(c)
                i += 1
        if run:
            parts.append((LIT, "".join(run), True))
        return i

    def _dollar(self, i: int, parts: list[tuple], quoted: bool) -> int:  # type: ignore[type-arg]
        """A `$…` or backtick expansion at `i`, as a part; the index after it."""
        text, n = self.text, len(self.text)
        if text[i] == "`":
            end = i + 1
            while end < n and text[end] != "`":
                end += 2 if text[end] == "\\" else 1
            inner = text[i + 1 : min(end, n)].replace("\\`", "`").replace("\\\\", "\\").replace("\\$", "$")
            parts.append((SUB, parse(inner, self.budget, self.depth + 1), quoted))
            return end + 1
        nxt = text[i + 1 : i + 2]
        if text.startswith("((", i + 1):
            end = _closing(text, i + 3, self.budget)
            body = text[i + 3 : end]
            end = end + 1 if text.startswith(")", end + 1) else end
            parts.append((ARITH, body, quoted))
            return end + 1
        if nxt == "(":
            script, end = self.substitution(i + 2)
            parts.append((SUB, script, quoted))
            return end
        if nxt == "{":
            end = _closing(text, i + 2, self.budget, "{", "}")
            parts.append(self._parameter(text[i + 2 : end], quoted))
            return end + 1
        j = i + 1
        if j < n and (text[j].isalpha() or text[j] == "_"):
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
        elif j < n and (text[j].isdigit() or text[j] in "@*#?$!-"):
            j += 1
        if j == i + 1:
            parts.append((LIT, "$", quoted))
            return j
        parts.append((PARAM, text[i + 1 : j], quoted, "", None))
        return j

    def substitution(self, i: int) -> tuple[Script, int]:
        """The script of a `$(…)`, `<(…)` or `>(…)` whose text starts at `i`, and the index after it."""
        if self.depth >= MAX_DEPTH:
            raise Unfinished("the command nests substitutions too deeply to check")
        inner = _Scanner(self.text, self.budget, self.depth + 1)
        tokens, end = inner.tokens(i, ")")
        return Script(_commands(tokens, self.budget)), end

    def _parameter(self, inner: str, quoted: bool) -> tuple:  # type: ignore[type-arg]
        """`${inner}`: (PARAM, name, quoted, operator, argument word)."""
        if inner.startswith("#") and len(inner) > 1 and name_end(inner, 1) == len(inner):
            return (PARAM, inner[1:], quoted, "#len", None)
        if inner.startswith("!"):
            return (PARAM, inner, quoted, "unknown", None)
        end = name_end(inner, 0)
        name, rest = inner[:end], inner[end:]
        if not name:
            return (PARAM, inner, quoted, "unknown", None)
        for op in _PARAMETER_OPERATORS:
            if rest.startswith(op):
                argument = rest[len(op) :]
                word = _Scanner(argument, self.budget, self.depth + 1).word(0, "", "")[0] if argument else None
                return (PARAM, name, quoted, op, word or Word([], ""))
        return (PARAM, name, quoted, "" if not rest else "unknown", None)


# Longest first where two share a start.
_PARAMETER_OPERATORS = (":-", ":=", ":+", ":?", "-", "=", "+", "?", "##", "#", "%%", "%", "//", "/", "^^", "^", ",,", ",",
                        ":")  # fmt: skip


def name_end(text: str, i: int) -> int:
    if i < len(text) and (text[i].isdigit() or text[i] in "@*#?$!-"):
        return i + 1
    while i < len(text) and (text[i].isalnum() or text[i] == "_"):
        i += 1
    return i


def _closing(text: str, i: int, budget: Budget, opening: str = "(", closing: str = ")") -> int:
    """The index of what closes an `opening` just before `i` (quotes respected), or the end."""
    level, quote = 1, ""
    while i < len(text):
        budget.spend()
        c = text[i]
        if quote:
            if c == quote:
                quote = ""
            elif c == "\\" and quote == '"':
                i += 1
        elif c in "'\"":
            quote = c
        elif c == "\\":
            i += 1
        elif c == opening:
            level += 1
        elif c == closing:
            level -= 1
            if level == 0:
                return i
        i += 1
    return len(text)


def ansi_c(text: str, i: int) -> tuple[str, int]:
    """The text of a `$'…'` starting at `i` (after the quote), decoded, and the index after it."""
    out: list[str] = []
    n = len(text)
    while i < n and text[i] != "'":
        c = text[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = text[i + 1]
        i += 2
        if e in _ESCAPES:
            out.append(_ESCAPES[e])
        elif e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            j = i
            while j < min(i + width, n) and text[j] in _HEX:
                j += 1
            if j > i:
                code = int(text[i:j], 16)
                out.append(chr(code) if 0 < code < 0x110000 and not 0xD800 <= code < 0xE000 else "")
                i = j
            else:
                out.append("\\" + e)
        elif e in "01234567":
            j = i - 1
            while j < min(i + 2, n) and text[j] in "01234567":
                j += 1
            code = int(text[i - 1 : j], 8) & 0xFF
            out.append(chr(code) if code else "")
            i = j
        elif e == "c" and i < n:
            out.append(chr(ord(text[i]) & 0x1F))
            i += 1
        else:
            out.append("\\" + e)
    return "".join(out).split("\0", 1)[0], i + 1


# -- tokens into commands ----------------------------------------------------------------------

_SKIPPED = frozenset(("if", "then", "elif", "else", "fi", "do", "done", "while", "until", "!", "{", "}", "esac",
                      "coproc"))  # fmt: skip
_ENDS = frozenset(("\n", ";", "&", "&&", "||", ";;", ";&", ";;&", "|", "|&", "(", ")"))


def assignment(word: Word) -> tuple[str, Word] | None:
    """`NAME=value` (or `NAME+=value`) as its name and its value's word; None for any other word."""
    first = word.parts[0] if word.parts else None
    if first is None or first[0] != LIT or first[2] or "=" not in first[1]:
        return None
    name, _, value = first[1].partition("=")
    name = name.removesuffix("+")
    if not name or name_end(name, 0) != len(name) or name[0].isdigit():
        return None
    rest = ([(LIT, value, False)] if value else []) + word.parts[1:]
    return name, Word(rest, word.raw.partition("=")[2])


def _commands(tokens: list[object], budget: Budget) -> list[Command]:
    """Group tokens into the commands they run, in order. What is no command (a case's word and
    patterns, a test's operands) is kept as a "test", so the substitutions in it are judged too."""
    out: list[Command] = []
    current = Command()
    state = ""  # "case": a case's word, up to `in`; "pattern": a case pattern, up to `)`; "for": a loop's words;
    piped = False  # "function": a function's name

    def finish(kind: str = "simple", pipes: bool = False) -> None:
        nonlocal current
        if current.words or current.assigns or current.redirects or current.kind == "for":
            current.piped, current.pipes = piped, pipes
            out.append(current)
        current = Command(kind)

    def scope(kind: str) -> None:
        finish()
        out.append(Command(kind))

    for token in tokens:
        budget.spend()
        if isinstance(token, Redirect):
            current.redirects.append(token)
            continue
        if isinstance(token, str):  # an operator
            if state == "pattern":
                if token == ")":
                    finish()
                    state = ""
                continue
            if token in (";;", ";&", ";;&"):
                finish("test")
                state, piped = "pattern", False
                continue
            if token == "(" and len(current.words) == 1 and not current.assigns and current.kind == "simple":
                current.words, state = [], "function"  # `name () { …; }`: a function's name, then its `)`
                continue
            if state == "function" and token == ")":
                state = ""
                continue
            if state != "case":
                state = ""
                if token == "(" and not current.words:
                    scope("push")  # a subshell: what it changes ends with it
                elif token == ")":
                    scope("pop")
                else:
                    finish(pipes=token in ("|", "|&"))
                piped = token in ("|", "|&")
            continue
        word = token
        assert isinstance(word, Word)
        literal = word.literal()
        if state == "function":  # `function name`: the name
            state = ""
            continue
        if state in ("case", "pattern"):
            if literal == "in" and state == "case":
                state = "pattern"
            elif literal == "esac" and state == "pattern":
                finish()
                state = ""
            else:
                current.words.append(word)
            continue
        if state == "for":
            if literal == "do":
                finish()
                state = ""
            elif literal != "in" or current.words:
                current.words.append(word)
            continue
        if current.kind == "for" and not current.name:
            current.name = literal or "_"
            state = "for"
            continue
        if not current.words and current.kind == "simple":
            if literal in _SKIPPED:
                continue
            if literal in ("for", "select"):
                finish("for")
                continue
            if literal == "case":
                finish("test")
                state = "case"
                continue
            if literal == "function":
                state = "function"
                continue
            if literal == "[[":
                current.kind = "test"
                continue
            found = assignment(word)
            if found is not None:
                current.assigns.append(found)
                continue
        if current.kind == "test" and literal == "]]":
            finish()
            continue
        current.words.append(word)
    finish()
    return out
