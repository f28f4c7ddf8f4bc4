"""The policy as a validated model: every rule memory-governor enforces, as data.

This module is the cold path (pydantic). Hooks never import it: they read the compiled
form that `governor.policy.compiled` builds from it (see `governor.policy.files`).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

ROLES = ("search", "timeline", "fetch", "context", "save", "summary")
Role = Literal["search", "timeline", "fetch", "context", "save", "summary"]
Enforce = Literal["block", "warn", "off"]
Unit = Literal["o200k_base", "cl100k_base", "chars", "chars_div4"]
TriggerName = Literal["post_compact", "explicit_user_recall", "session_resume"]
TriggerScope = Literal["this_turn", "next_turn", "once"]
NeedName = Literal[
    "none", "recent_session", "similar_issue", "architecture_decision", "continuation", "explicit_user_recall"
]
ResultFormat = Literal["auto", "engram", "knowledge_graph", "text"]

# Upper bounds that catch a typo (an extra zero) without limiting any real team.
MAX_CALLS = 1000
MAX_TOKENS = 10_000_000

Count = Annotated[int, Field(ge=0, le=MAX_CALLS)]
Tokens = Annotated[int, Field(ge=0, le=MAX_TOKENS)]
Name = Annotated[str, Field(min_length=1, max_length=200)]


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as err:
        raise ValueError(f"not a valid regular expression: {err}") from None
    return value


Pattern = Annotated[str, Field(min_length=1, max_length=2000), AfterValidator(_regex)]
Target = Annotated[str, Field(min_length=1, max_length=400)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ToolSpec(Strict):
    """What one memory-server tool is, and which of its arguments matter."""

    role: Role
    limit_param: Name | None = Field(None, description="Argument holding a result count (clamped on L1).")
    id_param: Name | None = Field(None, description="Argument holding the id(s) a timeline or fetch reads.")
    type_param: Name | None = Field(None, description="Argument holding a save's memory type.")
    content_param: Name | None = Field(None, description="Argument holding a save's body.")
    title_param: Name | None = Field(None, description="Argument holding a save's title.")
    topic_key_param: Name | None = Field(None, description="Argument holding a save's topic key.")
    default_type: Name | None = Field(None, description="The type the server gives a save that names none.")
    before_param: Name | None = Field(None, description="Argument holding how many neighbours a timeline shows before.")
    after_param: Name | None = Field(None, description="Argument holding how many neighbours a timeline shows after.")
    project_param: Name | None = Field(
        None,
        description="Argument naming the project a search or mem_context reads (kept only when it is the "
        "session's own, with L1 other_projects off).",
    )
    all_projects_param: Name | None = Field(None, description="Argument widening a search to every project.")
    max_bytes_param: Name | None = Field(
        None,
        description="Argument bounding a mem_context result in bytes (Engram v2: max_bytes): an allowed call is "
        "asked for about what the turn has left.",
    )
    compact_param: Name | None = Field(
        None, description="Argument asking for a mem_context result without previews (Engram v2: compact): set true."
    )
    format_param: Name | None = Field(
        None,
        description="Argument choosing a search result's form (Engram v2: response_format): with L1 snippets_only, "
        'a search asks for "compact" (each hit once, as its snippet).',
    )


class ToolMap(Strict):
    """One memory server, under each name the harness may give it."""

    servers: list[Name] = Field(min_length=1, description="MCP server names, e.g. engram.")
    format: ResultFormat = Field("auto", description="How results are parsed into entries.")
    map: dict[Name, ToolSpec] = Field(min_length=1, description="Tool name -> its role.")
    any_server: bool = Field(
        False,
        description="Govern these tools on any MCP server, whatever it is named (the same server registered "
        "again under another name): a tool named as in `map`, or, with `tool_prefix`, any tool named with it.",
    )
    tool_prefix: Name | None = Field(
        None, description="Every tool of this server is named with this prefix (Engram: mem_); with any_server."
    )
    unmapped: Literal["count", "pass"] = Field(
        "count",
        description="A tool of this server that `map` does not name: count: its result is counted and trimmed "
        "against the turn's budget; pass: passed untouched.",
    )


class Route(Strict):
    """Another way to the memory than its tools (a CLI, an HTTP API, the database file), or to
    what the governor depends on (its state, its program, a harness's settings): a call of one
    of `tools` that takes it is refused, and the model is told what it did and what to do instead.
    A call is judged on what it does (governor.engine.routes): a shell command on the commands it
    runs, the files it opens, writes and removes, the addresses it connects to and the code it
    runs; a file tool on its path, a fetch tool on its URL."""

    name: Name
    tools: list[Name] = Field(min_length=1, description="Harness tools the route goes through (e.g. Bash, Read).")
    pattern: Pattern | None = Field(
        None,
        description="A regex searched in what the call opens, connects to or runs as code: a path, a URL, an "
        "interpreter's inline code, never text it only passes along (a message, a search pattern). `{state}` "
        "stands for the governor's state directory in each spelling (absolute, ~/, $HOME/), `{ledger}` for the "
        "Redis the ledger is on.",
    )
    fields: list[Name] | None = Field(
        None,
        description="The input fields looked at (e.g. command, file_path); default: the command, paths and URLs. "
        "A field named here that is none of those is searched by `pattern` as it is written.",
    )
    writes: list[Target] | None = Field(
        None,
        description="Files a call may not write, create, move or remove (a file tool's path, what a shell command "
        "writes), however it spells them (`*`: any text; `{state}`, `{home}`, `{project}` (it and each folder "
        "above it), `{path}` (each folder on PATH), `{package}` the governor's installed package, `{prefix}` its "
        "environment, `{$NAME}` the variable NAME's value: a target whose variable is not set names nothing). "
        "A part decided only at run time counts "
        "where the command's own text points at the target around it.",
    )
    runs: list[Target] | None = Field(
        None,
        description="Commands a shell may not run (`*`: any text), judged on the program's base name and the words "
        "it is given (messages and patterns left out); a program named only at run time is none of them.",
    )
    use: Name = Field("mem_search", description="The memory tool the model is told to use instead.")
    reason: str | None = Field(
        None,
        max_length=400,
        description="What the model is told instead (default: that the call reads the "
        "memory outside its tools, and to use `use`).",
    )

    @model_validator(mode="after")
    def _judges_something(self) -> Route:
        if not (self.pattern or self.writes or self.runs):
            raise ValueError("a route needs a pattern, writes or runs")
        return self


class Layer(Strict):
    expected_tokens: Tokens = Field(description="Expected tokens of one result (per result for L1).")
    max_limit: Count | None = Field(None, description="Most results one call may ask for (L1).")
    max_tokens: Tokens | None = Field(
        None,
        description="L1 shaped by tokens: the most one search passes, in whole hits (with max_limit null, a "
        "search keeps the count it asks for, up to the server's cap, and its hits are cut at this).",
    )
    max_before: Count | None = Field(None, description="Most neighbours before the focus one call may ask for (L2).")
    max_after: Count | None = Field(None, description="Most neighbours after the focus one call may ask for (L2).")
    snippets_only: bool = False
    other_projects: bool = Field(
        True,
        description="A search may read other projects' memory (L1). false: a widening argument is clamped "
        "(all_projects -> false; a project other than the session's is dropped, so the server reads the session's).",
    )
    requires_surfaced_id: bool = Field(
        False, description="The id must have been surfaced by an L1/L2 result in this turn."
    )


class Ladder(Strict):
    """L1 = the search role, L2 = timeline, L3 = fetch."""

    L1: Layer
    L2: Layer
    L3: Layer


class CallLimit(Strict):
    value: Count
    enforce: Enforce


class TokenLimit(Strict):
    value: Tokens
    enforce: Enforce


class Limits(Strict):
    max_search_calls: CallLimit
    max_full_fetches: CallLimit
    max_memory_tokens_injected: TokenLimit
    max_save_calls_per_turn: CallLimit


class Window(Strict):
    """The per-user window: what every session and harness of one user takes from the memory in a
    rolling period, on this ledger (one machine's file, or every host's Redis). The backstop no new
    session escapes; refused (or warned) like a per-turn limit. Unset (a policy from before it
    existed): no window, the loosest there is, so the shipped one only ever tightens it."""

    minutes: Annotated[int, Field(ge=1, le=10_080)] = Field(1, description="The window's length, in minutes.")
    max_search_calls: CallLimit = CallLimit(value=MAX_CALLS, enforce="off")
    max_full_fetches: CallLimit = CallLimit(value=MAX_CALLS, enforce="off")
    max_memory_tokens_injected: TokenLimit = TokenLimit(value=MAX_TOKENS, enforce="off")


class Trigger(Strict):
    scope: TriggerScope = Field(description="this_turn, next_turn (the rest of this turn and the next), once.")
    uses: Annotated[int, Field(ge=1, le=MAX_CALLS)] = 1
    phrases: list[Name] = Field(default_factory=list, description="Prompt phrases that arm it.")
    min_idle_minutes: Annotated[int, Field(ge=0, le=100_000)] = Field(
        0,
        description="session_resume: arm only when the session was idle this long (a headless loop resumes every turn).",
    )
    requires_topic: Name | None = Field(
        None,
        description="post_compact, session_resume: arm only when the memory holds a topic under this prefix "
        "(e.g. session/, state/wave/), as the governor saw it in a save's or a result's topic_key.",
    )
    armed_by: Literal["session_start", "dispatch"] = Field(
        "session_start",
        description="session_resume: session_start = a SessionStart resume; dispatch = the session's first subagent "
        "dispatch, when a saved wave state exists (requires_topic, default state/wave/).",
    )


class Trimming(Strict):
    """What a result over the turn's token budget becomes (the packer's rules)."""

    over_budget: Literal["omit", "truncate", "keep-top"] = Field(
        "omit",
        description="omit: whole entries only, an entry that does not fit is left out whole; truncate: cut the "
        "first entry that does not fit; keep-top.",
    )
    fill: Literal["stop", "skip"] = Field("stop", description="stop: keep a prefix of the ranking; skip: keep filling.")


class MemContext(Strict):
    allow: bool = Field(description="Allow mem_context with no trigger (the seed: false).")
    outside_triggers: Literal["deny", "budgeted"] = Field(
        "deny",
        description="A call with no trigger armed (allow false): deny, or budgeted: it runs, asked for what the "
        "turn has left and cut to it in whole entries (a budgeted read); no trigger is spent.",
    )
    expected_tokens: Tokens
    unlocked_by: dict[TriggerName, Trigger]
    subagents_may_arm: bool = Field(False, description="May a subagent's events arm a trigger.")

    @model_validator(mode="after")
    def _conditions_fit(self) -> MemContext:
        for name, trigger in self.unlocked_by.items():
            if trigger.armed_by == "dispatch" and name != "session_resume":
                raise ValueError(f"unlocked_by.{name}.armed_by: dispatch arms session_resume only")
            if trigger.requires_topic and name == "explicit_user_recall":
                raise ValueError("unlocked_by.explicit_user_recall.requires_topic: the user's own ask needs no topic")
        return self


class MemoryNeed(Strict):
    triggers: list[Name] = Field(description="What the class covers, in words.")
    action: Name = Field(description="The recommended action, in words.")
    advice: str = Field("", max_length=400, description="The one line the agent is told; empty = none.")
    namespaces: list[Name] = Field(default_factory=list, description="Topic prefixes L1 should search.")
    patterns: list[Pattern] = Field(
        default_factory=list,
        description="Case-insensitive regexes, matched against the prompt lower-cased without accents.",
    )
    cues: list[Name] = Field(
        default_factory=list,
        description="Words (or short phrases) that hint at the class when no pattern matches; written without accents.",
    )
    max_memory_tokens_injected: Tokens | None = Field(
        None, description="This class's memory token budget per turn, instead of the limit's value (its enforce stays)."
    )
    max_search_calls: Count | None = Field(
        None, description="This class's L1 searches per turn, instead of the limit's."
    )
    max_full_fetches: Count | None = Field(
        None, description="This class's L3 full fetches per turn, instead of the limit's."
    )


class MemoryNeeds(Strict):
    precedence: list[NeedName] = Field(description="First matching class wins.")
    default: NeedName = Field(description="The class when no pattern matches.")
    model_threshold: Annotated[float, Field(ge=0, le=1)] = Field(
        0.5,
        description="With no pattern match: the learned model's class wins if its calibrated probability is at "
        "least this; 1 turns the model off.",
    )
    cue_threshold: Annotated[int, Field(ge=1, le=20)] = Field(
        2,
        description="With no pattern match and no model decision: the class with the most distinct cues wins if it has at least this many.",
    )
    on_none: Literal["advise", "deny"] = Field(
        "advise", description="For `none`: advise skipping memory, or deny retrieval for the turn."
    )
    classes: dict[NeedName, MemoryNeed]

    @model_validator(mode="after")
    def _classes_cover_precedence(self) -> MemoryNeeds:
        missing = [n for n in [*self.precedence, self.default] if n not in self.classes]
        if missing:
            raise ValueError(f"memory need(s) {', '.join(sorted(set(missing)))} have no entry under classes")
        return self


class NeverSave(Strict):
    raw_transcript: Enforce
    tool_noise: Enforce
    step_by_step: Enforce
    duplicate: Enforce


class CharLimit(Strict):
    value: Annotated[int, Field(ge=1, le=MAX_TOKENS)]
    enforce: Enforce


HUMAN_SPEAKERS = ["user", "human", "me", "q", "question", "h", "usuario", "yo", "pregunta"]
MACHINE_SPEAKERS = ["assistant", "ai", "bot", "model", "a", "answer", "agent", "asistente", "respuesta", "ia"]


class Speakers(Strict):
    """Speaker labels that mark a pasted conversation (`User:`, `### Assistant`, `Me -`)."""

    human: list[Name] = Field(default_factory=lambda: list(HUMAN_SPEAKERS), description="Labels of the person's turns.")
    machine: list[Name] = Field(
        default_factory=lambda: list(MACHINE_SPEAKERS), description="Labels of the agent's turns."
    )


class Save(Strict):
    allowed_types: list[Name] = Field(min_length=1)
    orchestrator_only: list[Name] = Field(default_factory=list)
    never_save: NeverSave
    max_chars: CharLimit = Field(
        CharLimit(value=20_000, enforce="block"),
        description="The longest free-text field a save may have (a delta is short); also bounds the checks.",
    )
    speakers: Speakers = Speakers()
    topic_keys: Enforce = Field("warn", description="Check topic keys against the namespace contract.")


class Tier(Strict):
    roles: list[Role] = Field(description="Memory roles the tier may use.")
    max_search_calls: Count | None = Field(None, description="A tighter per-turn search cap for the tier.")


class Subagents(Strict):
    default_tier: Name
    front_matter_key: Name = Field(description="Front matter key in a subagent definition file.")
    honor_front_matter: bool = True
    tiers: dict[Name, Tier]
    agents: dict[Name, Name] = Field(default_factory=dict, description="Agent type -> tier.")

    @model_validator(mode="after")
    def _tiers_exist(self) -> Subagents:
        unknown = sorted({self.default_tier, *self.agents.values()} - set(self.tiers))
        if unknown:
            raise ValueError(f"tier(s) {', '.join(unknown)} are used but not defined under tiers")
        return self


class Briefing(Strict):
    max_tokens: TokenLimit = Field(description="Tokens of memory cards one dispatch may carry.")
    raw_l3_body: Enforce = Field(description="A raw L3 body pasted into a dispatch prompt.")
    dispatch_tools: list[Name] = Field(description="Harness tools that dispatch a subagent.")


class Ledger(Strict):
    reservation_ttl_seconds: Annotated[int, Field(ge=1, le=86_400)]
    busy_timeout_ms: Annotated[int, Field(ge=10, le=60_000)]
    retention_days: Annotated[int, Field(ge=1, le=3650)]
    record_contents: bool = Field(False, description="Store prompts and memory text in the audit trail.")


class Delivery(Strict):
    """What reaches the model: an entry it already holds whole is not delivered twice."""

    dedupe: Literal["on", "off"] = Field(
        "off",
        description="on: a memory entry repeated in the same conversation context (the main agent, or one "
        "subagent) since it was last emptied (compaction, /clear, a new session) is replaced by one line naming it, "
        "and only that line is counted.",
    )


class Runtime(Strict):
    warm_server: Literal["auto", "off"] = "auto"
    idle_exit_seconds: Annotated[int, Field(ge=10, le=86_400)] = 1800
    decision_deadline_ms: Annotated[int, Field(ge=100, le=60_000)] = Field(
        3000,
        description="CPU time one decision may take (load included); past it, on_error applies to that call only.",
    )


class Proxy(Strict):
    """The MCP proxy (`memory-governor proxy`), for clients whose calls carry no turn id."""

    turn_gap_seconds: Annotated[int, Field(ge=1, le=86_400)] = Field(
        60,
        description="With no turn from the client or its hooks: a governed call after this many quiet seconds "
        "(no memory call in flight or answered) starts a new turn.",
    )


class Policy(Strict):
    """The whole policy. Field order is the order `explain` and the rendered Markdown use."""

    version: Literal[1]
    mode: Literal["enforce", "monitor"]
    on_error: Literal["open", "closed"]
    token_counter: Unit
    tools: list[ToolMap] = Field(min_length=1)
    ladder: Ladder
    limits: Limits
    window: Window = Window()
    trimming: Trimming = Trimming()
    mem_context: MemContext
    memory_needs: MemoryNeeds
    save: Save
    subagents: Subagents
    briefing: Briefing
    delivery: Delivery = Delivery()
    routes: list[Route] = Field(default_factory=list, description="Other ways to the memory, refused.")
    ledger: Ledger
    runtime: Runtime = Runtime()
    proxy: Proxy = Proxy()
    loosen_allowed: list[Name] = Field(
        default_factory=list,
        description="Dotted keys a local override may loosen (e.g. limits.max_search_calls).",
    )
