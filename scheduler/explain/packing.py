"""A cycle's explanation packed for the event history: every cluster's fate in a few kilobytes.

An `Explanation` is almost entirely cluster names: at 5,000 clusters with 40-character names its
JSON is over 200 KB, and it would be recorded in the history of every cycle that evaluated the
fleet. Packing keeps every fact and drops the repetition:

- the roster: every name the explanation mentions, once, sorted; each name is stored as the
  length of the prefix it shares with the previous one plus the rest, or, when it is the
  previous name with a larger number of the same width at its end ("...-00041" after
  "...-00040"), as the difference of the numbers;
- the skeleton: the explanation's JSON with each list of names replaced by `[mode, count]`
  (`invalid[].cluster` by a roster index);
- memberships: a list whose names are distinct and in roster order (mode 0) or its reverse
  (mode 1, e.g. equally scored clusters ranked by the larger-name tie-break) is recorded as a
  code on each of its names: per roster name, the lists it is in (nearly always one). Any
  other list (mode 2) is recorded as its roster indices, in its order, as zig-zag varint deltas.

The parts are compressed together with LZMA and base85-encoded (its alphabet needs no JSON
escaping), so the packed form is one JSON string that any Temporal client can carry. Unpacking
gives back an equal `Explanation`. Readers ignore skeleton fields they do not know (the models
do), so a newer writer's additions do not break an older reader; the format's version is the
first byte and is checked.

How small it gets depends on how alike the names are: fleets name clusters by pattern
(environment, region, team, number), which this reduces to a byte or two a name; random
40-character names cannot go below about 25 bytes each (bench/history.py measures both)."""

from __future__ import annotations

import base64
import functools
import json
import lzma
import re
from collections.abc import Callable, Iterator
from typing import Any, Final

from scheduler.errors import InvalidInputError
from scheduler.explain.explanation import Explanation

__all__ = ["PACKED_VERSION", "encoder_filters", "pack_explanation", "unpack_explanation"]

PACKED_VERSION: Final = 1
# Literal bytes modelled on whole bytes (lc=4, lp=0, pb=0): names are text, not aligned data.
_FILTERS: Final = [{"id": lzma.FILTER_LZMA2, "preset": 6, "lc": 4, "lp": 0, "pb": 0}]
_UNPACK_LIMIT: Final = 64 * 1024 * 1024  # a packed explanation never inflates past this
# The encoder's dictionary: preset 6's 8 MiB at most, LZMA's 4 KiB at least.
_DICTIONARY_MIN: Final = 4096
_DICTIONARY_MAX: Final = 8 * 1024 * 1024


def encoder_filters(size: int) -> list[dict[str, int]]:
    """`_FILTERS` with a dictionary just large enough for `size` bytes (a power of two).

    A match never reaches further back than the input's start, so a dictionary that covers
    the input finds what preset 6's 8 MiB finds, byte for byte, and the reader's 8 MiB reads
    it. What it saves: the match finder's tables scale with the dictionary, and liblzma zeroes
    them on every compress, holding the GIL: tens of megabytes for a few kilobytes of names."""
    dictionary = min(_DICTIONARY_MAX, max(_DICTIONARY_MIN, 1 << max(0, size - 1).bit_length()))
    return [{**_FILTERS[0], "dict_size": dictionary}]


# Where the explanation holds names (by its JSON aliases): lists of names inside each item of
# a list of groups, lists of names at the top level, and one name inside each item.
_GROUP_LISTS: Final = ("picked", "notPicked", "filtered", "bindings")
_NAME_LISTS: Final = ("kept", "alreadySelected", "valid", "notFound")
_ITEM_NAMES: Final = (("invalid", "cluster"), ("room", "cluster"))


def _names_in(doc: dict[str, Any]) -> Iterator[str]:
    for key in _GROUP_LISTS:
        for group in doc.get(key, []):
            yield from group["clusters"]
    for key in _NAME_LISTS:
        yield from doc.get(key, [])
    for key, field in _ITEM_NAMES:
        for item in doc.get(key, []):
            yield item[field]


