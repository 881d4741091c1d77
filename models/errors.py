"""Exceptions shared by every layer of certify.

`BadInput` is the one exception the CLI turns into a one-line message and exit code 2. It lives in
`models` (the bottom of the import graph) so that `solvers` and `certify` can raise it without
importing upward.
"""

from __future__ import annotations


class BadInput(ValueError):
    """The user's input (model file, vector, parameter, solver choice) cannot be used.

    The message is a single sentence naming the problem and what to do about it.
    """


class ModelError(BadInput):
    """A model is malformed, unsupported, non-finite or disagrees with its reference runtime."""


class UnsupportedOperator(ModelError):
    """The model contains an operator (or module) certify cannot represent exactly."""
