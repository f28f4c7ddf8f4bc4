"""What each program does with its words: the table the walk of a command line reads
(governor.engine.effects), and how a command's words split into options and operands.

A program's entry says which of its options take a value and what that value is, what each of
its operands is (a file it reads, lists, writes or removes; a destination folder; data it only
passes along: a pattern, a message, printed text; inline code; an address; a command it runs in
turn), and its kind where it does more than that (a wrapper, a shell, an interpreter, `find`,
`tar`, `git`). A program the table does not know reads its operands (a word with spaces is a
message) and writes only what an output option names: it is never taken to write its words.

Hot path: standard library only, no `re`.
"""

from __future__ import annotations

from governor.engine.words import ANY, PART

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")

# -- the table ---------------------------------------------------------------------------------
# A program: (options that take a value, each with its value's role; the operands' roles in order,
# the last followed by `*` repeating; its kind, when it is more than options and operands).
# Roles: r read, R read with the folder tree under it, l list, w write, m remove (or move away),
# s destination (into a folder), u anything under it may be written, c the folder it works in,
# d data (a pattern, a message, printed text: never judged), _ an argument (no path), x code,
# a an address, S a script it runs, n the rest is a command it runs. `(d)` first: the operand an
# option marked `!` supplies (grep's pattern by -e). `-` before letters: flags that change roles.


def _each(names: str, entry: T) -> dict[str, T]:
    return dict.fromkeys(names.split(), entry)


# fmt: off
_READ = ("", "r*")
_GREP = ("e:d! f:r! --regexp:d! --file:r! m:_ A:_ B:_ C:_ d:_ D:_ --include:_ --exclude:_ --exclude-dir:_ "
         "--max-count:_ --context:_ --after-context:_ --before-context:_ --color:_ --colour:_", "(d) r*", "recurse")
_SEARCH = ("e:d! f:r! --regexp:d! --file:r! g:_ t:_ T:_ m:_ A:_ B:_ C:_ M:_ j:_ --glob:_ --type:_ --max-count:_ "
           "--context:_ --max-depth:_ --ignore-file:r", "(d) R*")
_LIST = ("I:_ L:_ P:_ T:_ d:_ B:_ --max-depth:_ --block-size:_ --format:_ --time-style:_ --sort:_ --width:_ "
         "--hide:_ --ignore:_", "l*")
_DATA = ("", "d*")
_WRAP = ("", "n", "wrapper")
_SHELL = ("o:_ O:_ --rcfile:r --init-file:r", "r _*", "shell")
_COPY = ("t:s! S:_ --target-directory:s! --suffix:_ --backup:_", "r r*", "copy")
_TOOL = ("t:u r:r c:r e:r C:c o:w --target:u --requirement:r --constraint:r --editable:r --target-dir:u "
         "--manifest-path:r --prefix:u --cwd:c --directory:c --project:c --output:w --out-dir:u --outDir:u "
         "--log-file:w --cache-dir:u --root:u -m:d --message:d --title:d --body:d --description:d --comment:d "
         "--notes:d --subject:d", "r*", "tool")
_CURL = ("o:w O:_ d:d H:d u:_ X:_ A:_ e:_ b:_ c:w K:r T:r F:d x:a m:_ w:d D:w --output:w --data:d --data-binary:d "
         "--data-raw:d --data-urlencode:d --json:d --header:d --user:_ --request:_ --user-agent:_ --referer:_ "
         "--cookie:_ --cookie-jar:w --config:r --upload-file:r --form:d --proxy:a --max-time:_ --connect-timeout:_ "
         "--write-out:d --dump-header:w --url:a --output-dir:u --retry:_ --cacert:r --cert:r --key:r --resolve:a "
         "--connect-to:a --unix-socket:a --abstract-unix-socket:a", "a*", "curl")
_DOCKER = ("v:v w:_ e:_ p:_ u:_ l:_ m:_ t:_ f:r --mount:_ --env:_ --workdir:_ --name:_ --user:_ --network:_ "
           "--entrypoint:_ --volume:v --env-file:r --file:r --label:_ --platform:_ --memory:_ --cpus:_ "
           "--publish:_ --tag:_", "_*")


