package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/omnibusmq/omnibus/amqpserver"
	"github.com/omnibusmq/omnibus/cmd/internal/cli"
	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
	"github.com/omnibusmq/omnibus/cmd/omnibus/metrics"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/membudget"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/httpgw"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// serve runs the broker until SIGINT or SIGTERM.
func serve(args []string) error {
	fs := flag.NewFlagSet("omnibus", flag.ContinueOnError)
	var o app.Options
	fs.StringVar(&o.ConfigPath, "config", "", "Microsoft emulator Config.json to create entities from")
	fs.StringVar(&o.DataDir, "data", app.DefaultDataDir, "data directory (Pebble store)")
	fs.BoolVar(&o.Memory, "memory", false, "keep everything in memory; nothing is written to disk")
	fs.StringVar(&o.AMQPAddr, "amqp-addr", app.DefaultAMQPAddr, "AMQP 1.0 listen address (\"-\" disables)")
	fs.StringVar(&o.AMQPSAddr, "amqps-addr", app.DefaultAMQPSAddr, "AMQP 1.0 over TLS listen address, with the HTTPS certificate (\"-\" disables)")
	fs.StringVar(&o.HTTPAddr, "http-addr", app.DefaultHTTPAddr, "HTTP listen address for REST, management and /health (\"-\" disables)")
	fs.StringVar(&o.HTTPSAddr, "https-addr", app.DefaultHTTPSAddr, "HTTPS listen address (\"-\" disables)")
	addTLSFlags(fs, &o)
	fs.StringVar(&o.KeyName, "key-name", app.DefaultKeyName, "shared access key name (Manage rights)")
	fs.StringVar(&o.Key, "key", app.DefaultKey, "shared access key")
	fs.DurationVar(&o.TokenClockSkew, "token-clock-skew", sas.DefaultClockSkew,
		"how long after its expiry a SAS token is still accepted, and a link attached with it kept (0: none)")
	// AMQP connection limits (amqpserver.Config).
	fs.IntVar(&o.MaxConnections, "max-connections", amqpserver.DefaultMaxConnections, "maximum concurrent AMQP connections, checked at accept, and each namespace's unless its Limits say otherwise (0: unlimited)")
	fs.IntVar(&o.MaxPendingConnections, "max-pending-connections", amqpserver.DefaultMaxPendingConnections, "maximum sockets in the AMQP handshake at once (0: unlimited)")
	fs.DurationVar(&o.AuthTimeout, "amqp-auth-timeout", amqpserver.DefaultAuthTimeout, "time an AMQP connection has, from accept, to log in or put a valid token on $cbs")
	// What one open AMQP connection may make the server hold (README.md, Limits).
	fs.IntVar(&o.AMQPLimits.MaxSessionsPerConnection, "amqp-max-sessions", amqpserver.DefaultMaxSessionsPerConnection, "sessions per AMQP connection (channel-max + 1)")
	fs.IntVar(&o.AMQPLimits.MaxLinksPerSession, "amqp-max-links-per-session", amqpserver.DefaultMaxLinksPerSession, "links per AMQP session (handle-max + 1)")
	fs.IntVar(&o.AMQPLimits.MaxLinksPerConnection, "amqp-max-links", amqpserver.DefaultMaxLinksPerConnection, "links per AMQP connection, across its sessions")
	fs.IntVar(&o.AMQPLimits.MaxUnsettledPerLink, "amqp-max-unsettled", amqpserver.DefaultMaxUnsettledPerLink, "peek-locked deliveries one receiving link may hold unsettled")
	fs.IntVar(&o.AMQPLimits.MaxQueuedReplies, "amqp-max-queued-replies", amqpserver.DefaultMaxQueuedReplies, "$cbs/$management replies waiting on one reply link")
	fs.IntVar(&o.AMQPLimits.MaxDeliveryBuffer, "amqp-delivery-buffer", amqpserver.DefaultMaxDeliveryBuffer, "bytes of messages an AMQP connection holds for its clients, taken and not yet written")
	fs.IntVar(&o.AMQPLimits.MaxIncomingBuffer, "amqp-incoming-buffer", amqpserver.DefaultMaxIncomingBuffer, "bytes of incoming messages an AMQP connection holds, read and not yet stored and answered")
	fs.IntVar(&o.AMQPLimits.MaxTransactionsPerConnection, "amqp-max-transactions", amqpserver.DefaultMaxTransactions, "transactions an AMQP connection holds declared and not discharged")
	fs.IntVar(&o.AMQPLimits.MaxTransactionBytes, "amqp-transaction-buffer", amqpserver.DefaultMaxTransactionBytes, "bytes of messages an AMQP connection's open transactions hold until they commit")
	fs.DurationVar(&o.TxnTimeout, "txn-timeout", core.DefaultTxnTimeout, "a transaction still open this long after its first operation is rolled back")
	// Store (pebblestore.Options).
	diskReserve := cli.ByteSize(-1) // unset: the store's default
	fs.Var(&diskReserve, "disk-reserve", "free space kept on the data directory's disk: below it sends are refused, settlements go on "+
		"(auto: "+cli.FormatSize(pebblestore.DefaultDiskReserve)+", at most an eighth of the disk; 0: none)")
	fs.BoolVar(&o.Repair, "repair", false, "start on a data directory whose write-ahead log is damaged, accepting the loss of the records after the damage")
	faultOnSignal := fs.Bool("fail-fsync-on-sigusr1", false, "for tests of a failing disk (omnibus-tools soak --disk-faults): SIGUSR1 makes every later fsync of the write-ahead log fail")
	// HTTP gateway limits and protected mode.
	fs.DurationVar(&o.HTTPReadTimeout, "http-read-timeout", httpgw.DefaultReadTimeout, "time to read a whole HTTP request, body included")
	fs.DurationVar(&o.HTTPWriteTimeout, "http-write-timeout", httpgw.DefaultWriteTimeout, "time to write an HTTP response (a long poll gets its wait added)")
	fs.DurationVar(&o.HTTPIdleTimeout, "http-idle-timeout", httpgw.DefaultIdleTimeout, "an HTTP keep-alive connection idle this long is closed")
	fs.IntVar(&o.HTTPMaxConnections, "http-max-connections", httpgw.DefaultMaxConnections, "maximum HTTP and HTTPS connections together (0: unlimited)")
	fs.BoolVar(&o.AllowRemote, "allow-remote", false, "serve other machines even with the publicly known emulator key (protected mode off)")
	listFlag(fs, &o.AllowedHosts, "allowed-hosts", "comma-separated host names HTTP, HTTPS and WebSocket requests may use besides localhost, "+
		"IP addresses, this machine's names and --tls-hosts (*.example.com: every name under it; *: any); others get 421. "+
		"Checked with the publicly known key, or with a key of your own once given (DNS rebinding protection)")
	listFlag(fs, &o.AllowedOrigins, "allowed-origins", "comma-separated origins of web pages that may open AMQP over WebSockets, "+
		"e.g. http://localhost:8080 (*: any). With the publicly known key none may unless listed; with a key of your own any may unless given")
	// Namespaces (core/namespace).
	fs.IntVar(&o.MaxNamespaces, "max-namespaces", namespace.DefaultMaxNamespaces, "namespaces, the default one included, that Config.json and PUT /$namespaces/{name} may create")
	fs.IntVar(&o.Limits.MaxEntities, "max-entities", core.DefaultMaxEntities, "queues and topics one namespace may hold, unless its Limits say otherwise (0: no cap)")
	fs.BoolVar(&o.TestClock, "allow-test-clock", false, "let a Manage caller move a namespace's clock forward and deliver scheduled messages now (POST /$namespaces/{name}/clock, /deliver); for tests only")
	// Debugging the core.
	fs.BoolVar(&o.CheckConsistency, "check-consistency", false, "after recovery, compare memory with the store and log every difference (reads the whole store; see omnibus check)")
	// The core's memory bounds (core.Limits).
	fs.IntVar(&o.Limits.DedupHistoryMax, "dedup-history-max", core.DefaultDedupHistoryMax,
		"most message ids one entity's duplicate detection remembers; past it the oldest are forgotten early")
	maxMemory := cli.ByteSize(-1) // unset: a share of the machine's memory
	fs.Var(&maxMemory, "max-memory", "memory clients may make omnibus hold at once: AMQP buffers, open transactions, REST and console answers; "+
		"past it new work is refused with server-busy / 503 (auto: half of the machine's or the cgroup's memory; 0: none)")
	cacheMB := fs.Int64("body-cache-mb", core.DefaultBodyCacheBytes>>20,
		"MiB of message bodies all queues together keep in memory for hand-over to receivers")
	fs.IntVar(&o.MaxOutbox, "max-outbox", core.DefaultMaxOutbox, "with --groups: transfers a data group's outbox holds for other groups "+
		"(forwarding across groups) before sends that would add to it are refused as server busy")
	fs.IntVar(&o.PartitionCount, "partitions", core.DefaultPartitionCount, fmt.Sprintf("partitions of a queue or topic created with EnablePartitioning "+
		"(Service Bus Standard: 16; 1 to %d); an entity keeps the count it was created with", core.MaxPartitionCount))
	var maxEntity cli.ByteSize
	fs.Var(&maxEntity, "max-entity-size", "most one queue or topic stores, whatever its MaxSizeInMegabytes (which Service Bus lets be no less than 1 GiB), e.g. 64MiB, unless its namespace's Limits say otherwise; 0: no cap")
	cf := addClusterFlags(fs) // a replicated cluster node (cluster.go)
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	debugAddr := fs.String("debug-addr", "", "listen address for Go runtime profiles at /debug/pprof/ (empty: off)")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", app.DefaultMetricsAddr, "listen address for Prometheus metrics at /metrics, without a token (\"-\" disables metrics and the broker's statistics)")
	fs.IntVar(&o.MetricsMaxEntities, "metrics-max-entities", metrics.DefaultMaxEntities, "entities with metrics of their own; the rest are summed as entity=\"other\"")
	if err := cli.ParseWithEnv(fs, args); err != nil {
		return err
	}
	// On the command line 0 means no cap; in app.Options it means the default.
	for _, n := range []*int{&o.MaxConnections, &o.MaxPendingConnections, &o.HTTPMaxConnections} {
		if *n == 0 {
			*n = -1
		}
	}
	switch {
	case o.TokenClockSkew < 0:
		return cli.Exit(2, fmt.Errorf("--token-clock-skew must not be negative"))
	case o.TokenClockSkew == 0:
		o.TokenClockSkew = -1 // none; in app.Options 0 means the default
	}
	switch o.MaxMemory = int64(maxMemory); o.MaxMemory {
	case -1:
		o.MaxMemory = 0 // the default
	case 0:
		o.MaxMemory = -1 // none
	}
	switch o.DiskReserve = int64(diskReserve); o.DiskReserve {
	case -1:
		o.DiskReserve = 0 // the default
	case 0:
		o.DiskReserve = -1 // none
	}
	if o.PartitionCount < 1 || o.PartitionCount > core.MaxPartitionCount {
		return cli.Exit(2, fmt.Errorf("--partitions must be 1 to %d", core.MaxPartitionCount))
	}
	if o.Limits.MaxEntities < 0 {
		return cli.Exit(2, fmt.Errorf("--max-entities must not be negative"))
	}
	if *cacheMB < 1 || o.Limits.DedupHistoryMax < 1 {
		return cli.Exit(2, fmt.Errorf("--body-cache-mb and --dedup-history-max must be at least 1"))
	}
	o.Limits.BodyCacheBytes = *cacheMB << 20
	o.Limits.MaxEntityBytes = max(int64(maxEntity), 0) // "auto": no cap
	if o.MetricsMaxEntities < 0 {
		return cli.Exit(2, fmt.Errorf("--metrics-max-entities must not be negative"))
	}
	log, err := newLogger(*level)
	if err != nil {
		return err
	}
	defer log.Sync()
	o.Logger = log
	if o.ConfigPath == "" {
		if o.ConfigPath, err = emulatorConfig(emulatorConfigPath); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}
	logEmulatorEnvironment(log, os.Environ(), fs)
	if *faultOnSignal {
		o.FailLogSyncs = failFsyncOnSignal(log)
	}
	start, err := cf.starter(o)
	if err != nil {
		return err
	}

	defer cli.StartGCTuning()()
	procs := cli.LimitProcs()

	// Listen for signals before anything starts, so a signal during
	// start-up is a clean shutdown too.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	log.Info("omnibus is starting", zap.String("data", storeName(o)), zap.String("maxMemory", describeMaxMemory(o.MaxMemory)), zap.String("gomaxprocs", procs))
	began := time.Now()
	a, err := startOrSignal(start, sig, log)
	if err != nil {
		return err
	}
	fields := []zap.Field{zap.Duration("startup", time.Since(began))}
	if o.Memory {
		fields = append(fields, zap.String("store", "memory (nothing persists)"))
	} else {
		fields = append(fields, zap.String("data", o.DataDir))
	}
	if addr := a.AMQPAddr(); addr != nil {
		fields = append(fields, zap.Stringer("amqp", addr))
	}
	if addr := a.AMQPSAddr(); addr != nil {
		fields = append(fields, zap.Stringer("amqps", addr))
	}
	if addr := a.HTTPAddr(); addr != nil {
		fields = append(fields, zap.Stringer("http", addr))
	}
	if addr := a.HTTPSAddr(); addr != nil {
		fields = append(fields, zap.Stringer("https", addr))
	}
	if ma, ok := a.(interface{ MetricsAddr() net.Addr }); ok && ma.MetricsAddr() != nil {
		fields = append(fields, zap.String("metrics", "http://"+ma.MetricsAddr().String()+"/metrics"))
	}
	if *debugAddr != "" {
		d, err := startDebug(*debugAddr, log)
		if err != nil {
			_ = a.Shutdown(context.Background())
			return fmt.Errorf("debug listener: %w", err)
		}
		defer d.Shutdown(context.Background())
		fields = append(fields, zap.Stringer("debug", d.Addr()))
	}
	if w, ok := a.(interface{ ConfigApplied() <-chan struct{} }); ok {
		// A cluster with data groups serves the config file's entities
		// once its meta leader applied the file: ready only then.
		select {
		case <-w.ConfigApplied():
		default:
			log.Info("waiting for the cluster's meta leader to apply the config file before saying ready (it needs a majority of the nodes up)")
			select {
			case <-w.ConfigApplied():
			case got := <-sig:
				log.Info("shutting down", zap.Stringer("signal", got))
				return shutdown(a, sig, log)
			}
		}
	}
	log.Info("omnibus is ready", fields...)
	log.Info(emulatorReadyLine) // what tools that start Microsoft's emulator wait for
	if a.AMQPAddr() != nil {
		log.Info("connect with", zap.String("connectionString", a.ConnectionString()))
	}
	if cs := a.TLSConnectionString(); cs != "" {
		fields := []zap.Field{zap.String("connectionString", cs)}
		if ca := caPath(a); ca != "" {
			fields = append(fields, zap.String("trust", ca))
		}
		log.Info("connect over TLS with", fields...)
	}

	got := <-sig
	log.Info("shutting down", zap.Stringer("signal", got))
	return shutdown(a, sig, log)
}

