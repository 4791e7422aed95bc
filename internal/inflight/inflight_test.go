package inflight

import (
	"strings"
	"testing"
	"time"
)

func TestClaimOnceUntilReleased(t *testing.T) {
	var k Keys
	if !k.Claim("a") || k.Claim("a") {
		t.Fatal("a key was claimed twice, or not at all")
	}
	if !k.Claim("b") || k.Len() != 2 {
		t.Fatalf("another key: Len %d, want 2", k.Len())
	}
	k.Release("a")
	if !k.Claim("a") {
		t.Fatal("a released key could not be claimed again")
	}
}

func TestReleaseMatching(t *testing.T) {
	var k Keys
	for _, key := range []string{"ns/g", "ns/g@u1", "ns/g@u2", "ns/other"} {
		k.Claim(key)
	}
	k.ReleaseMatching(func(key string) bool { return key == "ns/g" || strings.HasPrefix(key, "ns/g@") })
	if k.Len() != 1 || k.Claim("ns/other") {
		t.Fatalf("after the release %d keys are claimed, want only ns/other", k.Len())
	}
}

func TestGoRunsOnceAtATime(t *testing.T) {
	var k Keys
	release, done := make(chan struct{}), make(chan struct{})
	runs := 0
	k.Go("w", func() {
		runs++
		<-release
		close(done)
	})
	// While the first run goes, a second under the same key is dropped.
	k.Go("w", func() { t.Error("a second run started while the first went") })
	close(release)
	<-done
	deadline := time.Now().Add(5 * time.Second)
	for k.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the key was not released after its run")
		}
		time.Sleep(time.Millisecond)
	}
	ran := make(chan struct{})
	k.Go("w", func() { close(ran) })
	<-ran
	if runs != 1 {
		t.Fatalf("first func ran %d times, want 1", runs)
	}
}