def _walk_lists(doc: dict[str, Any], visit: Callable[[Any], Any]) -> None:
    """Replace every list of names (and every single name) in `doc` by `visit` of it."""
    for key in _GROUP_LISTS:
        for group in doc.get(key, []):
            group["clusters"] = visit(group["clusters"])
    for key in _NAME_LISTS:
        if key in doc:
            doc[key] = visit(doc[key])
    for key, field in _ITEM_NAMES:
        for item in doc.get(key, []):
            item[field] = visit(item[field])


def _varint(value: int, out: bytearray) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


class _Reader:
    def __init__(self, data: bytes, start: int = 0) -> None:
        self.data, self.pos = data, start

    def varint(self) -> int:
        value = shift = 0
        while True:
            if self.pos >= len(self.data):
                raise InvalidInputError("packed explanation is truncated")
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def take(self, count: int) -> bytes:
        if self.pos + count > len(self.data):
            raise InvalidInputError("packed explanation is truncated")
        chunk = self.data[self.pos : self.pos + count]
        self.pos += count
        return chunk


_TRAILING_NUMBER: Final = re.compile(rb"[0-9]+$")
_ASCENDING, _DESCENDING, _EXPLICIT = 0, 1, 2


def _numbered(name: bytes) -> tuple[bytes, bytes]:
    """(stem, trailing digits) of a name; the digits are empty when it does not end in one."""
    found = _TRAILING_NUMBER.search(name)
    return (name, b"") if found is None else (name[: found.start()], found.group())


@functools.lru_cache(maxsize=16)
def _roster_bytes(roster: tuple[str, ...]) -> bytes:
    """The front-coded roster. Memoised: the cycles of one fleet's placements mostly mention
    the same clusters, and encoding 5,000 names was a tenth of a 5,000-cluster turn."""
    out = bytearray()
    _varint(len(roster), out)
    previous = b""
    for name in roster:
        encoded = name.encode()
        stem, digits = _numbered(encoded)
        previous_stem, previous_digits = _numbered(previous)
        if (
            digits
            and stem == previous_stem
            and len(digits) == len(previous_digits)
            and int(digits) > int(previous_digits)
        ):
            _varint(0, out)  # the previous name's successor by number
            _varint(int(digits) - int(previous_digits) - 1, out)
        else:
            shared = 0
            limit = min(len(previous), len(encoded))
            while shared < limit and previous[shared] == encoded[shared]:
                shared += 1
            _varint(shared + 1, out)
            _varint(len(encoded) - shared, out)
            out += encoded[shared:]
        previous = encoded
    return bytes(out)


def _roster_from(reader: _Reader) -> list[str]:
    roster: list[str] = []
    previous = b""
    # The previous name split as `_numbered` splits it, found only when a successor needs it:
    # a successor's own split is its predecessor's stem and its new digits, no search needed.
    numbered: tuple[bytes, bytes] | None = (b"", b"")
    for _ in range(reader.varint()):
        mode = reader.varint()
        if mode == 0:
            stem, digits = numbered if numbered is not None else _numbered(previous)
            if not digits:
                raise InvalidInputError("packed explanation has a malformed roster")
            following = str(int(digits) + reader.varint() + 1).zfill(len(digits)).encode()
            if len(following) != len(digits):
                raise InvalidInputError("packed explanation has a malformed roster")
            current = stem + following
            numbered = (stem, following)
        else:
            if mode - 1 > len(previous):
                raise InvalidInputError("packed explanation has a malformed roster")
            current = previous[: mode - 1] + reader.take(reader.varint())
            numbered = None
        try:
            roster.append(current.decode())
        except UnicodeDecodeError as exc:
            raise InvalidInputError(f"packed explanation has a malformed name: {exc}") from exc
        previous = current
    return roster


def _zigzag(value: int, out: bytearray) -> None:
    _varint(value * 2 if value >= 0 else -value * 2 - 1, out)


