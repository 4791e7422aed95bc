package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func parse(t *testing.T, args ...string) *options {
	t.Helper()
	o := defaultOptions()
	fs := pflag.NewFlagSet("phalanx-global", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

// Every problem is refused with its flag named, and problems of different
// flags are all reported at once.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{args: []string{"--scheduler-name="}, want: "--scheduler-name: must not be empty"},
		{args: []string{"--scheduler-name=default-scheduler"}, want: "--scheduler-name: default-scheduler is karmada-scheduler's"},
		{args: []string{"--default-queue="}, want: "--default-queue: must not be empty"},
		{args: []string{"--interval=1ms"}, want: "--interval: 1ms is shorter than 100ms"},
		{args: []string{"--starved-after=-1s"}, want: "--starved-after: -1s is negative"},
		{args: []string{"--move-after=-1m"}, want: "--move-after: -1m0s is negative"},
		{args: []string{"--moves-per-hour=-1"}, want: "--moves-per-hour: -1 is negative"},
		{args: []string{"--kube-api-qps=0"}, want: "--kube-api-qps, --kube-api-burst"},
		{args: []string{"--kube-api-burst=-1"}, want: "--kube-api-qps, --kube-api-burst"},
		{args: []string{"--leader-elect-resource-name="}, want: "--leader-elect-resource-name: must not be empty with --leader-elect"},
		{args: []string{"--leader-elect-resource-namespace="}, want: "--leader-elect-resource-namespace"},
		{args: []string{"--estimator-cert-file=/tls.crt"}, want: "--estimator-cert-file and --estimator-key-file"},
		{args: []string{"--estimator-port=0"}, want: "--estimator-port"},
		{args: []string{"--estimator-service-namespace=Not_A_Name"}, want: "--estimator-service-namespace"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			err := parse(t, tc.args...).validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("validate: %v, want an error saying %q", err, tc.want)
			}
		})
	}
	// Without leader election the Lease's name is not needed.
	if err := parse(t, "--leader-elect=false", "--leader-elect-resource-name=").validate(); err != nil {
		t.Fatalf("--leader-elect=false with no Lease name: %v", err)
	}
	err := parse(t, "--interval=1ms", "--default-queue=").validate()
	if err == nil || !strings.Contains(err.Error(), "--interval") || !strings.Contains(err.Error(), "--default-queue") {
		t.Fatalf("two bad flags: %v, want both named", err)
	}
}

// The defaults are valid and are what the flags' help and the docs say:
// the tier's schedulerName, moves off, the bounded wait on, and
// karmada-scheduler's estimator defaults (docs/multicluster.md).
func TestDefaults(t *testing.T) {
	o := parse(t)
	if err := o.validate(); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"--scheduler-name", o.plane.SchedulerName, "phalanx-global"},
		{"--default-queue", o.plane.DefaultQueue, "default"},
		{"--interval", o.plane.Interval, 5 * time.Second},
		{"--move-after", o.plane.Tier.MoveAfter, time.Duration(0)},
		{"--starved-after", o.plane.Tier.StarvedAfter, 10 * time.Minute},
		{"--moves-per-hour", o.plane.Tier.MovesPerHour, 6},
		{"--leader-elect", o.leaderElect, true},
		{"--leader-elect-resource-namespace", o.leaseNS, "karmada-system"},
		{"--estimator-service-namespace", o.estimators.Namespace, "karmada-system"},
		{"--estimator-service-prefix", o.estimators.Prefix, "karmada-scheduler-estimator"},
		{"--estimator-port", o.estimators.Port, int32(10352)},
		{"--estimator-timeout", o.estimators.Timeout, 3 * time.Second},
	} {
		if tc.got != tc.want {
			t.Errorf("%s defaults to %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	doc, err := os.ReadFile("../../docs/multicluster.md")
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(string(doc)), " ")
	for _, said := range []string{"`--scheduler-estimator-timeout` (3 s)", "`--scheduler-estimator-port` (10352)"} {
		if !strings.Contains(flat, said) {
			t.Errorf("docs/multicluster.md no longer says %s; the estimator defaults above follow it", said)
		}
	}
}

// The built binary refuses a bad flag before it reaches for a cluster:
// it exits non-zero and names the flag on stderr; --help exits 0.
func TestBinaryRefusesBadFlags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "phalanx-global")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{args: []string{"--interval=1ms"}, code: 1, want: "--interval"},
		{args: []string{"--scheduler-name=default-scheduler"}, code: 1, want: "--scheduler-name"},
		{args: []string{"--estimator-cert-file=/etc/tls.crt"}, code: 1, want: "--estimator-key-file"},
		{args: []string{"--no-such-flag"}, code: 2, want: "unknown flag: --no-such-flag"},
		{args: []string{"--help"}, code: 0, want: "--move-after"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := exec.Command(bin, append(tc.args, "--kubeconfig=/nonexistent")...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Fatalf("exit: %v, want code %d (stderr: %s)", err, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("stderr does not name %s: %s", tc.want, stderr.String())
			}
		})
	}
}
