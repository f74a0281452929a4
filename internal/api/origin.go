package api

import (
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/vnet-project/vnet/internal/quote"
)

// A web page can make a browser send requests to this server: to
// 127.0.0.1 directly, or, through DNS rebinding, to a name of the page's
// own that it has pointed at this machine. The browser then names the
// page's host in Host, and its origin in Origin. So the server answers
// only requests whose Host is one of its own names (hosts), and takes a
// change only when its Origin, if any, is the server itself (sameOrigin):
// reads stay open to this machine without a token (Config.AuthReads off)
// without being open to every page its browser shows.

// hosts are the names a request's Host may give. Addresses need no
// listing: a page can make a browser send an address only as its own
// origin, which is then the server.
type hosts map[string]bool

// allowedHosts are localhost, the machine's name (whole and up to the
// first dot), the listen address's host when it is a name, and the names
// the server was given.
func allowedHosts(listen string, extra []string) hosts {
	h := hosts{"localhost": true}
	if name, err := os.Hostname(); err == nil && name != "" {
		h.add(name)
		short, _, _ := strings.Cut(name, ".")
		h.add(short)
	}
	if host, _, err := net.SplitHostPort(listen); err == nil && host != "" {
		h.add(host)
	}
	for _, name := range extra {
		h.add(name)
	}
	return h
}

func (h hosts) add(name string) { h[canonicalHost(name)] = true }

// canonicalHost is a host name as compared: lowercase, without a port,
// brackets or a trailing dot.
func canonicalHost(hostport string) string {
	host := hostport
	if hp, _, err := net.SplitHostPort(hostport); err == nil {
		host = hp
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	return strings.ToLower(host)
}

// allows reports whether a Host header names this server. An empty one
// (HTTP/1.0, which no browser sends) is allowed.
func (h hosts) allows(hostport string) bool {
	host := canonicalHost(hostport)
	if host == "" || h[host] || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, _, _ := strings.Cut(host, "%") // a zone: fe80::1%eth0
	return net.ParseIP(ip) != nil
}

// checkHost refuses a request whose Host is not one of the server's names.
func (s *Server) checkHost(r *http.Request) error {
	if s.hosts.allows(r.Host) {
		return nil
	}
	return fail(http.StatusForbidden, "Host "+quote.Q(r.Host)+" is not a name of this server: a web page may have sent this request; "+
		"to reach the server by that name, start it with --allow-host "+quote.Q(canonicalHost(r.Host)))
}

// checkOrigin refuses a change sent from a web page other than the
// server's own: one whose Origin is not the request's own host, or whose
// browser says it comes from another site.
func checkOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	site := r.Header.Get("Sec-Fetch-Site")
	if origin == "" && (site == "" || site == "same-origin" || site == "none") {
		return nil
	}
	if origin != "" {
		u, err := url.Parse(origin)
		if err == nil && u.Host != "" && sameHostPort(u, r) && (site == "" || site == "same-origin") {
			return nil
		}
	}
	return fail(http.StatusForbidden, "a change sent by the web page at "+quote.Q(origin)+" ("+quote.Q(site)+") is refused: "+
		"only the server's own pages and clients that are not browsers may make changes")
}

// sameHostPort reports whether an origin is the server the request came
// to: the same host and port, the port a scheme's default if left out.
func sameHostPort(origin *url.URL, r *http.Request) bool {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if origin.Scheme != scheme {
		return false
	}
	return withPort(origin.Host, scheme) == withPort(r.Host, scheme)
}

func withPort(hostport, scheme string) string {
	if _, _, err := net.SplitHostPort(hostport); err == nil {
		return strings.ToLower(hostport)
	}
	port := "80"
	if scheme == "https" {
		port = "443"
	}
	return strings.ToLower(net.JoinHostPort(strings.Trim(hostport, "[]"), port))
}

// Every answer says what a browser may do with it: not frame it (no page
// can put the dashboard under a click of its own), not guess its type,
// not send it on as a referrer, not keep it, not hand it to another
// site's page; and, but for the dashboard's own files, run and load
// nothing.
const (
	apiCSP       = "default-src 'none'; frame-ancestors 'none'"
	dashboardCSP = "default-src 'self'; style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", apiCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}
