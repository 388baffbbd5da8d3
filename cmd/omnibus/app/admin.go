package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"
)

// The admin socket: a Unix socket in the data directory on which a
// running omnibus takes requests from its own machine's operator
// (`omnibus backup`). It is reachable only through the file system: the
// socket is mode 0600, and each connection's peer credentials must be
// this process's user or root (peercred_linux.go), so it needs no key.

// AdminSocketName is the admin socket's name in the data directory.
const AdminSocketName = "omnibus.sock"

// maxSocketPath is what a Unix socket's path may hold (sun_path, less
// its terminating zero).
const maxSocketPath = 107

// AdminSocketPath is the admin socket of the omnibus whose data
// directory is dataDir.
func AdminSocketPath(dataDir string) string { return filepath.Join(dataDir, AdminSocketName) }

// adminServer serves the admin socket.
type adminServer struct {
	srv     *http.Server
	ln      net.Listener
	path    string
	scratch string // where backups are checkpointed before they are sent
	log     *zap.Logger
}

// backupFunc takes a backup into dir (which it creates) and describes it.
type backupFunc func(ctx context.Context, dir string) (Manifest, error)

// startAdmin listens on the admin socket of dataDir and serves backups
// with backup, which checkpoints into a directory under scratch (on the
// store's file system, so that the checkpoint can hard-link). A path too
// long for a socket, or a socket that cannot be made, leaves the node
// without one (logged): the broker runs on.
func startAdmin(dataDir, scratch string, backup backupFunc, log *zap.Logger) *adminServer {
	log = log.Named("admin")
	if leftovers, _ := filepath.Glob(filepath.Join(scratch, backupScratchPrefix+"*")); len(leftovers) > 0 {
		for _, d := range leftovers { // a backup a crash cut short
			_ = os.RemoveAll(d)
		}
	}
	path := AdminSocketPath(dataDir)
	abs, err := filepath.Abs(path)
	if err == nil && len(abs) > maxSocketPath {
		// Listen on the relative path would work from here, but clients
		// elsewhere could not reach it: say so instead.
		log.Warn("no admin socket: its path is too long for a Unix socket (omnibus backup cannot reach this node)",
			zap.String("path", abs), zap.Int("max", maxSocketPath))
		return nil
	}
	if err := removeStaleSocket(path); err != nil {
		log.Warn("no admin socket", zap.String("path", path), zap.Error(err))
		return nil
	}
	ln, err := listenPrivate(path)
	if err != nil {
		log.Warn("no admin socket", zap.String("path", path), zap.Error(err))
		return nil
	}
	a := &adminServer{ln: &credListener{Listener: ln, log: log}, path: path, scratch: scratch, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /backup", func(w http.ResponseWriter, r *http.Request) { a.serveBackup(w, r, backup) })
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: zap.NewStdLog(log)}
	go func() {
		if err := a.srv.Serve(a.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin socket stopped", zap.Error(err))
		}
	}()
	log.Info("admin socket", zap.String("path", path))
	return a
}

// listenPrivate listens on a Unix socket that only this user can open.
func listenPrivate(path string) (net.Listener, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// removeStaleSocket removes a socket a previous process left (the data
// directory's lock says no other omnibus runs on it); anything else at
// the path is an error.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	return os.Remove(path)
}

func (a *adminServer) shutdown(ctx context.Context) {
	if a == nil {
		return
	}
	if err := a.srv.Shutdown(ctx); err != nil {
		a.srv.Close()
	}
	_ = os.Remove(a.path)
}

// credListener accepts only connections from this process's user or
// root.
type credListener struct {
	net.Listener
	log *zap.Logger
}

func (l *credListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if err := checkPeerUser(c); err != nil {
			l.log.Warn("refused an admin connection", zap.Error(err))
			c.Close()
			continue
		}
		return c, nil
	}
}
