"""HubClient tests talk to the shared devhub over loopback HTTP, never to a mocked transport.

`hub_kubeconfig` (tests/conftest.py) resets the devhub for each test and hands over a kubeconfig
that carries its URL and token, so every client here is built the way users build one."""

from __future__ import annotations
