"""Model files users name: ONNX networks and scikit-learn classifiers, never a pickle.

`load_model` (every command taking an ONNX MODEL, and `certify bench --models`) refuses pickled
files by suffix (`models.file_kinds.PICKLE_EXTENSIONS`) before a byte is read, and checks the path
(a directory, device, FIFO or socket, a file over the memory budget) before `load_onnx` reads
it; a compressed or foreign file is named with what to do (`models.file_kinds.diagnose`).
`load_classifier` takes an .onnx network or a scikit-learn model saved with skops.
"""

from __future__ import annotations

import os

from models.file_kinds import PICKLE_EXTENSIONS

from ..errors import BadInput

#: what `load_classifier` reads
CLASSIFIER_SUFFIXES = (".onnx", ".skops")


def load_model(path: str):
    """An ONNX model as a certify Network (never unpickles: .pt/.pth/.pkl/... files are refused)."""
    from models import load_onnx
    from models.errors import ModelError
    from models.file_kinds import check_input_file

    ext = os.path.splitext(path)[1].lower()
    if ext in PICKLE_EXTENSIONS:
        raise BadInput(
            f"{path}: the CLI loads ONNX only and never unpickles files; export the model with "
            "torch.onnx.export, or use certify.from_torch in Python"
        )
    # a directory, device, FIFO or socket (/dev/zero would be read forever, a FIFO would block), or a
    # file larger than the memory budget: one line and exit 2, before a byte is read
    check_input_file(path, "model file", ModelError)
    return load_onnx(path)


def load_classifier(path: str, others: str = ""):
    """A certify Network (.onnx) or a scikit-learn model (.skops; pickle refused with a hint);
    `others` lists what else the option takes, for the message."""
    ext = os.path.splitext(path)[1].lower()
    if ext == ".onnx":
        return load_model(path)
    if ext == ".skops" or ext in PICKLE_EXTENSIONS:
        from ..robustness.classifiers.sklearn_io import load_sklearn

        return load_sklearn(path)
    raise BadInput(f"{path}: unknown model type {ext or '(no suffix)'}; give an .onnx network or a scikit-learn "
                   f"model saved with skops (.skops){others}")


__all__ = ["CLASSIFIER_SUFFIXES", "load_classifier", "load_model"]
