"""The words of a shell command as bash expands them, before shell.py judges them.

Line continuations, `$'…'`, quoting (a quoted or escaped character is kept literal, so brace,
tilde, parameter and glob expansion leave it alone), brace expansion, parameter expansion with
its operators, arithmetic on integers; what cannot be decided from the line and its environment
is an undecided part (UNDECIDED: any text), and `could_be` says whether a pattern with such
parts could be a protected target. Bounded: brace results, pattern lengths.

Hot path: standard library only.
"""

from __future__ import annotations

import itertools
import re

MAX_BRACES = 64  # words one brace expansion may give
MAX_PATTERN = 512  # characters of a pattern compared with a target
UNDECIDED = "\x00"  # any text: what the shell makes of this part is not known here
GLOB = "\x01"  # any text within one path component: a glob not matched in bounds
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]|[@*#?$!-]")
# Outside quotes a character is active; quoted or escaped it is literal: kept as a private character
# (so brace, tilde, parameter and glob expansion leave it alone) and given back at the end.
_LITERAL = {c: chr(0xE000 + i) for i, c in enumerate("$`{}*?[]~,\\'\"")}
_UNLITERAL = str.maketrans({v: k for k, v in _LITERAL.items()})
_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
            "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}  # fmt: skip


def prepare(text: str, env: dict[str, str]) -> tuple[str, list[str]]:
    """`text` as the lexer should read it: line continuations joined, `$'…'` decoded, `$((…))`
    evaluated (or undecided), each `$(…)`, `<(…)`, `>(…)` and backtick body replaced by an
    undecided part and returned (the shell runs them even inside double quotes), and quoted or
    escaped characters marked literal. Single-quoted text is left alone, as the shell leaves it."""
    bodies: list[str] = []
    kept: list[str] = []
    i, n = 0, len(text)
    quote = ""
    while i < n:
        c = text[i]
        if quote == "'":
            kept.append("'" if c == "'" else _LITERAL.get(c, c))
            quote = "" if c == "'" else quote
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if nxt == "\n":  # a line continuation: nothing, in or out of double quotes
                i += 2
            elif quote and nxt not in '$`"\\':
                kept.append(_LITERAL["\\"] + _LITERAL.get(nxt, nxt))
                i += 2
            else:
                kept.append(_LITERAL.get(nxt, nxt) if nxt != "\n" else "")
                i += 2
            continue
        if c == "$" and not quote and text.startswith("'", i + 1):
            decoded, i = _ansi_c(text, i + 2)
            kept.append("'" + "".join(_LITERAL.get(ch, ch) for ch in decoded) + "'")
            continue
        if c == "'" and not quote:
            quote = "'"
        elif c == '"':
            quote = "" if quote == '"' else '"'
        if c == "$" and text.startswith("((", i + 1):
            end = closing(text, i + 2)
            body = text[i + 3 : end].removesuffix(")")
            kept.append(_arithmetic(body, env))
            i = end + 1
            continue
        if (c == "$" or (c in "<>" and not quote)) and text.startswith("(", i + 1):
            end = closing(text, i + 2)
            bodies.append(text[i + 2 : end])
            kept.append(UNDECIDED)
            i = end + 1
            continue
        if c == "$" and quote == '"' and text.startswith("{", i + 1):
            end = text.find("}", i)
            end = n - 1 if end < 0 else end
            kept.append(text[i : end + 1])  # a parameter expansion is active inside double quotes
            i = end + 1
            continue
        if c == "`":
            end = text.find("`", i + 1)
            end = n if end < 0 else end
            bodies.append(text[i + 1 : end])
            kept.append(UNDECIDED)
            i = end + 1
            continue
        kept.append(_LITERAL[c] if quote == '"' and c in "{}*?[]~," else c)
        i += 1
    return "".join(kept), bodies


def _ansi_c(text: str, i: int) -> tuple[str, int]:
    """The text of a `$'…'` starting at `i` (after the quote) decoded, and the index after it."""
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
            digits = re.match(rf"[0-9a-fA-F]{{1,{width}}}", text[i : i + width])
            if digits:
                code = int(digits.group(), 16)
                out.append(chr(code) if 0 < code < 0x110000 and not 0xD800 <= code < 0xE000 else "")
                i += len(digits.group())
            else:
                out.append("\\" + e)
        elif e in "01234567":
            digits = re.match(r"[0-7]{1,3}", text[i - 1 : i + 2])
            assert digits is not None
            code = int(digits.group(), 8) & 0xFF
            out.append(chr(code) if code else "")
            i += len(digits.group()) - 1
        elif e == "c" and i < n:
            out.append(chr(ord(text[i]) & 0x1F))
            i += 1
        else:
            out.append("\\" + e)
    joined = "".join(out)
    return joined.split("\0", 1)[0], i + 1


def _arithmetic(body: str, env: dict[str, str]) -> str:
    """`$((body))` as bash computes it, when it is integers, known variables and + - * / % ( )."""
    import ast

    def value(match: re.Match[str]) -> str:
        found = env.get(match.group(1) or match.group(2))
        return found if found is not None and re.fullmatch(r"\s*-?\d{1,30}\s*", found) else UNDECIDED

    text = re.sub(r"\$\{?([A-Za-z_]\w*)\}?|(?<![\w$])([A-Za-z_]\w*)", value, body)
    if UNDECIDED in text or len(text) > 200 or not re.fullmatch(r"[\d\s+\-*/%()]*", text) or not text.strip():
        return UNDECIDED
    try:
        tree = ast.parse(text.replace("/", "//").replace("////", "//"), mode="eval")
    except (SyntaxError, ValueError):
        return UNDECIDED
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv,
               ast.Mod, ast.USub, ast.UAdd)  # fmt: skip
    if not all(isinstance(node, allowed) for node in ast.walk(tree)):
        return UNDECIDED
    try:
        result = eval(compile(tree, "<arithmetic>", "eval"), {"__builtins__": {}})
    except (ZeroDivisionError, OverflowError, ValueError):
        return UNDECIDED
    return str(result) if isinstance(result, int) and abs(result) < 1 << 63 else UNDECIDED


