package derive

import (
	"regexp"
	"strings"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// Op is the kind of an expression node (libpcp's N_* node types).
type Op uint8

// Node kinds.
const (
	OpName       Op = iota + 1 // a metric name
	OpInteger                  // an integer constant (or mkconst of one)
	OpDouble                   // a floating point constant (or mkconst of one)
	OpPlus                     // l + r
	OpMinus                    // l - r
	OpStar                     // l * r
	OpSlash                    // l / r
	OpNeg                      // -l
	OpLT                       // l < r
	OpLEQ                      // l <= r
	OpEQ                       // l == r
	OpGEQ                      // l >= r
	OpGT                       // l > r
	OpNEQ                      // l != r
	OpAnd                      // l && r
	OpOr                       // l || r
	OpNot                      // !l
	OpQuest                    // l ? r.l : r.r (r is an OpColon)
	OpColon                    // the two branches of a ternary
	OpAvg                      // avg(name)
	OpCount                    // count(name)
	OpDelta                    // delta(name)
	OpMax                      // max(name)
	OpMin                      // min(name)
	OpSum                      // sum(name)
	OpAnon                     // anon(PM_TYPE_xxx)
	OpRate                     // rate(name)
	OpInstant                  // instant(name)
	OpDefined                  // defined(name)
	OpRescale                  // rescale(l, "units"); r is an OpScale
	OpScale                    // the units of a rescale
	OpFilterInst               // l is an OpPattern, r the filtered expression
	OpPattern                  // an instance name ([name]) or regular expression
	OpScalar                   // scalar(l)
)

var opNames = [...]string{
	OpName: "NAME", OpInteger: "INTEGER", OpDouble: "DOUBLE", OpPlus: "PLUS", OpMinus: "MINUS",
	OpStar: "STAR", OpSlash: "SLASH", OpNeg: "NEG", OpLT: "LT", OpLEQ: "LEQ", OpEQ: "EQ",
	OpGEQ: "GEQ", OpGT: "GT", OpNEQ: "NEQ", OpAnd: "AND", OpOr: "OR", OpNot: "NOT",
	OpQuest: "QUEST", OpColon: "COLON", OpAvg: "AVG", OpCount: "COUNT", OpDelta: "DELTA",
	OpMax: "MAX", OpMin: "MIN", OpSum: "SUM", OpAnon: "ANON", OpRate: "RATE",
	OpInstant: "INSTANT", OpDefined: "DEFINED", OpRescale: "RESCALE", OpScale: "SCALE",
	OpFilterInst: "FILTERINST", OpPattern: "PATTERN", OpScalar: "SCALAR",
}

var opSymbols = [...]string{
	OpPlus: "+", OpMinus: "-", OpStar: "*", OpSlash: "/", OpNeg: "-", OpLT: "<", OpLEQ: "<=",
	OpEQ: "==", OpGEQ: ">=", OpGT: ">", OpNEQ: "!=", OpAnd: "&&", OpOr: "||", OpNot: "!",
	OpQuest: "?", OpColon: ":",
}

// String returns libpcp's name of the node type (__dmnode_type_str), e.g. "PLUS".
func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return "unknown type " + itoa(int(o)) + "!"
}

func (o Op) symbol() string {
	if int(o) < len(opSymbols) && opSymbols[o] != "" {
		return opSymbols[o]
	}
	return "op " + itoa(int(o)) + "!"
}

func (o Op) isRelational() bool { return o >= OpLT && o <= OpNEQ }
func (o Op) isBoolean() bool    { return o == OpAnd || o == OpOr }
func (o Op) isArith() bool      { return o >= OpPlus && o <= OpSlash }

// Node is one node of a parsed expression tree.
type Node struct {
	Op          Op
	Left, Right *Node
	// Value is the metric name of an OpName, the literal text of a constant,
	// the instance name or regular expression of an OpPattern, and the
	// units text of an OpScale.
	Value string
	// Desc is the descriptor of a constant (with mkconst's overrides), of
	// the type operand of anon(), and the units of an OpScale.
	Desc semantics.Desc
	// For OpPattern: Exact is a [name] filter, otherwise Regex (POSIX ERE,
	// from matchinst) with Invert for "!".
	Exact  bool
	Regex  *regexp.Regexp
	Invert bool

	saveLast bool // operand of delta() or rate(): keep the previous sample
	depth    int
}

// Expr is a syntactically valid derived metric expression.
type Expr struct {
	Text string
	Root *Node
}

// String returns the expression fully parenthesized, showing how it was
// parsed, e.g. "((-a) + b)".
func (e *Expr) String() string {
	var b strings.Builder
	writeNode(&b, e.Root)
	return b.String()
}

func writeNode(b *strings.Builder, n *Node) {
	if n == nil {
		b.WriteString("<nil>")
		return
	}
	switch n.Op {
	case OpName, OpInteger, OpDouble:
		b.WriteString(n.Value)
	case OpNeg, OpNot:
		b.WriteString("(" + n.Op.symbol())
		writeNode(b, n.Left)
		b.WriteString(")")
	case OpQuest:
		b.WriteString("(")
		writeNode(b, n.Left)
		b.WriteString(" ? ")
		writeNode(b, n.Right.Left)
		b.WriteString(" : ")
		writeNode(b, n.Right.Right)
		b.WriteString(")")
	case OpRescale:
		b.WriteString("rescale(")
		writeNode(b, n.Left)
		b.WriteString(", \"" + n.Right.Value + "\")")
	case OpFilterInst:
		if n.Left.Exact {
			writeNode(b, n.Right)
			b.WriteString("[" + n.Left.Value + "]")
			return
		}
		b.WriteString("matchinst(")
		if n.Left.Invert {
			b.WriteString("!")
		}
		b.WriteString("/" + n.Left.Value + "/, ")
		writeNode(b, n.Right)
		b.WriteString(")")
	case OpAvg, OpCount, OpDelta, OpMax, OpMin, OpSum, OpAnon, OpRate, OpInstant, OpDefined, OpScalar:
		b.WriteString(strings.ToLower(n.Op.String()) + "(")
		writeNode(b, n.Left)
		b.WriteString(")")
	default:
		if n.Right == nil {
			b.WriteString(n.Op.String())
			return
		}
		b.WriteString("(")
		writeNode(b, n.Left)
		b.WriteString(" " + n.Op.symbol() + " ")
		writeNode(b, n.Right)
		b.WriteString(")")
	}
}

// Names returns the metric names the expression refers to, in order of
// appearance, without duplicates.
func (e *Expr) Names() []string {
	var out []string
	seen := map[string]bool{}
	var walk func(n *Node)
	walk = func(n *Node) {
		if n == nil {
			return
		}
		walk(n.Left)
		walk(n.Right)
		if n.Op == OpName && !seen[n.Value] {
			seen[n.Value] = true
			out = append(out, n.Value)
		}
	}
	walk(e.Root)
	return out
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	neg := i < 0
	if neg {
		i = -i
	}
	var b [20]byte
	p := len(b)
	for i > 0 {
		p--
		b[p] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		p--
		b[p] = '-'
	}
	return string(b[p:])
}
