"""Errors that reach the user as one line and exit code 2."""


class UsageError(Exception):
    """Bad command line, config or rule folder: the message says which."""
