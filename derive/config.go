package derive

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Definition is one derived metric: its name, parsed expression, and the
// help texts set by name(oneline) and name(helptext) lines.
type Definition struct {
	Name    string
	Expr    *Expr
	OneLine string
	Help    string
	// File and Line locate the definition in a config file ("" and 0 when
	// it was made with Define).
	File string
	Line int
}

// Define parses expr and returns the definition of name (pmRegisterDerived).
// Names are not checked, as libpcp does not check them there.
func Define(name, expr string) (Definition, error) {
	e, err := Parse(expr)
	if err != nil {
		return Definition{}, err
	}
	return Definition{Name: name, Expr: e}, nil
}

// ConfigError is an error or warning pmLoadDerivedConfig reports for a line
// of a config file.
type ConfigError struct {
	File    string
	Line    int
	Warning bool
	Msg     string // e.g. "pmLoadDerivedConfig: missing ``='' after derived metric name"
	// Detail is the rest of PCP's report: the offending line, or for a
	// syntax error the expression, the caret line and pmDerivedErrStr.
	Detail []string
}

// Error returns the first line of the report, "[file:line] Error: msg".
func (e *ConfigError) Error() string {
	kind := "Error"
	if e.Warning {
		kind = "Warning"
	}
	return fmt.Sprintf("[%s:%d] %s: %s", e.File, e.Line, kind, e.Msg)
}

// Report returns the whole report as libpcp prints it, each line ending in
// a newline.
func (e *ConfigError) Report() string {
	var b strings.Builder
	b.WriteString(e.Error())
	b.WriteByte('\n')
	for _, d := range e.Detail {
		b.WriteString(d)
		b.WriteByte('\n')
	}
	return b.String()
}

// anonNames are the derived metrics libpcp registers before any config
// (global PMIDs 511.0.1 and 511.0.2).
var anonNames = []string{"event.flags", "event.missed"}

// LoadConfig loads derived metric definitions as pmLoadDerivedConfig(3)
// does: path is a colon-separated list of files and directories
// (directories are walked recursively, entries in name order); in each file
// a line is processed only when its newline is read (a last line without
// one is ignored), empty lines and lines whose first character is '#' are
// skipped, a backslash before the newline joins the next line (PCP 6.2.2
// and later), "name = expr" defines a metric (the expression is the rest of
// the line after the first '='), and "name(oneline) = text" or
// "name(helptext) = text" set help texts of an already defined metric (the
// text may be quoted with ' or " and then spans lines, with \ escapes).
//
// The errors are *ConfigError for bad lines (which are skipped, as libpcp
// skips them) and a plain error when a path cannot be read, which stops the
// loading as it stops pmLoadDerivedConfig.
func LoadConfig(path string) ([]Definition, []error) {
	l := configLoader{names: map[string]bool{}}
	for _, n := range anonNames {
		l.names[n] = true
	}
	for _, comp := range strings.Split(path, ":") {
		if comp == "" {
			continue
		}
		if err := l.component(comp); err != nil {
			l.errs = append(l.errs, err)
			break
		}
	}
	return l.defs, l.errs
}

type configLoader struct {
	defs  []Definition
	errs  []error
	names map[string]bool
}

