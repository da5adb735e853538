"""Errors of the user's input or of stage order: the CLI prints them as one line and exits 2."""


class StageOrderError(RuntimeError):
    """A stage was asked to run before the one it builds on."""
