{{/* Object name prefix: "phalanx" unless overridden. */}}
{{- define "phalanx.fullname" -}}
{{- default "phalanx" .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "phalanx.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "phalanx.selector" -}}
app.kubernetes.io/name: phalanx
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "phalanx.labels" -}}
{{ include "phalanx.selector" . }}
app.kubernetes.io/part-of: phalanx
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- define "phalanx.replace" -}}
{{- if not (has .Values.mode (list "second-scheduler" "replace")) -}}
{{- fail (printf "mode: %q is not one of second-scheduler, replace" .Values.mode) -}}
{{- end -}}
{{- eq .Values.mode "replace" | ternary "true" "" -}}
{{- end -}}

{{/*
The KubeSchedulerConfiguration: manifests/scheduler-config.yaml (the canonical
profile, files/scheduler-config.yaml) with the deployment mode's leader election
and the values' plugin args and top-level settings merged in. In replace mode a
default-scheduler profile (stock plugins) is added; kube-scheduler requires
every profile to share the queueSort plugin and its args.
*/}}
{{- define "phalanx.schedulerConfig" -}}
{{- $cfg := .Files.Get "files/scheduler-config.yaml" | fromYaml -}}
{{- if hasKey $cfg "Error" -}}{{- fail (printf "files/scheduler-config.yaml: %s" $cfg.Error) -}}{{- end -}}
{{- if hasKey .Values.scheduler.config "profiles" -}}
{{- fail "scheduler.config must not set profiles; use scheduler.pluginArgs" -}}
{{- end -}}
{{- $cfg = mergeOverwrite $cfg (deepCopy .Values.scheduler.config) -}}
{{- $profile := index $cfg.profiles 0 -}}
{{- range $entry := $profile.pluginConfig -}}
{{- if hasKey $.Values.scheduler.pluginArgs $entry.name -}}
{{- $_ := set $entry "args" (mergeOverwrite (deepCopy (default dict $entry.args)) (deepCopy (index $.Values.scheduler.pluginArgs $entry.name))) -}}
{{- end -}}
{{- end -}}
{{- range $name, $_ := .Values.scheduler.pluginArgs -}}
{{- $found := false -}}
{{- range $profile.pluginConfig -}}{{- if eq .name $name -}}{{- $found = true -}}{{- end -}}{{- end -}}
{{- if not $found -}}
{{- fail (printf "scheduler.pluginArgs.%s: no such plugin in the phalanx-scheduler profile" $name) -}}
{{- end -}}
{{- end -}}
{{- if include "phalanx.replace" . -}}
{{- $_ := set $cfg "clientConnection" (mergeOverwrite (default dict $cfg.clientConnection) (dict "kubeconfig" .Values.replace.kubeconfig)) -}}
{{- $_ := set $cfg "leaderElection" (dict "leaderElect" true "resourceLock" "leases" "resourceNamespace" "kube-system" "resourceName" "kube-scheduler") -}}
{{- $qs := deepCopy (default dict $profile.plugins.queueSort) -}}
{{- $_ := set $qs "enabled" (list (dict "name" "Coscheduling")) -}}
{{- $_ := set $profile.plugins "queueSort" $qs -}}
{{- $default := dict "schedulerName" "default-scheduler" "plugins" (dict "queueSort" (deepCopy $qs)) -}}
{{- range $profile.pluginConfig -}}
{{- if eq .name "Coscheduling" -}}
{{- $_ := set $default "pluginConfig" (list (dict "name" "Coscheduling" "args" (deepCopy .args))) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $cfg "profiles" (append $cfg.profiles $default) -}}
{{- else -}}
{{- $le := dict "leaderElect" .Values.scheduler.leaderElection.enabled -}}
{{- if .Values.scheduler.leaderElection.enabled -}}
{{- $_ := set $le "resourceNamespace" .Release.Namespace -}}
{{- $_ := set $le "resourceName" .Values.scheduler.leaderElection.leaseName -}}
{{- end -}}
{{- $_ := set $cfg "leaderElection" $le -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* The CapacityQueue default queue, which the controller must agree on. */}}
{{- define "phalanx.defaultQueue" -}}
{{- $q := "default" -}}
{{- range (index (include "phalanx.schedulerConfig" . | fromYaml).profiles 0).pluginConfig -}}
{{- if and (eq .name "CapacityQueue") .args -}}{{- $q = default $q .args.defaultQueue -}}{{- end -}}
{{- end -}}
{{- $q -}}
{{- end -}}

{{/* CapacityQueue's usageHalfLifeSeconds (decayed fair share), which the controller must agree on. */}}
{{- define "phalanx.usageHalfLifeSeconds" -}}
{{- $s := 0 -}}
{{- range (index (include "phalanx.schedulerConfig" . | fromYaml).profiles 0).pluginConfig -}}
{{- if and (eq .name "CapacityQueue") .args -}}{{- $s = default $s .args.usageHalfLifeSeconds -}}{{- end -}}
{{- end -}}
{{- int64 $s -}}
{{- end -}}

{{- define "phalanx.podSecurityContext" -}}
runAsNonRoot: true
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "phalanx.containerSecurityContext" -}}
allowPrivilegeEscalation: false
capabilities:
  drop: [ALL]
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}
