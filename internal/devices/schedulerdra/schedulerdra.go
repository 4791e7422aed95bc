// Package schedulerdra is internal/devices' port over the scheduler
// framework's DRA manager: the assume cache and in-flight claims the
// DynamicResources plugin allocates from, and claim status writes that the
// assume cache learns of at once.
package schedulerdra

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/devices"
)

// source is the devices port over the framework's DRA manager: the same
// assume cache and in-flight claims the DynamicResources plugin allocates
// from.
type source struct{ m fwk.SharedDRAManager }

func (s source) Claim(namespace, name string) (*resourceapi.ResourceClaim, error) {
	return s.m.ResourceClaims().Get(namespace, name)
}

func (s source) Classes() structured.DeviceClassLister { return s.m.DeviceClasses() }

func (s source) ClassForResource(name v1.ResourceName) *resourceapi.DeviceClass {
	if r := s.m.DeviceClassResolver(); r != nil {
		return r.GetDeviceClass(name)
	}
	return nil
}

func (s source) Slices() ([]*resourceapi.ResourceSlice, error) {
	return s.m.ResourceSlices().ListWithDeviceTaintRules()
}

// Allocated retries briefly: the tracker refuses a read that races with a
// change of its state.
func (s source) Allocated() (*structured.AllocatedState, error) {
	var err error
	for range 100 {
		var st *structured.AllocatedState
		if st, err = s.m.ResourceClaims().GatherAllocatedState(); err == nil && st != nil {
			return st, nil
		}
	}
	return nil, fmt.Errorf("gathering allocated devices: %v", err)
}

// New is the process's device view, nil when the scheduler has no
// DRA manager.
func New(dra fwk.SharedDRAManager, client kubernetes.Interface) *devices.Devices {
	if dra == nil {
		return nil
	}
	features := dynamicresources.AllocatorFeatures(feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))
	d := devices.New(source{dra}, features)
	if client != nil {
		d.SetWriter(claimWriter{client, dra})
	}
	return d
}

// claimWriter writes claim status with the scheduler's client, and tells
// the DRA manager's assume cache at once, as the DynamicResources plugin does
// after its own writes: a member must not be scheduled on the claim as it
// was before.
type claimWriter struct {
	c   kubernetes.Interface
	dra fwk.SharedDRAManager
}

func (w claimWriter) Unbound(ctx context.Context, namespace, name string, uid types.UID) (bool, error) {
	pod, err := w.c.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	return pod.UID == uid && pod.Spec.NodeName == "", nil
}

func (w claimWriter) GroupUnbound(ctx context.Context, namespace, podGroup string) (bool, error) {
	pods, err := w.c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, p := range pods.Items {
		if sg := p.Spec.SchedulingGroup; sg != nil && ptr.Deref(sg.PodGroupName, "") == podGroup && p.Spec.NodeName != "" {
			return false, nil
		}
	}
	return true, nil
}

func (w claimWriter) UpdateClaimStatus(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	updated, err := w.c.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	return w.dra.ResourceClaims().AssumeClaimAfterAPICall(updated)
}