// How long a shutdown takes at most. The fronts get drainTimeout to
// answer what they owe (a send the disk holds is answered once the store
// gives up on it, see app.App.Shutdown); past shutdownLimit the process
// exits whatever still waits, so that SIGTERM stops it within 5 s even on
// a disk that answers nothing, with a second to spare for a machine too
// busy to run the timer on time. Everything acknowledged is on disk by
// then.
const (
	drainTimeout  = 2500 * time.Millisecond
	shutdownLimit = 4 * time.Second
)

// shutdown stops the app within shutdownLimit, or at once on a second
// signal. It returns an error (exit status 1) when the shutdown failed,
// which a disk fault the store could not get past makes it do, or did not
// finish in time.
func shutdown(a server, sig <-chan os.Signal, log *zap.Logger) error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		done <- a.Shutdown(ctx)
	}()
	limit := time.NewTimer(shutdownLimit)
	defer limit.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("shutdown: %w", err)
		}
		log.Info("stopped cleanly")
		return nil
	case <-limit.C:
		return fmt.Errorf("shutdown did not finish within %v (the disk may not be answering): exiting anyway; "+
			"what was acknowledged is on disk", shutdownLimit)
	case got := <-sig:
		return fmt.Errorf("stopped by a second %v during the shutdown: exiting at once; what was acknowledged is on disk", got)
	}
}

