"""Compilation targets: TVM's target config dict in one canonical form (`Target.config`), and the
match policy that makes msdb's queries target-aware (`Target.matches`; `strict=True` asks for the
exact configuration).

The forms a target is read from, the canonical dict and the policy are in docs/targets.md; the
bounds on targets read from user files (`MAX_TARGET_CHARS`, linear-time splitting, no lone
surrogates) in docs/architecture.md, "Records and targets".
"""

from __future__ import annotations

import functools
import json
import os
import re
from typing import Any, Collection, Mapping, NamedTuple

from msdb.errors import MsdbError

__all__ = ["Target", "TargetError", "MatchKey", "cli_form"]


def cli_form(config: Mapping[str, Any], leave_out: Collection[str] = ("host",)) -> str:
    """A target config in TVM's CLI-like form (`llvm -keys=cpu -num-cores=4`): the kind, then
    `-key=value` for every attribute but `leave_out` and the empty ones (lists joined by
    commas, booleans as true/false)."""
    parts = [str(config.get("kind", "?"))]
    for key, value in config.items():
        if key == "kind" or key in leave_out or value in ("", [], None):
            continue
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        elif isinstance(value, bool):
            value = "true" if value else "false"
        parts.append(f"-{key}={value}")
    return " ".join(parts)


class TargetError(MsdbError, ValueError):
    """A target string or config msdb cannot understand."""


#: TVM's registered target kinds (tvm/src/target/target_kind.cc), with the `keys` TVM gives them.
KIND_KEYS: dict[str, tuple[str, ...]] = {
    "llvm": ("cpu",),
    "c": ("cpu",),
    "cuda": ("cuda", "gpu"),
    "nvptx": ("cuda", "gpu"),
    "rocm": ("rocm", "gpu"),
    "opencl": ("opencl", "gpu"),
    "metal": ("metal", "gpu"),
    "vulkan": ("vulkan", "gpu"),
    "webgpu": ("webgpu", "gpu"),
    "hexagon": ("hexagon",),
    "ext_dev": ("ext_dev",),
    "hybrid": ("hybrid",),
    "composite": (),
    "stackvm": (),
    "example_target_hook": (),
}

#: Kinds TVM registers for its own tests: accepted as TVM accepts them, never offered to a user.
INTERNAL_KINDS = frozenset({"example_target_hook"})

#: Defaults TVM fills in for a kind when the attribute is absent.
KIND_DEFAULTS: dict[str, dict[str, Any]] = {
    "cuda": {"max_num_threads": 1024, "thread_warp_size": 32},
}

#: Attributes that hold arrays; their CLI form is comma separated (`-mattr=+avx2,+fma`).
LIST_ATTRS = frozenset({"keys", "mattr", "libs", "cl-opt", "mllvm"})

#: Attributes never compared, not even with strict=True.
NEVER_COMPARED = frozenset({"tag", "keys"})

#: The longest target string or config (as JSON) accepted: a hundred times the longest real one
#: (a CUDA target with its host and every attribute is about 600 characters).
MAX_TARGET_CHARS = 65536

_KIND_RE = re.compile(r"^[a-z][a-z0-9_]*$")
#: A lone surrogate: a code point JSON's `\uXXXX` can name but UTF-8 cannot encode.
_SURROGATE = re.compile(r"[\ud800-\udfff]")
#: One piece of a POSIX shell word (`shlex.split`'s rules without comments): plain characters, a
#: single-quoted or double-quoted string, a backslash escape; or whitespace; or a quote or
#: backslash that starts nothing (unclosed). Each alternative is decided by its first character,
#: so splitting is linear in the string's length.
_WORD_PIECE = re.compile(r"""([^ \t\r\n'"\\]+)|'([^']*)'|"((?:[^"\\]|\\.)*)"|\\(.)|([ \t\r\n]+)|(['"\\])""", re.S)
_DQ_ESCAPE = re.compile(r'\\(["\\])')
_DQ_TRAILING_ESCAPE = re.compile(r'(?:[^"\\]|\\.)*\\', re.S)
_OPTION_RE = re.compile(r"^--?([A-Za-z_][A-Za-z0-9_\-.]*)(?:=(.*))?$", re.S)
_INT_RE = re.compile(r"^[+-]?\d+$")
#: Options TVM 0.27's target kinds declare as integers (`TargetKind.options_from_name`); TVM
#: refuses any other value for them, and so does msdb (`num-cores=four` is a typo, not a name).
INT_ATTRS = frozenset({
    "num-cores", "opt-level", "vector-width", "from_device", "target_device_type", "max_num_threads",
    "max_shared_memory_per_block", "max_threads_per_block", "thread_warp_size", "registers_per_block",
    "l2_cache_size_bytes", "workspace-byte-alignment", "constants-byte-alignment",
})


