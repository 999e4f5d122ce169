// Package storetest gives tests a real database: a SQLite file, or a
// database of a throwaway PostgreSQL server that this package starts from
// Debian's packages (initdb + postgres into a temp dir, on a loopback
// port, as the postgres user when the tests run as root), one server per
// test process and a fresh schema per test: its URL sets search_path, so
// to the store it is a database of its own (CREATE SCHEMA takes a
// millisecond, CREATE DATABASE a second on a busy machine).
//
// NANOHOST_TEST_STORE=postgres makes URL hand out PostgreSQL databases,
// so a package's whole suite runs on PostgreSQL (docs/scaling.md, "Tests").
// Without the server's binaries a test that needs PostgreSQL skips,
// loudly — unless NANOHOST_REQUIRE_POSTGRES=1 (set by CI) makes that a
// failure. scripts/test.sh installs the package when it is missing.
package storetest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"nanohost/internal/testkit"
)

// URL is the store a test opens with store.Open for the data in dir: the
// SQLite file dir/nanohost.db, or with NANOHOST_TEST_STORE=postgres the
// PostgreSQL database of dir (see PostgresFor).
func URL(t testing.TB, dir string) string {
	t.Helper()
	if u, ok := PostgresFor(t, dir); ok {
		return u
	}
	return filepath.Join(dir, "nanohost.db")
}

// PostgresFor is, with NANOHOST_TEST_STORE=postgres, the PostgreSQL
// database that stands for dir's SQLite file: the same database every time
// it is asked for dir in this process (a host restarted on dir finds its
// data), fresh the first time, dropped when the test that first asked ends.
// ok is false without NANOHOST_TEST_STORE=postgres.
func PostgresFor(t testing.TB, dir string) (url string, ok bool) {
	t.Helper()
	if !Postgres() {
		return "", false
	}
	key := filepath.Clean(dir)
	byDirMu.Lock()
	defer byDirMu.Unlock()
	if u, ok := byDir[key]; ok {
		return u, true
	}
	u := PostgresURL(t)
	byDir[key] = u
	t.Cleanup(func() {
		byDirMu.Lock()
		delete(byDir, key)
		byDirMu.Unlock()
	})
	return u, true
}

// Known is the PostgreSQL database PostgresFor made for dir, if it made
// one (without making one).
func Known(dir string) (url string, ok bool) {
	byDirMu.Lock()
	defer byDirMu.Unlock()
	url, ok = byDir[filepath.Clean(dir)]
	return url, ok
}

var (
	byDirMu sync.Mutex
	byDir   = map[string]string{}
)

// Postgres reports whether NANOHOST_TEST_STORE=postgres asks for the whole
// suite to run on PostgreSQL.
func Postgres() bool { return os.Getenv("NANOHOST_TEST_STORE") == "postgres" }

// PostgresURL returns the URL of a new, empty database (a schema of its
// own) on this process's test server (started on first use), dropped when
// t ends. Without PostgreSQL installed it skips t (fails it under
// NANOHOST_REQUIRE_POSTGRES=1).
func PostgresURL(t testing.TB) string {
	t.Helper()
	srv, err := server()
	if err != nil {
		if errors.Is(err, errNotInstalled) {
			testkit.Missing(t, "NANOHOST_REQUIRE_POSTGRES", fmt.Sprintf("SKIPPING: %v; install Debian's postgresql package (scripts/test.sh does) or set NANOHOST_REQUIRE_POSTGRES=1 to make this a failure", err))
		}
		t.Fatalf("PostgreSQL for tests: %v", err)
	}
	name, err := srv.createSchema()
	if err != nil {
		t.Fatalf("create a test database: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.dropSchema(name); err != nil {
			t.Logf("drop test schema %s: %v", name, err)
		}
	})
	return srv.url(name)
}

// Main runs the package's tests and stops the server they started: call
// it from TestMain, os.Exit(storetest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	Stop()
	return code
}

// Stop stops this process's test server, if it started one, and removes
// its directory. (A process that dies without it takes its server with it
// — the server gets the parent-death signal — and the next test process
// removes the directory.)
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	if srv != nil {
		srv.stop()
		srv = nil
	}
	started = false
}

var errNotInstalled = errors.New("PostgreSQL's server binaries (initdb, postgres) are not installed")

var (
	mu      sync.Mutex
	srv     *pgServer
	srvErr  error
	started bool
)

func server() (*pgServer, error) {
	mu.Lock()
	defer mu.Unlock()
	if !started {
		started = true
		srv, srvErr = startServer()
	}
	return srv, srvErr
}

