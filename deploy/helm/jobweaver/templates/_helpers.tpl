{{- define "jobweaver.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "jobweaver.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "jobweaver.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- with .pool }}
jobweaver/executor-pool: {{ . }}
{{- end }}
{{- end -}}

{{/* An executor pool's KEDA settings, as YAML: executor.autoscaling.keda with the pool's own
keys over it, one by one (sprig's merge would not let a pool's `false` or `0` win). */}}
{{- define "jobweaver.poolKeda" -}}
{{- $keda := deepCopy (.root.Values.executor.autoscaling.keda | default dict) }}
{{- range $key, $value := ((.pool.autoscaling | default dict).keda | default dict) }}
{{- $_ := set $keda $key $value }}
{{- end }}
{{- toYaml $keda }}
{{- end -}}

{{/* Everything a JobWeaver container needs: image, environment, security, /tmp. */}}
{{- define "jobweaver.container" -}}
image: "{{ .root.Values.image.repository }}:{{ .root.Values.image.tag }}"
imagePullPolicy: {{ .root.Values.image.pullPolicy }}
env:
  {{- include "jobweaver.configEnv" .root | nindent 2 }}
  - name: DJANGO_SECRET_KEY
    valueFrom:
      secretKeyRef: {name: {{ .root.Values.secret.name }}, key: {{ .root.Values.secret.secretKeyKey }}}
  - name: DATABASE_URL
    valueFrom:
      secretKeyRef: {name: {{ .root.Values.secret.name }}, key: {{ .root.Values.secret.databaseUrlKey }}}
  {{- with .metricsPort }}
  - name: JOBWEAVER_METRICS_PORT
    value: {{ . | quote }}
  - name: JOBWEAVER_METRICS_BIND
    value: {{ $.root.Values.metrics.workerBind | quote }}
  {{- end }}
  {{- if .root.Values.secret.metricsTokenKey }}
  - name: JOBWEAVER_METRICS_TOKEN
    valueFrom:
      secretKeyRef: {name: {{ .root.Values.secret.name }}, key: {{ .root.Values.secret.metricsTokenKey }}}
  {{- end }}
securityContext:
  {{- toYaml .root.Values.securityContext | nindent 2 }}
volumeMounts:
  # Writable scratch under a read-only root: gunicorn's and prometheus' files, liveness files.
  - name: tmp
    mountPath: /tmp
{{- end -}}

{{- define "jobweaver.podSpec" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
volumes:
  - name: tmp
    emptyDir: {}
{{- with .root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "jobweaver.workerProbes" -}}
livenessProbe:
  exec:
    command: ["python", "-m", "jobweaver_site.workers", "probe", {{ .role | quote }}]
  initialDelaySeconds: 30
  periodSeconds: 30
  timeoutSeconds: 10
  failureThreshold: 3
readinessProbe:
  exec:
    command: ["python", "-m", "jobweaver_site.workers", "probe", {{ .role | quote }}]
  periodSeconds: 15
  timeoutSeconds: 10
{{- end -}}

{{- define "jobweaver.metricsAnnotations" -}}
{{- if .root.Values.metrics.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}

{{/* Non-secret settings as env entries. Inline, not a ConfigMap: the pre-install migration hook
runs before any regular object of the release exists. */}}
{{- define "jobweaver.configEnv" -}}
{{- $env := dict
  "DJANGO_DEBUG" "0"
  "DJANGO_ALLOWED_HOSTS" (printf "%s,$(JOBWEAVER_POD_IP)" (join "," .Values.config.allowedHosts))
  "KAFKA_BOOTSTRAP_SERVERS" .Values.kafka.bootstrapServers
  "JOBWEAVER_KAFKA_TOPIC_PREFIX" .Values.kafka.topicPrefix
  "JOBWEAVER_RUN_JOB_PARTITIONS" .Values.kafka.runJobPartitions
  "JOBWEAVER_LOG_FORMAT" .Values.config.logFormat
  "JOBWEAVER_LOG_LEVEL" .Values.config.logLevel
  "JOBWEAVER_DISPATCH_INTERVAL_SECONDS" .Values.config.dispatchIntervalSeconds
  "JOBWEAVER_DISPATCH_PREFETCH" .Values.config.dispatchPrefetch
  "JOBWEAVER_LEASE_SECONDS" .Values.config.leaseSeconds
  "JOBWEAVER_DISPATCH_TIMEOUT_SECONDS" .Values.config.dispatchTimeoutSeconds
  "JOBWEAVER_SHUTDOWN_GRACE_SECONDS" .Values.config.shutdownGraceSeconds
  "JOBWEAVER_EXECUTOR_CONCURRENCY" .Values.config.executorConcurrency
  "JOBWEAVER_SECURE_PROXY_SSL_HEADER" (ternary "1" "0" .Values.config.secureProxySslHeader)
  "JOBWEAVER_LIVENESS_MAX_AGE_SECONDS" .Values.probes.workerMaxAgeSeconds
  "JOBWEAVER_WEB_WORKERS" .Values.web.workers
  "JOBWEAVER_WEB_THREADS" .Values.web.threads
-}}
{{- /* First: the allowed hosts name it as $(JOBWEAVER_POD_IP), which Kubernetes expands only
from variables defined before. Prometheus scrapes a pod by its IP: that is its Host header. */ -}}
- name: JOBWEAVER_POD_IP
  valueFrom:
    fieldRef: {fieldPath: status.podIP}
{{- range $name, $value := merge (dict) .Values.config.extraEnv $env }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end -}}
