"""Input files before they are read: what kind of file it is, and files that are obviously not models.

The one table of file signatures and of pickle suffixes (`PICKLE_EXTENSIONS`: certify never
unpickles a file, whatever loads it: the ONNX command line, the scikit-learn loader). A protobuf
parser reading a compressed or foreign file only reports "wire format was corrupt" (or, worse,
parses garbage): the first bytes say much more. Only signatures are read; nothing is
decompressed or unpickled.
"""

from __future__ import annotations

import os
import stat

from .errors import BadInput
from .memory import ENV_VAR, gb, work_left

# what a non-regular file is, by its st_mode type
_SPECIAL = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str | None:
    """What a non-regular file is ("a directory", "a named pipe (FIFO)", ...), None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _SPECIAL if test(mode)), "not a regular file")


def check_input_file(path: str | os.PathLike, what: str = "input file", error: type[BadInput] = BadInput) -> int:
    """Refuse (`error`, a `BadInput`) before reading: a missing path, a directory, a device, a FIFO
    or a socket (reading /dev/zero never ends, a FIFO blocks until a writer comes), and a regular
    file larger than the memory budget (it is read whole). Returns the file's size in bytes.

    `os.stat` never blocks, whatever the file is."""
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    kind = _kind(st.st_mode)
    if kind is not None:
        if kind == "a directory":
            raise error(f"{what} {path} is a directory; give the path of a file")
        raise error(f"{what} {path} is {kind}, not a regular file; certify reads input files whole: "
                    "save the data to a regular file first")
    left, described = work_left()
    if st.st_size > left:
        raise error(f"{what} {path} is too large: {gb(st.st_size)}, more than the memory budget of {described}; "
                    f"use a smaller file, or set {ENV_VAR} (e.g. {ENV_VAR}=32G) if the machine has the memory")
    return int(st.st_size)


def read_input_file(path: str | os.PathLike, what: str = "input file", error: type[BadInput] = BadInput) -> bytes:
    """The bytes of a regular file (`check_input_file` first). The file is opened without blocking
    and checked again on the open descriptor, so a path swapped for a FIFO or a device after the
    check is refused too, and at most its checked size (plus one byte) is read."""
    path = os.fspath(path)
    size = check_input_file(path, what, error)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        kind = _kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise error(f"{what} {path} is {kind}, not a regular file")
        data = fh.read(size + 1)
    if len(data) > size:  # grew while being read: what was checked is not what would be read
        raise error(f"{what} {path} changed while it was read; read it again when it is complete")
    return data

#: suffixes of pickled files (torch.save, pickle, joblib, dill): refused by name, never opened
PICKLE_EXTENSIONS: tuple[str, ...] = (".pt", ".pth", ".ckpt", ".bin", ".pkl", ".pickle", ".joblib", ".pk", ".sav",
                                      ".dill")

# (leading bytes, what the file is, what to do); "{path}" is replaced by the file's path
_SIGNATURES: tuple[tuple[bytes, str, str], ...] = (
    (b"\x1f\x8b", "gzip-compressed", "decompress it first (gunzip -k {path}) and load the .onnx file"),
    (b"BZh", "bzip2-compressed", "decompress it first (bunzip2 -k {path}) and load the .onnx file"),
    (b"\xfd7zXZ\x00", "xz-compressed", "decompress it first (unxz -k {path}) and load the .onnx file"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed", "decompress it first (unzstd {path}) and load the .onnx file"),
    (b"PK\x03\x04", "a zip archive (PyTorch .pt checkpoints are zip archives too)",
     "extract the .onnx file from it (unzip {path}), or export a torch model with torch.onnx.export"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive", "extract the .onnx file from it"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file (e.g. a Keras model)", "convert it to ONNX first (e.g. with tf2onnx)"),
    (b"\x93NUMPY", "a NumPy array file", "pass the ONNX model here; arrays go to the vector options"),
    (b"version https://git-lfs", "a Git LFS pointer, not the model itself", "fetch the file with git lfs pull"),
)


def diagnose(data: bytes, path: str) -> str | None:
    """One sentence naming what the file is and what to do, when it is obviously not ONNX."""
    if not data:
        return f"{path} is empty; expected an ONNX model"
    for magic, kind, todo in _SIGNATURES:
        if data.startswith(magic):
            return f"{path} is {kind}, not an ONNX file; {todo.format(path=path)}"
    if len(data) > 262 and data[257:262] == b"ustar":
        return f"{path} is a tar archive, not an ONNX file; extract the .onnx file from it (tar -xf {path})"
    if data[0] == 0x80 and len(data) > 1 and 2 <= data[1] <= 5:
        return (f"{path} is a Python pickle (e.g. a torch.save file), not an ONNX model; certify never unpickles "
                "files: export the model with torch.onnx.export")
    head = data[:512]
    if all(32 <= b < 127 or b in b"\t\r\n" for b in head):
        text = head.decode("ascii").lstrip()
        if text.startswith((";", "(declare", "(assert")):
            return f"{path} is a text file that looks like a VNNLIB property, not an ONNX model; pass the .onnx network here"
        return f"{path} is a text file, not a binary ONNX model"
    return None
