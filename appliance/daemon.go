package appliance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"

	"kernelbox/appliance/api"
	"kernelbox/appliance/runner"
	"kernelbox/appliance/store"
	"kernelbox/gpu"
	"kernelbox/problems"
	"kernelbox/queue"
	"kernelbox/sandbox"
)

// Daemon is `kernelbox serve`: the store, the queue, the runner and the
// API, started and stopped together.
type Daemon struct {
	cfg Config
	log *slog.Logger
	now func() time.Time

	// Python, when set before Start, is the harness interpreter, and the
	// configuration's python and discovery are skipped (tests probe once).
	Python *problems.Interpreter
	// launch, when set, replaces the sandbox launcher: tests of the
	// runner's failure paths script the launcher's answers.
	launch runner.LaunchFunc
	// nvml and gpuRoot, when set, replace the real NVIDIA library and the
	// host's / for discovery: tests give the daemon fake GPUs.
	nvml      gpu.NVML
	gpuRoot   string
	inventory gpu.Inventory
	monitor   *gpu.Monitor
	// profiler is profile mode's ncu, nil where PyTorch's table stands in;
	// profilerBinds are what a sandbox needs to run it.
	profiler      *problems.Profiler
	profilerBinds []sandbox.Bind

	lock   *dirLock // the data directory's (datadir.go)
	store  *store.Store
	queue  *queue.Store
	svc    *Service
	runner *runner.Runner
	rt     *sandbox.Runtime
	api    *API

	servers   []*http.Server
	tcpAddr   string
	serveWG   sync.WaitGroup
	closeOnce sync.Once
}

// NewDaemon prepares a daemon; Start starts it.
func NewDaemon(cfg Config, log *slog.Logger) *Daemon {
	return &Daemon{cfg: cfg, log: log, now: time.Now}
}

// AdminTokenFile is where the first start writes the admin's token.
func AdminTokenFile(dataDir string) string { return filepath.Join(dataDir, "admin-token") }

// Start opens the databases, recovers what an earlier daemon left, starts
// the runner and listens. Problems that stop the box from evaluating (no
// root for the sandbox, no PyTorch) do not stop it from starting: it
// serves status and refuses submissions with the reason.
func (d *Daemon) Start(ctx context.Context) (err error) {
	if err := d.cfg.Validate(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			d.closeAll()
		}
	}()
	if err := os.MkdirAll(d.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if d.lock, err = lockDataDir(d.cfg.DataDir); err != nil {
		return err
	}
	if d.store, err = store.Open(ctx, filepath.Join(d.cfg.DataDir, "kernelbox.db"), d.now); err != nil {
		return err
	}
	if err := tidyDataDir(d.cfg.DataDir, d.log); err != nil {
		return err
	}
	marks, err := checkStore(ctx, d.cfg.DataDir, d.store, d.cfg.AcceptStoreLoss, d.log)
	if err != nil {
		return err
	}
	if err := store.MergeQueueFile(ctx, d.store, filepath.Join(d.cfg.DataDir, "queue.db"), d.log); err != nil {
		return err
	}
	d.queue = d.store.Queue()
	boot := randomHex(8)
	d.svc = newService(d.cfg, d.store, d.queue, d.log.With("component", "service"), d.now, boot)
	d.svc.marks = marks
	d.svc.canary = runner.NewCanaries(d.cfg.Canary, d.now)
	// Every lease of an earlier boot is an orphan: its holder is gone.
	if n, err := d.queue.Reap(ctx, boot); err != nil {
		return err
	} else if n > 0 {
		d.log.Warn("requeued jobs an earlier daemon held", "jobs", n)
	}
	if err := d.bootstrapAdmin(ctx); err != nil {
		return err
	}

	if d.cfg.Executor == ExecutorSlurm {
		return d.startCoordinator(ctx)
	}
	it, launch, health := d.prepareRunner(ctx, d.svc.metrics)
	d.svc.health = append(d.svc.health, health...)
	if d.launch != nil {
		launch = d.launch
	}
	if d.cfg.GPUs == "auto" {
		d.inventory = gpu.Discover(ctx, gpu.Options{NVML: d.nvml, Root: d.gpuRoot, Aliases: d.cfg.GPUAliases})
	} else {
		d.inventory = gpu.Inventory{Vendor: gpu.VendorNone, GPUs: []gpu.GPU{}, Notes: []string{"GPUs are off in the config (gpus: none)"}}
	}
	for _, g := range d.inventory.GPUs {
		d.log.Info("GPU", "index", g.Index, "name", g.Name, "type", g.Type, "uuid", g.UUID, "pci", g.PCI, "numa", g.NUMANode)
	}
	if len(d.inventory.GPUs) == 0 {
		d.log.Info("no GPUs: the CPU backend serves this box", "why", strings.Join(d.inventory.Notes, "; "))
	}
	profilerNote := d.setupProfiler()
	cpus := runner.AllowedCPUs()
	gslots := runner.GPUSlots(d.inventory, cpus)
	d.openMonitor(gslots)
	slots := append(gslots, runner.CPUSlots(d.cfg.CPUSlots, cpus)...)
	if d.cfg.Measurement.MeasuresCPU(slots) {
		// Now, before any run: a run on another slot would slow the copy
		// (a low ceiling flags honest kernels) and the copy would slow the
		// run. Jobs read the cached figure.
		d.log.Info("measured this host's bandwidth, the CPU slots' ceiling for physics floors", "bytes_per_s", gpu.CPUPeak().BytesPerSec)
	}
	if len(d.svc.health) == 0 && len(slots) == 0 {
		d.svc.health = append(d.svc.health, "no slots: no GPU was found and cpu_slots is 0")
	}
	d.svc.offer(slots) // even when none can run: jobs wait for the box to be fixed
	if len(d.svc.health) > 0 {
		slots = nil // nothing can run; keep the jobs queued
		d.log.Error("the box cannot evaluate submissions", "why", strings.Join(d.svc.health, "; "))
	}
	d.runner = runner.New(d.runnerDeps(slots, launch, it))
	return d.startServing(ctx, api.GPUsStatus{Vendor: string(d.inventory.Vendor), Driver: d.inventory.Driver,
		Notes: d.inventory.Notes, Profiler: profilerNote})
}

