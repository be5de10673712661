// Package relaytest starts the nostrwire relay for tests and benchmarks and
// reads events from the repository's corpus.
package relaytest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// Binary returns the nostrwire relay binary: $NOSTRWIRE_BIN (a relative
// path is taken from the current directory, else from repoRoot), else
// target/release/nostrwire under repoRoot; "" when neither exists.
func Binary(repoRoot string) string {
	if b := os.Getenv("NOSTRWIRE_BIN"); b != "" {
		if _, err := os.Stat(b); err != nil && !filepath.IsAbs(b) {
			if abs, err := filepath.Abs(filepath.Join(repoRoot, b)); err == nil {
				return abs
			}
		}
		return b
	}
	b, _ := filepath.Abs(filepath.Join(repoRoot, "target", "release", "nostrwire"))
	if _, err := os.Stat(b); err != nil {
		return ""
	}
	return b
}

// Relay is a running nostrwire relay.
type Relay struct {
	URL string
	// Log is the relay's log file.
	Log string
	cmd *exec.Cmd
	log *os.File
}

// Start runs `bin relay` on a free port of 127.0.0.1 with a database in dir
// and the dictionary set file set ("" for none); it returns once the relay
// accepts connections.
func Start(bin, dir, set string) (*Relay, error) {
	cfg := filepath.Join(dir, "relay.toml")
	body := fmt.Sprintf("[storage]\ndurability = \"none\"\nmap_size_gib = 4\ndictionaries = %q\n", set)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	r := &Relay{URL: "ws://" + addr, Log: filepath.Join(dir, "relay.log")}
	if r.log, err = os.Create(r.Log); err != nil {
		return nil, err
	}
	r.cmd = exec.Command(bin, "relay", "-c", cfg, "--listen", addr, "--data", filepath.Join(dir, "db"))
	r.cmd.Stderr = r.log
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := r.cmd.Start(); err != nil {
		r.log.Close()
		return nil, err
	}
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return r, nil
		}
		if i > 400 {
			r.Stop()
			return nil, errors.New("relay did not listen on " + addr)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// Stop ends the relay (SIGTERM, then SIGKILL after 5 s).
func (r *Relay) Stop() {
	r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		r.cmd.Process.Kill()
		<-done
	}
	r.log.Close()
}

// StartT starts a relay for a test (skipping it when there is no binary)
// and stops it at the end, printing its log when the test failed.
func StartT(t testing.TB, repoRoot, set string) *Relay {
	bin := Binary(repoRoot)
	if bin == "" {
		t.Skip("no nostrwire relay binary: set NOSTRWIRE_BIN or build it (cargo build --release -p nostrwire)")
	}
	r, err := Start(bin, t.TempDir(), set)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Stop()
		if t.Failed() {
			b, _ := os.ReadFile(r.Log)
			t.Logf("relay log:\n%s", b)
		}
	})
	return r
}

// Servable reports whether every relay keeps ev as it is and serves it to
// anyone: a regular kind but direct messages and gift wraps, no expiration.
func Servable(ev *nostr.Event) bool {
	return nostr.IsRegularKind(ev.Kind) && ev.Kind != 4 && ev.Kind != 1059 && ev.Tags.Find("expiration") == nil
}

// Events reads up to n events from the JSON Lines file path, skipping the
// first skip lines and the events keep rejects (nil keeps all).
func Events(path string, skip, n int, keep func(*nostr.Event) bool) ([]nostr.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(nil, 4<<20)
	var out []nostr.Event
	for i := 0; s.Scan() && len(out) < n; i++ {
		if i < skip {
			continue
		}
		var ev nostr.Event
		if err := json.Unmarshal(s.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, i+1, err)
		}
		if keep == nil || keep(&ev) {
			out = append(out, ev)
		}
	}
	return out, s.Err()
}
