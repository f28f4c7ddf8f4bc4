"""The policy: the YAML a team lead edits, as a validated model, and the compiled form hooks read.

Owns the model (model), reading YAML with positions (document), layering the shipped default,
a team policy and a local override with located problems (files), finding the files and
caching the compiled form (compiled), the policy in words (text) and what a change loosens
or tightens (diff).

May import the engine (the compiled form it produces, the unit it counts in) and the
foundation; never the hook runtime, the harnesses, the review tools or the commands.
"""