func (l *configLoader) component(name string) error {
	fi, err := os.Stat(name)
	if err != nil {
		return fmt.Errorf("derived metrics config: %w", err)
	}
	if fi.Mode().IsRegular() {
		data, err := os.ReadFile(name)
		if err != nil {
			return fmt.Errorf("derived metrics config: %w", err)
		}
		l.file(name, data)
		return nil
	}
	if !fi.IsDir() {
		return nil
	}
	ents, err := os.ReadDir(name)
	if err != nil {
		return fmt.Errorf("derived metrics config: %w", err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	for _, e := range ents {
		if err := l.component(filepath.Join(name, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// checkName is libpcp's checkname(): components of [A-Za-z][A-Za-z0-9_]*
// separated by '.'.
func checkName(s string) bool {
	first := true
	for i := 0; i < len(s); i++ {
		c := int(s[i])
		if first {
			first = false
			if isAlpha(c) {
				continue
			}
			return false
		}
		if isAlpha(c) || isDigit(c) || c == '_' {
			continue
		}
		if c == '.' {
			first = true
			continue
		}
		return false
	}
	return true
}

func trimSpace(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r < 0x80 && isSpace(int(r)) })
}

// file processes one config file, __dminit_configfile.
func (l *configLoader) file(fname string, data []byte) {
	pos := 0
	next := func() int {
		if pos >= len(data) {
			return lexEOF
		}
		c := int(data[pos])
		pos++
		return c
	}
	lineno := 1
	var buf []byte
	eq, lp, rp := -1, -1, -1
	errf := func(warn bool, msg string, detail ...string) {
		l.errs = append(l.errs, &ConfigError{File: fname, Line: lineno, Warning: warn, Msg: msg, Detail: detail})
	}
	for {
		c := next()
		if c == lexEOF {
			return
		}
		if c == '\n' && len(buf) > 0 && buf[len(buf)-1] == '\\' {
			// continuation: drop the backslash and the newline
			buf = buf[:len(buf)-1]
			lineno++
			continue
		}
		if eq == -1 {
			switch {
			case c == '=':
				eq = len(buf)
			case c == '(' && lp == -1:
				lp = len(buf)
			case c == ')' && rp == -1:
				rp = len(buf)
			}
		}
		if c != '\n' {
			buf = append(buf, byte(c))
			continue
		}
		line := string(buf)
		if len(buf) > 0 && buf[0] != '#' {
			if eq == -1 {
				errf(false, "pmLoadDerivedConfig: missing ``='' after derived metric name", line)
			} else {
				l.definition(fname, &lineno, line, eq, lp, rp, next, errf)
			}
		}
		lineno++
		buf = buf[:0]
		eq, lp, rp = -1, -1, -1
	}
}

func (l *configLoader) definition(fname string, lineno *int, line string, eq, lp, rp int, next func() int, errf func(bool, string, ...string)) {
	var name string
	if lp != -1 && lp < eq {
		name = line[:lp]
	} else {
		name = line[:eq]
	}
	name = trimSpace(name)
	if name == "" {
		errf(false, "pmLoadDerivedConfig: derived metric name missing", line)
		return
	}
	if !checkName(name) {
		errf(false, "pmLoadDerivedConfig: illegal derived metric name ("+name+")")
		return
	}
	if lp >= 0 && rp == -1 {
		errf(false, "pmLoadDerivedConfig: missing ')' after attribute", line)
		return
	}
	if rp >= 0 && lp == -1 {
		errf(false, "pmLoadDerivedConfig: missing '(' before attribute", line)
		return
	}
	rest := line[eq+1:]
	if lp == -1 && rp == -1 {
		exprText := strings.TrimLeftFunc(rest, func(r rune) bool { return r < 0x80 && isSpace(int(r)) })
		if exprText == "" {
			errf(false, "pmLoadDerivedConfig: expression missing", line)
			return
		}
		lead := len(rest) - len(exprText)
		var e *Expr
		var se *SyntaxError
		if l.names[name] {
			se = &SyntaxError{Expr: exprText, Pos: 0, Msg: "Duplicate global derived metric name"}
		} else {
			var err error
			e, err = Parse(exprText)
			if err != nil {
				var ok bool
				if se, ok = err.(*SyntaxError); !ok {
					se = &SyntaxError{Expr: exprText, Msg: err.Error()}
				}
			}
		}
		if se != nil {
			caret := []byte(rest)
			at := lead + se.Pos
			for i := range caret {
				if i == at {
					caret[i] = '^'
				} else if !isSpace(int(caret[i])) {
					caret[i] = ' '
				}
			}
			detail := []string{rest, string(caret)}
			if se.Msg != "" {
				detail = append(detail, se.Msg)
			}
			errf(false, "pmRegisterDerived("+name+", ...) syntax error", detail...)
			return
		}
		l.names[name] = true
		l.defs = append(l.defs, Definition{Name: name, Expr: e, File: fname, Line: *lineno})
		return
	}
	// name(attr) = value
	attr := trimSpace(line[lp+1 : rp])
	if attr == "" {
		errf(false, "pmLoadDerivedConfig: attribute name missing", line)
		return
	}
	vp := strings.TrimLeftFunc(rest, func(r rune) bool { return r < 0x80 && isSpace(int(r)) })
	var delim byte
	if vp != "" && (vp[0] == '"' || vp[0] == '\'') {
		delim = vp[0]
		vp = vp[1:]
	}
	if vp == "" {
		errf(false, "pmLoadDerivedConfig: attribute value missing", line)
		return
	}
	value := vp
	if delim != 0 {
		var v []byte
		esc := false
		xtralines := 0
		i := 0
		c := 0
		for {
			switch {
			case i < len(vp):
				c = int(vp[i])
				i++
			case xtralines == 0:
				c = '\n'
			default:
				c = next()
			}
			if c == lexEOF {
				break
			}
			if c == '\n' {
				xtralines++
			}
			if esc {
				esc = false
				if c != '\n' {
					v = append(v, byte(c))
				}
				continue
			}
			if c == '\\' {
				esc = true
				continue
			}
			if c == int(delim) {
				break
			}
			v = append(v, byte(c))
		}
		if xtralines > 1 {
			*lineno += xtralines - 1
		}
		if c == lexEOF {
			errf(false, fmt.Sprintf("pmLoadDerivedConfig: missing termination (%c) for value", delim))
			return
		}
		if i < len(vp) {
			if extra := trimSpace(vp[i:]); extra != "" {
				errf(true, "pmLoadDerivedConfig: extra text ("+strings.TrimLeftFunc(vp[i:], func(r rune) bool { return r < 0x80 && isSpace(int(r)) })+") after attribute value will be ignored")
			}
		} else if xtralines > 0 {
			c = next()
			for c != lexEOF && c != '\n' {
				c = next()
				if !isSpace(c) {
					break
				}
			}
			if c != lexEOF && c != '\n' {
				extra := []byte{byte(c)}
				for c = next(); c != lexEOF && c != '\n'; c = next() {
					extra = append(extra, byte(c))
				}
				errf(true, "pmLoadDerivedConfig: extra text ("+string(extra)+") after attribute value will be ignored")
			}
		}
		value = string(v)
	}
	var d *Definition
	for i := range l.defs {
		if l.defs[i].Name == name {
			d = &l.defs[i]
		}
	}
	switch {
	case d == nil:
		errf(false, "pmLoadDerivedConfig: cannot set attribute, derived metric ("+name+") not defined", line)
	case attr == "oneline":
		if d.OneLine != "" {
			errf(false, "pmLoadDerivedConfig: duplicate value for attribute ("+attr+") of metric ("+name+")", line)
			return
		}
		d.OneLine = value
	case attr == "helptext":
		if d.Help != "" {
			errf(false, "pmLoadDerivedConfig: duplicate value for attribute ("+attr+") of metric ("+name+")", line)
			return
		}
		d.Help = value
	default:
		errf(false, "pmLoadDerivedConfig: attribute ("+attr+") is unknown for metric ("+name+")", line)
	}
}
