"""Errors raised to users; `BadInput` (and subclasses) become exit code 2 in the CLI."""

from models.errors import BadInput, ModelError, UnsupportedOperator

__all__ = ["BadInput", "ModelError", "UnsupportedOperator"]
