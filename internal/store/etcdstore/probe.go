package etcdstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"
)

// probeTimeout bounds each step of probing one endpoint.
const probeTimeout = time.Second

// probe looks for why endpoints did not serve: refused or silent TCP, or a
// TLS handshake that fails (unknown CA, missing client certificate). The
// etcd client only reports that its deadline passed; this names the cause.
// It returns "" when every endpoint connects, as a member without quorum does.
func probe(endpoints []string, tc *tls.Config) string {
	causes := make([]string, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := probeOne(ep, tc); err != nil {
				causes[i] = fmt.Sprintf("%s: %v", ep, err)
			}
		}()
	}
	wg.Wait()
	var out []string
	for _, c := range causes {
		if c != "" {
			out = append(out, c)
		}
	}
	return strings.Join(out, "; ")
}

func probeOne(endpoint string, tc *tls.Config) error {
	secure := strings.HasPrefix(endpoint, "https://")
	host := endpoint
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil {
			return err
		}
		host = u.Host
	}
	conn, err := net.DialTimeout("tcp", host, probeTimeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	if !secure {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if tc != nil {
		cfg = tc.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(host)
	}
	cfg.NextProtos = []string{"h2"}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	tconn := tls.Client(conn, cfg)
	if err := tconn.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("TLS: %w", err)
	}
	// With TLS 1.3 a server refuses a client certificate only after the
	// client's side of the handshake is done: its alert comes on the first
	// read. A server that accepts just waits for the client to speak.
	tconn.SetReadDeadline(time.Now().Add(probeTimeout / 2))
	_, err = tconn.Read(make([]byte, 1))
	var ne net.Error
	if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("TLS: %w", err)
	}
	return nil
}
