package interop_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/braidmux/braid"
	"github.com/stretchr/testify/require"
)

// External peers: another implementation's muxer in a child process (Node.js
// for js-libp2p, a Rust binary for rust-yamux) on one end of a loopback TCP
// connection, braid on the other. The peer dials or listens, as the test
// chooses, and then serves a tiny command protocol: every stream braid opens
// starts with one command line, and the peer's stdout carries events back.
// The peers (interop/js/peer.mjs, interop/rust/src/main.rs) implement:
//
//	echo               copy the stream back until FIN, then FIN
//	send N             send N pattern bytes (byte i = i mod 251), then FIN
//	recv               read to FIN, reply "N SHA256HEX", FIN
//	finfirst TAG N     send N pattern bytes and FIN, read to FIN, print "report TAG N SHA256HEX"
//	waitreset TAG      reply "ready", print "report TAG reset" when the stream is reset ("eof" on FIN)
//	reset N            send N pattern bytes, then reset the stream
//	cut N fin|rst      send N pattern bytes, read one line, then, once the bytes were
//	                   written to the socket, end the TCP connection (FIN or RST)
//	                   with the stream still open
//	goaway             close the muxer (go-away, code 0), then the connection
//	watchgoaway TAG    reply "ready", then once the muxer no longer opens streams print
//	                   "report TAG refused goaway CODE" when that is for the go-away it read
//	                   (CODE its code), else "report TAG ended REASON"
//	ping N             ping braid N times, reply "ok" (or "unsupported")
//	open N SIZE        open N streams at once, echo-check SIZE random bytes on each
//	                   (braid echoes every stream it accepts), reply "ok N" or "fail ..."
//
// Peer processes print "listening HOST:PORT" first when they listen, and
// "closed ..." when their connection ends ("closed goaway CODE" when it
// ended with a go-away read from braid, CODE its code); then they exit.

// Bounds on every wait of these tests: the machines are shared and slow, and
// a Node.js process needs a few hundred milliseconds to start.
const (
	extStartTimeout = 30 * time.Second // peer process start, dial and accept
	extOpTimeout    = 60 * time.Second // one check's stream deadline (16 MiB under -race)
	extEventTimeout = 30 * time.Second // a stdout event the check waits for
	extEventBuffer  = 4096             // stdout lines kept before the test reads them
)

// extPeer is an implementation run as a child process.
type extPeer struct {
	name     string
	protocol braid.Protocol
	dir      string                        // working directory of the process
	argv     func(args ...string) []string // the command line for "listen" or "dial ADDR"
	// finsOnGoAway: the peer's go-away first ends every open stream with a
	// FIN (js-libp2p), instead of leaving them open (rust-yamux).
	finsOnGoAway bool
	// pings: the peer can ping on command (rust-yamux 0.13 has no ping API:
	// the pings it sends on its own are checked on the wire instead).
	pings bool
	// refusedEcho is how the peer's "open" reply describes a stream braid
	// refused with a reset (rust-yamux reads a reset as the end of the
	// stream, so its echo comes back empty).
	refusedEcho string
}

func (p extPeer) yamux() bool { return p.protocol == braid.Yamux }

// extConn is one running peer process and braid's session with it.
type extConn struct {
	peer   extPeer
	sess   *braid.Session
	events chan string // the peer's stdout lines; closed at its end
	stderr *lockedBuffer
}

// lockedBuffer collects a process's stderr for the failure log.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startExt starts the peer (dialing braid when peerDials, else listening)
// and connects a braid session to it. braid echoes every stream the peer
// opens. The process group is killed, and every goroutine ended, when the
// test ends.
func startExt(t *testing.T, p extPeer, peerDials bool) *extConn {
	t.Helper()
	return startExtWith(t, p, peerDials, braid.DefaultConfig())
}

// startExtWith is startExt with braid's configuration (its Protocol is set
// to the peer's).
func startExtWith(t *testing.T, p extPeer, peerDials bool, cfg *braid.Config) *extConn {
	t.Helper()
	return startExtVia(t, p, peerDials, cfg, nil)
}

// startExtRelayed is startExt with the connection passing through a
// yamuxRelay in this process, which records the frames each way; braid
// still has a *net.TCPConn of its own (one end of a loopback pair).
func startExtRelayed(t *testing.T, p extPeer, peerDials bool) (*extConn, *yamuxRelay) {
	t.Helper()
	var r *yamuxRelay
	x := startExtVia(t, p, peerDials, braid.DefaultConfig(), func(peerConn net.Conn) net.Conn {
		var braidConn net.Conn
		r, braidConn = startYamuxRelay(t, peerConn)
		return braidConn
	})
	return x, r
}

