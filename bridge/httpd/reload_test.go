package httpd

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestReloader: POST /-/reload answers 200 when the load succeeds and 500
// with the reason when it fails, the gauge saying which; GET is refused
// without loading.
func TestReloader(t *testing.T) {
	var fail error
	loads := 0
	reg := prometheus.NewRegistry()
	r := NewReloader(func() error { loads++; return fail }, slog.New(slog.DiscardHandler), reg)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: r}
	go srv.Serve(l)
	defer srv.Close()
	url := "http://" + l.Addr().String() + "/-/reload"
	do := func(method string) (int, string) {
		req, _ := http.NewRequest(method, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ok := func() float64 {
		return testutil.ToFloat64(r.ok)
	}
	if code, _ := do(http.MethodPost); code != 200 || ok() != 1 || loads != 1 {
		t.Fatalf("good load: %d, gauge %v, %d loads", code, ok(), loads)
	}
	fail = errors.New("bad line 3")
	if code, body := do(http.MethodPut); code != 500 || !strings.Contains(body, "bad line 3") || ok() != 0 {
		t.Fatalf("bad load: %d %q, gauge %v", code, body, ok())
	}
	if code, _ := do(http.MethodGet); code != 405 || loads != 2 {
		t.Fatalf("GET: %d, %d loads (want 405, 2)", code, loads)
	}
	fail = nil
	if err := r.Reload(); err != nil || ok() != 1 {
		t.Fatalf("reload after a fix: %v, gauge %v", err, ok())
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 2 {
		t.Errorf("registered: %d metrics, %v (want the two gauges)", n, err)
	}
}