def closing(text: str, start: int) -> int:
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


def braces(word: str) -> list[str]:
    """Brace expansion of `word` (`a{b,c}d`, `{1..3}`, nested), at most MAX_BRACES words."""
    start = word.find("{")
    while start >= 0:
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
        inner = word[start + 1 : end]
        head, tail = word[:start], word[end + 1 :]
        if commas:
            cuts = [start, *commas, end]
            choices = [word[a + 1 : b] for a, b in itertools.pairwise(cuts)]
        else:
            sequence = re.fullmatch(r"(-?\d{1,6}|[A-Za-z])\.\.(-?\d{1,6}|[A-Za-z])(?:\.\.(-?\d{1,4}))?", inner)
            if not sequence:
                start = word.find("{", start + 1)
                continue
            choices = _sequence(*sequence.groups())
        out: list[str] = []
        for choice in choices:
            for rest in braces(head + choice + tail):
                out.append(rest)
                if len(out) >= MAX_BRACES:
                    return out
        return out
    return [word]


def _sequence(first: str, last: str, step: str | None) -> list[str]:
    by = abs(int(step)) if step and int(step) else 1
    if first.lstrip("-").isdigit() and last.lstrip("-").isdigit():
        a, b = int(first), int(last)
        numbers = range(a, b + (1 if b >= a else -1), by if b >= a else -by)
        return [str(x) for x in list(numbers)[:MAX_BRACES]]
    if first.isalpha() and last.isalpha():
        a, b = ord(first), ord(last)
        return [chr(x) for x in list(range(a, b + (1 if b >= a else -1), by if b >= a else -by))[:MAX_BRACES]]
    return [f"{first}..{last}"]


def parameters(word: str, env: dict[str, str]) -> str:
    """`$NAME`, `${NAME}` and `${NAME<operator>word}` in `word`, as bash expands them where the
    value is known; an unknown variable (not in the environment, not assigned earlier in the
    line) or an operator not computed here is an undecided part."""
    out: list[str] = []
    i, n = 0, len(word)
    while i < n:
        c = word[i]
        if c != "$" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        if word[i + 1] == "{":
            level, j = 1, i + 2
            while j < n and level:
                level += {"{": 1, "}": -1}.get(word[j], 0)
                j += 1
            out.append(_braced(word[i + 2 : j - 1] if not level else word[i + 2 :], env))
            i = j
            continue
        name = _NAME.match(word, i + 1)
        if not name:
            out.append(c)
            i += 1
            continue
        out.append(_value(name.group(), env))
        i = name.end()
    return "".join(out)


def _value(name: str, env: dict[str, str]) -> str:
    found = env.get(name) if not (name.isdigit() or name in "@*#?$!-") else None
    return UNDECIDED if found is None else found


