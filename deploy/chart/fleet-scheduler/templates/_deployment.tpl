{{/*
One of the three Deployments (deploy/base/worker.yaml, activities.yaml, watcher.yaml), called
with a dict:
  root       the chart's context
  component  worker | activities | watcher (names, labels, the container)
  runs       the value of --components (workflows | activities | watcher)
  values     the component's values (replicas, resources, extraArgs)
  grace      terminationGracePeriodSeconds
  spread     whether to spread the pods over nodes (topologySpreadConstraints)
A flag every Deployment takes goes into the args below, once.
*/}}
{{- define "fleet-scheduler.deployment" -}}
{{- $root := .root -}}
{{- $name := printf "%s-%s" (include "fleet-scheduler.fullname" $root) .component -}}
{{- $tls := $root.Values.temporal.tls -}}
{{- $apiKey := $root.Values.temporal.apiKey -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "fleet-scheduler.labels" $root | nindent 4 }}
    app.kubernetes.io/name: fleet-scheduler
    app.kubernetes.io/component: {{ .component }}
spec:
  replicas: {{ .values.replicas }}
  selector:
    matchLabels:
      {{- include "fleet-scheduler.selector" $root | nindent 6 }}
      app.kubernetes.io/component: {{ .component }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 0
      maxSurge: 1
  template:
    metadata:
      labels:
        {{- include "fleet-scheduler.selector" $root | nindent 8 }}
        app.kubernetes.io/component: {{ .component }}
      annotations:
        prometheus.io/scrape: "true"
        prometheus.io/port: {{ $root.Values.metricsPort | quote }}
        prometheus.io/path: /metrics
        # The ConfigMap has a fixed name (Kustomize's has a content hash): roll the pods when
        # it changes.
        checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
    spec:
      serviceAccountName: {{ include "fleet-scheduler.fullname" $root }}
      automountServiceAccountToken: true
      enableServiceLinks: false
      terminationGracePeriodSeconds: {{ .grace }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- range . }}
        - name: {{ . }}
        {{- end }}
      {{- end }}
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
      {{- if .spread }}
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: kubernetes.io/hostname
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels:
              {{- include "fleet-scheduler.selector" $root | nindent 14 }}
              app.kubernetes.io/component: {{ .component }}
      {{- end }}
      containers:
        - name: {{ .component }}
          image: {{ printf "%s:%s" $root.Values.image.repository (include "fleet-scheduler.tag" $root) | quote }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          # No --kubeconfig: the hub is the cluster this pod runs in (its service account).
          args:
            - run
            - --components={{ .runs }}
            - --metrics-port={{ $root.Values.metricsPort }}
            {{- if eq $root.Values.mode "beside-kubefleet" }}
            - --no-snapshotter
            {{- end }}
            {{- $decisions := $root.Values.placementDecisions }}
            {{- if ne $decisions.publish "auto" }}
            - --placement-decisions={{ $decisions.publish }}
            {{- end }}
            {{- if ne $decisions.namespace "fleet-system" }}
            - --placement-decisions-namespace={{ $decisions.namespace }}
            {{- end }}
            {{- if ne $decisions.clusterProfileNamespace "fleet-system" }}
            - --cluster-profile-namespace={{ $decisions.clusterProfileNamespace }}
            {{- end }}
            {{- range .values.extraArgs }}
            - {{ . | quote }}
            {{- end }}
          envFrom:
            - configMapRef:
                name: {{ include "fleet-scheduler.fullname" $root }}
          env:
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            - name: OTEL_RESOURCE_ATTRIBUTES
              value: k8s.pod.name=$(POD_NAME),k8s.namespace.name=$(POD_NAMESPACE)
            {{- if $apiKey.secretName }}
            - name: TEMPORAL_API_KEY
              valueFrom:
                secretKeyRef:
                  name: {{ $apiKey.secretName }}
                  key: {{ $apiKey.key }}
            {{- end }}
            {{- if $tls.secretName }}
            - name: TEMPORAL_TLS_CLIENT_CERT_PATH
              value: /etc/fleet-scheduler/temporal-tls/{{ $tls.certKey }}
            - name: TEMPORAL_TLS_CLIENT_KEY_PATH
              value: /etc/fleet-scheduler/temporal-tls/{{ $tls.keyKey }}
            {{- if $tls.caKey }}
            - name: TEMPORAL_TLS_SERVER_CA_CERT_PATH
              value: /etc/fleet-scheduler/temporal-tls/{{ $tls.caKey }}
            {{- end }}
            {{- end }}
          ports:
            - name: metrics
              containerPort: {{ $root.Values.metricsPort }}
              protocol: TCP
          startupProbe:
            httpGet:
              path: /healthz
              port: metrics
            periodSeconds: 2
            failureThreshold: 30
          livenessProbe:
            httpGet:
              path: /healthz
              port: metrics
            periodSeconds: 10
            timeoutSeconds: 3
            failureThreshold: 3
          readinessProbe:
            httpGet:
              path: /readyz
              port: metrics
            periodSeconds: 5
            timeoutSeconds: 3
            failureThreshold: 3
          resources:
            {{- toYaml .values.resources | nindent 12 }}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            runAsNonRoot: true
            capabilities:
              drop: [ALL]
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- if $tls.secretName }}
            - name: temporal-tls
              mountPath: /etc/fleet-scheduler/temporal-tls
              readOnly: true
            {{- end }}
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
        {{- if $tls.secretName }}
        - name: temporal-tls
          secret:
            secretName: {{ $tls.secretName }}
            defaultMode: 288  # 0440: the owner and group read
        {{- end }}
{{- end -}}
