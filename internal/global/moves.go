package global

import (
	"fmt"
	"sort"
	"time"
)

// moves: jobs dispatched more than MoveAfter ago to a ready member that
// have not started in it (nothing of them runs there: the aggregated status shows no
// started quorum) go whole to another member where they start now, oldest
// first, at most MovesPerHour over the last hour.
func (p *pass) moves() []Verdict {
	if p.cfg.MoveAfter <= 0 {
		return nil
	}
	now := p.clock.Now()
	kept := p.Tier.moves[:0]
	for _, at := range p.Tier.moves {
		if now.Sub(at) < time.Hour {
			kept = append(kept, at)
		}
	}
	p.Tier.moves = kept
	// A member that is not ready reports nothing the tier can trust: its
	// jobs may run there unseen. They move only by Karmada's failover.
	reachable := map[string]bool{}
	for _, m := range p.world.Members {
		reachable[m.Name] = m.Ready
	}
	var stuck []*Job
	for _, j := range p.world.Jobs {
		if j.Member != "" && reachable[j.Member] && !j.Started && !j.Done && !j.Since.IsZero() && now.Sub(j.Since) >= p.cfg.MoveAfter {
			stuck = append(stuck, j)
		}
	}
	sort.Slice(stuck, func(a, b int) bool {
		if !stuck[a].Since.Equal(stuck[b].Since) {
			return stuck[a].Since.Before(stuck[b].Since)
		}
		return stuck[a].Key < stuck[b].Key
	})
	var out []Verdict
	for _, j := range stuck {
		if len(p.Tier.moves) >= p.cfg.MovesPerHour {
			break
		}
		var others []*Member
		for _, m := range p.holders(j) {
			if m.Name != j.Member && p.drained[m.Name] == nil {
				others = append(others, m)
			}
		}
		answers := p.ask(j, others)
		best := choose(others, answers)
		if best == nil {
			continue
		}
		p.Tier.moves = append(p.Tier.moves, now)
		p.charge(best.Name, j)
		p.assumed[best.Name] = append(p.assumed[best.Name], j)
		out = append(out, Verdict{Job: j, Member: best.Name, Reason: Dispatched, Move: true,
			Message: fmt.Sprintf("moved whole from member %s, where it had not started after %s, to member %s, where it starts now (%s)",
				j.Member, now.Sub(j.Since).Round(time.Second), best.Name, describe(others, answers))})
	}
	return out
}
