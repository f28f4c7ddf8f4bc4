"""A word as judged: what the command wrote, what only run time decides, and whether it can be
a protected target.

An expanded word is text with markers. A part the shell decides only when the command runs (an
unknown variable, a command substitution's output) is PART: any text without a `/`, unless it
starts a path and a `/` follows it, where it is ANY: any folder. A glob's active characters are
kept apart from quoted ones (STAR, QUERY, CLASS). HERE marks the end of what the call's working
directory supplied: the characters before it were not written by the command.

`could_be` says whether such a word can be a target (`*`: any text). A word with run-time parts
reaches a target only through what the command wrote: some component of the target must begin
with characters the command wrote itself (`$X/ledger.db`, `.cla$X/settings.json`,
`~/.local/state/$X/…`), never where a run-time part stands for the name (`rm -f $tmp`,
`mkdir build/$(date +%s)`, `mv "$f" "$f".jpg`).

Hot path: standard library only, no `re`.
"""

from __future__ import annotations

ANY = "\x00"  # run-time text that may hold "/": a folder decided when the command runs
PART = "\x01"  # run-time text without "/": part of one name
STAR, QUERY, CLASS = "\x02", "\x03", "\x04"  # a glob's active `*`, `?` and `[`
HERE = "\x05"  # zero-width: what precedes it is the call's working directory, not the command's text
PLACED = "\x07"  # zero-width, in a target: what precedes it is a placeholder's value, not the target's own name
# Folder names too common to say where a command aims (`cp x /usr/bin/$NAME` aims at no file in particular).
GENERIC = frozenset(("bin", "sbin", "lib", "lib64", "usr", "local", "tmp", "var", "etc", "opt", "home", "root", "srv",
                     "mnt", "share", "include", "src", "private", "Users", "build", "dist", "out", "target", ".local",
                     "state", ".config", "config", ".cache", "cache", "data", "site-packages"))  # fmt: skip
RUNTIME = ANY + PART + STAR + QUERY + CLASS
MAX_PATTERN = 512  # characters of a word compared with a target

_SHOWN = str.maketrans({ANY: "", PART: "", STAR: "*", QUERY: "?", CLASS: "[", HERE: ""})


def decided(text: str) -> bool:
    """Is every character of `text` known before the command runs?"""
    return not any(marker in text for marker in RUNTIME)


def shown(text: str) -> str:
    """`text` as a route's pattern reads it: run-time parts left out, globs as written."""
    return text.translate(_SHOWN)


def could_be(text: str, target: str, sep: str = "/", first: bool = False, pointed: bool = False) -> bool:
    """Could `text` (a path, or with `sep=" "` a command line) be a text matching `target`?
    A decided text must match it; one with run-time parts must be able to, and some component
    of the target that is not `*` alone must begin with two characters the command wrote (or
    one, for a name of one character; `first`: the target's first component, the program) unless
    `pointed` says the text already points at it (a decided folder, anything under it)."""
    placed = target.rfind(PLACED) + 1  # the target's own name begins there
    target = target.replace(PLACED, "")
    placed -= target[:placed].count(PLACED) if placed else 0
    if decided(text):
        return matches(text.replace(HERE, ""), target)
    here = text.find(HERE)
    text = _classless(text.replace(HERE, ""))[-MAX_PATTERN:]
    written = here if 0 <= here <= len(text) else 0
    ends = len(text), len(target)
    starts = [j == 0 or (target[j - 1] == sep and not first) for j in range(len(target))]
    names = {j: target[j : (target.find(sep, j) + 1 or len(target) + 1) - 1] for j in range(len(target)) if starts[j]}
    distinct = [starts[j] and j >= placed and target[j] not in ("*", sep) and names[j] not in GENERIC
                for j in range(len(target))]  # fmt: skip
    # reach: 0 no name reached yet; 1 a name begun by one character the command wrote; 2 reached
    seen = {(0, 0, 2 if pointed else 0)}
    todo = list(seen)
    while todo:
        i, j, reach = todo.pop()
        if (i, j) == ends and reach == 2:
            return True
        a = text[i] if i < ends[0] else ""
        b = target[j] if j < ends[1] else ""
        moves = []
        held = 2 if reach == 2 else 0  # a name begun and not continued by what was written is not reached
        if b == "*":
            moves.append((i, j + 1, held))
            if a:
                moves.append((i + 1, j, held))
        if a in (ANY, PART):
            moves.append((i + 1, j, held))
            if b and b != "*" and (a == ANY or b != sep):
                moves.append((i, j + 1, held))
        elif a and b and b != "*" and a == b:
            step = reach
            if i >= written and distinct[j]:
                step = max(reach, 2 if j + 1 == ends[1] or target[j + 1] == sep else 1)
            elif i >= written and reach == 1:
                step = 2
            elif reach == 1:
                step = 0
            moves.append((i + 1, j + 1, step))
        for move in moves:
            if move not in seen:
                seen.add(move)
                todo.append(move)
    return False


def _classless(text: str) -> str:
    """Every active glob character (a bracket expression whole) as PART: any text in one name."""
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == CLASS:
            end = text.find("]", i + 2)
            i = len(text) if end < 0 else end + 1
            out.append(PART)
            continue
        out.append(PART if c in (STAR, QUERY) else c)
        i += 1
    return "".join(out)


def matches(text: str, target: str) -> bool:
    """Does the decided `text` match `target` (`*`: any text; `?`: one character)? Matched by the
    target's literal pieces, in order, with no regular expression to compile."""
    if "?" in target:
        return glob_match(text, target.replace("*", STAR).replace("?", QUERY), slash=True)
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


def glob_match(name: str, pattern: str, slash: bool = False) -> bool:
    """Does `name` match the glob `pattern` (its STAR, QUERY and CLASS active; `slash`: they may
    match a `/`), as the shell matches a file name?"""
    p, n = 0, 0
    back_p, back_n = -1, -1
    while n < len(name):
        c = pattern[p] if p < len(pattern) else ""
        if c == STAR:
            back_p, back_n = p, n
            p += 1
            continue
        if c == QUERY and (slash or name[n] != "/"):
            p, n = p + 1, n + 1
            continue
        if c == CLASS:
            fits, after = _in_class(pattern, p + 1, name[n])
            if fits:
                p, n = after, n + 1
                continue
        elif c and c not in (QUERY, CLASS) and c == name[n]:
            p, n = p + 1, n + 1
            continue
        if back_p < 0 or (not slash and name[back_n] == "/"):
            return False
        back_n += 1
        p, n = back_p + 1, back_n
    return all(c == STAR for c in pattern[p:])


def _in_class(pattern: str, at: int, char: str) -> tuple[bool, int]:
    """Does `char` fit the bracket expression starting at `at` (after its `[`), and where it ends."""
    end = pattern.find("]", at + 1)
    if end < 0:
        return char == "[", at
    body = pattern[at:end]
    negate = body[:1] in ("!", "^")
    body = body[1:] if negate else body
    fits, i = False, 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            fits = fits or body[i] <= char <= body[i + 2]
            i += 3
        else:
            fits = fits or body[i] == char
            i += 1
    return fits != negate, end + 1