// startExtVia is startExtWith with via, when not nil, between the
// connection to the peer and braid: braid runs on the conn it returns.
func startExtVia(t *testing.T, p extPeer, peerDials bool, cfg *braid.Config, via func(peerConn net.Conn) net.Conn) *extConn {
	t.Helper()
	var ln net.Listener
	args := []string{"listen"}
	if peerDials {
		var err error
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		args = []string{"dial", ln.Addr().String()}
	}
	argv := p.argv(args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = p.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	x := &extConn{peer: p, events: make(chan string, extEventBuffer), stderr: &lockedBuffer{}}
	cmd.Stderr = x.stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start(), "starting %s", p.name)

	// Owned here: the stdout reader ends at the pipe's EOF, after the kill.
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(x.events)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case x.events <- sc.Text():
			default: // no check waits for so many lines; drop, never block the peer
			}
		}
	}()
	// Owned here: waits for the process once its stdout ended.
	exited := make(chan struct{})
	var waitErr error // written before exited closes
	go func() {
		<-readerDone
		waitErr = cmd.Wait()
		close(exited)
	}()
	sessionStarted := false
	t.Cleanup(func() {
		if sessionStarted {
			// braid's session was closed (the later cleanup ran first), so
			// the peer's connection ended and the peer exits by itself,
			// with status 0: any other status (an uncaught exception, a
			// panic, a failed check) is a failure the checks did not see.
			select {
			case <-exited:
				if waitErr != nil {
					t.Errorf("%s exited with %v after its connection ended", p.name, waitErr)
				}
			case <-time.After(extEventTimeout):
				t.Errorf("%s still running %v after braid's session closed", p.name, extEventTimeout)
			}
		}
		select {
		case <-exited:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", p.name, x.stderr.String())
		}
	})

	var conn net.Conn
	if peerDials {
		require.NoError(t, ln.(*net.TCPListener).SetDeadline(time.Now().Add(extStartTimeout)))
		conn, err = ln.Accept()
		require.NoError(t, err, "%s did not dial", p.name)
	} else {
		line := x.event(t, "listening ")
		conn, err = net.DialTimeout("tcp", strings.TrimPrefix(line, "listening "), extStartTimeout)
		require.NoError(t, err)
	}
	if via != nil {
		conn = via(conn)
	}
	cfg.Protocol = p.protocol
	if peerDials {
		x.sess, err = braid.Server(conn, cfg)
	} else {
		x.sess, err = braid.Client(conn, cfg)
	}
	require.NoError(t, err)

	// Owned here: the acceptor and its echo goroutines end when the
	// session closes (their streams fail then).
	var echoes sync.WaitGroup
	echoes.Add(1)
	go func() {
		defer echoes.Done()
		for {
			st, err := x.sess.AcceptStream()
			if err != nil {
				return
			}
			echoes.Add(1)
			go func() {
				defer echoes.Done()
				_ = st.SetDeadline(time.Now().Add(extOpTimeout))
				if _, err := io.Copy(st, st); err != nil {
					_ = st.Reset()
					return
				}
				_ = st.CloseWrite()
			}()
		}
	}()
	sessionStarted = true
	t.Cleanup(func() {
		_ = x.sess.Close()
		echoes.Wait()
	})
	return x
}

// event waits for the peer's next stdout line that starts with prefix;
// other lines are logged and skipped.
func (x *extConn) event(t *testing.T, prefix string) string {
	t.Helper()
	timer := time.NewTimer(extEventTimeout)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-x.events:
			if !ok {
				t.Fatalf("%s exited before printing %q", x.peer.name, prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
			t.Logf("%s: %s", x.peer.name, line)
		case <-timer.C:
			t.Fatalf("%s printed no %q within %v", x.peer.name, prefix, extEventTimeout)
		}
	}
}

// command opens a stream, bounded by extOpTimeout, and sends the command
// line (and any bytes after it in the same write).
func (x *extConn) command(t *testing.T, line string) *braid.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), extStartTimeout)
	defer cancel()
	st, err := x.sess.OpenStream(ctx)
	require.NoError(t, err)
	require.NoError(t, st.SetDeadline(time.Now().Add(extOpTimeout)))
	_, err = st.Write([]byte(line + "\n"))
	require.NoError(t, err)
	return st
}

// extPattern returns n bytes of the transfer pattern from offset off.
func extPattern(off, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((off + i) % 251)
	}
	return b
}

// readPattern reads until an error and checks that every byte read
// follows the transfer pattern; it returns the count and the error.
func readPattern(st *braid.Stream) (int, error) {
	buf := make([]byte, 64*1024)
	n := 0
	for {
		k, err := st.Read(buf)
		if !bytes.Equal(buf[:k], extPattern(n, k)) {
			return n, fmt.Errorf("bytes %d..%d differ from the pattern", n, n+k)
		}
		n += k
		if err != nil {
			return n, err
		}
	}
}

// forBothExtRoles runs f against the peer in both roles, each with a fresh
// process.
func forBothExtRoles(t *testing.T, p extPeer, f func(t *testing.T, peerDials bool)) {
	for _, peerDials := range []bool{true, false} {
		name := "peer-listens"
		if peerDials {
			name = "peer-dials"
		}
		t.Run(name, func(t *testing.T) { f(t, peerDials) })
	}
}
