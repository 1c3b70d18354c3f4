"""TVM's JSON dialect, read and written byte for byte.

MetaSchedule logs are written by TVM's own JSON writer, which differs from `json.dumps`:
no whitespace at all, dict keys sorted, floats printed with 20 significant digits the way C's
`%.20g` does (`0.00014999999999999998686`, `1e+21`, and 1e10 as `10000000000`), and strings
escaped byte-wise: `\\"`, `\\\\`, `\\n`, `\\t`, `\\r` by name, every other control byte and every
byte of a non-ASCII character as `\\xHH` (which standard JSON does not allow). Writing msdb's
records in exactly that form lets a user diff msdb's output against TVM's, and lets TVM read it.

Reading accepts standard JSON plus those `\\xHH` escapes. A float keeps the spelling it was read
with (`JsonFloat`), so `dumps(loads(text)) == text` even for logs from writers that spelled
floats differently (older logs say `0.2` where TVM 0.27 would write `0.2000000000000000111`).
A float built in Python (plain `float`) is written in TVM 0.27's spelling.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["JsonFloat", "loads", "dumps", "format_float", "escape_string"]


class JsonFloat(float):
    """A float read from JSON that remembers how it was spelled, so writing it back gives the
    same bytes. Behaves as a plain float everywhere else."""

    __slots__ = ("text",)
    text: str

    def __new__(cls, text: str) -> JsonFloat:
        value = super().__new__(cls, text)
        value.text = text
        return value

    def __repr__(self) -> str:
        return float.__repr__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (JsonFloat, (self.text,))


def format_float(value: float) -> str:
    """TVM's spelling of a float: `%.20g` (C printf semantics; Python's `%` operator has them).
    Non-finite values, which TVM never writes in logs, use Python's JSON names."""
    if isinstance(value, JsonFloat):
        return value.text
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return "%.20g" % value


# ---------------------------------------------------------------- writing

_NAMED_ESCAPES = {0x22: '\\"', 0x5C: "\\\\", 0x0A: "\\n", 0x09: "\\t", 0x0D: "\\r"}
_BYTE_ESCAPES: list[str] = []
for _b in range(256):
    if _b in _NAMED_ESCAPES:
        _BYTE_ESCAPES.append(_NAMED_ESCAPES[_b])
    elif _b < 0x20 or _b >= 0x7F:
        _BYTE_ESCAPES.append("\\x%02X" % _b)
    else:
        _BYTE_ESCAPES.append(chr(_b))
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f\x7f-\U0010ffff]')


def escape_string(text: str) -> str:
    """`text` as TVM writes a JSON string, quotes included. Lone surrogates (bytes that were
    not valid UTF-8 when read) go back out as the bytes they came from."""
    if not _NEEDS_ESCAPE.search(text):
        return '"' + text + '"'
    data = text.encode("utf-8", errors="surrogateescape")
    return '"' + "".join(_BYTE_ESCAPES[b] for b in data) + '"'


def _write(obj: Any, out: list[str]) -> None:
    if obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, str):
        out.append(escape_string(obj))
    elif isinstance(obj, int):
        out.append(str(int(obj)))
    elif isinstance(obj, float):
        out.append(format_float(obj))
    elif isinstance(obj, (list, tuple)):
        out.append("[")
        for i, item in enumerate(obj):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    elif isinstance(obj, dict):
        out.append("{")
        for i, key in enumerate(sorted(obj)):
            if not isinstance(key, str):
                raise TypeError(f"JSON object keys must be strings, got {type(key).__name__}")
            if i:
                out.append(",")
            out.append(escape_string(key))
            out.append(":")
            _write(obj[key], out)
        out.append("}")
    else:
        raise TypeError(f"cannot write {type(obj).__name__} as TVM JSON")


def dumps(obj: Any) -> str:
    """`obj` in TVM's JSON format (see the module docstring)."""
    out: list[str] = []
    _write(obj, out)
    return "".join(out)


# ---------------------------------------------------------------- reading

_ESCAPE_RUN = re.compile(r"((?:\\x[0-9A-Fa-f]{2})+)|\\.", re.DOTALL)


def _byte_escapes_to_json(text: str) -> str:
    """Rewrite TVM's `\\xHH` escape runs as standard `\\uXXXX` escapes of the characters the
    bytes spell in UTF-8 (bytes that are not valid UTF-8 become lone surrogates, which
    `escape_string` turns back into the same bytes)."""

    def replace(match: re.Match[str]) -> str:
        run = match.group(1)
        if run is None:
            return match.group(0)
        data = bytes(int(run[i + 2:i + 4], 16) for i in range(0, len(run), 4))
        chars = data.decode("utf-8", errors="surrogateescape")
        return json.dumps(chars, ensure_ascii=True)[1:-1]

    return _ESCAPE_RUN.sub(replace, text)


def loads(text: str | bytes) -> Any:
    """Parse TVM JSON. Floats come back as `JsonFloat` (remembering their spelling), integers as
    int; `\\xHH` string escapes are accepted. Raises `ValueError` on malformed text."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="surrogateescape")
    if "\\x" in text:
        text = _byte_escapes_to_json(text)
    if _NEGATIVE_ZERO.search(text):
        # TVM writes the float -0.0 as `-0`; keep it a float so it is written back the same.
        return json.loads(text, parse_float=JsonFloat, parse_int=_parse_int)
    return json.loads(text, parse_float=JsonFloat)


_NEGATIVE_ZERO = re.compile(r"-0(?![.\deE])")


def _parse_int(text: str) -> int | float:
    return JsonFloat(text) if text == "-0" else int(text)
