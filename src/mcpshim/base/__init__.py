"""Foundations every stage uses: terminal-safe views of foreign bytes (display), atomic
writes of a user's file and private directories (safewrite), and EINTR-safe fd reads and
writes (fdio), a bare command name looked up on a PATH (pathsearch).

May import: nothing.
"""
