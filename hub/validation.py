"""Kubernetes' naming rules for object names, label keys and values, in one place.

kube-apiserver's rules (apimachinery's validation package): a DNS-1123 subdomain (object names,
label key prefixes) is at most 253 lower-case alphanumerics, '-' and '.', starting and ending
with an alphanumeric; a DNS-1123 label at most 63 of lower-case alphanumerics and '-'; a label
key is an optional subdomain prefix and '/', then a name of at most 63 alphanumerics, '-', '_'
and '.', starting and ending with an alphanumeric; a label value is empty or such a name. The
`*_error` functions answer in kube-apiserver's words (devhub's 422 causes); the predicates are
for callers that say it their own way (the scheduler's filter reasons). Pure: stdlib only."""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "MAX_LABEL_LENGTH",
    "MAX_SUBDOMAIN_LENGTH",
    "SelectorError",
    "is_dns1123_label",
    "is_label_value",
    "is_qualified_name_part",
    "is_subdomain",
    "label_key_error",
    "label_value_error",
    "subdomain_error",
]

MAX_SUBDOMAIN_LENGTH: Final = 253
MAX_LABEL_LENGTH: Final = 63  # a DNS-1123 label, a label key's name part, a label value

_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1123_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", re.ASCII)
_QUALIFIED_NAME: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")

SUBDOMAIN_HINT: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
QUALIFIED_HINT: Final = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
    "for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_HINT: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?"
    "[A-Za-z0-9])?')"
)


class SelectorError(ValueError):
    """A label selector Kubernetes would refuse (to parse or to build); the message says why."""


def is_subdomain(name: str) -> bool:
    return len(name) <= MAX_SUBDOMAIN_LENGTH and _SUBDOMAIN.fullmatch(name) is not None


def is_dns1123_label(name: str) -> bool:
    return len(name) <= MAX_LABEL_LENGTH and _DNS1123_LABEL.fullmatch(name) is not None


def is_qualified_name_part(name: str) -> bool:
    """The name part of a label key (after the optional `prefix/`)."""
    return len(name) <= MAX_LABEL_LENGTH and _QUALIFIED_NAME.fullmatch(name) is not None


def is_label_value(value: str) -> bool:
    return value == "" or is_qualified_name_part(value)


def subdomain_error(name: str) -> str | None:
    """Why `name` is not a DNS-1123 subdomain, or None when it is one."""
    if len(name) > MAX_SUBDOMAIN_LENGTH:
        return f"must be no more than {MAX_SUBDOMAIN_LENGTH} characters"
    if not _SUBDOMAIN.fullmatch(name):
        return SUBDOMAIN_HINT
    return None


def label_key_error(key: str) -> str | None:
    """Why `key` is not a qualified name (`[prefix/]name`), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "prefix part must be non-empty"
    if prefix and (err := subdomain_error(prefix)):
        return f"prefix part {err}"
    if not name:
        return "name part must be non-empty"
    if len(name) > MAX_LABEL_LENGTH:
        return f"name part must be no more than {MAX_LABEL_LENGTH} characters"
    if not _QUALIFIED_NAME.fullmatch(name):
        return QUALIFIED_HINT
    return None


def label_value_error(value: str) -> str | None:
    """Why `value` cannot be a label value, or None."""
    if len(value) > MAX_LABEL_LENGTH:
        return f"must be no more than {MAX_LABEL_LENGTH} characters"
    if not is_label_value(value):
        return LABEL_VALUE_HINT
    return None
