package devices

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
)

func TestClaimRiders(t *testing.T) {
	member := func(uid, node string, claims ...v1.PodResourceClaim) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid)},
			Spec: v1.PodSpec{NodeName: node, ResourceClaims: claims}}
	}
	shared := v1.PodResourceClaim{Name: "net", ResourceClaimName: ptr.To("shared")}
	own := v1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}
	other := v1.PodResourceClaim{Name: "other", ResourceClaimName: ptr.To("other")}
	deleting := member("d", "", shared)
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, tc := range []struct {
		name             string
		members          []*v1.Pod
		reserved, placed []types.UID
		want             int
	}{
		{"nothing reserved", []*v1.Pod{member("r", "", shared), member("p", "", shared)}, nil, nil, 0},
		{"reserved member holds no claim", []*v1.Pod{member("r", ""), member("p", "", shared)}, []types.UID{"r"}, []types.UID{"r"}, 0},
		{"pending member shares the claim", []*v1.Pod{member("r", "", shared), member("p", "", shared)}, []types.UID{"r"}, []types.UID{"r"}, 1},
		{"shared claim and its own template claim", []*v1.Pod{member("r", "", shared), member("p", "", shared, own)}, []types.UID{"r"}, []types.UID{"r"}, 1},
		{"another named claim is not its own", []*v1.Pod{member("r", "", shared), member("p", "", shared, other)}, []types.UID{"r"}, []types.UID{"r"}, 0},
		{"bound, placed and deleting members do not ride", []*v1.Pod{member("r", "", shared), member("b", "n1", shared), member("q", "", shared), deleting},
			[]types.UID{"r"}, []types.UID{"r", "q"}, 0},
		{"a member without claims does not ride", []*v1.Pod{member("r", "", shared), member("p", "")}, []types.UID{"r"}, []types.UID{"r"}, 0},
		{"two riders", []*v1.Pod{member("r", "", shared), member("p", "", shared), member("s", "", shared, own)}, []types.UID{"r"}, []types.UID{"r"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClaimRiders(tc.members, sets.New(tc.reserved...), sets.New(tc.placed...)); got != tc.want {
				t.Fatalf("ClaimRiders = %d, want %d", got, tc.want)
			}
		})
	}
}
