"""`certify inspect` and `certify eval`."""

from __future__ import annotations

import argparse

import numpy as np

from ..schema import EVAL, INSPECT
from .common import add_json_flag, add_model_argument, console, emit, fmt, line, load_model, vector_arg


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="describe a model's layers", description="Describe the layers of an ONNX model after import.")
    add_model_argument(p)
    add_json_flag(p)
    p.set_defaults(handler=_inspect)

    p = sub.add_parser("eval", help="evaluate a model at an input", description="Evaluate a model at one input vector (float64).")
    add_model_argument(p)
    p.add_argument("--input", required=True, metavar="V", help="input vector: comma-separated numbers or @file (.npy/.json/.csv)")
    add_json_flag(p)
    p.set_defaults(handler=_eval)


def _inspect(args: argparse.Namespace) -> int:
    net = load_model(args.model)
    info = net.describe()

    def human(r: dict) -> None:
        from rich.table import Table

        c = console()
        c.print(line((r["name"], "bold"), f": input shape {r['input_shape']} ({r['input_dim']} inputs), "
                     f"{r['output_dim']} outputs, {r['relu_count']} ReLUs"))
        t = Table("#", "layer", "in", "out")
        for i, layer in enumerate(r["layers"]):
            if layer["kind"] == "affine":
                kind = "affine (conv)" if "conv" in layer else "affine"
                t.add_row(str(i), kind, str(layer["in"]), str(layer["out"]))
            else:
                t.add_row(str(i), "relu", str(layer["size"]), str(layer["size"]))
        c.print(t)

    return emit(args, info, human, INSPECT)


def _eval(args: argparse.Namespace) -> int:
    net = load_model(args.model)
    x = vector_arg(args.input, "--input", net.input_dim)
    with np.errstate(over="ignore", invalid="ignore"):  # float64 overflow is the answer (inf), not a warning
        y = net.forward(x)

    def human(r: dict) -> None:
        console().print("output: [" + ", ".join(fmt(v) for v in r["output"]) + "]")

    return emit(args, {"output": y}, human, EVAL)
