"""Fixes as data, the journaled executor and undo: actions.py (what a fix does), journal.py (doing it
and undoing it), atomic.py (crash-safe file primitives)."""
