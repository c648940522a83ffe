{{/* Labels shared by every object of the controller chart. */}}
{{- define "tcc.labels" -}}
app.kubernetes.io/name: tau-core-controller
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: {{ .Values.partOf }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "tcc.selectorLabels" -}}
app.kubernetes.io/name: tau-core-controller
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The controller image: a digest wins over a tag; one of them is required. */}}
{{- define "tcc.image" -}}
{{- $img := .Values.image -}}
{{- if $img.digest -}}
{{ $img.repository }}@{{ $img.digest }}
{{- else if $img.tag -}}
{{ $img.repository }}:{{ $img.tag }}
{{- else -}}
{{ fail "tau-core-controller: set image.digest or image.tag (the controller image cannot be resolved without one)" }}
{{- end -}}
{{- end -}}
