package libp2pmux

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/braidmux/braid/internal/skip"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// A full js-libp2p 3.3.11 node (@libp2p/tcp, @chainsafe/libp2p-noise,
// @chainsafe/libp2p-yamux; ../interop/js/node.mjs, versions pinned in its
// package-lock.json) against a go-libp2p host whose only muxer is braid,
// each side dialing in turn. ../interop/setup.sh installs the node modules;
// the test skips where node or they are missing.

const (
	jsCtlProtocol   = protocol.ID("/braid-test/ctl/1.0.0")
	jsNodeTimeout   = time.Minute // start, connect and every check
	jsNodeStreams   = 16          // concurrent echo streams each side opens
	jsNodeEventWait = 30 * time.Second
)

// jsNode is a running node.mjs process.
type jsNode struct {
	lines  chan string   // its stdout lines; closed at its end
	stdin  io.Closer     // closing it asks the node to stop and exit 0
	exited chan struct{} // closed once the process was waited for; waitErr is then set
	// waitErr is the process's exit: nil when it exited 0. Written
	// before exited is closed.
	waitErr error
}

// startJSNode starts node.mjs with args; the process group is killed when
// the test ends.
func startJSNode(t *testing.T, args ...string) *jsNode {
	t.Helper()
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		skip.Because(t, "node is not installed: the js-libp2p node test needs Node.js 20+ (interop/setup.sh)")
	}
	dir, err := filepath.Abs(filepath.Join("..", "interop", "js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "libp2p", "package.json")); err != nil {
		skip.Because(t, "js-libp2p modules are not installed in interop/js: run interop/setup.sh (npm ci there)")
	}
	cmd := exec.Command(nodeBin, append([]string{"node.mjs"}, args...)...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr strings.Builder
	var stderrMu sync.Mutex // guards stderr
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		stderrMu.Lock()
		defer stderrMu.Unlock()
		return stderr.Write(p)
	})
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &jsNode{lines: make(chan string, 256), stdin: stdin, exited: make(chan struct{})}
	go func() { // reads stdout to its end, then waits for the process
		defer close(n.exited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case n.lines <- sc.Text():
			default: // never block the node; no check waits for so many lines
			}
		}
		close(n.lines)
		n.waitErr = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // a no-op once stop saw it exit
		<-n.exited
		if t.Failed() {
			stderrMu.Lock()
			t.Logf("node.mjs stderr:\n%s", stderr.String())
			stderrMu.Unlock()
		}
	})
	return n
}

// stop closes the node's stdin, on which it stops its libp2p node (closing
// its connection to the go host) and exits, and fails the test unless it
// exits 0 within jsNodeEventWait: a js-libp2p error at the close, or an
// unhandled one during the checks, is a failure, not a killed process.
func (n *jsNode) stop(t *testing.T) {
	t.Helper()
	_ = n.stdin.Close()
	select {
	case <-n.exited:
	case <-time.After(jsNodeEventWait):
		t.Fatalf("node.mjs still running %v after its stdin closed", jsNodeEventWait)
	}
	if n.waitErr != nil {
		t.Fatalf("node.mjs: %v", n.waitErr)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// line waits for the node's next stdout line starting with prefix.
func (n *jsNode) line(t *testing.T, prefix string) string {
	t.Helper()
	timer := time.NewTimer(jsNodeEventWait)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-n.lines:
			if !ok {
				t.Fatalf("node.mjs exited before printing %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return strings.TrimPrefix(l, prefix)
			}
			t.Logf("node.mjs: %s", l)
		case <-timer.C:
			t.Fatalf("node.mjs printed no %q within %v", prefix, jsNodeEventWait)
		}
	}
}

func TestJSLibp2pNode(t *testing.T) {
	for _, jsDials := range []bool{false, true} {
		name := "go-dials"
		if jsDials {
			name = "js-dials"
		}
		t.Run(name, func(t *testing.T) {
			h := newTestHost(t, useBraid, useNoise)
			ctx, cancel := context.WithTimeout(context.Background(), jsNodeTimeout)
			defer cancel()
			var js peer.ID
			var n *jsNode
			if jsDials {
				// The js node reports its dial done before go's swarm has
				// added the connection: wait for go's own notice of it.
				connected := make(chan peer.ID, 1)
				h.Network().Notify(&network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) {
					select {
					case connected <- c.RemotePeer():
					default:
					}
				}})
				addr := fmt.Sprintf("%s/p2p/%s", h.Addrs()[0], h.ID())
				n = startJSNode(t, "dial", addr)
				id, err := peer.Decode(strings.Fields(n.line(t, "connected "))[0])
				if err != nil {
					t.Fatal(err)
				}
				js = id
				select {
				case got := <-connected:
					if got != js {
						t.Fatalf("go host connected to %s, the js node is %s", got, js)
					}
				case <-ctx.Done():
					t.Fatal("the go host never saw the js node's connection")
				}
			} else {
				n = startJSNode(t, "listen")
				ai, err := peer.AddrInfoFromString(n.line(t, "listening "))
				if err != nil {
					t.Fatal(err)
				}
				if err := h.Connect(ctx, *ai); err != nil {
					t.Fatal(err)
				}
				js = ai.ID
			}
			checkMuxer(t, h, js)
			checkReserves(t, ctx, h, js)

			// go opens streams to js's echo handler while js opens as many
			// to go's, on the one connection.
			var wg sync.WaitGroup
			errs := make(chan error, jsNodeStreams+1)
			for range jsNodeStreams {
				wg.Go(func() {
					if err := echoRoundTrip(ctx, h, js); err != nil {
						errs <- fmt.Errorf("go to js: %w", err)
					}
				})
			}
			wg.Go(func() {
				if err := jsOpens(ctx, h, js, jsNodeStreams, bytesPerStream); err != nil {
					errs <- fmt.Errorf("js to go: %w", err)
				}
			})
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if got := len(h.Network().ConnsToPeer(js)); got != 1 {
				t.Errorf("%d connections to the js node after the checks, want 1", got)
			}
			n.stop(t)
		})
	}
}

// jsOpens asks the js node, on its control protocol, to open n echo streams
// to h at once and check size random bytes on each.
func jsOpens(ctx context.Context, h *testHost, js peer.ID, n, size int) error {
	s, err := h.NewStream(ctx, js, jsCtlProtocol)
	if err != nil {
		return fmt.Errorf("ctl stream: %w", err)
	}
	defer s.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(d)
	}
	if _, err := fmt.Fprintf(s, "open %d %d\n", n, size); err != nil {
		return err
	}
	if err := s.CloseWrite(); err != nil {
		return err
	}
	reply, err := io.ReadAll(s)
	if err != nil {
		return fmt.Errorf("reply %q: %w", reply, err)
	}
	if want := fmt.Sprintf("ok %d\n", n); string(reply) != want {
		return fmt.Errorf("js node replied %q, want %q", reply, want)
	}
	return nil
}
