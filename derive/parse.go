package derive

import (
	"fmt"
	"strings"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// MaxDepth bounds the parser stack and the depth of an expression tree, as
// bison's YYMAXDEPTH bounds libpcp's parser stack, so that hostile input
// (say 100000 '(') cannot exhaust memory or the evaluator's stack.
const MaxDepth = 10000

// depthMsg is our pmDerivedErrStr for an expression over MaxDepth (libpcp's
// bison parser fails there with "memory exhausted" and no error text).
const depthMsg = "Expression nested too deeply"

// SyntaxError is a syntax error found by Parse: Pos is the byte offset of the
// error in the expression, as returned by pmRegisterDerived (-1 for an empty
// expression, whose error is "before" it), and Msg is the text of
// pmDerivedErrStr() ("" when libpcp sets none, e.g. for "1 2").
type SyntaxError struct {
	Expr string
	Pos  int
	Msg  string
}

// Error returns the expression, the offset and the message.
func (e *SyntaxError) Error() string {
	msg := e.Msg
	if msg == "" {
		msg = "syntax error"
	}
	return fmt.Sprintf("derived metric expression %q: offset %d: %s", e.Expr, e.Pos, msg)
}

// Caret returns the line pointing at the error under the expression, as
// pmRegisterDerivedMetric() prints it.
func (e *SyntaxError) Caret() string {
	n := e.Pos
	if n < 0 {
		n = -n
	}
	if e.Pos == 0 {
		return "^"
	}
	return strings.Repeat(" ", n) + "^"
}

// Report returns the message pmRegisterDerivedMetric(name, expr) returns for
// this error (PCP 6.0), ending in a newline.
func (e *SyntaxError) Report(name string) string {
	s := "Error: pmRegisterDerivedMetric(\"" + name + "\", ...)\n" + e.Expr + "\n" + e.Caret() + "\n"
	if e.Msg != "" {
		s += e.Msg + "\n"
	}
	return s
}

// Session is a series of pmRegisterDerived calls sharing libpcp's lexer
// state. libpcp keeps a static "inside matchinst(" flag that only a
// successful matchinst() clears: after an expression with a broken
// matchinst(, the next expressions of the same process lex '/' as the start
// of a pattern. Parse uses a fresh Session; a Session reproduces what a
// program registering several expressions in turn gets from libpcp.
type Session struct {
	inMatchinst bool
}

// Parse parses a derived metric expression with libpcp's grammar. A syntax
// error is a *SyntaxError.
func Parse(expr string) (*Expr, error) {
	var s Session
	return s.Parse(expr)
}

// Parse parses expr in this session.
func (s *Session) Parse(expr string) (*Expr, error) {
	p := &parser{sess: s}
	p.lex = lexer{s: expr, sess: s, errmsg: &p.errmsg, hasErr: &p.hasErr}
	if !p.run() {
		return nil, &SyntaxError{Expr: expr, Pos: p.lex.lexicon, Msg: p.errmsg}
	}
	return &Expr{Text: expr, Root: p.tree}, nil
}

type parser struct {
	lex      lexer
	sess     *Session
	errmsg   string
	hasErr   bool
	tree     *Node
	specdesc semantics.Desc
}

// gramerr records the first error message, as libpcp's gramerr().
func (p *parser) gramerr(phrase, pos, arg string) {
	if p.hasErr {
		return
	}
	if pos == "" {
		p.errmsg = phrase + " '" + arg + "'"
	} else {
		p.errmsg = phrase + " expected to " + pos + " " + arg
	}
	p.hasErr = true
}

// node builds an interior node, enforcing MaxDepth.
func (p *parser) node(op Op, l, r *Node) (semval, actStatus) {
	d := 0
	if l != nil {
		d = l.depth
	}
	if r != nil && r.depth > d {
		d = r.depth
	}
	if d+1 > MaxDepth {
		p.gramerr(depthMsg, "", "")
		p.errmsg = depthMsg
		return semval{}, actAbort
	}
	return semval{n: &Node{Op: op, Left: l, Right: r, depth: d + 1}}, actOK
}

const noToken symbol = -1

// run is bison's yyparse() over the LALR tables of tables.go, including its error
// recovery: on a syntax error, states are popped until one can shift the
// error token; the error rules then report gramerr() and YYERROR, which
// continues the recovery until the stack is empty. It reports whether the
// input was accepted.
func (p *parser) run() bool {
	states := make([]int, 1, 64)
	vals := make([]semval, 1, 64)
	tok := noToken
	var tokText string
	errStatus := 0
	for {
		s := states[len(states)-1]
		rule := -1
		if lalrNeedsToken[s] {
			if tok == noToken {
				tok, tokText = p.lex.next()
			}
			a := int(lalrAction[s][tok])
			switch {
			case a > 0:
				states = append(states, a-1)
				vals = append(vals, semval{s: tokText})
				tok = noToken
				if errStatus > 0 {
					errStatus--
				}
				if len(states) > MaxDepth {
					p.gramerr(depthMsg, "", "")
					p.errmsg = depthMsg
					return false
				}
				continue
			case a < 0:
				rule = -a - 1
			default:
				rule = int(lalrDefReduce[s])
			}
		} else {
			rule = int(lalrDefReduce[s])
		}
		if rule < 0 {
			// syntax error (yyerrlab)
			if errStatus == 3 {
				// the lookahead is never $end here: discard it
				tok = noToken
			}
			if !p.recover(&states, &vals) {
				return false
			}
			errStatus = 3
			continue
		}
		r := &grammar[rule]
		n := len(r.rhs)
		v, st := r.action(p, vals[len(vals)-n:])
		switch st {
		case actAccept:
			return true
		case actAbort:
			return false
		case actError:
			// YYERROR: pop the rule's symbols, then recover
			states = states[:len(states)-n]
			vals = vals[:len(vals)-n]
			if !p.recover(&states, &vals) {
				return false
			}
			errStatus = 3
			continue
		}
		states = states[:len(states)-n]
		vals = vals[:len(vals)-n]
		to := lalrGoTo[states[len(states)-1]][r.lhs-numTerminals]
		if to < 0 {
			return false // cannot happen with consistent tables
		}
		states = append(states, int(to))
		vals = append(vals, v)
	}
}

// recover is yyerrlab1: pop states until one shifts the error token, then
// shift it. It reports false (YYABORT) when the stack empties.
func (p *parser) recover(states *[]int, vals *[]semval) bool {
	for {
		s := (*states)[len(*states)-1]
		if a := lalrAction[s][symError]; a > 0 {
			*states = append(*states, int(a)-1)
			*vals = append(*vals, semval{})
			return true
		}
		if len(*states) == 1 {
			return false
		}
		*states = (*states)[:len(*states)-1]
		*vals = (*vals)[:len(*vals)-1]
	}
}
