"""The engine: decide(Event, CompiledPolicy, Ledger, World) -> Decision, and what it needs.

Owns every rule memory-governor enforces (decide), the shapes it takes in and gives back
(events), the per-turn counts across processes (ledger), the compiled policy as it reads it
and the fixed lines it may add (rules), memory-server results as entries (results), counting
in the policy's unit (tokens), memory-need classification (classify, need_model), save discipline
(saves), subagent tiers (tiers), and token-bounded selection and briefings (packer,
briefing).

Knows no harness, no file format of a policy, no command line. May import only itself and
the foundation (governor, governor.state); everything else imports it.
"""
