"""Opt-in: what a placement asks of fleet-scheduler with its `fleet-scheduler.io/` annotations,
and how a bad value is said.

It decides what each of our annotations' values means, through one parser per value, and which
of a placement's values are wrong (`placement_annotations`, docs/validation.md "Our
annotations"); the error every parser raises and the bounded quote of the value it carries
(`values`); and the schedule deadline: its annotation, when a placement is past it, how aging
lifts its priority, and the words for what is missing (`deadline`, docs/operations.md
"Scheduling deadlines"). A placement without our annotations reads as KubeFleet's."""
