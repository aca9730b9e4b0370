"""Clusters: what a cycle reads of a member cluster, and what it asks of it.

It decides the compact facts a cycle reads of each MemberCluster, built once per cluster
object (`facts`), whether a label selector is valid and matches a cluster's labels (`labels`),
and whether a cluster may receive new placements now, with KubeFleet's reasons (`eligibility`,
kubefleet-rules section 6, used by the ClusterEligibility filter, PickFixed and the watch
rules). "now" is an argument, never a clock read."""
