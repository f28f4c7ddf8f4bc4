"""The hook runtime: harness bytes on stdin to one answer on stdout, fast and never silent.

Owns the hook process (entry), the thin client to the warm server (client), the warm
server itself (server), and one decision from raw bytes to answer bytes with the policy's
on_error when the governor cannot decide (runner).

May import the engine, the policy, the harnesses and the foundation; never the review tools
or the commands.
"""
