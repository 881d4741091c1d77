"""Run identities: a resumable output is resumed only by the run that wrote it.

`certify radius --points --out`, `certify report`, `certify bench` and `certify verify --instances
--out` append finished rows to their output and skip them when rerun. Rows of one run must never
come back as answers of another, so every such output carries the identity of its run: a
fingerprint of the command, the settings that change results (never output-only ones such as
--workers, --json or the progress bar), the model and one hash per input row (so a differing row
can be named). It is stored beside the output: `OUT.run.json` for a file, `DIR/run.json` for a
directory.

Claim policy (`claim_file`, `claim_directory`):

- output missing or empty: start fresh and write the identity;
- output with the same identity: resume;
- output of another run, or rows with no identity (an older certify, or written by hand):
  refused with `BadInput` naming what differs, unless `overwrite` (the old rows are deleted);
- a file that is not a results file (the `check` callback says so) is refused even with
  `overwrite`: it may be the user's data, and certify deletes only what it wrote.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .certificate import to_jsonable
from .errors import BadInput

SCHEMA = "certify.run/1"
DIRECTORY_FILE = "run.json"
_REMEDY = "use --overwrite to start fresh or another --out"

Check = Callable[[Path], Any]  # raises BadInput when a file is not a results file


def model_sha256(net: Any) -> str:
    """The model part of an identity: the network's fingerprint (`models.Network.fingerprint`)."""
    from models.ir import Network

    if not isinstance(net, Network):
        raise BadInput(f"model must be a certify Network or the path of an ONNX file, got {type(net).__name__}")
    return net.fingerprint()


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes, read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def item_sha256(item: Any) -> str:
    """SHA-256 of one input row: numbers as float64 bytes with their shape (a list and an array of
    the same values hash alike, fast for wide points), other JSON data as canonical JSON."""
    try:
        arr = np.asarray(item)
    except (ValueError, TypeError):  # ragged: not a table of numbers
        arr = None
    if arr is not None and arr.dtype.kind in "biuf":
        h = hashlib.sha256(b"num" + repr(arr.shape).encode())
        h.update(np.ascontiguousarray(arr, dtype="<f8").tobytes())
        return h.hexdigest()
    try:
        text = json.dumps(to_jsonable(item), sort_keys=True, separators=(",", ":"))
    except TypeError:
        raise TypeError(f"cannot hash a {type(item).__name__} input row; pass its hash (run_batch keys=)") from None
    return hashlib.sha256(b"json" + text.encode()).hexdigest()


def _canonical(obj: Any) -> Any:
    """What a value looks like after a JSON round trip (the form identities are compared in).
    An object with no JSON form (e.g. an ONNX reference session) counts by its type: a repr would
    hold a memory address and no rerun would ever match."""
    return json.loads(json.dumps(to_jsonable(obj), default=lambda o: f"<{type(o).__name__}>"))


