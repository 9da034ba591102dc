package slowconn_test

import (
	"fmt"
	"io"
	"net"
	"time"

	"github.com/braidmux/braid/slowconn"
)

// ExamplePipe sends 1 MB over a simulated 100 Mbit/s link with 5 ms of
// one-way latency and compares the time it took with the ideal: the payload
// at the link's goodput with full packets, plus one latency.
func ExamplePipe() {
	link := slowconn.Link{Bandwidth: 100e6, Latency: 5 * time.Millisecond}
	a, b := slowconn.Pipe(link)
	defer b.Close()

	go func() {
		a.Write(make([]byte, 1e6))
		a.Close() // the peer reads io.EOF after the data
	}()
	start := time.Now()
	n, _ := io.Copy(io.Discard, b)
	elapsed := time.Since(start)

	ideal := time.Duration(float64(n)/link.Goodput()*float64(time.Second)) + link.Latency
	fmt.Printf("received %d bytes\n", n)
	fmt.Printf("payload per packet: %d bytes\n", link.PayloadPerPacket())
	fmt.Printf("goodput: %.3f MB/s\n", link.Goodput()/1e6)
	fmt.Printf("ideal time: %v\n", ideal.Round(time.Millisecond))
	fmt.Println("no faster than ideal:", elapsed >= ideal)
	// Output:
	// received 1000000 bytes
	// payload per packet: 1460 bytes
	// goodput: 12.167 MB/s
	// ideal time: 87ms
	// no faster than ideal: true
}

// ExampleWrap shapes the sending side of a real conn: bytes written to the
// wrapped end reach the peer after the link's latency. Wrap each end of a
// pair to shape both directions.
func ExampleWrap() {
	c1, c2 := net.Pipe() // a TCP conn from net.Dial works the same way
	link := slowconn.Link{Latency: 20 * time.Millisecond}
	slow := slowconn.Wrap(c1, link)
	defer c2.Close()

	start := time.Now()
	go func() {
		slow.Write([]byte("hello"))
		slow.Close() // delivers what was written, then closes c1
	}()
	got, _ := io.ReadAll(c2)
	fmt.Printf("received %q\n", got)
	fmt.Println("after the latency:", time.Since(start) >= link.Latency)
	// Output:
	// received "hello"
	// after the latency: true
}
