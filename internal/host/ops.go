package host

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"

	"nanohost/internal/config"
	"nanohost/internal/container"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/store"
	"nanohost/internal/web"
	"nanohost/internal/workspace"
)

// Metrics are the host's Prometheus collectors, on their own registry so
// tests can run several hosts in one process.
type Metrics struct {
	Registry          *prometheus.Registry
	ActiveRuns        prometheus.GaugeFunc
	NodeDuration      *prometheus.HistogramVec
	ContainersRunning prometheus.Gauge
	ContainersStarted prometheus.Counter
	// ContainersReclaimed counts idle sessions stopped to give their slot
	// to a waiting request (container.ReasonReclaimed).
	ContainersReclaimed prometheus.Counter
	ChatQueued          prometheus.Gauge
	ChannelConnected    *prometheus.GaugeVec
	IPCPickup           *prometheus.HistogramVec

	activeRuns atomic.Pointer[runs.Service]
	treesOnce  sync.Once
	trees      atomic.Int64
	treeBytes  atomic.Int64
	spares     atomic.Int64
	spareBytes atomic.Int64
}

// NewMetrics registers the collectors.
func NewMetrics() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	*m = Metrics{
		Registry: m.Registry,
		ActiveRuns: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "nanohost_active_runs", Help: "Pipeline runs executing in this process (queued for a run slot included)."},
			func() float64 {
				if s := m.activeRuns.Load(); s != nil {
					return float64(s.Active())
				}
				return 0
			}),
		NodeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nanohost_node_duration_seconds", Help: "How long pipeline stages took, by outcome (a custom outcome word counts as custom).",
			Buckets: prometheus.ExponentialBuckets(0.05, 2.5, 12)}, []string{"status"}),
		ContainersRunning: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nanohost_containers_running", Help: "Agent and tool containers running now."}),
		ContainersStarted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nanohost_containers_started_total", Help: "Agent and tool containers started."}),
		ContainersReclaimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nanohost_containers_reclaimed_total", Help: "Idle agent sessions (a chat conversation between messages, a pipeline thread between stages) stopped to give their container slot to a waiting request; each resumes in a new container on its next turn."}),
		ChatQueued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nanohost_chat_messages_queued", Help: "Chat messages waiting for their group's agent."}),
		ChannelConnected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nanohost_channel_connected", Help: "1 when the chat channel is connected."}, []string{"channel"}),
		IPCPickup: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nanohost_ipc_pickup_seconds", Help: "How long agents' IPC requests waited between being written and being acted on, by type.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9)}, []string{"type"}),
	}
	m.Registry.MustRegister(m.ActiveRuns, m.NodeDuration, m.ContainersRunning, m.ContainersStarted, m.ContainersReclaimed, m.ChatQueued, m.ChannelConnected, m.IPCPickup,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// SlotWaiter says how many requests wait for a container slot
// (container.Backend; Options.Slots).
type SlotWaiter interface {
	Waiting() int
}

// watchQueue reports b's waiting requests as nanohost_containers_queued
// (once per registry: Metrics shared by two hosts keep the first).
func (m *Metrics) watchQueue(b SlotWaiter) error {
	err := m.Registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "nanohost_containers_queued", Help: "Agent and tool requests waiting for a container slot (runtime.max_containers in use)."},
		func() float64 { return float64(b.Waiting()) }))
	if dup := (prometheus.AlreadyRegisteredError{}); errors.As(err, &dup) {
		return nil
	}
	return err
}

// nameReplica exports nanohost_replica_info{replica="<replica.id>"} 1:
// which replica a scrape came from, whatever the scraper calls it, to
// join with every other series of that scrape (once per registry).
func (m *Metrics) nameReplica(replica string) error {
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "nanohost_replica_info", Help: "Always 1; its replica label is this host's replica.id (the host name by default).",
		ConstLabels: prometheus.Labels{"replica": replica}})
	info.Set(1)
	err := m.Registry.Register(info)
	if dup := (prometheus.AlreadyRegisteredError{}); errors.As(err, &dup) {
		return nil
	}
	return err
}

