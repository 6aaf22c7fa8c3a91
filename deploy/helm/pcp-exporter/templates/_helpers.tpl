{{/*
Names and labels.
*/}}
{{- define "pcp-exporter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "pcp-exporter.fullname" -}}
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

{{- define "pcp-exporter.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "pcp-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pcp-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "pcp-exporter.labels" -}}
helm.sh/chart: {{ include "pcp-exporter.chart" . }}
{{ include "pcp-exporter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: {{ .Values.mode }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "pcp-exporter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "pcp-exporter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "pcp-exporter.image" -}}
{{- $repo := .Values.image.repository }}
{{- if .Values.image.registry }}
{{- $repo = printf "%s/%s" .Values.image.registry .Values.image.repository }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repo .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{- define "pcp-exporter.configName" -}}
{{- printf "%s-config" (include "pcp-exporter.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "pcp-exporter.hasConfig" -}}
{{- if or .Values.derivedConfig .Values.mappingConfig .Values.pmcdConfig.enabled }}true{{ end }}
{{- end }}

{{/*
pcp-exporter.pidCheck: "true" when the MMV PID check stays on. "auto" keeps it on only when
the writers' PIDs are visible: shareProcessNamespace in the sidecar, hostPID in the DaemonSet.
*/}}
{{- define "pcp-exporter.pidCheck" -}}
{{- $v := toString .Values.mmv.pidCheck }}
{{- if eq $v "auto" }}
{{- if eq .Values.mode "daemonset" }}
{{- if .Values.daemonset.hostPID }}true{{ else }}false{{ end }}
{{- else }}
{{- if .Values.sidecar.shareProcessNamespace }}true{{ else }}false{{ end }}
{{- end }}
{{- else if eq $v "true" }}true
{{- else if eq $v "false" }}false
{{- else }}
{{- fail (printf "mmv.pidCheck must be auto, true or false, not %q" $v) }}
{{- end }}
{{- end }}

{{/*
pcp-exporter.commonArgs: flags shared by serve and backfill (naming, mapping, derived metrics).
*/}}
{{- define "pcp-exporter.commonArgs" -}}
{{- with .Values.naming }}
- --naming={{ . }}
{{- end }}
{{- if .Values.derivedConfig }}
- --derived.config=/etc/pcp-exporter/derived.conf
{{- end }}
{{- if .Values.mappingConfig }}
- --mapping.config=/etc/pcp-exporter/mapping.yaml
{{- end }}
{{- end }}

{{/*
pcp-exporter.secretFile: the path of a Secret's key as mounted ({secret, key}; .what names the
value in errors). A string (a secret pasted as a value) is refused.
*/}}
{{- define "pcp-exporter.secretFile" -}}
{{- $v := .v }}
{{- if not (kindIs "map" $v) }}
{{- fail (printf "%s: secrets are not values: give {secret: NAME, key: KEY} of a Kubernetes Secret" .what) }}
{{- end }}
{{- range $k, $_ := $v }}
{{- if not (has $k (list "secret" "key")) }}
{{- fail (printf "%s: unknown field %q (secret, key)" $.what $k) }}
{{- end }}
{{- end }}
{{- printf "/etc/pcp-exporter-secrets/%s/%s" (required (printf "%s.secret is required" .what) $v.secret) (required (printf "%s.key is required" .what) $v.key) }}
{{- end }}

{{/*
pcp-exporter.pmcdFile: pmcd.yml, the file of --pmcd.config, from pmcdConfig.
*/}}
{{- define "pcp-exporter.pmcdFile" -}}
{{- $auths := dict }}
{{- range $name, $a := .Values.pmcdConfig.auths }}
{{- $auth := dict }}
{{- range $k, $_ := $a }}
{{- if not (has $k (list "tls" "sasl")) }}
{{- fail (printf "pmcdConfig.auths.%s.%s: an auth has tls and sasl" $name $k) }}
{{- end }}
{{- end }}
{{- if hasKey $a "tls" }}
{{- $t := dict }}
{{- range $k, $v := ($a.tls | default dict) }}
{{- $what := printf "pmcdConfig.auths.%s.tls.%s" $name $k }}
{{- if eq $k "caFile" }}{{ $_ := set $t "ca_file" (include "pcp-exporter.secretFile" (dict "v" $v "what" $what)) }}
{{- else if eq $k "certFile" }}{{ $_ := set $t "cert_file" (include "pcp-exporter.secretFile" (dict "v" $v "what" $what)) }}
{{- else if eq $k "keyFile" }}{{ $_ := set $t "key_file" (include "pcp-exporter.secretFile" (dict "v" $v "what" $what)) }}
{{- else if eq $k "serverName" }}{{ $_ := set $t "server_name" $v }}
{{- else if eq $k "insecureSkipVerify" }}{{ $_ := set $t "insecure_skip_verify" $v }}
{{- else }}{{ fail (printf "%s: unknown field (caFile, certFile, keyFile, serverName, insecureSkipVerify)" $what) }}
{{- end }}
{{- end }}
{{- $_ := set $auth "tls" $t }}
{{- end }}
{{- if hasKey $a "sasl" }}
{{- $sa := dict }}
{{- range $k, $v := ($a.sasl | default dict) }}
{{- $what := printf "pmcdConfig.auths.%s.sasl.%s" $name $k }}
{{- if eq $k "passwordFile" }}{{ $_ := set $sa "password_file" (include "pcp-exporter.secretFile" (dict "v" $v "what" $what)) }}
{{- else if eq $k "mechanism" }}{{ $_ := set $sa "mechanism" $v }}
{{- else if eq $k "username" }}{{ $_ := set $sa "username" $v }}
{{- else if eq $k "password" }}{{ fail (printf "%s: secrets are not values: give passwordFile: {secret: NAME, key: KEY} of a Kubernetes Secret" $what) }}
{{- else }}{{ fail (printf "%s: unknown field (mechanism, username, passwordFile)" $what) }}
{{- end }}
{{- end }}
{{- $_ := set $auth "sasl" $sa }}
{{- end }}
{{- $_ := set $auths $name $auth }}
{{- end }}
{{- $file := dict "auths" $auths "modules" (.Values.pmcdConfig.modules | default dict) "probe" (.Values.pmcdConfig.probe | default dict) }}
{{- toYaml $file }}
{{- end }}

{{/*
pcp-exporter.pmcdSecrets: the Secrets pmcdConfig's auths name, sorted, as a JSON list.
*/}}
{{- define "pcp-exporter.pmcdSecrets" -}}
{{- $names := list }}
{{- if .Values.pmcdConfig.enabled }}
{{- range $name, $a := .Values.pmcdConfig.auths }}
{{- range $block := list "tls" "sasl" }}
{{- range $k, $v := (get $a $block | default dict) }}
{{- if and (kindIs "map" $v) (hasKey $v "secret") }}
{{- $names = append $names $v.secret }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- $names | uniq | sortAlpha | toJson }}
{{- end }}

{{/*
pcp-exporter.serveArgs: the args of `pcp-exporter serve` (their --help).
*/}}
{{- define "pcp-exporter.serveArgs" -}}
- serve
- --mmv.dir={{ .Values.mmv.dir }}
{{- if eq (include "pcp-exporter.pidCheck" .) "true" }}
- --mmv.pid-check
{{- else }}
- --no-mmv.pid-check
{{- end }}
- --web.listen-address=:{{ .Values.web.port }}
- --web.telemetry-path={{ .Values.web.telemetryPath }}
- --log.level={{ .Values.log.level }}
- --log.format={{ .Values.log.format }}
{{- if eq .Values.mode "daemonset" }}
{{- range .Values.daemonset.archives.replay }}
- --archive={{ printf "%s/%s" $.Values.daemonset.archives.mountPath . }}
{{- end }}
{{- if .Values.daemonset.pmcd.enabled }}
- --pmcd=unix:{{ .Values.daemonset.pmcd.mountPath | trimSuffix "/" }}/pmcd.socket
{{- range .Values.daemonset.pmcd.metrics }}
- --pmcd.metrics={{ . }}
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.pmcdConfig.enabled }}
- --pmcd.config=/etc/pcp-exporter/pmcd.yml
{{- with .Values.pmcdConfig.auth }}
{{- if not (hasKey $.Values.pmcdConfig.auths .) }}
{{- fail (printf "pmcdConfig.auth %q is not in pmcdConfig.auths" .) }}
{{- end }}
- --pmcd.auth={{ . }}
{{- end }}
{{- end }}
{{- with include "pcp-exporter.commonArgs" . }}
{{ . }}
{{- end }}
{{- with .Values.extraArgs }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
pcp-exporter.exporterBody: the exporter container's fields after name (image, args, ports,
probes, security context, mounts). Used by the sidecar, the DaemonSet.
*/}}
{{- define "pcp-exporter.exporterBody" -}}
image: {{ include "pcp-exporter.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
args:
{{- include "pcp-exporter.serveArgs" . | nindent 2 }}
env:
  - name: PCP_TMP_DIR
    value: {{ .Values.mmv.dir | trimSuffix "/" | trimSuffix "/mmv" }}
{{- with .Values.extraEnv }}
{{- toYaml . | nindent 2 }}
{{- end }}
ports:
  - name: {{ .Values.web.portName }}
    containerPort: {{ .Values.web.port }}
    protocol: TCP
{{- with .Values.livenessProbe }}
livenessProbe:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.readinessProbe }}
readinessProbe:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.resources }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.containerSecurityContext | nindent 2 }}
volumeMounts:
  - name: pcp-mmv
    mountPath: {{ .Values.mmv.dir }}
    readOnly: true
{{- if and (eq .Values.mode "daemonset") .Values.daemonset.archives.enabled }}
  - name: pcp-archives
    mountPath: {{ .Values.daemonset.archives.mountPath }}
    readOnly: true
{{- end }}
{{- if and (eq .Values.mode "daemonset") .Values.daemonset.pmcd.enabled }}
  - name: pcp-pmcd
    mountPath: {{ .Values.daemonset.pmcd.mountPath }}
    readOnly: true
{{- end }}
{{- if include "pcp-exporter.hasConfig" . }}
  - name: pcp-exporter-config
    mountPath: /etc/pcp-exporter
    readOnly: true
{{- end }}
{{- range $i, $s := include "pcp-exporter.pmcdSecrets" . | fromJsonArray }}
  - name: pmcd-secret-{{ $i }}
    mountPath: /etc/pcp-exporter-secrets/{{ $s }}
    readOnly: true
{{- end }}
{{- with .Values.extraVolumeMounts }}
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
pcp-exporter.sidecar: the exporter as a container, for your own pod spec. In an application
chart that lists pcp-exporter as a dependency (its values under the "pcp-exporter" key):

  {{- $pcp := index .Subcharts "pcp-exporter" }}
  containers:
    - name: app
      env: [{name: PCP_TMP_DIR, value: /var/lib/pcp/tmp}]
      volumeMounts: [{name: pcp-mmv, mountPath: /var/lib/pcp/tmp/mmv}]
    {{- include "pcp-exporter.sidecar" $pcp | nindent 4 }}
  volumes:
    {{- include "pcp-exporter.volumes" $pcp | nindent 4 }}

