package httpd

import (
	"log"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"
)

// ErrorLog returns the standard-library logger for http.Server.ErrorLog
// that sends the server's own errors (a TLS handshake that fails, a
// connection a handler panicked on) to logger: one line per cause per
// interval, the cause being the message without the peer's address, with
// the peer of the first occurrence and how many occurrences the last line
// left out. A client opening connections that fail in a loop no longer
// writes a line each.
func ErrorLog(logger *slog.Logger, interval time.Duration) *log.Logger {
	return log.New(&errorLog{logger: logger, interval: interval, causes: map[string]*errorCause{}}, "", 0)
}

type errorLog struct {
	logger   *slog.Logger
	interval time.Duration

	mu     sync.Mutex
	causes map[string]*errorCause
}

type errorCause struct {
	last   time.Time
	missed int
}

// maxCauses bounds the causes remembered: messages quoting what a client
// sent could otherwise be distinct without end.
const maxCauses = 256

// peerRE finds the peer address the server puts in its messages
// ("from 127.0.0.1:5555: ", "from [::1]:5555: ").
var peerRE = regexp.MustCompile(`\bfrom (\[[0-9a-fA-F:.%\w]+\]|[0-9.]+|[\w.-]+):\d+`)

func (e *errorLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	cause, peer := msg, ""
	if m := peerRE.FindStringSubmatchIndex(msg); m != nil {
		peer = msg[m[0]+len("from ") : m[1]]
		cause = msg[:m[0]] + "from a client" + msg[m[1]:]
	}
	now := time.Now()
	e.mu.Lock()
	c := e.causes[cause]
	if c == nil {
		if len(e.causes) >= maxCauses {
			for k, o := range e.causes {
				if now.Sub(o.last) >= e.interval {
					delete(e.causes, k)
				}
			}
		}
		if len(e.causes) >= maxCauses {
			cause = "other HTTP server errors"
			if c = e.causes[cause]; c == nil {
				c = &errorCause{}
				e.causes[cause] = c
			}
		} else {
			c = &errorCause{}
			e.causes[cause] = c
		}
	}
	if !c.last.IsZero() && now.Sub(c.last) < e.interval {
		c.missed++
		e.mu.Unlock()
		return len(p), nil
	}
	missed := c.missed
	c.last, c.missed = now, 0
	e.mu.Unlock()
	e.logger.Warn("HTTP server error", "cause", cause, "peer", peer, "left_out_since_last_line", missed, "next_line_after", e.interval)
	return len(p), nil
}
