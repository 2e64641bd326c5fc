"""Foundations every stage uses: terminal-safe views of foreign bytes (display), atomic
writes of a user's file and private directories (safewrite), and EINTR-safe fd reads and
writes (fdio).

May import: nothing.
"""
