"""The hub's API: KubeFleet's v1beta1 kinds as pydantic models, their wire names, and the client."""
