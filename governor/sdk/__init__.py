"""Entries for programs that run agents themselves (orchestrators), called from their own code.

- `governor.sdk.claude_agent.govern(options)`: a Claude Agent SDK `ClaudeAgentOptions` whose
  hooks decide every event in this process, through the same engine and ledger as the hooks.
- `governor.sdk.briefing.brief(candidates, ...)`: a dispatch briefing's memory cards, packed to
  a token budget, as `memory-governor brief` packs them.

docs/orchestrators.md shows both. Nothing here is imported by a hook process.

May import: governor.runtime, governor.harnesses, governor.policy, governor.engine, governor.state;
the commands may import it (`brief` packs through the same function).
"""
