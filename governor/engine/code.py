"""What an interpreter's inline code does, as far as its text says: the files it writes and the
command lines it runs.

A path is written when it is an argument of a call that writes files (`open(p, "w")`,
`Path(p).write_text(…)`, `os.remove(p)`, `fs.writeFileSync(p, …)`, `shutil.rmtree(p)`, …), as a
string literal or a name the code assigned one to; a literal the code only reads or prints is
not. A command line is a string literal the code hands a call that runs commands (`os.system`,
`subprocess.run`, `execSync`, `system`, backticks), a list of literals included
(`["engram", "search", "x"]`). Paths and commands the code builds at run time are not seen: this
is a reading of the text, not of the program.

Hot path: standard library only, no `re`; used only for code a command hands an interpreter.
"""

from __future__ import annotations

# Calls whose arguments are files they write, create, move or remove.
_WRITERS = frozenset(("write_text", "write_bytes", "writeFile", "writeFileSync", "appendFile", "appendFileSync",
                      "createWriteStream", "unlink", "unlinkSync", "remove", "removedirs", "rmtree", "rmdir",
                      "rmdirSync", "rmSync", "rename", "renameSync", "replace", "move", "copy", "copyfile", "copy2",
                      "copytree", "copyFileSync", "cpSync", "symlink", "symlinkSync", "symlink_to", "link", "chmod",
                      "chmodSync", "truncate", "truncateSync", "mkdir", "mkdirSync", "makedirs", "touch", "rm",
                      "rm_rf", "rm_r", "rm_f", "mv", "cp", "file_put_contents", "connect", "delete", "outputFile",
                      "writeJson", "writeJSON"))  # fmt: skip
_OPENERS = frozenset(("open", "fopen", "File.open", "os.open"))  # write only in a write mode
_REMOVERS = frozenset(("unlink", "unlinkSync", "remove", "removedirs", "rmtree", "rmdir", "rmdirSync", "rmSync", "rm",
                       "rm_rf", "rm_r", "rm_f", "delete", "rename", "renameSync", "move", "mv"))  # fmt: skip
_RUNNERS = ("system", "popen", "Popen", "run(", "call(", "check_call", "check_output", "exec", "spawn", "execSync",
            "execFile", "spawnSync", "`", "%x", "Runtime", "subprocess", "shell_exec", "passthru")  # fmt: skip
MAX_LITERALS = 256


def literals(code: str) -> list[tuple[int, int, str]]:
    """The short string literals of `code`, each with where it starts and ends ('…' or "…", one line)."""
    out: list[tuple[int, int, str]] = []
    i = 0
    while i < len(code) and len(out) < MAX_LITERALS:
        c = code[i]
        if c in "'\"":
            end = code.find(c, i + 1)
            while end > 0 and code[end - 1] == "\\" and code[end - 2 : end] != "\\\\":
                end = code.find(c, end + 1)
            if end < 0:
                break
            text = code[i + 1 : end]
            if text and len(text) <= 1024 and "\n" not in text:
                out.append((i, end + 1, text))
            i = end + 1
        else:
            i += 1
    return out


def written_paths(code: str) -> list[tuple[str, bool]]:
    """The files the code's write calls name (literals, or names it assigned a literal to), each
    with whether the call removes or moves it away."""
    found = literals(code)
    names = _assigned(code, found)
    out: list[tuple[str, bool]] = []
    at = code.find("(")
    while at >= 0 and len(out) < 64:
        name = _called(code, at)
        end = _closing(code, at)
        inside = [text for start, _, text in found if at < start < end]
        mode = [t for t in inside if t and len(t) <= 3 and set(t) <= set("rwabxt+<>") and set(t) & set("wax+>")]
        if name.rsplit(".", 1)[-1] in _WRITERS or (name.removeprefix(".") in _OPENERS and mode):
            paths = [t for t in inside if t not in mode][:2]  # os.remove(p), fs.writeFileSync(p, …), open(p, "w")
            paths += [names[w] for w in _words(code[at + 1 : end]) if w in names][:2]
            receiver = name.rsplit(".", 1)[0] if "." in name else ""
            if receiver in names:  # p.write_text(…), with p = Path("…")
                paths.append(names[receiver])
            elif name.startswith(".") and code[at - len(name) - 1 : at - len(name)] == ")":  # Path("…").write_text(…)
                opening = code.rfind("(", 0, at - len(name) - 1)
                paths += [t for s, _, t in found if opening < s < at - len(name)][:1]
            out += [(path, name.rsplit(".", 1)[-1] in _REMOVERS) for path in paths]
        at = code.find("(", at + 1)
    return out


def writes_files(code: str) -> str:
    """What the code may do to files named on its command line: "m" when it calls anything that
    removes or moves files, "w" when anything that writes them, "" when neither."""
    called = [name for name in _WRITERS | _OPENERS if f"{name}(" in code or f"{name} " in code]
    return "m" if any(name in _REMOVERS for name in called) else "w" if called else ""


def command_lines(code: str) -> list[str]:
    """The command lines the code hands a call that runs commands: literals with a space, and lists of
    literals (`["engram", "search", "x"]`) joined."""
    if not any(token in code for token in _RUNNERS):
        return []
    found = literals(code)
    out = [text for _, _, text in found if " " in text.strip()]
    for start, _, _ in found:  # a list of literals: the words of one command
        opening = code.rfind("[", 0, start)
        if opening < 0 or code[opening + 1 : start].strip():
            continue
        closing = code.find("]", start)
        words = [text for s, e, text in found if opening < s < closing]
        between = code[opening + 1 : closing]
        for s, e, _ in found:
            if opening < s < closing:
                between = between.replace(code[s:e], "")
        if words and not between.replace(",", "").strip():
            out.append(" ".join(words))
    return list(dict.fromkeys(out))[:16]


def _called(code: str, at: int) -> str:
    """The (dotted) name right before the `(` at `at`."""
    start = at
    while start > 0 and (code[start - 1].isalnum() or code[start - 1] in "_."):
        start -= 1
    return code[start:at]


def _closing(code: str, at: int) -> int:
    level = 0
    for i in range(at, min(len(code), at + 4096)):
        level += {"(": 1, ")": -1}.get(code[i], 0)
        if level == 0:
            return i
    return min(len(code), at + 4096)


def _words(text: str) -> list[str]:
    return ["".join(c if c.isalnum() or c == "_" else " " for c in part).strip() for part in text.split(",")]


def _assigned(code: str, found: list[tuple[int, int, str]]) -> dict[str, str]:
    """Names the code assigns a literal to (`p = 'notes/out.json'`, `p = Path('x')`)."""
    out = {}
    for start, _, text in found:
        line = code.rfind("\n", 0, start) + 1
        head = code[line:start].rstrip()
        for opener in ("Path(", "pathlib.Path(", "Path.new("):
            head = head.removesuffix(opener).rstrip()
        if head.endswith("=") and not head.endswith(("==", "!=", "<=", ">=")):
            name = head[:-1].strip().split()[-1:] or [""]
            if name[0].replace("_", "").isalnum():
                out[name[0]] = text
    return out