(deploy/helm/test/testdata/parent is a complete, tested example.) The application writes its
MMV files into the shared emptyDir "pcp-mmv"; the exporter mounts it read-only. The PID check
is off unless sidecar.shareProcessNamespace is true (then also set shareProcessNamespace on
the pod).
*/}}
{{- define "pcp-exporter.sidecar" -}}
- name: pcp-exporter
  {{- include "pcp-exporter.exporterBody" . | nindent 2 }}
{{- end }}

{{/*
pcp-exporter.nativeSidecar: the same container as an init container that keeps running
(restartPolicy: Always, Kubernetes >= 1.29), for the initContainers list.
*/}}
{{- define "pcp-exporter.nativeSidecar" -}}
- name: pcp-exporter
  restartPolicy: Always
  {{- include "pcp-exporter.exporterBody" . | nindent 2 }}
{{- end }}

{{/*
pcp-exporter.volumes: the pod volumes the sidecar needs: the shared MMV emptyDir "pcp-mmv"
and, when derivedConfig or mappingConfig is set, the chart's ConfigMap.
*/}}
{{- define "pcp-exporter.volumes" -}}
- name: pcp-mmv
  emptyDir:
    {{- with .Values.mmv.emptyDir.medium }}
    medium: {{ . }}
    {{- end }}
    {{- with .Values.mmv.emptyDir.sizeLimit }}
    sizeLimit: {{ . }}
    {{- end }}
{{- include "pcp-exporter.configVolume" . }}
{{- end }}

