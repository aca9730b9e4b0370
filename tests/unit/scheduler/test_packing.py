"""The packed explanation: lossless, order-preserving, small for patterned names, and a clear
error for anything that is not one."""

from __future__ import annotations

import base64
import json
import lzma

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler import (
    BindingGroup,
    Explanation,
    FilterGroup,
    InvalidInputError,
    InvalidTarget,
    ScoreGroup,
)
from scheduler.explain.packing import (
    PACKED_VERSION,
    encoder_filters,
    pack_explanation,
    unpack_explanation,
)

# Cluster names as hubs have them, numbered ones sharing stems (zero-padded or not, of
# different widths), and arbitrary text (PickFixed's not-found targets are whatever the user
# wrote).
NAME = st.one_of(
    st.from_regex(r"[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?", fullmatch=True),
    st.from_regex(r"(prod|dev)-[ab]?-?0{0,2}[0-9]{1,3}", fullmatch=True),
    st.text(min_size=1, max_size=30),
)
NAMES = st.lists(NAME, max_size=12)


@st.composite
def explanations(draw: st.DrawFn) -> Explanation:
    def scores() -> list[ScoreGroup]:
        return [
            ScoreGroup(
                topology=draw(st.integers(-1000, 1000)),
                affinity=draw(st.integers(-100, 100)),
                obsolete=draw(st.integers(0, 1)),
                total=draw(st.none() | st.integers()),
                clusters=draw(NAMES),
            )
            for _ in range(draw(st.integers(0, 3)))
        ]

    return Explanation(
        placement_type=draw(st.sampled_from(["PickAll", "PickN", "PickFixed"])),
        snapshot=draw(NAME),
        wanted=draw(st.none() | st.integers(0, 50)),
        branch=draw(st.none() | st.sampled_from(["steady", "schedule", "downscale"])),
        picked=scores(),
        created=draw(st.integers(0, 10)),
        not_picked=scores(),
        filtered=[
            FilterGroup(plugin=draw(NAME), reason=draw(st.text()), clusters=draw(NAMES))
            for _ in range(draw(st.integers(0, 3)))
        ],
        kept=draw(NAMES),
        already_selected=draw(NAMES),
        not_evaluated=draw(st.integers(0, 5)),
        valid=draw(NAMES),
        invalid=[
            InvalidTarget(cluster=draw(NAME), reason=draw(st.text()))
            for _ in range(draw(st.integers(0, 3)))
        ],
        not_found=draw(NAMES),
        bindings=[
            BindingGroup(
                action=draw(st.sampled_from(["patched", "revived", "unscheduled"])),
                why=draw(st.text()),
                clusters=draw(NAMES),
            )
            for _ in range(draw(st.integers(0, 2)))
        ],
        notes=draw(st.lists(st.text(), max_size=2)),
    )


@settings(max_examples=300, deadline=None)
@given(explanations())
def test_unpacking_gives_back_the_same_explanation(explanation: Explanation) -> None:
    # Lists keep their order (ranks, duplicates) and names may repeat across lists.
    assert unpack_explanation(pack_explanation(explanation)) == explanation


def fleet(size: int) -> Explanation:
    names = [f"prod-westeurope-payments-cluster-{i:05d}" for i in range(size)]
    return Explanation(
        placement_type="PickN",
        snapshot="web-3",
        wanted=10,
        branch="schedule",
        # Ranked best first: descending names, the tie-break, not the roster's order.
        picked=[ScoreGroup(topology=0, affinity=90, obsolete=0, clusters=names[-10:][::-1])],
        not_picked=[
            ScoreGroup(topology=0, affinity=score, obsolete=0, clusters=names[score::89][::-1])
            for score in range(89)
        ],
        filtered=[FilterGroup(plugin="TaintToleration", reason="taint", clusters=names[:7])],
        bindings=[BindingGroup(action="patched", why="score changed", clusters=names[-3:])],
    )


def test_a_patterned_fleet_packs_to_a_fraction_of_its_json() -> None:
    explanation = fleet(5000)
    packed = pack_explanation(explanation)
    assert unpack_explanation(packed) == explanation
    assert len(packed) * 8 < len(explanation.model_dump_json())


def test_the_packed_form_is_plain_json_text() -> None:
    packed = pack_explanation(fleet(200))
    assert json.loads(json.dumps(packed)) == packed
    assert '"' not in packed and "\\" not in packed


@pytest.mark.parametrize(
    ("packed", "says"),
    [
        ("not base85 ~~~ \x00", "not base85"),
        (base64.b85encode(bytes([PACKED_VERSION + 1]) + b"rest").decode(), "format version 2"),
        (base64.b85encode(bytes([PACKED_VERSION]) + b"garbage").decode(), "does not decompress"),
        ("", "format version none"),
    ],
)
def test_anything_else_is_refused_with_a_reason(packed: str, says: str) -> None:
    with pytest.raises(InvalidInputError, match=says):
        unpack_explanation(packed)


def test_a_truncated_packed_explanation_is_refused() -> None:
    packed = pack_explanation(fleet(100))
    raw = base64.b85decode(packed)
    with pytest.raises(InvalidInputError):
        unpack_explanation(base64.b85encode(raw[: len(raw) // 2]).decode())


# The reference encoder: the one every packed explanation in a history was written with.
REFERENCE_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 6, "lc": 4, "lp": 0, "pb": 0}]


@pytest.mark.parametrize(
    ("size", "dictionary"),
    [(0, 4096), (1, 4096), (4096, 4096), (4097, 8192), (40_000, 65536),
     (8 << 20, 8 << 20), (9 << 20, 8 << 20)],
)  # fmt: skip
def test_the_encoder_dictionary_covers_the_input_and_no_more(size: int, dictionary: int) -> None:
    # Preset 6's 8 MiB dictionary for a few kilobytes had every turn zero and fault in tens of
    # megabytes of match-finder tables, holding the GIL (issue 35: a sixth of an activity
    # process's CPU); a dictionary the size of the input finds the same matches.
    (chosen,) = encoder_filters(size)
    assert chosen["dict_size"] == dictionary
    assert {k: v for k, v in chosen.items() if k != "dict_size"} == REFERENCE_FILTERS[0]


BODIES = st.binary(max_size=20_000) | st.text(alphabet="ab-0123", max_size=20_000).map(str.encode)


@given(BODIES)
@settings(max_examples=60, deadline=None)
def test_a_sized_dictionary_writes_the_same_bytes_as_preset_6(body: bytes) -> None:
    # The history holds the same bytes as before the cut: only the encoder's memory changed.
    sized = lzma.compress(body, format=lzma.FORMAT_RAW, filters=encoder_filters(len(body)))
    assert sized == lzma.compress(body, format=lzma.FORMAT_RAW, filters=REFERENCE_FILTERS)
