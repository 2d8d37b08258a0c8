{{/* Labels on every object: the app name (also the selector, as config/ has it) and Helm's own. */}}
{{- define "csi-handover.labels" -}}
app.kubernetes.io/name: csi-handover
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The objects keep config/'s names (the operator's defaults name its Deployment, webhook and Secret): one release per cluster. */}}
{{- define "csi-handover.checks" -}}
{{- if not (has .Values.mode (list "standalone" "companion")) }}{{ fail (printf "mode must be standalone or companion, not %q" .Values.mode) }}{{ end }}
{{- if not (has .Values.webhook.certSource (list "self" "service-ca")) }}{{ fail (printf "webhook.certSource must be self or service-ca, not %q" .Values.webhook.certSource) }}{{ end }}
{{- if lt (int .Values.replicas) 1 }}{{ fail "replicas must be at least 1 (scale the Deployment to 0 to pause the operator)" }}{{ end }}
{{- end }}