{{- define "pcp-exporter.configVolume" -}}
{{- if include "pcp-exporter.hasConfig" . }}
- name: pcp-exporter-config
  configMap:
    name: {{ include "pcp-exporter.configName" . }}
{{- end }}
{{- range $i, $s := include "pcp-exporter.pmcdSecrets" . | fromJsonArray }}
- name: pmcd-secret-{{ $i }}
  secret:
    secretName: {{ $s }}
    defaultMode: 0440
{{- end }}
{{- end }}

{{/*
pcp-exporter.podCommon: pod spec fields shared by every workload.
*/}}
{{- define "pcp-exporter.podCommon" -}}
serviceAccountName: {{ include "pcp-exporter.serviceAccountName" . }}
automountServiceAccountToken: {{ .Values.serviceAccount.automountServiceAccountToken }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "pcp-exporter.podMetadata" -}}
labels:
  {{- include "pcp-exporter.selectorLabels" . | nindent 2 }}
  app.kubernetes.io/component: {{ .Values.mode }}
  {{- with .Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- if or .Values.podAnnotations (include "pcp-exporter.hasConfig" .) }}
annotations:
  {{- if include "pcp-exporter.hasConfig" . }}
  checksum/config: {{ printf "%s\n%s\n%s" .Values.derivedConfig .Values.mappingConfig (include "pcp-exporter.pmcdFile" .) | sha256sum }}
  {{- end }}
  {{- with .Values.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}
{{- end }}

{{- define "pcp-exporter.validate" -}}
{{- if not (has .Values.mode (list "sidecar" "daemonset" "backfill")) }}
{{- fail (printf "mode must be sidecar, daemonset or backfill, not %q" .Values.mode) }}
{{- end }}
{{- end }}

{{/*
pcp-exporter.backfillArgs: `pcp-exporter backfill` flags (their --help), without
the archives.
*/}}
{{- define "pcp-exporter.backfillArgs" -}}
- backfill
- --quiet
- --output={{ required "backfill.output is required (remote-write:URL, tsdb:DIR or openmetrics:FILE)" .Values.backfill.output }}
{{- if .Values.backfill.raw }}
- --raw
{{- else if .Values.backfill.step }}
- --step={{ .Values.backfill.step }}
{{- end }}
{{- with .Values.backfill.start }}
- --start={{ . }}
{{- end }}
{{- with .Values.backfill.finish }}
- --finish={{ . }}
{{- end }}
{{- with include "pcp-exporter.commonArgs" . }}
{{ . }}
{{- end }}
{{- with .Values.backfill.extraArgs }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
pcp-exporter.backfillPod: the pod spec of a backfill Job or CronJob; .args are the container
args, .root the chart context, .shards whether the shard ConfigMap is mounted.
*/}}
{{- define "pcp-exporter.backfillPod" -}}
{{- $ := .root }}
{{- include "pcp-exporter.podCommon" $ }}
restartPolicy: Never
containers:
  - name: pcp-exporter
    image: {{ include "pcp-exporter.image" $ }}
    imagePullPolicy: {{ $.Values.image.pullPolicy }}
    args:
      {{- .args | nindent 6 }}
    {{- if .shards }}
    env:
      - name: SHARD_INDEX
        valueFrom:
          fieldRef:
            fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']
      {{- with $.Values.extraEnv }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    {{- else if $.Values.extraEnv }}
    env:
      {{- toYaml $.Values.extraEnv | nindent 6 }}
    {{- end }}
    {{- with $.Values.backfill.resources }}
    resources:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    securityContext:
      {{- toYaml $.Values.containerSecurityContext | nindent 6 }}
    volumeMounts:
      - name: pcp-archives
        mountPath: {{ $.Values.backfill.archivesMountPath }}
        readOnly: true
      {{- if .shards }}
      - name: pcp-exporter-shards
        mountPath: /etc/pcp-exporter-shards
        readOnly: true
      {{- end }}
      {{- if include "pcp-exporter.hasConfig" $ }}
      - name: pcp-exporter-config
        mountPath: /etc/pcp-exporter
        readOnly: true
      {{- end }}
      {{- with $.Values.extraVolumeMounts }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
volumes:
  - name: pcp-archives
    {{- toYaml $.Values.backfill.archivesVolume | nindent 4 }}
  {{- if .shards }}
  - name: pcp-exporter-shards
    configMap:
      name: {{ include "pcp-exporter.fullname" $ }}-shards
  {{- end }}
  {{- include "pcp-exporter.configVolume" $ | nindent 2 }}
  {{- with $.Values.extraVolumes }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}
