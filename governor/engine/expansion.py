"""What a shell word expands to: the words the shell hands a program, as far as they are known
before the command runs.

Quotes removed, `$'…'` decoded (governor.engine.shell read both), braces, `~`, known variables
and their operators, arithmetic on integers, and the output of a command substitution that only
prints (the walk in governor.engine.effects says which); anything else is a run-time part
(governor.engine.words). An unknown variable with a default (`${x:-text}`) is each of the two,
and a word with several spellings is judged in each. Bounded: spellings, words, characters, and
the Budget's steps.

Hot path: standard library only, no `re`.
"""

from __future__ import annotations

import os

from governor.engine.programs import base
from governor.engine.shell import ARITH, LIT, MAX_TEXT, PARAM, SUB, Budget, Script, Unfinished, Word, name_end
from governor.engine.words import ANY, CLASS, HERE, PART, QUERY, STAR, decided

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

MAX_ALTERNATIVES = 16  # spellings one word may have at once (unknown variables with defaults, loops)
MAX_FIELDS = 64  # words one word may become (brace expansion, splitting)
MAX_VALUE = MAX_TEXT  # characters of one expanded word
MAX_GROWTH = 65536  # characters a parameter operator may make of a value (`${x//a/$x}`), else a run-time part
BREAK = "\x06"  # where an unquoted value's blanks split a word into words


Env = dict  # name -> the spellings its value may have


