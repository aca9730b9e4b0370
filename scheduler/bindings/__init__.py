"""How a binding write looks: deterministic names and merge patches."""
