// Command kubectl-phalanx is a kubectl plugin: put it on PATH and run
// `kubectl phalanx queues|jobs|why|top`. See internal/cli.
package main

import (
	"os"

	"github.com/phalanx-sched/phalanx/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr))
}