class Expansion:
    """What words expand to in one place of a script: its variables, folder and home; `output`
    says what a command substitution prints (and judges the commands it runs)."""

    __slots__ = ("budget", "cwd", "env", "home", "output", "pipe")

    def __init__(self, env: dict[str, list[str]], cwd: str, home: str, budget: Budget,
                 output: Callable[[Script], list[str]], pipe: Callable[[Script], str]) -> None:  # fmt: skip
        self.env, self.cwd, self.home, self.budget, self.output, self.pipe = env, cwd, home, budget, output, pipe

    def word(self, word: Word, split: bool = True) -> list[list[str]]:
        """`word`'s spellings, each the list of words it becomes (braces, splitting); at most
        MAX_ALTERNATIVES spellings, else Unfinished."""
        spellings: list[list[str]] = [[""]]
        for index, part in enumerate(word.parts):
            self.budget.spend()
            kind, value, quoted = part[0], part[1], part[2]
            if kind == LIT:
                pieces = [value] if quoted else self._unquoted(value, index == 0)
                spellings = [[field + piece for field in fields for piece in pieces] for fields in spellings]
                continue
            if kind == PARAM:
                values = self._parameter(value, part[3], part[4])
            elif kind == SUB:
                values = self.output(value)
            elif kind == ARITH:
                values = [self._arithmetic(value)]
            else:  # PROC: the name of the pipe its output comes from
                values = [self.pipe(value)]
            grown = []
            self.budget.spend(sum(len(one) for one in values) // 64)  # a value used again and again costs its length
            separators = self._separators() if split and not quoted else ""
            for fields in spellings:
                for one in values:
                    for c in separators:  # split where IFS's characters are: marked, cut at the end
                        one = one.replace(c, BREAK)
                    grown.append([field + one for field in fields])
            spellings = grown
            if len(spellings) > MAX_ALTERNATIVES:
                raise Unfinished("a word has too many possible spellings to check")
        spellings = [[p for f in fields for p in (f.split(BREAK) if BREAK in f else [f]) if p or BREAK not in f]
                     for fields in spellings]  # fmt: skip
        for fields in spellings:
            if len(fields) > MAX_FIELDS or any(len(field) > MAX_VALUE for field in fields):
                raise Unfinished("a word expands to too much text to check")
        return spellings

    def _separators(self) -> str:
        """The characters field splitting splits at: IFS's, as the command set it (bash's own default
        when it did not, whatever the environment says)."""
        ifs = self.env.get("IFS")
        if ifs is None:
            return " \t\n"
        known = "".join(c for c in dict.fromkeys("".join(ifs)) if c not in (ANY, PART))
        return known if len(ifs) == 1 and len(known) == len(set(ifs[0])) else " \t\n" + known

    def _unquoted(self, text: str, first: bool) -> list[str]:
        """Unquoted literal text: brace expansion, then `~` at its start, globs marked active."""
        out = []
        for one in braces(text, self.budget) if "{" in text else [text]:
            if first and (one == "~" or one.startswith("~/")):
                one = self.home + HERE + one[1:]  # the home folder: not a name the command wrote
            one = one.replace("*", STAR).replace("?", QUERY)
            if "[" in one and "]" in one[one.find("[") + 1 :]:  # a bracket expression ([ alone is a program)
                one = one.replace("[", CLASS, 1)
            out.append(one)
        return out

    def value(self, name: str) -> list[str] | None:
        """The spellings of variable `name`, or None when it is not set (or not known)."""
        if name == "PWD":
            return [self.cwd]
        if name == "HOME":
            return [self.home + HERE]
        if name == "IFS" and name not in self.env:
            return [" \t\n"]  # what bash starts with, whatever the environment says
        if name[:1].isdigit() or name in ("@", "*", "#", "?", "$", "!", "-", "OLDPWD", "RANDOM", "_"):
            return self.env.get(name) or [PART]  # the positional ones where a `sh -c` or `set --` gave them
        return self.env.get(name)

    def _parameter(self, name: str, op: str, argument: Word | None) -> list[str]:
        found = self.value(name) if op != "unknown" else None
        if op in ("", "unknown"):
            return found if found is not None else [PART]
        if op == "#len":
            return [str(len(found[0])) if found and len(found) == 1 and decided(found[0]) else PART]
        given = [" ".join(fields) for fields in self.word(argument, split=False)] if argument is not None else [""]
        if op in (":-", "-", ":=", "="):
            if found is None:  # not set where the hook runs: its default, or what the shell has
                if op.endswith("="):
                    self.env[name] = [PART, *given]
                return [PART, *given]
            return [v if (v or op in ("-", "=")) else g for v in found for g in given]
        if op in (":+", "+"):
            return ["", *given] if found is None else [g if (v or op == "+") else "" for v in found for g in given]
        if op in (":?", "?") or found is None or not all(decided(v) for v in found):
            return found if op in (":?", "?") and found is not None else [PART]
        return [_operate(v, op, g) for v in found for g in given]

    def _arithmetic(self, body: str) -> str:
        """`$((body))` on integers, known variables and + - * / % ( ); else a run-time part (and a
        command substitution in it is judged as it runs)."""
        if "$(" in body or "`" in body:
            from governor.engine.shell import parse

            self.output(parse(f"echo {body}", self.budget))
            return PART
        tokens: list[str] = []
        i = 0
        while i < len(body):
            c = body[i]
            if c in " \t\n":
                i += 1
            elif c.isdigit():
                j = i
                while j < len(body) and body[j].isdigit():
                    j += 1
                tokens.append(body[i:j])
                i = j
            elif c.isalpha() or c in "_$":
                j = i + (1 if c == "$" else 0)
                j += 1 if j < len(body) and body[j] == "{" else 0
                end = name_end(body, j)
                found = self.value(body[j:end])
                if not found or len(found) != 1 or not found[0].strip().lstrip("-").isdigit():
                    return PART
                tokens.append(found[0].strip())
                i = end + (1 if body.startswith("}", end) else 0)
            elif c in "+-*/%()":
                tokens.append(c)
                i += 1
            else:
                return PART
        result = _evaluate(tokens)
        return PART if result is None else str(result)


def _operate(value: str, op: str, argument: str) -> str:
    """A parameter operator on a known value: prefix and suffix removal, substitution, slices, case."""
    if op in ("#", "##", "%", "%%"):
        pattern = argument.replace("*", STAR).replace("?", QUERY)
        from governor.engine.words import glob_match

        cuts = range(len(value) + 1)
        order = reversed(cuts) if op in ("##", "%") else cuts
        for cut in order:
            if op.startswith("#") and glob_match(value[:cut], pattern, slash=True):
                return value[cut:]
            if op.startswith("%") and glob_match(value[len(value) - cut :], pattern, slash=True):
                return value[: len(value) - cut]
        return value
    if op in ("/", "//"):
        old, _, new = argument.partition("/")
        if not old or any(c in old for c in "*?[") or len(value) * max(1, len(new)) > MAX_GROWTH:
            return PART
        return value.replace(old, new) if op == "//" else value.replace(old, new, 1)
    if op == ":":
        start, _, length = argument.partition(":")
        try:
            first = int(start.strip() or "0")
            first = max(len(value) + first, 0) if first < 0 else first
            return value[first : first + int(length)] if length.strip() else value[first:]
        except ValueError:
            return PART
    cased = {"^^": value.upper(), ",,": value.lower(), "^": value[:1].upper() + value[1:],
             ",": value[:1].lower() + value[1:]}  # fmt: skip
    return cased.get(op, PART)


def _evaluate(tokens: list[str]) -> int | None:
    """Integer arithmetic over tokens (precedence climbing); None when it is not that."""
    at = [0]

    def atom() -> int | None:
        if at[0] >= len(tokens):
            return None
        token = tokens[at[0]]
        at[0] += 1
        if token == "(":
            inner = expression(0)
            if at[0] >= len(tokens) or tokens[at[0]] != ")":
                return None
            at[0] += 1
            return inner
        if token in "+-":
            operand = atom()
            return None if operand is None else (-operand if token == "-" else operand)
        return int(token) if token.isdigit() else None

    def expression(level: int) -> int | None:
        left = atom()
        while left is not None and at[0] < len(tokens) and tokens[at[0]] in "+-*/%":
            op = tokens[at[0]]
            rank = 1 if op in "+-" else 2
            if rank <= level:
                break
            at[0] += 1
            right = expression(rank)
            if right is None or (op in "/%" and right == 0):
                return None
            left = {"+": left + right, "-": left - right, "*": left * right,
                    "/": int(left / right), "%": left - right * int(left / right)}[op]  # fmt: skip
            if abs(left) >= 1 << 63:
                return None
        return left

    result = expression(0)
    return result if at[0] == len(tokens) else None


def braces(word: str, budget: Budget) -> list[str]:
    """Brace expansion of `word` (`a{b,c}d`, `{1..3}`, nested), at most MAX_FIELDS words."""
    start = word.find("{")
    while start >= 0:
        budget.spend()
        level, commas, end = 0, [], -1
        for j in range(start, len(word)):
            c = word[j]
            if c == "{":
                level += 1
            elif c == "}":
                level -= 1
                if level == 0:
                    end = j
                    break
            elif c == "," and level == 1:
                commas.append(j)
        if end < 0:
            return [word]
        head, tail = word[:start], word[end + 1 :]
        if commas:
            cuts = [start, *commas, end]
            choices = [word[cuts[k] + 1 : cuts[k + 1]] for k in range(len(cuts) - 1)]
        else:
            sequence = _sequence(word[start + 1 : end])
            if sequence is None:
                start = word.find("{", start + 1)
                continue
            choices = sequence
        out: list[str] = []
        budget.spend(1 + len(word) * len(choices) // 64)  # each choice makes the word again
        for choice in choices:
            out += braces(head + choice + tail, budget)
            if len(out) > MAX_FIELDS:
                raise Unfinished("a brace expansion makes too many words to check")
        return out
    return [word]


def _sequence(inner: str) -> list[str] | None:
    """`{1..3}`, `{a..e}`, `{10..1..2}` as its words; None when `inner` is not a sequence."""
    pieces = inner.split("..")
    if len(pieces) not in (2, 3) or any(not p for p in pieces):
        return None
    first, last = pieces[0], pieces[1]
    step_text = pieces[2] if len(pieces) == 3 else "1"
    if not step_text.lstrip("-").isdigit():
        return None
    step = abs(int(step_text)) or 1
    if first.lstrip("-").isdigit() and last.lstrip("-").isdigit() and len(first) < 8 and len(last) < 8:
        a, b = int(first), int(last)
    elif len(first) == 1 == len(last) and first.isalpha() and last.isalpha():
        a, b = ord(first), ord(last)
    else:
        return None
    values = list(range(a, b + (1 if b >= a else -1), step if b >= a else -step))[:MAX_FIELDS]
    return [str(v) for v in values] if first.lstrip("-").isdigit() else [chr(v) for v in values]


def resolve(word: str, cwd: str, folder: bool = False) -> str:
    """`word` as the absolute path it names from `cwd`. A run-time part that starts it and is
    followed by `/` (or is all of a `folder`'s name) may be any folder."""
    if word.startswith(PART) and (word[1:2] == "/" or (folder and len(word) == 1)):
        word = ANY + word[1:]
    if not word.startswith(("/", ANY)):
        word = cwd.rstrip("/") + "/" + word
    return normalise(word)


def normalise(path: str) -> str:
    """`..` and `.` taken out of a path, as the kernel would (markers kept; `..` after a run-time
    folder stays under it)."""
    lead = "" if path.startswith(ANY) else "/"
    out: list[str] = []
    for piece in path.split("/"):
        if piece in ("", "."):
            continue
        if piece == ".." and out and out[-1] != ANY:
            gone = out.pop()
            if HERE in gone:  # climbing out of the working directory: what is left of it is still not written
                if out:
                    out[-1] += HERE
                else:
                    lead += HERE
        elif piece != "..":
            out.append(piece)
    joined = lead + "/".join(out)
    return joined if joined else "/"


def home_of(env: dict[str, str]) -> str:
    return env.get("HOME") or os.path.expanduser("~")


def glob_chars(text: str) -> bool:
    return STAR in text or QUERY in text or CLASS in text


def printed(argv: list[str], cwd: str, stdin: list[str] | None, env: dict[str, list[str]] | None = None) -> str:
    """What a command prints when it only prints (echo, printf, pwd, basename, dirname, which, cat
    or tee of its input); a run-time part otherwise."""
    program, words = base(argv[0]), argv[1:]
    if program == "echo":
        escapes = False
        while words and words[0] in ("-n", "-e", "-E", "-ne", "-en"):
            escapes = escapes or "e" in words[0]
            words = words[1:]
        return _escaped(" ".join(words)) if escapes else " ".join(words)
    if program == "printf" and words:
        return _format(words[0], words[1:])
    if program == "pwd":
        return cwd
    if program in ("basename", "dirname") and words and decided(words[0]):
        head, _, tail = words[0].rstrip("/").rpartition("/")
        if program == "dirname":
            return head or ("/" if words[0].startswith("/") else ".")
        return tail.removesuffix(words[1]) if len(words) > 1 else tail
    if program in ("which", "command", "type") and words and words[-1][:1] != "-":
        return ANY + "/" + words[-1]
    if program in ("realpath", "readlink") and words:
        return resolve(words[-1], cwd)
    if program == "mktemp":  # a new name in the temporary folder (or the one it is told)
        folder = next((w.split("=", 1)[1] for w in words if w.startswith(("--tmpdir=", "-p="))), None)
        folder = folder or next((words[n + 1] for n, w in enumerate(words[:-1]) if w in ("-p", "--tmpdir")), None)
        folder = folder or next((w.rsplit("/", 1)[0] for w in words if "/" in w and not w.startswith("-")), None)
        found = (env or {}).get("TMPDIR")
        folder = folder or (found[0] if found and len(found) == 1 else "/tmp")
        template = next((w.rsplit("/", 1)[-1] for w in words if not w.startswith("-") and "XXX" in w), "tmp.XXX")
        fresh = template.split("XXX", 1)[0] + PART  # a name that did not exist: no folder above anything
        return folder.rstrip("/") + "/" + fresh if folder.startswith("/") else ANY
    if program in ("cat", "tee") and stdin and (program == "tee" or not words):
        return stdin[0].rstrip("\n")
    if program in ("head", "tail", "sort", "uniq") and stdin:  # lines of what it was handed
        return stdin[0].rstrip("\n")
    if program == "ls" and any(STAR in w or QUERY in w for w in words):  # the paths its globs name
        return "\n".join(w for w in words if not w.startswith("-"))
    return PART


def _format(fmt: str, args: list[str]) -> str:
    """printf's output for `%s`, `%b`, `%d` and backslash escapes; a run-time part for anything else."""
    out: list[str] = []
    i, used = 0, 0
    while i < len(fmt):
        c = fmt[i]
        if c == "%" and i + 1 < len(fmt):
            if fmt[i + 1] == "%":
                out.append("%")
            elif fmt[i + 1] in "sbd":
                arg = args[used] if used < len(args) else ""
                out.append(_escaped(arg) if fmt[i + 1] == "b" else arg)
                used += 1
            else:
                return PART
            i += 2
        else:
            end = fmt.find("%", i + 1)
            end = len(fmt) if end < 0 else end
            out.append(_escaped(fmt[i:end]))
            i = end
    return "".join(out)


def _escaped(text: str) -> str:
    """`text` with printf's and `echo -e`'s backslash escapes (newline, tab, octal, hex) decoded."""
    from governor.engine.shell import ansi_c

    return ansi_c(text.replace("'", "\\'") + "'", 0)[0] if "\\" in text else text
