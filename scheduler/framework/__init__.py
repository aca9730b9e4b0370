"""The framework: how a profile's plugins run in a cycle, after KubeFleet's (kubefleet-rules 4.3,
5.0) and kube-scheduler's.

It decides which plugins a profile runs at each extension point and how their scores combine
(`profile`, from YAML; `registry` finds third-party plugins by entry point), what each
extension point may return and what the runner then does (`interfaces`, `status`, `score`,
`runner`), what a cycle's plugins share (`cycle_state`), in which order turns are taken
(`queue_sort`, the QueueSort extension point), and what a failing plugin or a bad profile
raises (`errors`). Pure: no I/O, no clock."""
