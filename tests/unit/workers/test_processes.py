"""workers.processes: the parent's /metrics merges its activity processes' expositions, and
the default number of them follows the cores the container may use."""

from __future__ import annotations

import os
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from workers.processes import PROCESS_LABEL, available_cpus, merge_expositions

PARENT = """# HELP fleet_scheduler_cycles_total Scheduling cycles run.
# TYPE fleet_scheduler_cycles_total counter
fleet_scheduler_cycles_total{outcome="success",placement_type="PickAll"} 1.0
# HELP up_seconds Uptime.
# TYPE up_seconds gauge
up_seconds 5.0
"""
CHILD = """# HELP fleet_scheduler_cycles_total Scheduling cycles run.
# TYPE fleet_scheduler_cycles_total counter
fleet_scheduler_cycles_total{outcome="success",placement_type="PickAll"} 7.0
fleet_scheduler_cycles_total{outcome="failed",placement_type="PickN"} 2.0
# HELP up_seconds Uptime.
# TYPE up_seconds gauge
up_seconds 3.0
"""


def test_samples_of_one_family_are_grouped_and_labelled_by_process() -> None:
    merged = merge_expositions([(None, PARENT), ("activities-1", CHILD), ("activities-2", CHILD)])
    text = merged.decode()
    # One HELP and one TYPE per family, or Prometheus refuses the whole scrape.
    assert text.count("# TYPE fleet_scheduler_cycles_total counter") == 1
    assert text.count("# TYPE up_seconds gauge") == 1
    families = {family.name: family for family in text_string_to_metric_families(text)}
    cycles = families["fleet_scheduler_cycles"].samples
    by_process: dict[str | None, float] = {}
    for sample in cycles:
        process = sample.labels.get(PROCESS_LABEL)
        by_process[process] = by_process.get(process, 0.0) + sample.value
    assert by_process == {None: 1.0, "activities-1": 9.0, "activities-2": 9.0}
    uptimes = {s.labels.get(PROCESS_LABEL): s.value for s in families["up_seconds"].samples}
    assert uptimes == {None: 5.0, "activities-1": 3.0, "activities-2": 3.0}


def test_one_document_comes_back_as_it_was() -> None:
    families = list(text_string_to_metric_families(merge_expositions([(None, PARENT)]).decode()))
    assert [(f.name, [s.value for s in f.samples]) for f in families] == [
        ("fleet_scheduler_cycles", [1.0]),
        ("up_seconds", [5.0]),
    ]


def test_the_default_process_count_follows_the_containers_cpu_limit(tmp_path: Path) -> None:
    cpus = len(os.sched_getaffinity(0))
    cpu_max = tmp_path / "cpu.max"
    assert available_cpus(tmp_path / "absent", tmp_path / "absent") == cpus  # no cgroup files
    cpu_max.write_text("max 100000\n")
    assert available_cpus(cpu_max) == cpus  # no quota
    cpu_max.write_text("100000 100000\n")
    assert available_cpus(cpu_max) == 1  # a one-core limit: one process
    cpu_max.write_text("150000 100000\n")
    assert available_cpus(cpu_max) == min(cpus, 2)  # 1.5 cores round up, never above the CPUs
    cpu_max.write_text("50000 100000\n")
    assert available_cpus(cpu_max) == 1  # half a core is still one process


def test_names_stay_as_their_exporter_wrote_them() -> None:
    # The Temporal SDK's counters have no `_total`; a parse-and-render would add one, and every
    # dashboard on them would break as soon as the worker had activity processes.
    sdk = "# HELP temporal_request Client requests.\n# TYPE temporal_request counter\n"
    merged = merge_expositions(
        [(None, sdk + "temporal_request{operation=\"Poll\"} 3\n"),
         ("activities-1", sdk + "temporal_request 4\n")]
    ).decode()  # fmt: skip
    assert merged.splitlines() == [
        "# HELP temporal_request Client requests.",
        "# TYPE temporal_request counter",
        'temporal_request{operation="Poll"} 3',
        'temporal_request{fleet_process="activities-1"} 4',
    ]


def test_a_cgroup_v1_quota_counts_too(tmp_path: Path) -> None:
    cpus = len(os.sched_getaffinity(0))
    v1 = tmp_path / "cpu"
    v1.mkdir()
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    (v1 / "cpu.cfs_quota_us").write_text("-1\n")
    assert available_cpus(tmp_path / "no-v2", v1) == cpus  # no limit
    (v1 / "cpu.cfs_quota_us").write_text("100000\n")
    assert available_cpus(tmp_path / "no-v2", v1) == 1
