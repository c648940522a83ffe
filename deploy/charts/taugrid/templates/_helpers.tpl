{{- define "taugrid.labels" -}}
app.kubernetes.io/name: taugrid
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: taugrid
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* true when toleration (index . 0) tolerates taint (index . 1) */}}
{{- define "taugrid.tolerates" -}}
{{- $tol := index . 0 -}}{{- $taint := index . 1 -}}
{{- $op := $tol.operator | default "Equal" -}}
{{- $keyOk := or (not $tol.key) (eq $tol.key $taint.key) -}}
{{- $valueOk := or (eq $op "Exists") (eq ($tol.value | default "") ($taint.value | default "")) -}}
{{- $effectOk := or (not $tol.effect) (eq $tol.effect $taint.effect) -}}
{{- if and $keyOk $valueOk $effectOk -}}true{{- end -}}
{{- end -}}
