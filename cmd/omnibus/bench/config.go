package bench

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"
)

// Scenario names accepted by --scenario.
const (
	ScenarioSend     = "send"     // senders only
	ScenarioReceive  = "receive"  // pre-fill the queue, then receive it
	ScenarioBoth     = "both"     // send and receive at once, end-to-end latency
	ScenarioSessions = "sessions" // S sessions through the SDK, FIFO checked per session
	ScenarioFanout   = "fanout"   // a topic with K subscriptions through the SDK
	ScenarioREST     = "rest"     // REST send and peek-lock+complete through the HTTP gateway
	ScenarioDrain    = "drain"    // receive whatever the queue holds until it stays quiet for --drain-timeout
	ScenarioPipeline = "pipeline" // receive, then complete + send a result (--txn: in one transaction); pipeline.go
)

// Config is one benchmark run. The zero value of a field means its
// default (see [Config.validate]).
type Config struct {
	Scenario string
	Label    string // names the target in the output, e.g. "omnibus" or "rabbitmq-quorum"

	// Endpoint. Plain AMQP uses URL, User and Password; the SDK uses
	// ConnString; REST uses HTTPURL with KeyName and Key. For plain AMQP
	// URL may list several endpoints, comma-separated (the nodes of a
	// cluster): connection i dials the (i mod n)-th, as a load balancer
	// would spread them.
	URL        string
	CAFile     string // PEM roots trusted for amqps:// and wss:// besides the system's
	User       string
	Password   string
	SDK        bool
	ConnString string
	HTTPURL    string
	KeyName    string
	Key        string

	// Entities. Queue is the AMQP address (for RabbitMQ 3.x, e.g.
	// "/amq/queue/NAME"); fanout uses Topic and Subscriptions.
	Queue         string
	Topic         string
	Subscriptions []string
	PipelineTo    string // pipeline: where results go (default Queue + "-out")
	Txn           bool   // pipeline: complete and send in one transaction
	// PartitionKeys > 0: plain AMQP sends annotate message seq with the
	// partition key "k<seq mod PartitionKeys>" (x-opt-partition-key), for
	// a partitioned entity; 0: no key (the broker picks any partition).
	PartitionKeys int

	// Load shape.
	Size         int           // payload bytes
	Connections  int           // connections (each with one session)
	Links        int           // sender and receiver links per connection
	Inflight     int           // unsettled sends in flight per sender link
	Credit       int           // link credit per receiver (SDK session receivers take 1 at a time)
	MaxBacklog   int64         // scenario both: senders wait while this many sent are not yet received (0: no bound)
	BatchCredit  bool          // grant Credit again only when all of it was used (plain AMQP receivers)
	Presettled   bool          // send settled (at-most-once, no acknowledgement)
	DirectWrites bool          // plain AMQP: go-amqp writes every frame itself, one goroutine per send in flight
	RAD          bool          // receive-and-delete: the broker sends settled
	Durable      bool          // AMQP header durable flag
	Sessions     int           // sessions scenario: number of sessions
	Duration     time.Duration // how long to send (when Count is 0)
	Count        int64         // messages to send (overrides Duration)
	Prefill      int64         // receive scenario: messages put in first (default Count or 20000)
	Rate         float64       // target messages/s over all senders (0: as fast as possible)
	BrokerPID    int           // > 0: also report this process's CPU time (Linux), the broker under test
	Warmup       time.Duration // leading part of the run left out of the numbers
	DrainTimeout time.Duration // how long receivers may go without a delivery before the rest counts as lost

	// Output.
	JSONPath string // write the result as JSON here
	// StagesPath: at a target rate with receivers, write each message's
	// moments here as CSV (see stageLog.writeCSV), to lay a run's slow
	// episodes beside the broker's own events.
	StagesPath string
	PlotPath   string // draw throughput and latency here (.png or .svg)
	Quiet      bool   // no live progress line
}

// errUsage marks configuration errors (exit status 2).
var errUsage = errors.New("bench: usage")

// IsUsage reports whether err is a flag or configuration error.
func IsUsage(err error) bool { return errors.Is(err, errUsage) }

