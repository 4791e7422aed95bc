// Command etcd is a stand-in for the etcd binary that upstream's
// scheduler_perf starts (it execs "etcd" from PATH with the flags below). It
// runs the same etcd server through go.etcd.io/etcd/server/v3/embed, the one
// the test harness embeds, so the benchmarks need nothing beyond Go modules.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	fs := flag.NewFlagSet("etcd", flag.ExitOnError)
	dataDir := fs.String("data-dir", "", "data directory")
	listenClient := fs.String("listen-client-urls", "", "client URL (unix:// or http://)")
	advertiseClient := fs.String("advertise-client-urls", "", "advertised client URL")
	listenPeer := fs.String("listen-peer-urls", "http://127.0.0.1:0", "peer URL")
	logLevel := fs.String("log-level", "warn", "log level")
	quota := fs.Int64("quota-backend-bytes", 0, "backend quota")
	_ = fs.Parse(os.Args[1:])

	cfg := embed.NewConfig()
	cfg.Dir = *dataDir
	cfg.LogLevel = *logLevel
	cfg.QuotaBackendBytes = *quota
	cfg.UnsafeNoFsync = true
	for _, u := range []struct {
		raw  string
		into *[]url.URL
	}{{*listenClient, &cfg.ListenClientUrls}, {*advertiseClient, &cfg.AdvertiseClientUrls}, {*listenPeer, &cfg.ListenPeerUrls}} {
		if u.raw == "" {
			continue
		}
		parsed, err := url.Parse(u.raw)
		if err != nil {
			fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
			os.Exit(2)
		}
		*u.into = []url.URL{*parsed}
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		os.Exit(1)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	select {
	case <-stop:
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
	}
	e.Close()
}