def _digest(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _short(value: Any, width: int = 40) -> str:
    text = "unset" if value is None else json.dumps(value)
    return text if len(text) <= width else text[: width - 3] + "..."


@dataclass(frozen=True)
class RunIdentity:
    """What a run's rows depend on. `inputs` names the rows in messages ("points file", "data set")."""

    command: str
    settings: dict
    model: str | None
    rows: tuple[str, ...]
    inputs: str = "inputs"

    @classmethod
    def of(cls, command: str, settings: dict, model: str | None, rows: Iterable[str],
           inputs: str = "inputs") -> "RunIdentity":
        return cls(command, _canonical(settings), model, tuple(rows), inputs)

    def body(self) -> dict:
        return {"schema": SCHEMA, "command": self.command, "settings": self.settings, "model_sha256": self.model,
                "inputs": self.inputs, "rows": list(self.rows)}

    @property
    def sha256(self) -> str:
        return _digest(self.body())

    def to_dict(self) -> dict:
        return {**self.body(), "sha256": self.sha256}

    def difference(self, previous: dict) -> str | None:
        """How the stored identity `previous` differs from this run, as the end of "OUT holds a run
        ..."; None when it is this run."""
        if _digest({k: v for k, v in previous.items() if k != "sha256"}) == self.sha256:
            return None
        if previous.get("command") != self.command:
            return f"of certify {previous.get('command')}, not certify {self.command}"
        if previous.get("model_sha256") != self.model:
            return "of another model (its hash differs)"
        old = previous.get("settings") if isinstance(previous.get("settings"), dict) else {}
        for key in [*self.settings, *(k for k in old if k not in self.settings)]:  # the caller's order
            if old.get(key) != self.settings.get(key):
                return (f"with other settings ({key}: {_short(old.get(key))} before, "
                        f"{_short(self.settings.get(key))} now)")
        rows = previous.get("rows") if isinstance(previous.get("rows"), list) else []
        for i, (a, b) in enumerate(zip(rows, self.rows)):
            if a != b:
                return f"of another {self.inputs} (row {i} differs)"
        if len(rows) != len(self.rows):
            return f"of another {self.inputs} ({len(rows)} rows before, {len(self.rows)} now)"
        return "with another run identity"  # a hand-edited identity file


def sidecar(out: str | os.PathLike) -> Path:
    """Where the identity of the file output `out` is stored."""
    return Path(os.fspath(out) + ".run.json")


def _stored_mismatch(path: Path, identity: RunIdentity) -> str | None:
    """Why the identity stored at `path` is not `identity` (None: it is)."""
    if not path.exists():
        return f"results with no run identity ({path.name} is missing: written by an older certify or by hand)"
    try:
        previous = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        previous = None
    if not isinstance(previous, dict) or previous.get("schema") != SCHEMA:
        return f"results whose {path.name} is not a run identity of this certify (an older version, or by hand)"
    diff = identity.difference(previous)
    return None if diff is None else "a run " + diff


def _has_rows(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


def _write_identity(path: Path, identity: RunIdentity) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(identity.to_dict(), indent=1) + "\n")
    os.replace(tmp, path)  # never a half-written identity


def _decide(stored: Path, identity: RunIdentity, label: str, overwrite: bool) -> bool:
    reason = _stored_mismatch(stored, identity)
    if reason is None:
        return True
    if not overwrite:
        raise BadInput(f"{label} holds {reason}; {_REMEDY}")
    return False


def claim_file(out: str | os.PathLike, identity: RunIdentity, *, overwrite: bool = False,
               check: Check | None = None) -> bool:
    """Claim the file output `out` for `identity` (policy in the module doc); True when resuming."""
    path = Path(out)
    label = os.fspath(out)
    if path.is_dir():
        raise BadInput(f"{label} is a directory; --out takes a file name")
    if path.exists() and not path.is_file():  # a device (/dev/null), FIFO or socket: never read, emptied or deleted
        raise BadInput(f"--out {label} is not a regular file (a device, FIFO or socket); give a file name to write")
    try:
        if _has_rows(path):
            if check is not None:
                check(path)  # before anything is deleted
            if _decide(sidecar(path), identity, label, overwrite):
                return True
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            path.unlink()
        _write_identity(sidecar(path), identity)
        path.touch()  # unwritable places fail here, before any work
    except OSError as exc:
        raise BadInput(f"cannot write --out {label}: {exc.strerror or exc}") from None
    return False


def claim_directory(out: str | os.PathLike, identity: RunIdentity, *, journals: Sequence[str],
                    products: Sequence[str] = (), overwrite: bool = False, check: Check | None = None) -> bool:
    """Claim the directory output `out` for `identity`; True when resuming.

    `journals`: the resumable files of the run (they hold its rows); `products`: other files it
    writes (deleted with the journals when starting afresh, so no file of an old run remains).
    Other files in the directory are never touched."""
    path = Path(out)
    label = os.fspath(out)
    if path.exists() and not path.is_dir():
        raise BadInput(f"--out {label} exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        present = [path / j for j in journals if _has_rows(path / j)]
        if present:
            for journal in present:
                if check is not None:
                    check(journal)
            if _decide(path / DIRECTORY_FILE, identity, label, overwrite):
                return True
        for name in (*journals, *products):
            if (path / name).is_file():
                (path / name).unlink()
        _write_identity(path / DIRECTORY_FILE, identity)
    except OSError as exc:
        raise BadInput(f"cannot write --out {label}: {exc.strerror or exc}") from None
    return False


__all__ = ["RunIdentity", "SCHEMA", "claim_directory", "claim_file", "file_sha256", "item_sha256", "model_sha256",
           "sidecar"]