// pgServer is a running throwaway server.
type pgServer struct {
	dir   string // holds data/ and the socket; removed by stop
	port  int
	proc  *os.Process
	exit  chan struct{}
	admin *pgx.Conn
	amu   sync.Mutex
	n     atomic.Int64
}

// dirPrefix names the servers' directories in the temp dir.
const dirPrefix = "nanohost-pgtest-"

func startServer() (*pgServer, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	removeStale()
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	cred, err := serverUser(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "nanohost", "--no-sync",
		"-E", "UTF8", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	var lastErr error
	for range 3 { // a port picked free may be taken before the server binds it
		s, err := launch(bin, dir, data, cred)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// binDir finds the newest installed server (Debian: /usr/lib/postgresql/N/bin).
func binDir() (string, error) {
	if d := os.Getenv("NANOHOST_PG_BIN"); d != "" {
		return d, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(found) == 0 {
		if p, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
		return "", errNotInstalled
	}
	slices.SortFunc(found, func(a, b string) int { return versionOf(a) - versionOf(b) })
	return filepath.Dir(found[len(found)-1]), nil
}

func versionOf(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// serverUser is who runs the server: this user, or postgres when this is
// root (the server refuses to run as root), who is given dir.
func serverUser(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, the server needs the postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// launch starts the server on a free loopback port and waits until it
// takes connections. The server is started from a thread that stays
// locked for as long as it runs, with SIGQUIT (immediate shutdown) as its
// parent-death signal: if the test process dies, so does the server.
func launch(bin, dir, data string, cred *syscall.Credential) (*pgServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=500", "-c", "shared_buffers=64MB",
		"-c", "log_min_messages=fatal")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	startErr := make(chan error, 1)
	exit := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: Pdeathsig follows this thread
		if err := cmd.Start(); err != nil {
			startErr <- err
			return
		}
		startErr <- nil
		_ = cmd.Wait()
		logf.Close()
		close(exit)
	}()
	if err := <-startErr; err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s := &pgServer{dir: dir, port: port, proc: cmd.Process, exit: exit}
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := pgx.Connect(context.Background(), s.url("public"))
		if err == nil {
			// A schema still in use when its test ends is left behind
			// (thrown away with the server) rather than waited for.
			_, err = conn.Exec(context.Background(), "SET lock_timeout = '2s'")
		}
		if err == nil {
			s.admin = conn
			return s, nil
		}
		select {
		case <-exit:
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return nil, fmt.Errorf("postgres exited at start: %s", strings.TrimSpace(string(log)))
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("postgres did not take connections within 15s: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// url is the database "postgres" seen through schema.
func (s *pgServer) url(schema string) string {
	u := url.URL{Scheme: "postgres", User: url.User("nanohost"), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path: "/postgres", RawQuery: url.Values{"sslmode": {"disable"}, "search_path": {schema}}.Encode()}
	return u.String()
}

func (s *pgServer) createSchema() (string, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := fmt.Sprintf("t%d_%x", s.n.Add(1), b)
	s.amu.Lock()
	defer s.amu.Unlock()
	_, err := s.admin.Exec(context.Background(), "CREATE SCHEMA "+name)
	return name, err
}

func (s *pgServer) dropSchema(name string) error {
	s.amu.Lock()
	defer s.amu.Unlock()
	if s.admin == nil {
		return nil // the server stopped first
	}
	_, err := s.admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+name+" CASCADE")
	return err
}

// stop shuts the server down (fast: no checkpoint needed, it is thrown
// away) and removes its directory.
func (s *pgServer) stop() {
	s.amu.Lock()
	if s.admin != nil {
		_ = s.admin.Close(context.Background())
		s.admin = nil
	}
	s.amu.Unlock()
	_ = s.proc.Signal(syscall.SIGQUIT)
	select {
	case <-s.exit:
	case <-time.After(10 * time.Second):
		_ = s.proc.Kill()
		<-s.exit
	}
	os.RemoveAll(s.dir)
}

// removeStale removes the directories of test servers whose process is
// gone (it died before it could remove them).
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		owner, err := os.ReadFile(filepath.Join(d, "owner"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(owner)))
		if err != nil || alive(pid) {
			continue
		}
		if pm, err := os.ReadFile(filepath.Join(d, "data", "postmaster.pid")); err == nil {
			if first, _, _ := strings.Cut(string(pm), "\n"); first != "" {
				if p, err := strconv.Atoi(first); err == nil && alive(p) {
					continue // its server still runs: leave it to whoever started it
				}
			}
		}
		os.RemoveAll(d)
	}
}

func alive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}