PROGRAMS: dict[str, tuple[str, ...]] = {
    **_each("cat tac nl less more most bat view strings od hexdump md5sum sha1sum sha224sum sha256sum "
            "sha384sum sha512sum b2sum cksum wc diff cmp comm paste rev zcat zless zmore bzcat xzcat open "
            "xdg-open fold fmt expand unexpand tsort column pr", _READ),
    "head": ("n:_ c:_ --lines:_ --bytes:_", "r*"),
    "tail": ("n:_ c:_ s:_ --lines:_ --bytes:_ --pid:_ --sleep-interval:_", "r*"),
    "cut": ("d:_ f:_ c:_ b:_ --delimiter:_ --fields:_ --characters:_ --bytes:_ --output-delimiter:_", "r*"),
    "sort": ("o:w k:_ t:_ T:u S:_ --output:w --key:_ --field-separator:_ --temporary-directory:u --buffer-size:_ "
             "--parallel:_", "r*"),
    "uniq": ("f:_ s:_ w:_ --skip-fields:_ --skip-chars:_ --check-chars:_", "r w"),
    "xxd": ("c:_ g:_ l:_ o:_ s:_ n:_", "r w"),
    "iconv": ("f:_ t:_ o:w --from-code:_ --to-code:_ --output:w", "r*"),
    "base64": ("w:_ --wrap:_", "r"),
    "split": ("b:_ l:_ n:_ a:_ C:_ t:_ --bytes:_ --lines:_ --number:_ --additional-suffix:_", "r w"),
    "tr": _DATA,
    "sd": ("", "d d w*"),
    "mount": ("o:_ t:_ B:_ --bind:_", "r m"),
    "duckdb": ("c:x! cmd:x! init:r", "w x*", "sqlite"),
    "jq": ("f:r! L:_ --from-file:r! --arg:__ --argjson:__ --slurpfile:__ --rawfile:__ --indent:_", "(d) r*"),
    "yq": ("f:r! --from-file:r! --arg:__ I:_ o:_ --output-format:_ p:_", "(d) r*", "in-place"),
    **_each("ls dir vdir tree du df stat file realpath readlink basename dirname namei lsattr", _LIST),
    **_each("grep egrep fgrep zgrep zegrep zfgrep", _GREP),
    **_each("rg ag ack ack-grep ugrep", _SEARCH),
    "sed": ("e:d! f:r! --expression:d! --file:r! l:_ --line-length:_", "(d) r*", "in-place"),
    **_each("awk gawk mawk nawk", ("f:r! v:_ F:_ i:r --file:r! --assign:_ --field-separator:_ --include:r", "(x) r*")),
    **_each("echo printf test [ [[ true false : alias unalias shopt ulimit umask wait jobs fg bg disown "
            "hash help history type whence where which whereis hostname uname whoami id groups date cal sleep seq "
            "yes exit return break continue shift let kill pkill pgrep killall ps top htop free uptime lsof nproc "
            "clear tput stty locale getconf printenv logger notify-send say man info apropos whatis tldr expr bc "
            "dc factor numfmt", _DATA),
    **_each("cp install rsync scp", _COPY),
    "mv": ("t:s! S:_ --target-directory:s! --suffix:_ --backup:_", "m m*", "copy"),
    "ln": ("t:s! S:_ --target-directory:s! --suffix:_", "_ _*", "copy"),
    **_each("rm unlink shred trash trash-put srm", ("n:_ s:_", "m*")),
    "rmdir": ("", "_*"),  # an empty folder only: nothing in it goes
    "touch": ("d:_ r:r t:_ --date:_ --reference:r", "w*"),
    **_each("mkdir mkfifo mknod", ("m:_ Z:_ --mode:_ --context:_", "w*")),
    "truncate": ("s:_ r:r --size:_ --reference:r", "w*"),
    **_each("chmod chown chgrp chattr setfacl", ("--reference:r! --from:_", "(_) w*", "mode")),
    "tee": ("", "w*"),
    **_each("vi vim nvim nano emacs pico ed ex code subl gedit kate micro joe mcedit patch", ("", "w*")),
    **_each("gzip gunzip bzip2 bunzip2 xz unxz lzma zstd unzstd lz4 compress uncompress", ("S:_ --suffix:_", "w*")),
    "zip": ("b:u n:_ t:_ x:_ i:_ --temp-path:u", "w R*"),
    "unzip": ("d:u x:_ P:_", "r _*", "extract"),
    "tar": ("f:_ C:c b:_ T:r X:r H:_ --file:_ --directory:c --exclude:_ --files-from:r --exclude-from:r "
            "--transform:_ --xform:_ --strip-components:_ --format:_ --use-compress-program:_", "_*", "tar"),
    "dd": ("", "_*", "dd"),
    "curl": _CURL,
    "wget": ("O:w o:w a:w P:u i:r e:_ t:_ T:_ U:_ --output-document:w --output-file:w --append-output:w "
             "--directory-prefix:u --input-file:r --header:d --post-data:d --post-file:r --user:_ --password:_ "
             "--tries:_ --timeout:_", "a*"),
    **_each("nc ncat netcat telnet socat", ("p:a s:a w:_ i:_ q:_ x:a X:_ e:S c:S", "a*", "address")),
    **_each("http https xh xhs", ("", "a a d*")),
    "redis-cli": ("h:a p:a u:a s:a a:_ n:_ r:_ i:_ --user:_ --pass:_ --cacert:r --cert:r --key:r --eval:r", "x*"),
    "sqlite3": ("-cmd:x -init:r -separator:_ -newline:_ -nullvalue:_", "w x*", "sqlite"),
    **_each("psql mysql mariadb", ("c:x f:r h:a p:a d:_ U:_ u:_ o:w e:x --command:x --file:r --host:a --port:a "
                                   "--output:w --execute:x", "_ _*")),
    "ssh": ("p:_ i:r F:r o:_ l:_ J:a L:a R:a D:a W:a b:_ c:_ e:_ m:_ O:_ Q:_ S:_ w:_ E:w B:_", "a S", "ssh"),
    "git": ("C:c c:_ --git-dir:_ --work-tree:c --namespace:_ --exec-path:_", "_ _*", "git"),
    **_each("docker podman nerdctl", _DOCKER),
    "make": ("C:c f:r j:_ l:_ o:_ W:_ I:_ --directory:c --file:r --makefile:r --jobs:_", "_*"),
    **_each("pip pip3 uv poetry pdm hatch conda mamba micromamba gem bundle npm pnpm yarn bun deno cargo go rustup "
            "pipenv pixi mise asdf direnv nix devbox rye just task "
            "brew apt apt-get dnf yum apk pacman snap flatpak kubectl helm terraform gh glab aws gcloud az systemctl "
            "journalctl service mvn gradle dotnet composer nix tox nox pytest mypy ruff black isort flake8 pylint "
            "eslint prettier tsc jest vitest mocha", _TOOL),
    **_each("npx pnpx bunx uvx pipx", ("p:_ --package:_ --from:_ --with:_ --python:_", "n", "wrapper")),
    **_each("sh bash zsh dash ksh ash fish mksh yash rbash source .", _SHELL),
    "eval": ("", "S*", "eval"),
    **_each("python python2 python3 pypy pypy3 ipython", ("c:x! m:_! W:_ X:_ Q:_", "r _*", "interpreter")),
    **_each("node nodejs tsx ts-node", ("e:x! p:x! r:_ C:_ --eval:x! --print:x! --require:_ --import:_ --loader:_",
                                        "r _*", "interpreter")),
    **_each("perl perl5", ("e:x! E:x! M:_ m:_ I:_ x:_", "r r*", "interpreter")),
    "ruby": ("e:x! r:_ I:_ C:c x:_", "r _*", "interpreter"),
    "php": ("r:x! f:r! d:_ c:_ B:x E:x R:x F:r", "r _*", "interpreter"),
    **_each("lua luajit", ("e:x! l:_", "r _*", "interpreter")),
    "Rscript": ("e:x!", "r _*", "interpreter"),
    "osascript": ("e:x! l:_", "r _*", "interpreter"),
    **_each("pwsh powershell", ("c:x! -Command:x! -File:r! -command:x! -file:r!", "r _*", "interpreter")),
    "find": ("", "l*", "find"),
    "fd": ("e:_ t:_ d:_ E:_ x:n X:n c:_ j:_ --exec:n --exec-batch:n --extension:_ --type:_ --max-depth:_ "
           "--exclude:_ --changed-within:_ --changed-before:_ --size:_", "(d) l*"),
    "xargs": ("I:_ i:_ n:_ P:_ d:_ E:_ L:_ s:_ a:r --max-args:_ --max-procs:_ --delimiter:_ --replace:_ "
              "--arg-file:r --max-lines:_ --max-chars:_ --eof:_", "n", "xargs"),
    "env": ("u:_ C:c S:S --unset:_ --chdir:c --split-string:S", "n", "env"),
    **_each("sudo doas", ("u:_ g:_ h:_ p:_ C:_ D:c r:_ t:_ U:_ T:_ --user:_ --group:_ --host:_ --prompt:_ "
                          "--chdir:c --close-from:_", "n", "wrapper")),
    "su": ("c:S s:_ g:_ G:_ --command:S --shell:_ --group:_ --supp-group:_", "_*", "su"),
    "runuser": ("c:S! s:_ g:_ G:_ u:_ --command:S! --shell:_ --group:_ --supp-group:_ --user:_", "n", "wrapper"),
    "sg": ("c:S!", "_ S", "wrapper"),
    **_each("setpriv chpst parallel entr", ("u:_ g:_ --reuid:_ --regid:_ --groups:_ -j:_ --jobs:_", "n", "wrapper")),
    "gdb": ("--args:n ex:_ x:r batch:_", "r _*"),
    **_each("xterm gnome-terminal konsole", ("e:n --command:S T:_ title:_", "_*", "wrapper")),
    "at": ("f:r q:_ t:_", "_*", "su"),
    "tmux": ("c:_ f:r L:_ S:_ t:_ s:_ n:_ x:_ y:_ F:_", "_*", "tmux"),
    "screen": ("S:_ c:r dmS:_ -dmS:_", "n", "wrapper"),
    "nix-shell": ("--run:S! --command:S! -p:_ --packages:_ -I:_", "_*"),
    "expect": ("c:x! f:r", "r _*", "interpreter"),
    "timeout": ("s:_ k:_ --signal:_ --kill-after:_", "_ n", "wrapper"),
    **_each("nice renice", ("n:_ --adjustment:_", "n", "wrapper")),
    "ionice": ("c:_ n:_ p:_ P:_ u:_ --class:_ --classdata:_", "n", "wrapper"),
    "stdbuf": ("i:_ o:_ e:_ --input:_ --output:_ --error:_", "n", "wrapper"),
    "time": ("f:_ o:w --format:_ --output:w", "n", "wrapper"),
    "command": ("", "n", "command"),
    "exec": ("a:_", "n", "wrapper"),
    **_each("nohup setsid builtin unbuffer chronic caffeinate firejail torsocks proxychains proxychains4 catchsegv "
            "dbus-run-session ssh-agent tsp coproc busybox", _WRAP),
    "faketime": ("f:_", "_ n", "wrapper"),
    "valgrind": ("--log-file:w --tool:_ --suppressions:r", "n", "wrapper"),
    **_each("strace ltrace", ("e:_ o:w p:_ s:_ E:_ u:_", "n", "wrapper")),
    "flock": ("w:_ E:_ c:S! --timeout:_ --conflict-exit-code:_ --command:S!", "w n", "wrapper"),
    "chroot": ("--userspec:_ --groups:_", "c n", "wrapper"),
    "unshare": ("S:_ G:_ R:c w:c --setuid:_ --setgid:_ --root:c --wd:c", "n", "wrapper"),
    "systemd-run": ("p:_ u:_ E:_ --unit:_ --property:_ --setenv:_ --working-directory:c --uid:_ --gid:_", "n",
                    "wrapper"),
    "xvfb-run": ("n:_ s:_ e:w f:r w:_ --server-num:_ --server-args:_ --error-file:w --auth-file:r", "n", "wrapper"),
    "script": ("c:S! E:_ O:w I:r T:w t:w B:w --command:S! --log-out:w --log-in:r --log-timing:w", "w", "wrapper"),
    "watch": ("n:_ d:_ --interval:_ --differences:_", "S*", "watch"),
    **_each("cd pushd", ("", "c", "cd")),
    **_each("export declare typeset local readonly", ("", "_*", "assign")),
    "unset": ("", "_*", "unset"),
    "set": ("", "_*", "set"),
    "trap": ("", "S _*"),
    "read": ("p:d d:_ n:_ N:_ t:_ u:_ a:_ i:_", "_*", "read"),
}
# fmt: on

