{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "hookgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: the release name, plus the chart name unless it already contains it. */}}
{{- define "hookgate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "hookgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hookgate.labels" -}}
helm.sh/chart: {{ include "hookgate.chart" . }}
{{ include "hookgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "hookgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hookgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "hookgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "hookgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "hookgate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret every role reads: the user's own, or the chart's. */}}
{{- define "hookgate.secretName" -}}
{{- if .Values.secret.existingSecret }}
{{- .Values.secret.existingSecret }}
{{- else }}
{{- include "hookgate.fullname" . }}
{{- end }}
{{- end }}

{{/* The secret data (base64), shared by the release Secret and the migration hook's copy. */}}
{{- define "hookgate.secretData" -}}
DATABASE_URL: {{ required "secret.databaseUrl (or secret.existingSecret) is required" .Values.secret.databaseUrl | b64enc | quote }}
HOOKGATE_MASTER_KEY: {{ required "secret.masterKey (or secret.existingSecret) is required: base64 of 32 random bytes" .Values.secret.masterKey | b64enc | quote }}
{{- with .Values.secret.redisUrl }}
REDIS_URL: {{ . | b64enc | quote }}
{{- end }}
{{- with .Values.secret.adminToken }}
HOOKGATE_ADMIN_TOKEN: {{ . | b64enc | quote }}
{{- end }}
{{- end }}

{{/* Pod-level settings every Hookgate pod shares. */}}
{{- define "hookgate.podCommon" -}}
automountServiceAccountToken: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