def _unzigzag(coded: int) -> int:
    return coded // 2 if coded % 2 == 0 else -(coded + 1) // 2


def pack_explanation(explanation: Explanation) -> str:
    """The explanation as one compact string (see the module docstring)."""
    doc = explanation.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    roster = sorted(set(_names_in(doc)))
    index = {name: i for i, name in enumerate(roster)}
    memberships: list[list[int]] = [[] for _ in roster]
    explicit = bytearray()
    lists = 0

    def to_refs(value: Any) -> Any:
        nonlocal lists
        if isinstance(value, str):
            return index[value]
        positions = [index[name] for name in value]
        mode = _EXPLICIT
        if len(set(positions)) == len(positions):
            if positions == sorted(positions):
                mode = _ASCENDING
            elif positions == sorted(positions, reverse=True):
                mode = _DESCENDING
        if mode == _EXPLICIT:
            previous = -1
            for position in positions:
                _zigzag(position - previous - 1, explicit)
                previous = position
        else:
            for position in positions:
                memberships[position].append(lists)
        lists += 1
        return [mode, len(value)]

    _walk_lists(doc, to_refs)
    skeleton = json.dumps(doc, separators=(",", ":")).encode()
    body = bytearray()
    _varint(len(skeleton), body)
    body += skeleton
    body += _roster_bytes(tuple(roster))
    for member_of in memberships:
        _varint(len(member_of), body)
        for list_id in member_of:
            _varint(list_id, body)
    body += explicit
    packed = lzma.compress(bytes(body), format=lzma.FORMAT_RAW, filters=encoder_filters(len(body)))
    return base64.b85encode(bytes([PACKED_VERSION]) + packed).decode("ascii")


def unpack_explanation(packed: str) -> Explanation:
    """The explanation `pack_explanation` packed; InvalidInputError if `packed` is not one."""
    try:
        raw = base64.b85decode(packed.encode("ascii"))
    except (ValueError, UnicodeEncodeError) as exc:
        raise InvalidInputError(f"packed explanation is not base85: {exc}") from exc
    if not raw or raw[0] != PACKED_VERSION:
        version = raw[0] if raw else "none"
        raise InvalidInputError(
            f"packed explanation has format version {version}; this reader knows {PACKED_VERSION}"
        )
    decompressor = lzma.LZMADecompressor(format=lzma.FORMAT_RAW, filters=_FILTERS)
    try:
        body = decompressor.decompress(raw[1:], max_length=_UNPACK_LIMIT)
    except lzma.LZMAError as exc:
        raise InvalidInputError(f"packed explanation does not decompress: {exc}") from exc
    reader = _Reader(body)
    skeleton = reader.take(reader.varint())
    roster = _roster_from(reader)
    members: dict[int, list[str]] = {}
    for name in roster:
        for _ in range(reader.varint()):
            members.setdefault(reader.varint(), []).append(name)
    try:
        doc = json.loads(skeleton)
    except ValueError as exc:
        raise InvalidInputError(f"packed explanation has a malformed skeleton: {exc}") from exc
    lists = 0

    def from_refs(value: Any) -> Any:
        nonlocal lists
        if isinstance(value, int):
            return roster[value]
        mode, count = value
        list_id, lists = lists, lists + 1
        if mode == _EXPLICIT:
            out, previous = [], -1
            for _ in range(count):
                previous += _unzigzag(reader.varint()) + 1
                if previous < 0:
                    raise IndexError(f"roster index {previous}")
                out.append(roster[previous])
            return out
        out = members.get(list_id, [])
        if len(out) != count or mode not in (_ASCENDING, _DESCENDING):
            raise ValueError(f"list {list_id}: {len(out)} names recorded, {count} expected")
        return out[::-1] if mode == _DESCENDING else out

    try:
        _walk_lists(doc, from_refs)
        return Explanation.model_validate(doc)
    except (IndexError, KeyError, TypeError, ValueError) as exc:
        raise InvalidInputError(f"packed explanation does not match its roster: {exc}") from exc