class MatchKey(NamedTuple):
    """The device identity a target is matched on ("" = not stated)."""

    kind: str
    arch: str
    isa: str
    device: str


def _cut(text: str, limit: int = 200) -> str:
    """`text`, cut to `limit` characters, to quote it in an error message."""
    return text if len(text) <= limit else text[:limit] + "..."


def _shown(text: str, limit: int = 200) -> str:
    """`repr(text)`, of at most `limit` characters of it, to quote a value in an error message."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


def _split_words(text: str) -> list[str]:
    """`shlex.split(text)` (POSIX rules, no comments), in linear time; `ValueError` as shlex
    gives for an unclosed quote or a trailing backslash."""
    words: list[str] = []
    word: list[str] | None = None
    for match in _WORD_PIECE.finditer(text):
        plain, single, double, escaped, space, stray = match.groups()
        if space is not None:
            if word is not None:
                words.append("".join(word))
                word = None
            continue
        if stray is not None:
            # shlex's words: a backslash with nothing to escape, also inside an unclosed "..."
            if stray == "\\" or (stray == '"' and _DQ_TRAILING_ESCAPE.fullmatch(text, match.end())):
                raise ValueError("No escaped character")
            raise ValueError("No closing quotation")
        if word is None:
            word = []
        if plain is not None:
            word.append(plain)
        elif single is not None:
            word.append(single)
        elif double is not None:
            word.append(_DQ_ESCAPE.sub(r"\1", double))
        else:
            word.append(escaped)
    if word is not None:
        words.append("".join(word))
    return words


def _check_text(value: str, source: str) -> None:
    if _SURROGATE.search(value):
        raise TargetError(f"target {source}: {_shown(value)} holds a lone surrogate (U+D800-U+DFFF), which is not "
                          "text; msdb could store it but never write it out again")


def _check_size(value: Any, what: str) -> None:
    """Refuse a target whose strings and items add up to more than `MAX_TARGET_CHARS` (counted
    before anything is copied, printed or parsed)."""
    budget = MAX_TARGET_CHARS
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            budget -= len(item)
        elif isinstance(item, Mapping):
            budget -= len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            budget -= len(item)
            stack.extend(item)
        else:
            budget -= 1
        if budget < 0:
            raise TargetError(f"{what} is longer than {MAX_TARGET_CHARS:,} characters (a real target is a few "
                              "hundred); is its tag or an attribute corrupted?")


def _parse_cli_value(key: str, text: str) -> Any:
    if key in LIST_ATTRS:
        return [part for part in text.split(",") if part]
    if _INT_RE.match(text):
        return int(text)
    if text in ("true", "True"):
        return True
    if text in ("false", "False"):
        return False
    return text


def _canonical_value(value: Any, source: str) -> Any:
    """A JSON-able canonical copy of one attribute value."""
    if isinstance(value, str):
        _check_text(value, source)
        return value
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, (list, tuple)):
        return [_canonical_value(v, source) for v in value]
    if isinstance(value, Mapping):
        return {_canonical_value(str(k), source): _canonical_value(v, source)
                for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, Target):
        return value.config
    raise TargetError(f"target {source}: attribute value {value!r} of type {type(value).__name__} is not a JSON value")


def _parse_string(text: str) -> dict[str, Any]:
    """TVM's CLI form: `kind -key=value -key=v1,v2 -flag`, or a JSON object."""
    if len(text) > MAX_TARGET_CHARS:
        _check_size(text, "target string")
    stripped = text.strip()
    if not stripped:
        raise TargetError("empty target string; give a kind such as 'llvm' or 'cuda -arch=sm_80'")
    if stripped.startswith("{"):
        try:
            parsed = json.loads(stripped)
        except json.JSONDecodeError as exc:
            where = "column" if exc.msg.endswith(" at") else "at column"  # "Unterminated string starting at"
            raise TargetError(f"target string {_shown(text)} looks like JSON but does not parse: {exc.msg} {where} "
                              f"{exc.colno}") from None
        if not isinstance(parsed, dict):
            raise TargetError(f"target string {_shown(text)} must be a JSON object")
        return parsed
    try:
        words = _split_words(stripped)
    except ValueError as exc:
        raise TargetError(f"target string {_shown(text)}: {exc}") from None
    kind, options = words[0], words[1:]
    if "/" in kind:
        raise TargetError(f"target string {_shown(text)}: target tags such as {_shown(kind)} are not supported; "
                          "give the kind and attributes instead (e.g. 'cuda -arch=sm_80')")
    config: dict[str, Any] = {"kind": kind}
    for word in options:
        match = _OPTION_RE.match(word)
        if match is None:
            raise TargetError(f"target string {_shown(text)}: option {_shown(word)} is not of the form -key=value")
        key, value = match.group(1), match.group(2)
        config[key] = True if value is None else _parse_cli_value(key, value)
    return config


