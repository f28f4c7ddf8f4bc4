"""The command line: one module per command (click), the only room that imports click.

May import every other room; nothing imports it but governor.cli.
"""
