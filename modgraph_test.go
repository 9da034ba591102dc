package braid

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxUserModules is the most modules `go list -m all` may show for a program
// that imports braid and slowconn: the module graph a vulnerability scanner
// or a reviewer of a user's go.mod sees. go-yamux's users see 7.
const maxUserModules = 20

// TestUserModuleGraph builds a fresh program importing braid and
// braid/slowconn, lets `go mod tidy` resolve it against this checkout, and
// checks what its go.mod pulls in: at most maxUserModules modules and none
// of go-libp2p's graph or the other muxers.
func TestUserModuleGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go mod tidy; not in -short")
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/user\n\ngo 1.26.0\n\nrequire github.com/braidmux/braid v0.2.0\n\nreplace github.com/braidmux/braid => "+root+"\n")
	write("main.go", `package main

import (
	"net"

	"github.com/braidmux/braid"
	"github.com/braidmux/braid/slowconn"
)

func main() {
	a, b := slowconn.Pipe(slowconn.LAN())
	go func() { _, _ = braid.Server(b, nil) }()
	_, _ = braid.Client(a, nil)
	var _ net.Conn = a
}
`)
	run := func(args ...string) string {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mod", "tidy")
	run("build", "-o", os.DevNull, ".")
	mods := strings.Fields(run("list", "-m", "-f", "{{.Path}}", "all"))
	t.Logf("%d modules: %s", len(mods), strings.Join(mods, " "))
	if len(mods) > maxUserModules {
		t.Errorf("a program importing braid lists %d modules, want at most %d:\n%s", len(mods), maxUserModules, strings.Join(mods, "\n"))
	}
	for _, m := range mods {
		for _, banned := range []string{"github.com/libp2p/go-libp2p", "github.com/quic-go/", "github.com/pion/", "github.com/prometheus/", "go.uber.org/fx", "github.com/xtaci/smux", "github.com/hashicorp/yamux"} {
			if m == banned || strings.HasPrefix(m, banned+"/") || (strings.HasSuffix(banned, "/") && strings.HasPrefix(m, banned)) {
				t.Errorf("a program importing braid inherits %s", m)
			}
		}
	}
}
