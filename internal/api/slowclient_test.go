package api

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSlowHeadersAreCutOff trickles a request's headers one byte at a time,
// far slower than the header timeout allows: the server hangs up before
// the headers are complete, not before the timeout, and answers other
// clients all the while.
func TestSlowHeadersAreCutOff(t *testing.T) {
	const timeout = 500 * time.Millisecond
	s, _ := newTestServer(t, func(c *Config) { c.HeaderTimeout = timeout })
	base := startServer(t, s)
	addr := strings.TrimPrefix(base, "http://")

	start := time.Now()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hungUp := make(chan []byte)
	go func() {
		got, _ := io.ReadAll(conn) // ends when the server closes (or resets) the connection
		hungUp <- got
	}()

	// Others keep asking while the slow client holds its connection.
	var answered, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// A new connection each time: the server still accepts them.
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			resp, err := client.Get(base + "/healthz")
			if err != nil {
				failed.Add(1)
				t.Errorf("another client, while the slow one trickles: %v", err)
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				failed.Add(1)
				t.Errorf("another client, while the slow one trickles: %s", resp.Status)
				continue
			}
			answered.Add(1)
		}
	}()

	// 100 bytes at 50 ms each would take 5 s, ten times the timeout.
	request := []byte("GET /healthz HTTP/1.1\r\nHost: vnet\r\nUser-Agent: a-very-slow-client\r\nX-Padding: " +
		strings.Repeat("x", 21) + "\r\n\r\n")
	sent := 0
	var got []byte
	var cutAfter time.Duration
trickle:
	for sent < len(request) {
		select {
		case got = <-hungUp:
			cutAfter = time.Since(start)
			break trickle
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := conn.Write(request[sent : sent+1]); err != nil {
			got, cutAfter = <-hungUp, time.Since(start)
			break
		}
		sent++
	}
	if sent == len(request) {
		select {
		case got = <-hungUp:
			cutAfter = time.Since(start)
		case <-time.After(5 * time.Second):
		}
		close(stop)
		wg.Wait()
		t.Fatalf("the server took all %d header bytes over %v, past its %v header timeout", sent, time.Since(start), timeout)
	}
	close(stop)
	wg.Wait()

	if cutAfter < timeout {
		t.Errorf("cut off after %v, before the %v header timeout", cutAfter, timeout)
	}
	if bytes.Contains(got, []byte(" 200 ")) {
		t.Errorf("the trickled request was answered: %q", got)
	}
	if answered.Load() == 0 || failed.Load() != 0 {
		t.Errorf("other clients meanwhile: %d answered, %d failed", answered.Load(), failed.Load())
	}
	t.Logf("cut off after %v with %d of %d header bytes sent; %d other requests answered meanwhile", cutAfter, sent, len(request), answered.Load())
	resp, err := http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the server after the slow client: %v %v", resp, err)
	}
	resp.Body.Close()
}
