package ports_test

import (
	"context"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/plugins/internal/plugintest"
	"github.com/phalanx-sched/phalanx/plugins/internal/ports"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
)

// TestOfTakesTheHandlesPorts: the runtime gets the handle's informers,
// client, events and activator, and a rejecter of waiting pods.
func TestOfTakesTheHandlesPorts(t *testing.T) {
	var got ports.Framework
	var h fwk.Handle
	plugintest.New(t, plugintest.Objects{}, plugintest.Plugin{Name: "Parts", Extensions: []string{"PreFilter"},
		New: func(_ context.Context, handle fwk.Handle, _ *runtime.Runtime) (fwk.Plugin, error) {
			h, got = handle, ports.Of(handle)
			return plugintest.Parts{}, nil
		}})
	if got.Informers != h.SharedInformerFactory() || got.Client != h.ClientSet() || got.Events != h.EventRecorder() {
		t.Fatal("Of did not take the handle's informers, client and event recorder")
	}
	if got.Activator != h {
		t.Fatal("Of's activator is not the handle")
	}
	if got.Waiting == nil {
		t.Fatal("Of gave no waiting pods")
	}
	// A pod that is not waiting in Permit is left alone (no panic).
	got.Waiting.Reject("no-such-pod", "Coscheduling", "test")
}
