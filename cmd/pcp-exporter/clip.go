package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
)

// maxEcho is how much of a value from the user or a file an error or a
// log line repeats: a 10 MB expression or argument is cut, with its size.
const maxEcho = 256

// clip quotes s, cut to maxEcho bytes with its full size after it.
func clip(s string) string {
	if len(s) <= maxEcho {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:maxEcho]), len(s))
}

// clipHandler cuts long string values of log records (clip) before
// another handler writes them, so that no log line repeats a huge input.
type clipHandler struct{ slog.Handler }

func clipLogger(l *slog.Logger) *slog.Logger { return slog.New(clipHandler{l.Handler()}) }

func clipAttr(a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		if s := a.Value.String(); len(s) > maxEcho {
			return slog.String(a.Key, clip(s))
		}
	case slog.KindAny:
		switch v := a.Value.Any().(type) {
		case error:
			if s := v.Error(); len(s) > maxEcho {
				return slog.String(a.Key, clip(s))
			}
		case []string:
			c := make([]string, len(v))
			for i, s := range v {
				c[i] = s
				if len(s) > maxEcho {
					c[i] = clip(s)
				}
			}
			return slog.Any(a.Key, c)
		}
	case slog.KindGroup:
		as := a.Value.Group()
		c := make([]any, len(as))
		for i, g := range as {
			c[i] = clipAttr(g)
		}
		return slog.Group(a.Key, c...)
	}
	return a
}

func (h clipHandler) Handle(ctx context.Context, r slog.Record) error {
	if len(r.Message) > maxEcho {
		r.Message = clip(r.Message)
	}
	c := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		c.AddAttrs(clipAttr(a))
		return true
	})
	return h.Handler.Handle(ctx, c)
}

func (h clipHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := make([]slog.Attr, len(as))
	for i, a := range as {
		c[i] = clipAttr(a)
	}
	return clipHandler{h.Handler.WithAttrs(c)}
}

func (h clipHandler) WithGroup(name string) slog.Handler {
	return clipHandler{h.Handler.WithGroup(name)}
}
