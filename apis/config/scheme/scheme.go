// Package scheme registers the phalanx plugin args in kube-scheduler's config
// scheme. Import it for its side effect before the scheduler reads its config.
package scheme

import (
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/phalanx-sched/phalanx/apis/config"
	configv1 "github.com/phalanx-sched/phalanx/apis/config/v1"
)

// Scheme is kube-scheduler's own config scheme, which now knows our args.
var Scheme = kubeschedulerscheme.Scheme

func init() {
	utilruntime.Must(config.AddToScheme(Scheme))
	utilruntime.Must(configv1.AddToScheme(Scheme))
}
