package httpd

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer for a logger written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestErrorLogOncePerCause: 200 connections to a TLS server that speak
// plain HTTP (each a failed handshake the server logs) give one structured
// line, naming the cause without the peer's port, not 200 lines of the
// standard library's log.
func TestErrorLogOncePerCause(t *testing.T) {
	var logs syncBuffer
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = ErrorLog(slog.New(slog.NewTextHandler(&logs, nil)), time.Minute)
	srv.StartTLS()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	const conns = 200
	for range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		io.Copy(io.Discard, c) // until the server closes it
		c.Close()
	}
	// the server logs after closing the connection: wait for the last one
	time.Sleep(200 * time.Millisecond)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	causes := map[string]int{}
	for _, l := range lines {
		i := strings.Index(l, "cause=")
		if i < 0 {
			t.Fatalf("line without a cause: %s", l)
		}
		causes[l[i:strings.Index(l, " peer=")]]++
	}
	t.Logf("%d connections, %d lines:\n%s", conns, len(lines), logs.String())
	if len(causes) == 0 || len(causes) > 2 {
		t.Errorf("causes %v, want the failed handshake (and at most one other)", causes)
	}
	for c, n := range causes {
		if n != 1 {
			t.Errorf("%d lines for %s, want 1", n, c)
		}
		if !strings.Contains(c, "TLS handshake error from a client") {
			t.Errorf("cause %s: want the handshake error without the peer", c)
		}
	}
}