// storeName says where the store lives, for the log.
func storeName(o app.Options) string {
	if o.Memory {
		return "memory (nothing persists)"
	}
	return o.DataDir
}

// startOrSignal starts the app, unless SIGINT or SIGTERM comes first: then
// it gives the start a few seconds to finish (and shuts it down cleanly),
// else returns without it, so that a start stuck on its disk never keeps
// the process from exiting.
func startOrSignal(start func() (server, error), sig <-chan os.Signal, log *zap.Logger) (server, error) {
	type result struct {
		a   server
		err error
	}
	done := make(chan result, 1)
	go func() {
		a, err := start()
		done <- result{a, err}
	}()
	select {
	case r := <-done:
		return r.a, r.err
	case got := <-sig:
		log.Info("signal during start-up: stopping", zap.Stringer("signal", got))
		select {
		case r := <-done:
			if r.err != nil {
				return nil, r.err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := r.a.Shutdown(ctx); err != nil {
				return nil, fmt.Errorf("shutdown during start-up: %w", err)
			}
			return nil, cli.Exit(0, fmt.Errorf("stopped by %v during start-up", got))
		case <-time.After(5 * time.Second):
			return nil, fmt.Errorf("stopped by %v during start-up: the start did not finish within 5s", got)
		}
	}
}

// listFlag defines a flag taking a comma-separated list into *list.
func listFlag(fs *flag.FlagSet, list *[]string, name, usage string) {
	fs.Func(name, usage, func(v string) error {
		*list = (*list)[:0]
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				*list = append(*list, item)
			}
		}
		return nil
	})
}

// describeMaxMemory says what the memory budget is, for the start-up
// line.
func describeMaxMemory(opt int64) string {
	switch {
	case opt < 0:
		return "none"
	case opt > 0:
		return cli.FormatSize(opt)
	}
	n, src := membudget.DefaultLimit()
	return fmt.Sprintf("%s (1/%d of %s)", cli.FormatSize(n-n%(1<<20)), membudget.DefaultShare, src)
}

func newLogger(level string) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %v", level, err)
	}
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.Encoding = "console"
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	cfg.DisableStacktrace = true
	cfg.Sampling = nil
	return cfg.Build()
}

// failFsyncOnSignal returns the switch that fails the write-ahead log's
// fsyncs (app.Options.FailLogSyncs), turned on by SIGUSR1: a disk that
// fails under a running broker, for omnibus-tools soak --disk-faults.
func failFsyncOnSignal(log *zap.Logger) *atomic.Bool {
	fail := new(atomic.Bool)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for range usr1 {
			if !fail.Swap(true) {
				log.Warn("SIGUSR1: every fsync of the write-ahead log fails from now on (--fail-fsync-on-sigusr1)")
			}
		}
	}()
	return fail
}