def _canonical(config: Mapping[str, Any], source: str) -> dict[str, Any]:
    kind = config.get("kind")
    if not isinstance(kind, str) or not kind:
        raise TargetError(f"target {source} has no 'kind' (expected e.g. {{'kind': 'llvm'}})")
    if not _KIND_RE.match(kind) or kind not in KIND_KEYS:
        known = ", ".join(sorted(k for k in KIND_KEYS if k not in INTERNAL_KINDS))
        raise TargetError(f"target {source}: unknown target kind {kind!r}; known kinds: {known}")
    out: dict[str, Any] = {}
    for key, value in config.items():
        if not isinstance(key, str):
            raise TargetError(f"target {source}: attribute name {key!r} is not a string")
        _check_text(key, source)
        if key == "host" and value is not None and not isinstance(value, Target):
            value = Target(value).config
        elif key in LIST_ATTRS and isinstance(value, str):
            value = [part for part in value.split(",") if part]
        out[key] = _canonical_value(value, source)
        if key in INT_ATTRS and (type(out[key]) is not int):
            raise TargetError(f"target {source}: option {key!r} must be an integer, got {value!r}")
    out.setdefault("keys", list(KIND_KEYS[kind]))
    out.setdefault("tag", "")
    for key, value in KIND_DEFAULTS.get(kind, {}).items():
        out.setdefault(key, value)
    return dict(sorted(out.items()))


def _triple_isa(triple: Any) -> str:
    """`x86_64` of `x86_64-pc-linux-gnu`: the part of the triple that decides the code."""
    if not isinstance(triple, str) or not triple:
        return ""
    return triple.split("-", 1)[0]