// startServing loads the bundled problems, ends the runs the queue gave
// up on, starts the runner and listens: the last steps of Start, which
// both executors take.
func (d *Daemon) startServing(ctx context.Context, inv api.GPUsStatus) error {
	if d.cfg.Library {
		loaded, err := d.svc.loadLibrary(ctx, filepath.Join(d.cfg.DataDir, "problems", "library"))
		if err != nil {
			return err
		}
		d.log.Info("loaded the bundled problems", "leaderboards", len(loaded))
	}
	if err := d.svc.reconcile(ctx); err != nil {
		return err
	}
	if err := d.runner.Start(ctx); err != nil {
		return err
	}
	d.svc.attach(d.runner.Board(inv))
	a, err := newAPI(d.svc, d.log.With("component", "api"))
	if err != nil {
		return err
	}
	d.api = a
	return d.listen()
}

// runnerDeps are the runner's parts on this box: the queue and the store
// (one database), the service's task cache, reconciler, wake-up, metrics
// and canaries, the launcher, the GPU monitor and the profiler.
func (d *Daemon) runnerDeps(slots []runner.Slot, launch runner.LaunchFunc, it *problems.Interpreter) runner.Deps {
	deps := runner.Deps{Config: runnerConfig(d.cfg, d.svc.boot), Slots: slots, Queue: d.svc.queue, Store: d.svc.store,
		Wake: d.svc.wake, Metrics: d.svc.metrics, TasksFunc: d.svc.runTask, ReconcileFunc: d.svc.reconcile,
		Launch: launch, Python: it, Profiler: d.profiler, Canaries: d.svc.canary, Log: d.log.With("component", "runner")}
	deps.Config.Driver = d.inventory.Driver
	if d.monitor != nil { // a nil *gpu.Monitor in the interface would not read as none
		deps.Monitor = d.monitor
	}
	return deps
}

