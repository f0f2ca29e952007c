{{/* The release's name for its objects, at most 63 characters. */}}
{{- define "fencegate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "fencegate.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "fencegate.labels" -}}
{{ include "fencegate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The Secret of the gateway's environment: the user's, or the chart's. */}}
{{- define "fencegate.secretName" -}}
{{- .Values.credentials.existingSecret | default (include "fencegate.fullname" .) -}}
{{- end -}}

{{- define "fencegate.scheme" -}}
{{- if .Values.serverTLS.secretName -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end -}}

{{/* fencegate.yaml: what the values say, with .Values.config merged over it. */}}
{{- define "fencegate.config" -}}
{{- $http := dict "listen" "0.0.0.0:8080" "drain_delay" (printf "%ds" (int .Values.shutdown.drainDelaySeconds)) "shutdown_timeout" (printf "%ds" (int .Values.shutdown.timeoutSeconds)) -}}
{{- if .Values.serverTLS.secretName -}}
{{- $_ := set $http "tls" (dict "cert_file" "/etc/fencegate/tls/tls.crt" "key_file" "/etc/fencegate/tls/tls.key") -}}
{{- end -}}
{{- if not .Values.etcd.endpoints -}}
{{- fail "etcd.endpoints: the client URLs of your etcd cluster are required, such as [https://etcd-0.etcd:2379]" -}}
{{- end -}}
{{- $etcd := dict "endpoints" .Values.etcd.endpoints "prefix" .Values.etcd.prefix -}}
{{- if .Values.etcd.username -}}
{{- $_ := set $etcd "username" .Values.etcd.username -}}
{{- $_ := set $etcd "password_env" "ETCD_PASSWORD" -}}
{{- end -}}
{{- if .Values.etcd.tls.secretName -}}
{{- $tls := dict "ca_file" "/etc/fencegate/etcd-tls/ca.crt" -}}
{{- if .Values.etcd.tls.clientCert -}}
{{- $_ := set $tls "cert_file" "/etc/fencegate/etcd-tls/tls.crt" -}}
{{- $_ := set $tls "key_file" "/etc/fencegate/etcd-tls/tls.key" -}}
{{- end -}}
{{- $_ := set $etcd "tls" $tls -}}
{{- end -}}
{{- $s3 := dict "region" .Values.s3.region "path_style" .Values.s3.pathStyle -}}
{{- if .Values.s3.endpoint -}}{{- $_ := set $s3 "endpoint" .Values.s3.endpoint -}}{{- end -}}
{{- if .Values.s3.accessKey -}}
{{- $_ := set $s3 "access_key" .Values.s3.accessKey -}}
{{- $_ := set $s3 "secret_key_env" "S3_SECRET_KEY" -}}
{{- end -}}
{{- $config := dict "http" $http "etcd" $etcd "s3" $s3 -}}
{{- if .Values.s3Api.enabled -}}
{{- $s3api := dict "listen" (printf "0.0.0.0:%d" (int .Values.s3Api.port)) "region" .Values.s3Api.region -}}
{{- if .Values.s3Api.domain -}}{{- $_ := set $s3api "domain" .Values.s3Api.domain -}}{{- end -}}
{{- $_ := set $config "s3_api" $s3api -}}
{{- end -}}
{{- toYaml (mustMergeOverwrite $config (deepCopy .Values.config)) -}}
{{- end -}}