class Target:
    """A compilation target in TVM's config form.

    `Target("llvm -mcpu=skylake-avx512 -num-cores=4")`, `Target({"kind": "cuda", "arch":
    "sm_80"})` and `Target(other_target)` all work; `config` is the canonical dict (sorted keys)
    stored in databases and written to TVM logs. See the module docstring for the match policy.
    """

    __slots__ = ("_config", "_json", "_strict", "_key")

    def __init__(self, target: str | Mapping[str, Any] | Target, *, strict: bool = False) -> None:
        if isinstance(target, Target):
            config = target._config
            self._json: str = target._json
        else:
            if isinstance(target, str):
                raw = _parse_string(target)
                source = _shown(target)
            elif isinstance(target, Mapping):
                _check_size(target, "target config")
                source = _cut(repr(dict(target)))
                raw = dict(target)
            else:
                raise TargetError(f"a target is a string or a config dict, got {type(target).__name__}: {target!r}")
            config = _canonical(raw, source)
            self._json = json.dumps(config, sort_keys=True, separators=(",", ":"))
        self._config: dict[str, Any] = config
        self._strict = bool(strict)
        self._key: MatchKey | None = None

    # ---- construction helpers ----
    @staticmethod
    def coerce(target: str | Mapping[str, Any] | Target | None) -> Target | None:
        """`None` stays `None`; anything else becomes a `Target`."""
        if target is None or isinstance(target, Target):
            return target
        return Target(target)

    @staticmethod
    @functools.lru_cache(maxsize=1)
    def host() -> Target:
        """This machine as an llvm target: LLVM's process triple and host CPU name (from
        llvmlite, imported only here) and `num-cores` = `os.cpu_count()`."""
        import llvmlite.binding as llvm

        return Target({
            "kind": "llvm",
            "mtriple": llvm.get_process_triple(),
            "mcpu": llvm.get_host_cpu_name(),
            "num-cores": os.cpu_count() or 1,
        })

    def with_strict(self, strict: bool = True) -> Target:
        """The same target, matching records exactly (`strict=True`) or by the default policy."""
        return Target(self, strict=strict)

    # ---- accessors ----
    @property
    def config(self) -> dict[str, Any]:
        """The canonical config dict (a copy; keys sorted)."""
        return json.loads(self._json)

    @property
    def kind(self) -> str:
        return self._config["kind"]

    @property
    def strict(self) -> bool:
        return self._strict

    def get(self, attr: str, default: Any = None) -> Any:
        return self._config.get(attr, default)

    def as_json(self) -> dict[str, Any]:
        """The config dict TVM writes in a record line."""
        return self.config

    def canonical_json(self) -> str:
        """The canonical config as compact JSON with sorted keys (the database's target key)."""
        return self._json

    @property
    def match_key(self) -> MatchKey:
        """Kind and device identity; "" where the target does not say."""
        if self._key is None:
            config = self._config
            kind = config["kind"]
            if kind in ("cuda",):
                arch = str(config.get("arch", ""))
            elif kind == "nvptx":
                arch = str(config.get("mcpu", config.get("arch", "")))
            else:
                arch = str(config.get("mcpu", config.get("arch", "")))
            self._key = MatchKey(kind, arch, _triple_isa(config.get("mtriple")), str(config.get("device", "")))
        return self._key

    # ---- matching ----
    def matches(self, record_target: Target | None) -> bool:
        """Whether a record tuned for `record_target` answers a query for this target (the policy
        in the module docstring; this target is the query)."""
        if record_target is None:
            return False
        if self._strict:
            return self._strict_view() == record_target._strict_view()
        mine, theirs = self.match_key, record_target.match_key
        if mine.kind != theirs.kind:
            return False
        for a, b in zip(mine[1:], theirs[1:]):
            if a and b and a != b:
                return False
        return True

    def _strict_view(self) -> dict[str, Any]:
        view = {k: v for k, v in self._config.items() if k not in NEVER_COMPARED}
        if "mtriple" in view:
            view["mtriple"] = _triple_isa(view["mtriple"])
        if isinstance(view.get("host"), dict):
            view["host"] = Target(view["host"])._strict_view()
        return view

    # ---- value semantics ----
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Target):
            return NotImplemented
        return self._json == other._json

    def __hash__(self) -> int:
        return hash(self._json)

    def __str__(self) -> str:
        """TVM's CLI-like form, e.g. `llvm -keys=cpu -mcpu=skylake-avx512 -num-cores=4`."""
        return cli_form(self._config)

    def __repr__(self) -> str:
        strict = ", strict=True" if self._strict else ""
        return f"Target({self._json}{strict})"
