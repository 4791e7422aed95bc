// Package inflight keeps the keys of work in flight, so that work many
// events ask for at once (an API write, a wake) runs once at a time.
package inflight

import "sync"

// Keys is a set of claimed keys; the zero value is empty and ready.
type Keys struct {
	mu   sync.Mutex
	keys map[string]bool
}

// Claim marks key as in flight; false when it already is.
func (k *Keys) Claim(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys[key] {
		return false
	}
	if k.keys == nil {
		k.keys = map[string]bool{}
	}
	k.keys[key] = true
	return true
}

// Release ends key's claim.
func (k *Keys) Release(key string) {
	k.mu.Lock()
	delete(k.keys, key)
	k.mu.Unlock()
}

// ReleaseMatching ends the claim of every key match accepts.
func (k *Keys) ReleaseMatching(match func(key string) bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key := range k.keys {
		if match(key) {
			delete(k.keys, key)
		}
	}
}

// Go runs f in a goroutine unless a run under the same key is still going.
func (k *Keys) Go(key string, f func()) {
	if !k.Claim(key) {
		return
	}
	go func() {
		defer k.Release(key)
		f()
	}()
}

// Len is how many keys are claimed.
func (k *Keys) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.keys)
}
