"""Tools for team leads: what a policy does, did, and would do.

Owns playing a session through the hook's own code offline (player), transcript replay
(replay), scenario tests (scenarios), reports from the audit trail (report) and the demo
(demo).

May import the engine, the policy, the harnesses, the runtime and the foundation; the
commands import it, nothing else does.
"""
