"""Bindings: what a cycle's binding writes look like.

It decides a new binding's name, deterministically in KubeFleet's pattern so a retried create
adopts instead of duplicating (`naming`, kubefleet-rules 4.11), and every binding write as a
JSON merge patch of our own fields with the resourceVersion read, or a new binding (`writes`,
kubefleet-rules 4.2, 4.8). The cycles and the moves build their writes here; activities apply
them."""
