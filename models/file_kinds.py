"""Recognise files that are obviously not ONNX models, so the error says what to do.

A protobuf parser reading a compressed or foreign file only reports "wire format was corrupt" (or,
worse, parses garbage): the first bytes say much more. Only signatures are read; nothing is
decompressed or unpickled.
"""

from __future__ import annotations

# (leading bytes, what the file is, what to do); "{path}" is replaced by the file's path
_SIGNATURES: tuple[tuple[bytes, str, str], ...] = (
    (b"\x1f\x8b", "gzip-compressed", "decompress it first (gunzip -k {path}) and load the .onnx file"),
    (b"BZh", "bzip2-compressed", "decompress it first (bunzip2 -k {path}) and load the .onnx file"),
    (b"\xfd7zXZ\x00", "xz-compressed", "decompress it first (unxz -k {path}) and load the .onnx file"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed", "decompress it first (unzstd {path}) and load the .onnx file"),
    (b"PK\x03\x04", "a zip archive (PyTorch .pt checkpoints are zip archives too)",
     "extract the .onnx file from it, or export a torch model with torch.onnx.export"),
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
            return f"{path} is {kind}, not an ONNX model; {todo.format(path=path)}"
    if len(data) > 262 and data[257:262] == b"ustar":
        return f"{path} is a tar archive, not an ONNX model; extract the .onnx file from it (tar -xf {path})"
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
