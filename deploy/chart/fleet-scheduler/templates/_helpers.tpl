{{/*
The prefix of every object's name: the release name (or fullnameOverride) when it contains the
chart's name, else "<release>-fleet-scheduler". A release named fleet-scheduler gives exactly the
Kustomize overlays' names.
*/}}
{{- define "fleet-scheduler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The image tag: image.tag, else the chart's appVersion. */}}
{{- define "fleet-scheduler.tag" -}}
{{- .Values.image.tag | default .Chart.AppVersion | toString -}}
{{- end -}}

{{/* Labels on every object: the base's part-of label and Helm's own. */}}
{{- define "fleet-scheduler.labels" -}}
app.kubernetes.io/part-of: fleet-scheduler
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "fleet-scheduler.tag" . | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The labels that select fleet-scheduler's pods (all components) of this release. */}}
{{- define "fleet-scheduler.selector" -}}
app.kubernetes.io/name: fleet-scheduler
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The port of temporal.address (host:port), for the NetworkPolicy. */}}
{{- define "fleet-scheduler.temporalPort" -}}
{{- regexFind "[0-9]+$" .Values.temporal.address -}}
{{- end -}}

{{/*
Checks the schema cannot say (draft-07 compares no two values), with a message naming the keys.
Included by configmap.yaml, which every release renders.
*/}}
{{- define "fleet-scheduler.validate" -}}
{{- $hpa := .Values.activities.autoscaling -}}
{{- if and $hpa.enabled (gt (int $hpa.minReplicas) (int $hpa.maxReplicas)) -}}
{{- fail (printf "activities.autoscaling.minReplicas (%v) is above activities.autoscaling.maxReplicas (%v)" $hpa.minReplicas $hpa.maxReplicas) -}}
{{- end -}}
{{- if .Values.podDisruptionBudget.enabled -}}
{{- if lt (int .Values.worker.replicas) 2 -}}
{{- fail (printf "worker.replicas is %v: with podDisruptionBudget.enabled (minAvailable 1) no node running the worker could ever be drained; set worker.replicas to 2 or more, or podDisruptionBudget.enabled=false" .Values.worker.replicas) -}}
{{- end -}}
{{- $least := ternary $hpa.minReplicas .Values.activities.replicas $hpa.enabled -}}
{{- if lt (int $least) 2 -}}
{{- fail (printf "%s is %v: with podDisruptionBudget.enabled (minAvailable 1) no node running an activity worker could ever be drained; set it to 2 or more, or podDisruptionBudget.enabled=false" (ternary "activities.autoscaling.minReplicas" "activities.replicas" $hpa.enabled) $least) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.temporal.tls.secretName (not .Values.temporal.tls.certKey) -}}
{{- fail "temporal.tls.secretName is set but temporal.tls.certKey is empty: name the Secret's key holding the client certificate" -}}
{{- end -}}
{{- if and .Values.temporal.tls.secretName (not .Values.temporal.tls.keyKey) -}}
{{- fail "temporal.tls.secretName is set but temporal.tls.keyKey is empty: name the Secret's key holding the client key" -}}
{{- end -}}
{{- end -}}