// runnerConfig is the runner's part of cfg, for the daemon of boot.
func runnerConfig(cfg Config, boot string) runner.Config {
	return runner.Config{Boot: boot, LeaseTTL: cfg.LeaseTTL, MaxRunningPerUser: cfg.MaxRunningPerUser,
		BackfillLimit: cfg.BackfillLimit, AgePerSecond: cfg.AgePerSecond, Version: cfg.Version, WarmStart: cfg.WarmStart,
		Standby: cfg.Standby, WorkRoot: filepath.Join(cfg.DataDir, "work"), ProfilesDir: profilesDir(cfg.DataDir),
		MaxReport: int64(cfg.Profiler.MaxReport), CacheDir: filepath.Join(cfg.DataDir, "cache"),
		CacheBudget: int64(cfg.CacheBudget), Sandbox: cfg.Sandbox, Measure: cfg.Measurement}
}

// bootstrapAdmin creates the admin user on the first start and writes its
// token where only root can read it.
func (d *Daemon) bootstrapAdmin(ctx context.Context) error {
	users, err := d.store.Users(ctx)
	if err != nil {
		return err
	}
	if len(users) > 0 {
		return nil
	}
	_, token, err := d.store.CreateUser(ctx, "admin", api.RoleAdmin)
	if err != nil {
		return err
	}
	path := AdminTokenFile(d.cfg.DataDir)
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return fmt.Errorf("write admin token: %w", err)
	}
	d.log.Info("created the admin user; its token is in the admin-token file", "file", path)
	return nil
}

func (d *Daemon) listen() error {
	handler := d.api.Handler()
	var lns []net.Listener
	if d.cfg.Listen != "" {
		ln, err := net.Listen("tcp", d.cfg.Listen)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", d.cfg.Listen, err)
		}
		d.tcpAddr = ln.Addr().String()
		lns = append(lns, ln)
	}
	if sock := d.cfg.socketPath(); sock != "" {
		if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove old socket: %w", err)
		}
		ln, err := net.Listen("unix", sock)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return fmt.Errorf("listen on %s: %w", sock, err)
		}
		// The socket is for local administration: the same tokens apply,
		// but only root (and the daemon's group) can connect at all.
		if err := os.Chmod(sock, 0o660); err != nil {
			d.log.Warn("chmod socket", "err", err)
		}
		lns = append(lns, ln)
	}
	for _, ln := range lns {
		ln = netutil.LimitListener(ln, d.cfg.MaxConnections)
		// No WriteTimeout: a long-poll answers within 30 s by itself. No
		// ReadTimeout either: the API sets a deadline for each body
		// (body_timeout), longer for a problem set.
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(d.log.Handler(), slog.LevelWarn)}
		d.servers = append(d.servers, srv)
		d.serveWG.Add(1)
		go func() {
			defer d.serveWG.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.log.Error("serve", "addr", ln.Addr().String(), "err", err)
			}
		}()
		d.log.Info("listening", "addr", ln.Addr().String())
	}
	return nil
}

// Addr is the TCP address the API listens on (with the port chosen when
// the config said :0).
func (d *Daemon) Addr() string { return d.tcpAddr }

// Stop shuts down gracefully: it refuses new submissions, stops claiming,
// waits up to the grace period for running jobs, then stops them (their
// jobs go back to the queue, attempts intact), and closes the listeners
// and databases. ctx bounds the HTTP shutdown.
func (d *Daemon) Stop(ctx context.Context) error {
	if d.svc != nil {
		d.svc.draining.Store(true)
	}
	if d.runner != nil {
		d.runner.Stop(d.cfg.Grace)
	}
	var errs []error
	if d.api != nil {
		d.api.stop()
	}
	for _, srv := range d.servers {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
			srv.Close()
		}
	}
	d.serveWG.Wait()
	d.closeAll()
	return errors.Join(errs...)
}

func (d *Daemon) closeAll() {
	d.closeOnce.Do(func() {
		if d.monitor != nil {
			// After the runner: the clocks go back to the driver's default.
			if err := d.monitor.Close(); err != nil {
				d.log.Warn("close GPU monitor", "err", err)
			}
		}
		if d.rt != nil {
			if err := d.rt.Close(); err != nil {
				d.log.Warn("close sandbox runtime", "err", err)
			}
		}
		if d.store != nil { // the queue's tables with it
			d.store.Close()
		}
		if d.lock != nil { // last: the next daemon may open all of the above
			d.lock.Close()
		}
	})
}

// randomHex is n random bytes in hex: a boot's id, a job token. Since Go
// 1.24 crypto/rand.Read never fails (it crashes the program instead).
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
