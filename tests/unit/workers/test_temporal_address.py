"""Temporal addresses are HOST:PORT; anything else is refused before connecting, saying what is
wrong (without a port the SDK would only say the connection was refused)."""

from __future__ import annotations

import pytest

from workers.temporal_client import TemporalConfigError, check_address, load_target


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1:7233", "localhost:7233", "my-ns.a1b2c.tmprl.cloud:7233", "[::1]:7233", " h:1 "],
)
def test_host_and_port_are_accepted(address: str) -> None:
    assert check_address(address) == address.strip()


@pytest.mark.parametrize(
    ("address", "says"),
    [
        ("127.0.0.1", "has no port; give HOST:PORT, e.g. 127.0.0.1:7233"),
        ("temporal.example.com", "has no port"),
        ("http://127.0.0.1:7233", "is a URL"),
        ("127.0.0.1:", "is not HOST:PORT"),
        ("127.0.0.1:70000", "is not HOST:PORT with a port from 1 to 65535"),
        ("127.0.0.1:port", "is not HOST:PORT"),
        ("::1", "is not HOST:PORT"),
    ],
)
def test_anything_else_says_what_is_wrong(address: str, says: str) -> None:
    with pytest.raises(TemporalConfigError, match=f"the Temporal address '{address}' {says}"):
        check_address(address)


def test_the_environment_is_checked_as_a_flag_is() -> None:
    with pytest.raises(TemporalConfigError, match="has no port"):
        load_target(env={"TEMPORAL_ADDRESS": "10.0.0.5"})
    assert load_target(address="10.0.0.5:7233", env={}).address == "10.0.0.5:7233"