_SUFFIXES = "0123456789."


Given = list[tuple[str, str, str]]  # option values: (the value, its role, the option)
# Options end at the first operand where the rest is a command or its words.
_STOPS = frozenset(("wrapper", "xargs", "env", "interpreter", "shell", "su", "watch", "ssh", "git", "find", "command",
                    "eval"))  # fmt: skip
_specs: dict[str, tuple[dict[str, str], list[str], bool, str]] = {}


def spec(program: str) -> tuple[dict[str, str], list[str], bool, str]:
    """A program's options (name -> its value's role, `!` when it supplies the first operand),
    its operands' roles (the last one repeating when `repeat`), and its kind."""
    if program in _specs:
        return _specs[program]
    found = PROGRAMS.get(program)
    if found is None and program.rstrip(_SUFFIXES) != program:
        found = PROGRAMS.get(program.rstrip(_SUFFIXES))  # python3.12, pip3.11
    if found is None:
        return _UNKNOWN_OPTIONS, ["r"], True, "unknown"
    options: dict[str, str] = {}
    for item in found[0].split():
        name, _, role = item.rpartition(":")
        options[name if name.startswith("-") else ("-" + name if len(name) == 1 else "--" + name)] = role
    roles = found[1].split()
    repeat = bool(roles) and roles[-1].endswith("*")
    made = options, [r.rstrip("*") for r in roles], repeat, found[2] if len(found) > 2 else ""
    _specs[program] = made
    return made


