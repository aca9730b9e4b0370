"""Label selectors match and validate with Kubernetes semantics."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hub.types import LabelSelector, LabelSelectorRequirement
from scheduler.clusters.labels import SelectorError, compile_selector, matches, validate


def selector(
    match: Mapping[str, str] | None = None, *expressions: LabelSelectorRequirement
) -> LabelSelector:
    return LabelSelector(match_labels=dict(match or {}), match_expressions=list(expressions))


def req(key: str, operator: str, *values: str) -> LabelSelectorRequirement:
    return LabelSelectorRequirement(key=key, operator=operator, values=list(values))


PROD_EU = {"env": "prod", "region": "eu"}


@pytest.mark.parametrize(
    ("sel", "labels", "expected"),
    [
        pytest.param(selector(), {}, True, id="empty-matches-nothing-labelled"),
        pytest.param(selector(), PROD_EU, True, id="empty-matches-all"),
        pytest.param(selector({"env": "prod"}), PROD_EU, True, id="match-labels"),
        pytest.param(selector({"env": "dev"}), PROD_EU, False, id="match-labels-other-value"),
        pytest.param(selector({"tier": "web"}), PROD_EU, False, id="match-labels-missing-key"),
        pytest.param(selector({"env": ""}), {"env": ""}, True, id="match-empty-value"),
        pytest.param(selector({"env": ""}), {}, False, id="empty-value-needs-the-key"),
        pytest.param(selector(None, req("env", "In", "dev", "prod")), PROD_EU, True, id="in"),
        pytest.param(selector(None, req("env", "In", "dev")), PROD_EU, False, id="in-miss"),
        pytest.param(selector(None, req("tier", "In", "web")), PROD_EU, False, id="in-absent"),
        pytest.param(selector(None, req("env", "NotIn", "dev")), PROD_EU, True, id="notin"),
        pytest.param(selector(None, req("env", "NotIn", "prod")), PROD_EU, False, id="notin-hit"),
        pytest.param(
            selector(None, req("tier", "NotIn", "web")), PROD_EU, True, id="notin-absent-key"
        ),
        pytest.param(selector(None, req("env", "Exists")), PROD_EU, True, id="exists"),
        pytest.param(selector(None, req("tier", "Exists")), PROD_EU, False, id="exists-absent"),
        pytest.param(
            selector(None, req("tier", "DoesNotExist")), PROD_EU, True, id="does-not-exist"
        ),
        pytest.param(
            selector(None, req("env", "DoesNotExist")), PROD_EU, False, id="does-not-exist-hit"
        ),
        pytest.param(
            selector({"env": "prod"}, req("region", "In", "us")), PROD_EU, False, id="anded"
        ),
        pytest.param(
            selector({"env": "prod"}, req("region", "In", "eu"), req("tier", "DoesNotExist")),
            PROD_EU,
            True,
            id="all-hold",
        ),
    ],
)
def test_selector_matches_with_kubernetes_semantics(
    sel: LabelSelector, labels: dict[str, str], expected: bool
) -> None:
    assert matches(sel, labels) is expected
    assert compile_selector(sel)(labels) is expected


@pytest.mark.parametrize(
    ("sel", "complaint"),
    [
        pytest.param(selector(None, req("env", "in", "a")), "not a valid label selector operator"),
        pytest.param(selector(None, req("env", "In")), "needs at least one value"),
        pytest.param(selector(None, req("env", "NotIn")), "needs at least one value"),
        pytest.param(selector(None, req("env", "Exists", "a")), "takes no values"),
        pytest.param(selector(None, req("env", "DoesNotExist", "a")), "takes no values"),
        pytest.param(selector({"bad key": "a"}), "invalid label key"),
        pytest.param(selector({"a/b/c": "a"}), "at most one '/'"),
        pytest.param(selector({"/name": "a"}), "prefix before '/' must not be empty"),
        pytest.param(selector({"Example.com/name": "a"}), "DNS subdomain"),
        pytest.param(selector({"example.com/": "a"}), "name part must not be empty"),
        pytest.param(selector({"x" * 64: "a"}), "name part"),
        pytest.param(selector({"-name": "a"}), "name part"),
        pytest.param(selector({"env": "bad value"}), "invalid value"),
        pytest.param(selector({"env": "v" * 64}), "invalid value"),
        pytest.param(selector(None, req("env", "In", "-x")), "invalid value"),
        pytest.param(selector(None, req("bad key", "Exists")), "invalid label key"),
    ],
)
def test_invalid_selectors_are_reported(sel: LabelSelector, complaint: str) -> None:
    problem = validate(sel)
    assert problem is not None
    assert complaint in problem
    with pytest.raises(SelectorError) as raised:
        compile_selector(sel)
    assert str(raised.value) == problem


@pytest.mark.parametrize(
    "sel",
    [
        selector(),
        selector({"kubernetes-fleet.io/member-name": "a", "x": ""}),
        selector({"a.b-c_d": "V.1-x_2"}),
        selector({"example.com/" + "n" * 63: "v" * 63}),
        selector(None, req("env", "In", "a", "b"), req("k", "Exists")),
    ],
)
def test_valid_selectors_pass_validation(sel: LabelSelector) -> None:
    assert validate(sel) is None


def test_matches_raises_for_an_invalid_selector() -> None:
    with pytest.raises(SelectorError, match="operator"):
        matches(selector(None, req("env", "Equals", "a")), {"env": "a"})


# --- property: the compiled predicate agrees with a naive reading of the rules ---------------

KEYS = st.sampled_from(["a", "b", "c"])
VALUES = st.sampled_from(["x", "y", "z"])
LABELS = st.dictionaries(KEYS, VALUES)
REQUIREMENTS = st.one_of(
    st.builds(
        lambda k, op, vs: req(k, op, *vs),
        KEYS,
        st.sampled_from(["In", "NotIn"]),
        st.lists(VALUES, min_size=1, max_size=3),
    ),
    st.builds(lambda k, op: req(k, op), KEYS, st.sampled_from(["Exists", "DoesNotExist"])),
)
SELECTORS = st.builds(
    lambda ml, exprs: selector(ml, *exprs), LABELS, st.lists(REQUIREMENTS, max_size=3)
)


def naive(sel: LabelSelector, labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in sel.match_labels.items()):
        return False
    for r in sel.match_expressions:
        present = r.key in labels
        if r.operator == "In" and not (present and labels[r.key] in r.values):
            return False
        if r.operator == "NotIn" and present and labels[r.key] in r.values:
            return False
        if r.operator == "Exists" and not present:
            return False
        if r.operator == "DoesNotExist" and present:
            return False
    return True


@given(SELECTORS, LABELS)
def test_compiled_selector_agrees_with_naive_evaluation(
    sel: LabelSelector, labels: dict[str, str]
) -> None:
    assert compile_selector(sel)(labels) is naive(sel, labels)
