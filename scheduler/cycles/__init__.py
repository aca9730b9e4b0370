"""The scheduling cycle, in one place: `schedule` (schedule.py) runs one, KubeFleet's
RunSchedulingCycleFor between its reads and its writes, on a `CycleInput` (models.py) and
returns a `CycleResult` with its `BindingPlan` (plan.py). It classifies the placement's bindings
(classify.py), dispatches on the placement type (pick_all.py, pick_n.py, pick_fixed.py, with
what they share in common.py and crossref.py) and writes the snapshot's decisions and condition
(decisions.py). The framework it runs plugins with is scheduler.framework."""