// watchStore exports nanohost_store_write_errors_total: writes the store
// could not make (a full or failing disk), constraint refusals not counted
// (once per registry).
func (m *Metrics) watchStore(st *store.Store) error {
	err := m.Registry.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "nanohost_store_write_errors_total", Help: "Writes the store could not make (a full or failing disk, a lost database); refusals such as an already answered gate are not counted."},
		func() float64 { return float64(st.WriteFailures()) }))
	if dup := (prometheus.AlreadyRegisteredError{}); errors.As(err, &dup) {
		return nil
	}
	return err
}

// worktrees exports the runs' working trees and their disk use, and the
// spare trees kept for the next runs apart, as the last sweep found them
// (nanohost_worktrees, nanohost_worktrees_bytes, nanohost_worktrees_spare,
// nanohost_worktrees_spare_bytes).
func (m *Metrics) worktrees(rep workspace.SweepReport) {
	m.treesOnce.Do(func() {
		m.Registry.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nanohost_worktrees", Help: "Runs' working trees on disk (parallel branches' included), as the last sweep found them."},
				func() float64 { return float64(m.trees.Load()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nanohost_worktrees_bytes", Help: "Disk the runs' working trees use, as the last sweep found them (workspaces.retention bounds it)."},
				func() float64 { return float64(m.treeBytes.Load()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nanohost_worktrees_spare", Help: "Spare working trees kept checked out for the next runs (workspaces.spares per repository), as the last sweep found them; not counted in nanohost_worktrees."},
				func() float64 { return float64(m.spares.Load()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nanohost_worktrees_spare_bytes", Help: "Disk the spare working trees use, as the last sweep found them; not counted in nanohost_worktrees_bytes."},
				func() float64 { return float64(m.spareBytes.Load()) }))
	})
	m.trees.Store(int64(rep.Trees))
	m.treeBytes.Store(rep.Bytes)
	m.spares.Store(int64(rep.Spares))
	m.spareBytes.Store(rep.SpareBytes)
}

// watchRuns reports the runs service's executing runs as nanohost_active_runs.
func (m *Metrics) watchRuns(s *runs.Service) {
	m.activeRuns.Store(s)
}

// observeRun feeds a run's events into the metrics (runs.Config.Observe).
func (m *Metrics) observeRun(_ runs.Run, e engine.Event) {
	switch e.Type {
	case engine.EventStageCompleted, engine.EventStageFailed:
		if e.Duration > 0 {
			status := string(e.Status)
			if e.Status.IsCustom() {
				status = "custom" // agents choose these words: one label keeps the series bounded
			}
			m.NodeDuration.WithLabelValues(status).Observe(e.Duration.Seconds())
		}
	}
}

// OnContainerEvent feeds container lifecycle into the metrics; pass it as
// container.Config.OnEvent.
func (m *Metrics) OnContainerEvent(e container.Event) {
	switch e.Kind {
	case container.EventStarted:
		m.ContainersRunning.Inc()
		m.ContainersStarted.Inc()
	case container.EventStopped:
		m.ContainersRunning.Dec()
		if e.Reason == container.ReasonReclaimed {
			m.ContainersReclaimed.Inc()
		}
	}
}

// Health is the /healthz answer.
type Health struct {
	OK bool `json:"ok"`
	// Replica names this host among the replicas sharing the store
	// (replica.id; on SQLite, the one host).
	Replica string `json:"replica"`
	Store   string `json:"store"`
	// Disk is "ok", or says the data directory's disk is nearly full.
	Disk   string `json:"disk"`
	Docker string `json:"docker,omitempty"`
	// Kubernetes is set when the agents run on a cluster (then Docker is not).
	Kubernetes string            `json:"kubernetes,omitempty"`
	Channels   map[string]string `json:"channels"`
	Runs       int               `json:"active_runs"`
	// Leases are the runs this replica drives, by their leases in the
	// store shared with other replicas (absent on SQLite).
	Leases []string `json:"leases,omitempty"`
}

// healthCheck is what /healthz looks at: the store, the runtime (Docker
// or Kubernetes), the disk, the channels and the runs.
type healthCheck struct {
	replica   string
	store     healthStore
	dataDir   string
	kube      Pinger
	docker    Pinger
	endpoints *endpoints
	runs      interface{ Active() int }
}

// healthStore is what the health check reads of the store.
type healthStore interface {
	SchemaVersion(ctx context.Context) (int, error)
	WriteProblem() (error, time.Time)
	Capabilities() store.Capabilities
	LeasesOf(ctx context.Context, owner string) ([]string, error)
}

// check checks them all.
func (c healthCheck) check(ctx context.Context) Health {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	out := Health{OK: true, Replica: c.replica, Store: "ok", Docker: "unknown", Channels: c.endpoints.states()}
	if _, err := c.store.SchemaVersion(ctx); err != nil {
		out.OK, out.Store = false, err.Error()
	} else if err, at := c.store.WriteProblem(); err != nil {
		out.OK, out.Store = false, fmt.Sprintf("cannot write: %v (since %s; no write has succeeded since)", err, at.UTC().Format(time.RFC3339))
	}
	out.Disk = diskHealth(c.dataDir)
	if out.Disk != "ok" {
		out.OK = false
	}
	if c.kube != nil {
		out.Docker, out.Kubernetes = "", "ok"
		if err := c.kube.Ping(ctx); err != nil {
			out.OK, out.Kubernetes = false, err.Error()
		}
	}
	if c.docker != nil {
		if err := c.docker.Ping(ctx); err != nil {
			out.OK, out.Docker = false, err.Error()
		} else {
			out.Docker = "ok"
		}
	}
	for _, st := range out.Channels {
		if st != "connected" {
			out.OK = false
		}
	}
	out.Runs = c.runs.Active()
	if c.store.Capabilities().Replicas {
		leases, err := c.store.LeasesOf(ctx, out.Replica)
		if err != nil {
			out.OK, out.Store = false, err.Error()
		}
		out.Leases = leases
	}
	return out
}

// opsHandler serves /healthz and /metrics under the same host rule as the
// dashboard (web.HostGuard: loopback names only without a token), and with
// the token, when configured, required as a bearer token.
func opsHandler(listen, token string, health func(context.Context) Health, reg *prometheus.Registry) http.Handler {
	return web.HostGuard(listen, token, opsEndpoints(token, health, reg))
}

func opsEndpoints(token string, health func(context.Context) Health, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		hs := health(r.Context())
		w.Header().Set("Content-Type", "application/json")
		if !hs.OK {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(hs)
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if token == "" {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Constant-time, so response timing does not reveal how much of a guess matched.
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+token)) != 1 {
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// startHTTP listens on http.listen ("" switches the endpoint off), tells
// listening the address it got, and serves handler's there.
func startHTTP(cfg *config.Config, listening func(addr string), handler func() http.Handler, log *slog.Logger) (*http.Server, error) {
	if cfg.HTTP.Listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return nil, cfg.ListenError(err)
	}
	listening(ln.Addr().String())
	srv := &http.Server{Handler: handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http endpoint stopped", "err", err)
		}
	}()
	return srv, nil
}

// dashboardURL is where people reach the dashboard: http.public_url, else
// the address the HTTP endpoint listens on (a wildcard as 127.0.0.1, a
// port 0 as the one it got); "" while it is not listening or is off.
func dashboardURL(publicURL, listening string) string {
	if publicURL != "" {
		return strings.TrimRight(publicURL, "/")
	}
	host, port, err := net.SplitHostPort(listening)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// runPage is a run's page on the dashboard at base ("" without one).
func runPage(base, runID string) string {
	if base == "" {
		return ""
	}
	return base + "/runs/" + url.PathEscape(runID)
}

// MinFreeBytes is the free space under the data directory below which
// /healthz is not ok: runs journal every step there, and SQLite keeps its
// database there, so a run stops (interrupted) once none is left.
const MinFreeBytes = 64 << 20

// diskHealth is "ok", or what is wrong with the free space on dir's disk.
func diskHealth(dir string) string {
	var fs unix.Statfs_t
	if dir == "" || unix.Statfs(dir, &fs) != nil {
		return "ok" // not ours to judge: the store's own check reports a missing directory
	}
	free := fs.Bavail * uint64(fs.Bsize)
	if free >= MinFreeBytes {
		return "ok"
	}
	return fmt.Sprintf("%d MiB free on the disk holding %s, under %d MiB: free space there, or runs stop (interrupted) when it runs out",
		free>>20, dir, MinFreeBytes>>20)
}