_UNKNOWN_OPTIONS = {**_each("-o --output --out --outfile --out-file --output-file --log-file --logfile", "w"),
                    **_each("--output-dir --outdir --out-dir --target-dir", "u"),
                    **_each("-m --message --title --body --description --comment --subject --summary --notes", "d")}  # fmt: skip


# git: what a verb does with its operands (files it writes, removes or reads; refs and names otherwise).
_GIT = {"add": "r", "rm": "m", "mv": "m", "checkout": "u", "restore": "u", "stash": "w", "apply": "r", "am": "r",
        "init": "w", "blame": "r", "grep": "d", "diff": "r", "show": "_", "log": "_"}  # fmt: skip
_GIT_OPTIONS = {**dict.fromkeys(("-m", "--message", "--grep", "-S", "-G", "--format", "--pretty", "-e"), "d"),
                **dict.fromkeys(("-F", "--file", "--template"), "r"), **dict.fromkeys(("-o", "--output"), "w"),
                **dict.fromkeys(("--author", "--date", "-C", "-c", "-b", "-B", "--since", "--until", "-n",
                                 "--depth", "--branch", "--origin", "-u", "--upstream"), "_")}  # fmt: skip


def options_of(words: list[str], options: dict[str, str], kind: str) -> tuple[Given, list[str], set[str]]:
    """A command's words as option values (each with its role and its option), operands and flags.
    Options stop at `--`, and at the first operand where the rest is a command or its words."""
    given: Given = []
    operands: list[str] = []
    flags: set[str] = set()
    stops = kind in _STOPS
    i = 0
    while i < len(words):
        word = words[i]
        if operands and stops:
            operands += words[i:]
            break
        if word == "--":
            operands += words[i + 1 :]
            break
        if word[:1] != "-" or word == "-" or word[1:2] in (PART, ANY, "") or (kind == "mode" and _mode(word)):
            operands.append(word)
            i += 1
            continue
        name, eq, value = word.partition("=")
        role = options.get(name)
        if role is not None or word.startswith("--"):
            flags.add(name)
            if role is not None and eq:
                given.append((value, role, name))
            elif role is not None:
                for _ in role.rstrip("!"):  # `--arg NAME VALUE` takes two
                    if i + 1 < len(words):
                        i += 1
                        given.append((words[i], role, name))
            elif eq and kind == "unknown":
                given.append((value, "r" if "/" in value else "_", name))
            i += 1
            continue
        flags.add(word)
        for j in range(1, len(word)):
            letter = "-" + word[j]
            flags.add(letter)
            role = options.get(letter)
            if role is None:
                continue
            if j + 1 < len(word):
                given.append((word[j + 1 :], role, letter))
            elif i + 1 < len(words):
                i += 1
                given.append((words[i], role, letter))
            break
        i += 1
    return given, operands, flags


def _mode(word: str) -> bool:
    """Is `word` a permission mode that starts with `-` (`chmod -w FILE`)?"""
    return all(c in "rwxXstugoa+-=," for c in word) and any(c in "rwxXst" for c in word)


def operands_of(operands: list[str], roles: list[str], repeat: bool, kind: str) -> list[tuple[str, str]]:
    """Each operand with its role: in order, the last role repeating (else `_` past the end). An
    unknown program's operand with spaces in it is a message, not a file."""
    out = []
    for n, word in enumerate(operands):
        role = roles[n] if n < len(roles) else (roles[-1] if repeat and roles else "_")
        if kind in ("unknown", "tool") and (" " in word or "\n" in word):
            role = "_"
        out.append((word, role))
    return out


def without(words: list[str], data: list[str]) -> list[str]:
    """`words` without the data among them (each taken out once)."""
    out = list(words)
    for word in data:
        if word in out:
            out.remove(word)
    return out


def base(word: str) -> str:
    """A program's name: its path's last component."""
    return word.rstrip("/").rsplit("/", 1)[-1] or word
