{{/* The replace-mode static pod. Like kubeadm's kube-scheduler manifest: host
network, secure port on the loopback address, scheduler.conf from the host. */}}
{{- define "phalanx.staticPod" -}}
{{- $probe := dict "host" .Values.replace.bindAddress "port" 10259 "scheme" "HTTPS" -}}
apiVersion: v1
kind: Pod
metadata:
  name: kube-scheduler
  namespace: kube-system
  labels:
    component: kube-scheduler
    tier: control-plane
    app.kubernetes.io/name: phalanx
spec:
  hostNetwork: true
  priority: 2000001000
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile:
      type: RuntimeDefault
  containers:
  - name: kube-scheduler
    image: {{ include "phalanx.image" . }}
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    command:
    - /phalanx-scheduler
    - --config={{ .Values.replace.hostConfigDir }}/config.yaml
    # Wins over clientConnection.kubeconfig (which names the same file).
    - --kubeconfig={{ .Values.replace.kubeconfig }}
    - --authentication-kubeconfig={{ .Values.replace.kubeconfig }}
    - --authorization-kubeconfig={{ .Values.replace.kubeconfig }}
    - --bind-address={{ .Values.replace.bindAddress }}
    - --v={{ .Values.scheduler.logLevel }}
    {{- range .Values.scheduler.extraArgs }}
    - {{ . }}
    {{- end }}
    livenessProbe:
      httpGet: {{ merge (dict "path" "/livez") $probe | toJson }}
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
      failureThreshold: 8
    readinessProbe:
      httpGet: {{ merge (dict "path" "/readyz") $probe | toJson }}
      periodSeconds: 10
      timeoutSeconds: 5
      failureThreshold: 3
    startupProbe:
      httpGet: {{ merge (dict "path" "/livez") $probe | toJson }}
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
      failureThreshold: 24
    resources:
      {{- toYaml .Values.replace.resources | nindent 6 }}
    # Root because kubeadm writes scheduler.conf as root:root 0600; no
    # capabilities, read-only root filesystem.
    securityContext:
      allowPrivilegeEscalation: false
      capabilities:
        drop: [ALL]
      readOnlyRootFilesystem: true
      runAsNonRoot: false
      runAsUser: 0
      runAsGroup: 0
      seccompProfile:
        type: RuntimeDefault
    volumeMounts:
    - name: kubeconfig
      mountPath: {{ .Values.replace.kubeconfig }}
      readOnly: true
    - name: phalanx-config
      mountPath: {{ .Values.replace.hostConfigDir }}
      readOnly: true
  volumes:
  - name: kubeconfig
    hostPath:
      path: {{ .Values.replace.kubeconfig }}
      type: File
  - name: phalanx-config
    hostPath:
      path: {{ .Values.replace.hostConfigDir }}
      type: Directory
{{- end -}}
