package httpd

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestConnLimit: with two connections allowed, a third one closes the
// one idle longest; when both others are busy it closes itself.
func TestConnLimit(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{}, 2)
	c := &Config{ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, MaxConns: 2}
	srv := c.Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			started <- struct{}{}
			<-release
		}
		fmt.Fprintln(w, "ok")
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		return conn
	}
	// get sends a request on conn and returns the status line, "" when
	// the server closed the connection instead.
	get := func(conn net.Conn, path string) string {
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return ""
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Status
	}
	// closed reports whether the server closed conn.
	closed := func(conn net.Conn) bool {
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := conn.Read(make([]byte, 1))
		return err != nil && !strings.Contains(err.Error(), "timeout")
	}

	older, newer := dial(), dial()
	if s := get(older, "/"); s != "200 OK" {
		t.Fatalf("first connection: %q", s)
	}
	time.Sleep(10 * time.Millisecond)
	if s := get(newer, "/"); s != "200 OK" {
		t.Fatalf("second connection: %q", s)
	}
	third := dial()
	if s := get(third, "/"); s != "200 OK" {
		t.Fatalf("third connection: %q", s)
	}
	if !closed(older) {
		t.Error("the connection idle longest stayed open past the limit")
	}
	newer.Close()
	older.Close()

	// both slots busy: a new connection closes itself
	third.Close()
	time.Sleep(100 * time.Millisecond) // the server sees the closes
	busy1 := dial()
	fmt.Fprintf(busy1, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started
	busy2 := dial()
	fmt.Fprintf(busy2, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started
	extra := dial()
	if s := get(extra, "/"); s != "" {
		t.Errorf("a connection beyond two busy ones was served: %q", s)
	}
	close(release)
	busy1.Close()
	busy2.Close()
}

// TestGetOnly: GET and HEAD pass, OPTIONS lists them, others get 405.
func TestGetOnly(t *testing.T) {
	h := GetOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") }))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	defer srv.Close()
	for _, tc := range []struct {
		method string
		code   int
		allow  string
	}{
		{http.MethodGet, 200, ""},
		{http.MethodHead, 200, ""},
		{http.MethodOptions, 204, "GET, HEAD, OPTIONS"},
		{http.MethodPost, 405, "GET, HEAD, OPTIONS"},
		{http.MethodDelete, 405, "GET, HEAD, OPTIONS"},
	} {
		req, _ := http.NewRequest(tc.method, "http://"+l.Addr().String()+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code || resp.Header.Get("Allow") != tc.allow {
			t.Errorf("%s: %d Allow %q, want %d Allow %q", tc.method, resp.StatusCode, resp.Header.Get("Allow"), tc.code, tc.allow)
		}
	}
}
