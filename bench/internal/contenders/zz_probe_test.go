package contenders

import (
	"fmt"
	"os"
	"context"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/braidmux/braid"
)

func TestZZProbe(t *testing.T) {
	for _, tl := range []bool{false, true} {
		for _, size := range []int{64 << 10, 256 << 10} {
			if os.Getenv("ZZ") != "" && os.Getenv("ZZ") != fmt.Sprint(tl, size) {
				continue
			}
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			acc := make(chan net.Conn)
			go func() { c, _ := ln.Accept(); acc <- c }()
			c1, _ := net.Dial("tcp", ln.Addr().String())
			c2 := <-acc
			ln.Close()
			var a, b net.Conn = c1, c2
			if tl {
				s, _ := newSecurer()
				t1, t2, err := s.pair(c1, c2)
				if err != nil {
					t.Fatal(err)
				}
				a, b = t1, t2
			}
			client, _ := braid.Client(a, nil)
			server, _ := braid.Server(b, nil)
			cs, _ := client.OpenStream(context.Background())
			cs.Write([]byte{1})
			ss, _ := server.AcceptStream()
			io.ReadFull(ss, make([]byte, 1))
			n := 128 << 20 / size
			msg := make([]byte, size+4)
			done := make(chan struct{})
			go func() {
				buf := make([]byte, len(msg))
				for range n {
					io.ReadFull(ss, buf)
				}
				close(done)
			}()
			start := time.Now()
			for range n {
				cs.Write(msg)
			}
			<-done
			d := time.Since(start)
			c, s := client.Stats(), server.Stats()
			t.Logf("P=%d tls=%v size=%d %.0f MB/s; client %+v\n server %+v", runtime.GOMAXPROCS(0), tl, size, float64(n*size)/d.Seconds()/1e6, c, s)
			client.Close()
			server.Close()
		}
	}
}
