"""Embedded mode: everything on one machine (SQLite, local directory, bubblewrap)."""