// NewFlagSet returns the bench flags bound to c, with c's current values
// as defaults.
func NewFlagSet(c *Config) *flag.FlagSet {
	fs := flag.NewFlagSet("omnibus-tools bench", flag.ContinueOnError)
	fs.StringVar(&c.Scenario, "scenario", ScenarioSend, "send, receive, both, sessions, fanout, rest, drain or pipeline")
	fs.StringVar(&c.Label, "label", "", "name of the target in the output")
	fs.StringVar(&c.URL, "url", "amqp://127.0.0.1:5672", "AMQP 1.0 endpoint: amqp://, amqps:// (TLS), or ws:// or wss:// for AMQP over WebSockets\n(e.g. wss://127.0.0.1:5443/$servicebus/websocket); plain AMQP takes a comma-separated list too\n(a cluster's nodes): connection i dials the (i mod n)-th")
	fs.StringVar(&c.CAFile, "ca-file", "", "PEM file of certificates to trust for amqps:// and wss:// besides the system's (omnibus cert prints omnibus's)")
	fs.StringVar(&c.User, "user", "RootManageSharedAccessKey", "SASL PLAIN user name")
	fs.StringVar(&c.Password, "pass", "SAS_KEY_VALUE", "SASL PLAIN password")
	fs.BoolVar(&c.SDK, "sdk", false, "drive the endpoint through the azservicebus SDK (implied by sessions and fanout)")
	fs.StringVar(&c.ConnString, "connection-string", "", "Service Bus connection string for --sdk (default: built from --url and the key)")
	fs.StringVar(&c.HTTPURL, "http", "http://127.0.0.1:5300", "REST base URL for --scenario rest")
	fs.StringVar(&c.KeyName, "key-name", "RootManageSharedAccessKey", "SAS key name for REST tokens")
	fs.StringVar(&c.Key, "key", "SAS_KEY_VALUE", "SAS key for REST tokens")
	fs.StringVar(&c.Queue, "queue", "bench", "queue (AMQP address) to send to and receive from")
	fs.StringVar(&c.Topic, "topic", "bench-topic", "topic for --scenario fanout")
	fs.Func("subscriptions", "comma-separated subscriptions of --topic for fanout (default s1,s2)", func(s string) error {
		c.Subscriptions = splitList(s)
		return nil
	})
	fs.StringVar(&c.PipelineTo, "to", "", "pipeline: queue the results go to (default --queue with -out)")
	fs.IntVar(&c.PartitionKeys, "partition-keys", 0, "plain AMQP: send message n with the partition key k<n mod this> (x-opt-partition-key), for a\npartitioned entity; 0: no key")
	fs.BoolVar(&c.Txn, "txn", false, "pipeline: complete the input and send its result in one transaction")
	fs.IntVar(&c.Size, "size", 1024, "payload size in bytes")
	fs.IntVar(&c.Connections, "connections", 1, "connections")
	fs.IntVar(&c.Links, "links", 1, "sender and receiver links per connection")
	fs.IntVar(&c.Inflight, "inflight", 100, "unsettled sends in flight per sender link")
	fs.IntVar(&c.Credit, "credit", 100, "link credit per receiver")
	fs.Int64Var(&c.MaxBacklog, "max-backlog", 0, "scenario both: senders wait while this many messages sent are not yet received,\nso the queue stays near empty instead of keeping the backlog the first seconds left (0: no bound)")
	fs.BoolVar(&c.BatchCredit, "batch-credit", false, "grant --credit again only once all of it was used, never while deliveries are in flight\n(RabbitMQ 3.x's AMQP 1.0 plugin loses track of credit topped up mid-flight and stops delivering)")
	fs.BoolVar(&c.Presettled, "presettled", false, "send presettled (fire and forget)")
	fs.BoolVar(&c.DirectWrites, "direct-writes", false, "plain AMQP: let go-amqp write each frame to the socket as it goes, and keep --inflight sends\n"+
		"in flight with one goroutine each calling Send, as the SDKs do (by default the tool gathers its writes\n"+
		"into one system call per burst and pipelines a link's sends on two goroutines, to spare the CPU it shares)")
	fs.BoolVar(&c.RAD, "rad", false, "receive-and-delete: ask the broker to send presettled")
	fs.BoolVar(&c.Durable, "durable", false, "set the AMQP header durable flag")
	fs.IntVar(&c.Sessions, "sessions", 8, "number of sessions for --scenario sessions")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "how long to send (ignored with --count)")
	fs.Int64Var(&c.Count, "count", 0, "number of messages to send (overrides --duration)")
	fs.Int64Var(&c.Prefill, "prefill", 0, "receive scenario: messages to put in first (default --count, else 20000)")
	fs.Float64Var(&c.Rate, "rate", 0, "target messages/s over all senders (0: unlimited)")
	fs.IntVar(&c.BrokerPID, "broker-pid", 0, "PID of the broker under test, on this machine: report its CPU time per send or delivery\n(Linux; the tool always reports its own)")
	fs.DurationVar(&c.Warmup, "warmup", 0, "leading part of the run left out of the numbers")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", 30*time.Second, "receivers give up after this long without a delivery")
	fs.StringVar(&c.JSONPath, "json", "", "write the result as JSON to this file")
	fs.StringVar(&c.StagesPath, "stages", "", "with --rate and receivers: write each message's moments (scheduled, handed to the client library,\naccepted, delivered; ms since the start) to this CSV file, for laying slow episodes beside the broker's events")
	fs.StringVar(&c.PlotPath, "plot", "", "draw throughput over time and the latency distribution (.png or .svg)")
	fs.BoolVar(&c.Quiet, "quiet", false, "no live progress line")
	return fs
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// validate fills defaults and rejects nonsense.
func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
	}
	switch c.Scenario {
	case ScenarioSend, ScenarioReceive, ScenarioBoth, ScenarioREST, ScenarioDrain, ScenarioPipeline:
	case ScenarioSessions, ScenarioFanout:
		c.SDK = true
	default:
		return bad("unknown scenario %q", c.Scenario)
	}
	if c.Label == "" {
		c.Label = c.URL
		if c.Scenario == ScenarioREST {
			c.Label = c.HTTPURL
		}
	}
	if c.Size < 0 || c.Connections < 1 || c.Links < 1 || c.Inflight < 1 || c.Credit < 1 {
		return bad("--size must be ≥ 0 and --connections, --links, --inflight, --credit ≥ 1")
	}
	if c.Count < 0 || c.Rate < 0 || c.Warmup < 0 || c.Prefill < 0 || c.MaxBacklog < 0 {
		return bad("--count, --rate, --warmup, --prefill and --max-backlog must not be negative")
	}
	if c.MaxBacklog > 0 && c.Scenario != ScenarioBoth {
		return bad("--max-backlog is for --scenario both (senders and receivers of one queue in one run)")
	}
	if c.Count == 0 && c.Duration <= 0 && c.Scenario != ScenarioDrain {
		return bad("give --count or a positive --duration")
	}
	if c.Scenario == ScenarioPipeline && c.PipelineTo == "" {
		c.PipelineTo = c.Queue + "-out"
	}
	if (c.Scenario == ScenarioReceive || c.Scenario == ScenarioPipeline) && c.Prefill == 0 {
		c.Prefill = c.Count
		if c.Prefill == 0 {
			c.Prefill = 20000
		}
	}
	if c.Scenario == ScenarioSessions && c.Sessions < 1 {
		return bad("--sessions must be ≥ 1")
	}
	if c.Scenario == ScenarioFanout && len(c.Subscriptions) == 0 {
		c.Subscriptions = []string{"s1", "s2"}
	}
	if c.DirectWrites && (c.SDK || c.Scenario == ScenarioREST) {
		return bad("--direct-writes is for plain AMQP (the SDK writes each frame itself already)")
	}
	if c.Presettled && c.SDK {
		return bad("--presettled needs plain AMQP (the SDK always waits for the broker)")
	}
	if c.PartitionKeys < 0 {
		return bad("--partition-keys must not be negative")
	}
	plainAMQP := !c.SDK && c.Scenario != ScenarioREST && c.Scenario != ScenarioPipeline
	if c.PartitionKeys > 0 && !plainAMQP {
		return bad("--partition-keys needs plain AMQP (not --sdk, rest or pipeline)")
	}
	if len(c.urls()) > 1 && !plainAMQP {
		return bad("several --url endpoints need plain AMQP (not --sdk, rest or pipeline)")
	}
	if len(c.urls()) == 0 {
		return bad("--url is empty")
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
	return nil
}

// urls is the list --url gives.
func (c *Config) urls() []string { return splitList(c.URL) }

// sends reports whether the scenario's timed phase sends.
func (c *Config) sends() bool { return c.Scenario != ScenarioReceive && c.Scenario != ScenarioDrain }

// receives reports whether the scenario's timed phase receives.
func (c *Config) receives() bool { return c.Scenario != ScenarioSend }

// streams is how many times each message is delivered.
func (c *Config) streams() int {
	if c.Scenario == ScenarioFanout {
		return len(c.Subscriptions)
	}
	return 1
}
