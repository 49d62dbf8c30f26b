package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"github.com/pandastack/pandastack/internal/cacerts"
	"github.com/pandastack/pandastack/internal/diskreserve"
	"github.com/pandastack/pandastack/internal/network"
	"github.com/pandastack/pandastack/internal/quotas"
	"github.com/pandastack/pandastack/internal/server"
)

// runServer: `pandastack server`, the single-node server.
func runServer(ctx context.Context, s *streams, args []string) int {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(s.err)
	var cfg server.Config
	var templates, level, dnsUpstream, storageReserve, storageSize, extraCA, gitAllow string
	fs.StringVar(&cfg.DataDir, "data-dir", "/var/lib/pandastack", "where state, templates and VMs live")
	fs.StringVar(&cfg.CacheDir, "cache-dir", "", "build cache for kernels and root filesystems (default DATA/cache)")
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "address of the REST API")
	fs.StringVar(&cfg.SandboxDomain, "sandbox-domain", "localhost", "sandbox ports are served at http://PORT-SANDBOXID.DOMAIN on --listen")
	fs.StringVar(&cfg.TLSListen, "tls-listen", "", "address of the TLS listener routing by SNI (e.g. :8443): HTTPS for the API at DOMAIN and sandbox ports at PORT-SANDBOXID.DOMAIN, certificates from the server's CA (GET /v1/ca.pem); off when empty")
	fs.StringVar(&cfg.DBListen, "db-listen", "", "address of the database router (e.g. :5432): PostgreSQL clients of every database, TLS routed by SNI <id>.DB-DOMAIN (or options=endpoint=<id>); off when empty (no databases)")
	fs.StringVar(&cfg.DBDomain, "db-domain", "", "parent of databases' host names, under --sandbox-domain (default db.DOMAIN)")
	fs.StringVar(&cfg.DBBackupSchedule, "db-backup-schedule", "@daily", "when each database's base backup is due (cron: 5 fields, @daily, @every 6h; off: only on demand); WAL is archived continuously")
	fs.BoolVar(&cfg.DBBackupNoVerify, "db-backup-no-verify", false, "do not verify each base backup by restoring it in a throwaway machine")
	fs.DurationVar(&cfg.DBBackupRetention, "db-backup-retention", server.DefaultDBBackupRetention, "how long database backups and archived WAL are kept")
	fs.IntVar(&cfg.MaxConnsPerClient, "max-conns-per-client", server.DefaultMaxConnsPerClient, "connections one client address may hold at once on each listener (-1: no cap)")
	fs.IntVar(&cfg.DBMaxConnsPerClient, "db-max-conns-per-client", server.DefaultDBMaxConnsPerClient, "with --db-listen: connections one client address may hold at once on the database router (-1: no cap)")
	fs.StringVar(&cfg.Accel, "accel", "auto", "auto (probe by booting a guest), kvm or tcg")
	fs.StringVar(&templates, "templates", "base", "templates to build (or find cached) at start, comma separated")
	fs.IntVar(&cfg.PoolSize, "pool", 2, "QEMU processes per template started ahead of creates (0: none)")
	fs.BoolVar(&cfg.KillOnExit, "kill-on-exit", false, "end every sandbox when the server stops (default: they keep running and are re-attached at next start)")
	fs.IntVar(&cfg.MaxLivePerTeam, "max-live-per-team", quotas.Defaults.MaxSandboxes, "default cap on each team's live sandboxes, forks and service machines included (0: none; per team: pandastack quotas set)")
	fs.IntVar(&cfg.MaxServicePerTeam, "max-service-per-team", quotas.Defaults.MaxServiceMachines, "default cap on each team's live service machines (lifetime service; 0: none; per team: pandastack quotas set)")
	fs.IntVar(&cfg.MaxBuildsPerTeam, "max-builds-per-team", quotas.Defaults.MaxConcurrentBuilds, "default cap on the custom template builds each team (any key but an admin's) runs at once (per team: pandastack quotas set)")
	fs.BoolVar(&cfg.NoNetwork, "no-network", false, "give sandboxes no network (default: a namespace each, when running as root)")
	fs.StringVar(&cfg.NetworkPool, "network-pool", "", "IPv4 range of the host-side transit addresses (default 10.223.0.0/16)")
	fs.StringVar(&dnsUpstream, "dns-upstream", "", "DNS servers (host:port, comma separated) sandboxes' queries go to (default: the host's /etc/resolv.conf; env PANDASTACK_DNS_UPSTREAM)")
	fs.StringVar(&cfg.EgressDefaultDeny, "egress-default-deny", network.DefaultEgressDeny, "what sandboxes may not reach unless their policy's allow_cidrs names it: IPv4 CIDRs and link-local, private, shared, host (the host's own networks), comma separated; none for nothing")
	fs.StringVar(&cfg.ObjectStore, "object-store", "", "object storage for snapshot exports: file:///PATH or s3://BUCKET/PREFIX?endpoint=URL&region=R (credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or KEY:SECRET@); s3 exports every new snapshot (default file://DATA/objects; env PANDASTACK_OBJECT_STORE)")
	fs.StringVar(&storageReserve, "storage-reserve", "auto", "free space kept on the VM filesystem (DATA/cow) for running sandboxes to write into; below it creates, forks, snapshots, hibernations, volumes and template builds answer 507: a size (2GiB), a percentage (10%) or 0 for none (auto: 5% of the filesystem or 2 GiB, whichever is larger, at most 25%)")
	fs.StringVar(&storageSize, "storage-size", "", "size of the XFS image made for VM files (DATA/cow) when the data dir cannot reflink, such as 64GiB; only when the image is first made (default: the free space under the data dir, sparse)")
	fs.StringVar(&extraCA, "extra-ca-certs", "", "PEM files (comma separated) of CA certificates every sandbox and app build trusts besides its own, e.g. an HTTPS proxy's (env PANDASTACK_EXTRA_CA_CERTS)")
	fs.StringVar(&gitAllow, "git-allow-cidrs", "", "address ranges (CIDRs, comma separated) apps may be cloned from although they are the server's own networks — loopback, link-local, private, shared or the host's addresses, which are refused otherwise — e.g. a git server on the LAN")
	fs.DurationVar(&cfg.ParkFor, "park-for", 0, "how long a hibernated sandbox's VMM process is kept stopped, so a wake within it continues the process instead of restoring from disk (0: 10m; negative: never kept)")
	fs.DurationVar(&cfg.AppRollbackWindow, "app-rollback-window", 0, "how long an app's replaced release runs on, past its drain, so a rollback needs no wake; then it hibernates (0: 5m; negative: hibernate after the drain)")
	fs.StringVar(&cfg.AgentPath, "guest-agent", "", "path of pandastack-guest (default: beside this binary)")
	fs.StringVar(&level, "log-level", "info", "debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintf(s.err, "usage: pandastack server [flags]\n\nRuns the API server, host agent and template builder in one process.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		fmt.Fprintf(s.err, "error: --log-level: %v\n", err)
		return 2
	}
	cfg.Logger = slog.New(slog.NewTextHandler(s.err, &slog.HandlerOptions{Level: lv}))
	for _, t := range strings.Split(templates, ",") {
		if t = strings.TrimSpace(t); t != "" {
			cfg.Templates = append(cfg.Templates, t)
		}
	}
	var err error
	if cfg.StorageReserve, err = diskreserve.ParseSpec(storageReserve); err != nil {
		fmt.Fprintf(s.err, "error: --storage-reserve: %v\n", err)
		return 2
	}
	if storageSize != "" {
		if cfg.StorageSize, err = diskreserve.ParseBytes(storageSize); err != nil {
			fmt.Fprintf(s.err, "error: --storage-size: %v\n", err)
			return 2
		}
	}
	if cfg.ObjectStore == "" {
		cfg.ObjectStore = os.Getenv("PANDASTACK_OBJECT_STORE")
	}
	if extraCA == "" {
		extraCA = os.Getenv("PANDASTACK_EXTRA_CA_CERTS")
	}
	cfg.ExtraCACerts = cacerts.ParseList(extraCA)
	for _, c := range strings.Split(gitAllow, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err != nil {
			fmt.Fprintf(s.err, "error: --git-allow-cidrs: %q is not a CIDR such as 10.1.2.0/24\n", c)
			return 2
		}
		cfg.GitAllow = append(cfg.GitAllow, p.Masked())
	}
	if dnsUpstream == "" {
		dnsUpstream = os.Getenv("PANDASTACK_DNS_UPSTREAM")
	}
	for _, u := range strings.Split(dnsUpstream, ",") {
		if u = strings.TrimSpace(u); u != "" {
			cfg.DNSUpstreams = append(cfg.DNSUpstreams, u)
		}
	}
	if err := server.Run(ctx, cfg); err != nil {
		fmt.Fprintf(s.err, "error: %v\n", err)
		return 1
	}
	return 0
}
