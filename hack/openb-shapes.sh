#!/usr/bin/env bash
# Derives the small tables under examples/trace/ from Alibaba's
# cluster-trace-gpu-v2023 (github.com/alibaba/clusterdata, directory
# cluster-trace-gpu-v2023/csv). Usage:
#   hack/openb-shapes.sh openb_node_list_gpu_node.csv openb_pod_list_default.csv examples/trace
# Only aggregate counts leave this script; no row of the trace is copied.
set -euo pipefail
nodes=$1 pods=$2 out=${3:-examples/trace}

# Node shapes: CPU millicores, memory MiB and GPUs, counted.
{
	echo "cpu_milli,memory_mib,gpus,count"
	awk -F, 'NR > 1 { n[$2 "," $3 "," $4]++ } END { for (k in n) print k "," n[k] }' "$nodes" | sort -t, -k4,4nr -k3,3nr
} >"$out/openb-node-shapes.csv"

# Pod shapes of the GPU pods (num_gpu > 0; a shared GPU, gpu_milli < 1000,
# counts as one whole GPU): CPU rounded up to whole cores, memory
# up to whole GiB, counted.
{
	echo "gpus,cpu_milli,memory_mib,count"
	awk -F, '
		NR > 1 && $4 > 0 {
			cpu = int(($2 + 999) / 1000) * 1000; mem = int(($3 + 1023) / 1024) * 1024
			n[$4 "," cpu "," mem]++
		}
		END { for (k in n) print k "," n[k] }' "$pods" | sort -t, -k4,4nr -k1,1n
} >"$out/openb-pod-shapes.csv"

# Run times of the GPU pods (deletion_time - creation_time, seconds), as
# percentiles 0..100 in steps of 5.
{
	echo "percentile,seconds"
	awk -F, 'NR > 1 && $4 > 0 { print $10 - $9 }' "$pods" | sort -n | awk '{ d[NR] = $1 } END {
		for (p = 0; p <= 100; p += 5) { i = int(p / 100 * (NR - 1)) + 1; print p "," d[i] } }'
} >"$out/openb-durations.csv"
