package api

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// minTokenLen keeps guessable tokens out of a token file.
const minTokenLen = 16

// Tokens are the bearer tokens the server accepts, each with a name that
// the log and the events give as who made a change.
type Tokens struct {
	names  []string
	tokens [][]byte
}

// ParseTokens reads a token file: one token a line, as NAME:TOKEN or a bare
// TOKEN (named token1, token2, ...); blank lines and # comments are skipped.
func ParseTokens(data []byte) (*Tokens, error) {
	t := &Tokens{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, tok, ok := strings.Cut(line, ":")
		if !ok {
			name, tok = fmt.Sprintf("token%d", len(t.names)+1), line
		}
		if len(tok) < minTokenLen {
			return nil, fmt.Errorf("line %d: a token must be at least %d characters", n, minTokenLen)
		}
		t.names = append(t.names, name)
		t.tokens = append(t.tokens, []byte(tok))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(t.names) == 0 {
		return nil, errors.New("no token in the file")
	}
	return t, nil
}

// LoadTokens reads a token file.
func LoadTokens(path string) (*Tokens, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	t, err := ParseTokens(data)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return t, nil
}

// EnsureTokenFile makes a token file with one random token, named admin,
// readable by its owner only, unless the file exists. It reports whether
// it made one.
func EnsureTokenFile(path string) (bool, error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	}
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, fmt.Errorf("token file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return false, fmt.Errorf("token file: %w", err)
	}
	_, err = fmt.Fprintf(f, "admin:%s\n", hex.EncodeToString(buf))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err == nil, err
}

// FirstToken is the first token of a token file, for a client on the same
// machine as the server.
func FirstToken(path string) (string, error) {
	t, err := LoadTokens(path)
	if err != nil {
		return "", err
	}
	return string(t.tokens[0]), nil
}

// match returns the name of the token the request bears, if it is one.
func (t *Tokens) match(r *http.Request) (string, bool) {
	if t == nil {
		return "", false
	}
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	found := -1
	for i, want := range t.tokens {
		// Every token is compared, so the time taken says nothing of which matched.
		if subtle.ConstantTimeCompare([]byte(tok), want) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return t.names[found], true
}

// loopback reports whether the request came from this machine.
func loopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
