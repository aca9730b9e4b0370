"""Explain: what people and event histories are told of a cycle.

It decides how every cluster's fate in a cycle is grouped (`explanation`, the `Explanation`
model), how that is packed into a few kilobytes for the event history (`packing`), how
KubeFleet's reasons read in the CLI, the activities' summaries and the Temporal UI
(`readable`), and what a candidate profile would change against the current one, on the same
reads (`whatif`, for `plan --all`). Hub objects keep KubeFleet's exact text; only what people
read is rewritten."""