def _braced(inner: str, env: dict[str, str]) -> str:
    """`${inner}` expanded (see _parameters)."""
    from fnmatch import fnmatchcase

    if inner.startswith("#") and _NAME.fullmatch(inner[1:]):
        found = _value(inner[1:], env)
        return UNDECIDED if UNDECIDED in found else str(len(found))
    name = _NAME.match(inner)
    if not name or inner.startswith("!"):
        return UNDECIDED
    value = _value(name.group(), env)
    rest = inner[name.end() :]
    if not rest:
        return value
    known = UNDECIDED not in value
    colon = rest.startswith(":") and rest[1:2] in ("-", "=", "+", "?")
    op = rest[: 2 if colon else 1]
    arg = rest[len(op) :]
    if op.lstrip(":") in ("-", "=", "+", "?"):
        if not known:
            return UNDECIDED
        is_set = name.group() in env
        has = is_set and (bool(value) or not colon)
        word = parameters(arg, env) if "$" in arg else arg
        if op.lstrip(":") == "+":
            return word if has else ""
        if op.lstrip(":") == "=" and not has and UNDECIDED not in word:
            env[name.group()] = word
        return value if has or op.lstrip(":") == "?" else word
    if not known:
        return UNDECIDED
    if rest[0] in "#%":
        longest = rest[:2] in ("##", "%%")
        pattern = rest[2 if longest else 1 :]
        pattern = parameters(pattern, env) if "$" in pattern else pattern
        if UNDECIDED in pattern:
            return UNDECIDED
        cuts = range(len(value), -1, -1) if longest else range(len(value) + 1)
        for cut in cuts:
            if rest[0] == "#" and fnmatchcase(value[:cut], pattern):
                return value[cut:]
            if rest[0] == "%" and fnmatchcase(value[len(value) - cut :], pattern):
                return value[: len(value) - cut]
        return value
    sliced = re.fullmatch(r":\s*(-?\d{1,9})(?::\s*(\d{1,9}))?", rest)
    if sliced:
        start = int(sliced.group(1))
        start = max(len(value) + start, 0) if start < 0 else start
        return value[start : start + int(sliced.group(2))] if sliced.group(2) else value[start:]
    if rest in ("^^", "^"):
        return value.upper() if rest == "^^" else value[:1].upper() + value[1:]
    if rest in (",,", ","):
        return value.lower() if rest == ",," else value[:1].lower() + value[1:]
    return UNDECIDED


def could_be(pattern: str, target: str) -> bool:
    """Could a text matching `pattern` (UNDECIDED: any text; GLOB: any text without `/`) be a
    text matching `target` (`*`: any text)? The two are intersected, both ends anchored."""
    if UNDECIDED not in pattern and GLOB not in pattern:
        return _matches(pattern, target)
    p, t = pattern[:MAX_PATTERN], target
    reached = {(0, 0)}
    todo = [(0, 0)]
    while todo:
        i, j = todo.pop()
        if i == len(p) and j == len(t):
            return True
        nxt = []
        a = p[i] if i < len(p) else None
        b = t[j] if j < len(t) else None
        if a in (UNDECIDED, GLOB):
            nxt.append((i + 1, j))
            if b is not None and b != "*" and (a == UNDECIDED or b != "/"):
                nxt.append((i, j + 1))
        if b == "*":
            nxt.append((i, j + 1))
            if a is not None and a not in (UNDECIDED, GLOB):
                nxt.append((i + 1, j))
        if a is not None and b is not None and a not in (UNDECIDED, GLOB) and b != "*" and a == b:
            nxt.append((i + 1, j + 1))
        for pair in nxt:
            if pair not in reached:
                reached.add(pair)
                todo.append(pair)
    return False


def _matches(text: str, target: str) -> bool:
    """Does the decided `text` match `target` (fnmatch's `*` and `?`; `[` is a plain character)?
    A target with `*` only (every shipped one) is matched by its literal pieces, in order, with no
    regular expression to compile: a cold hook judges each command against every target once."""
    if "?" in target:
        from fnmatch import fnmatchcase

        return fnmatchcase(text, target.replace("[", "[[]"))
    first, *middle = target.split("*")
    if not middle:
        return text == target
    last = middle.pop()
    end = len(text) - len(last)
    if end < len(first) or not text.startswith(first) or not text.endswith(last):
        return False
    at = len(first)
    for piece in middle:  # the leftmost place of each piece leaves the most room for the rest
        found = text.find(piece, at, end)
        if found < 0:
            return False
        at = found + len(piece)
    return True
