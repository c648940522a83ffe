{{- define "tgc.labels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: {{ .Values.partOf }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* image: repository@digest when a digest is set (release values), else repository:tag, the tag defaulting to
    the chart's appVersion. Call with (list $ .image). */}}
{{- define "tgc.image" -}}
{{- $root := index . 0 -}}{{- $img := index . 1 -}}
{{- if $img.digest -}}
{{ $img.repository }}@{{ $img.digest }}
{{- else -}}
{{ $img.repository }}:{{ $img.tag | default $root.Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "tgc.restricted" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 1000
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* The Portal Service's cluster DNS names (the Host headers its mounted Stellar accepts). */}}
{{- define "tgc.portalHosts" -}}
{{- $s := .Values.portal.serviceName -}}
{{- $ns := .Release.Namespace -}}
{{- printf "%s,%s.%s,%s.%s.svc,%s.%s.svc.cluster.local" $s $s $ns $s $ns $s $ns -}}
{{- end }}
