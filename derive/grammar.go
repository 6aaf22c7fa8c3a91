package derive

import (
	"regexp"
	"strings"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// symbol is a grammar symbol: terminals are 0..numTerminals-1, nonterminals
// follow.
type symbol int

// Terminals of libpcp's derived metric grammar (derive_parser.y.in, PCP 6.0).
const (
	symEnd symbol = iota // $end (never returned by the lexer, which returns L_EOS)
	symError
	tokEOS
	tokPlus
	tokMinus
	tokStar
	tokSlash
	tokQuest
	tokColon
	tokLParen
	tokRParen
	tokAvg
	tokCount
	tokDelta
	tokMax
	tokMin
	tokSum
	tokAnon
	tokRate
	tokInstant
	tokLT
	tokLEQ
	tokEQ
	tokGEQ
	tokGT
	tokNEQ
	tokAnd
	tokOr
	tokMkconst
	tokRescale
	tokDefined
	tokMatchinst
	tokScalar
	tokType
	tokSemantics
	tokUnits
	tokAssign
	tokComma
	tokInteger
	tokDouble
	tokName
	tokString
	tokInstname
	tokPattern
	tokNot
	tokLexError // L_ERROR: a lexical error, never valid in the grammar
	numTerminals
)

// Nonterminals.
const (
	ntAccept symbol = numTerminals + iota
	ntDefn
	ntExpr
	ntRegexpr
	ntOptBang
	ntNum
	ntMid1 // mid-rule action of mkconst(INTEGER, ...)
	ntMid2 // mid-rule action of mkconst(DOUBLE, ...)
	ntSpeclist
	ntSpec
	ntSpecval
	ntFunc
	numSymbols
)

// semval is a semantic value on the parser's value stack.
type semval struct {
	n    *Node
	s    string
	bang bool
}

type actStatus uint8

const (
	actOK     actStatus = iota
	actError            // YYERROR: continue with error recovery
	actAbort            // derive_error(); return -1
	actAccept           // YYACCEPT
)

type ruleAction func(p *parser, v []semval) (semval, actStatus)

// phrases of gramerr()
const (
	followStr     = "follow"
	bexprStr      = "Boolean expression"
	aexprStr      = "Arithmetic expression"
	opStr         = "Arithmetic or relational or boolean operator"
	nameStr       = "Metric name"
	unexpectedStr = "Unexpected"
	initialStr    = "Unexpected initial"
)

// grammarRule is one production of the grammar with its semantic action.
// prec is the token named by %prec (symEnd when there is none).
type grammarRule struct {
	lhs    symbol
	rhs    []symbol
	prec   symbol
	action ruleAction
}

// grammar is the grammar's rules in declaration order: the parser tables in
// tables.go number them so.
var grammar = grammarRules()

// precedence is the grammar's %left declarations, lowest first; the table
// generator (tables_test.go) reads them.
var precedence = [][]symbol{
	{tokQuest, tokColon},
	{tokAnd, tokOr},
	{tokNot},
	{tokLT, tokLEQ, tokEQ, tokGEQ, tokGT, tokNEQ},
	{tokPlus, tokMinus},
	{tokStar, tokSlash},
}

//go:generate go test -run ^TestTables$ -update

func binaryNode(op Op) ruleAction {
	return func(p *parser, v []semval) (semval, actStatus) {
		return p.node(op, v[0].n, v[2].n)
	}
}

func gramErr(phrase, pos, arg string) ruleAction {
	return func(p *parser, v []semval) (semval, actStatus) {
		p.gramerr(phrase, pos, arg)
		return semval{}, actError
	}
}

func pass(i int) ruleAction {
	return func(p *parser, v []semval) (semval, actStatus) { return v[i], actOK }
}

// funcOfName is the action of f(NAME): a node of op over the metric name.
func funcOfName(op Op, saveLast bool) ruleAction {
	return func(p *parser, v []semval) (semval, actStatus) {
		name := &Node{Op: OpName, Value: v[2].s, saveLast: saveLast, depth: 1}
		return p.node(op, name, nil)
	}
}

func constDesc(t semantics.Type) semantics.Desc {
	return semantics.Desc{PMID: semantics.PMIDNull, Type: t, InDom: semantics.InDomNull, Sem: semantics.SemDiscrete}
}

func grammarRules() []grammarRule {
	var rules []grammarRule
	add := func(lhs symbol, act ruleAction, rhs ...symbol) {
		rules = append(rules, grammarRule{lhs: lhs, rhs: rhs, action: act})
	}
	addPrec := func(lhs symbol, precTok symbol, act ruleAction, rhs ...symbol) {
		rules = append(rules, grammarRule{lhs: lhs, rhs: rhs, action: act, prec: precTok})
	}
	E := ntExpr

	add(ntAccept, nil, ntDefn, symEnd)

	// defn
	add(ntDefn, func(p *parser, v []semval) (semval, actStatus) {
		p.tree = v[0].n
		return v[0], actAccept
	}, E, tokEOS)
	type tok struct {
		t symbol
		s string
	}
	for _, o := range []tok{{tokPlus, "+"}, {tokStar, "*"}, {tokSlash, "/"}, {tokLParen, "("}, {tokRParen, ")"},
		{tokLT, "<"}, {tokLEQ, "<="}, {tokEQ, "=="}, {tokGEQ, ">="}, {tokGT, ">"}, {tokNEQ, "!="},
		{tokAnd, "&&"}, {tokOr, "||"}} {
		add(ntDefn, gramErr(unexpectedStr, "", o.s), E, o.t, symError)
	}
	for _, o := range []tok{{tokPlus, "+"}, {tokStar, "*"}, {tokSlash, "/"}, {tokLParen, "("}, {tokRParen, ")"},
		{tokLT, "<"}, {tokLEQ, "<="}, {tokEQ, "=="}, {tokGEQ, ">="}, {tokGT, ">"}, {tokNEQ, "!="},
		{tokAnd, "&&"}, {tokOr, "||"}, {tokQuest, "?"}, {tokColon, ":"}} {
		add(ntDefn, gramErr(initialStr, "", o.s), o.t, symError)
	}

	// expr
	add(E, pass(1), tokLParen, E, tokRParen)
	add(E, func(p *parser, v []semval) (semval, actStatus) {
		name := &Node{Op: OpName, Value: v[0].s, depth: 1}
		pat := &Node{Op: OpPattern, Value: v[1].s, Exact: true, depth: 1}
		return p.node(OpFilterInst, pat, name)
	}, tokName, tokInstname)
	add(E, func(p *parser, v []semval) (semval, actStatus) {
		// libpcp makes this a regular expression filter (F_REGEX) whose
		// regex is never compiled; treat the text as an exact name.
		pat := &Node{Op: OpPattern, Value: v[3].s, Exact: true, depth: 1}
		return p.node(OpFilterInst, pat, v[1].n)
	}, tokLParen, E, tokRParen, tokInstname)
	add(E, pass(0), ntNum)
	add(E, func(p *parser, v []semval) (semval, actStatus) {
		return semval{n: &Node{Op: OpName, Value: v[0].s, depth: 1}}, actOK
	}, tokName)
	add(E, pass(0), ntFunc)
	add(E, binaryNode(OpPlus), E, tokPlus, E)
	add(E, binaryNode(OpMinus), E, tokMinus, E)
	add(E, binaryNode(OpStar), E, tokStar, E)
	add(E, binaryNode(OpSlash), E, tokSlash, E)
	addPrec(E, tokMinus, func(p *parser, v []semval) (semval, actStatus) {
		return p.node(OpNeg, v[1].n, nil)
	}, tokMinus, E)
	add(E, binaryNode(OpLT), E, tokLT, E)
	add(E, binaryNode(OpLEQ), E, tokLEQ, E)
	add(E, binaryNode(OpEQ), E, tokEQ, E)
	add(E, binaryNode(OpGEQ), E, tokGEQ, E)
	add(E, binaryNode(OpGT), E, tokGT, E)
	add(E, binaryNode(OpNEQ), E, tokNEQ, E)
	add(E, func(p *parser, v []semval) (semval, actStatus) {
		colon, st := p.node(OpColon, v[2].n, v[4].n)
		if st != actOK {
			return colon, st
		}
		return p.node(OpQuest, v[0].n, colon.n)
	}, E, tokQuest, E, tokColon, E)
	add(E, binaryNode(OpAnd), E, tokAnd, E)
	add(E, binaryNode(OpOr), E, tokOr, E)
	add(E, func(p *parser, v []semval) (semval, actStatus) {
		return p.node(OpNot, v[1].n, nil)
	}, tokNot, E)
	add(E, gramErr(opStr, followStr, "NAME"), tokName, symError)
	add(E, gramErr(aexprStr, followStr, "PLUS"), E, tokPlus, symError)
	add(E, gramErr(aexprStr, followStr, "MINUS"), E, tokMinus, symError)
	add(E, gramErr(aexprStr, followStr, "STAR"), E, tokStar, symError)
	add(E, gramErr(aexprStr, followStr, "SLASH"), E, tokSlash, symError)
	add(E, gramErr(aexprStr, followStr, "NEG"), tokMinus, symError)
	add(E, gramErr(aexprStr, followStr, "LT"), E, tokLT, symError)
	add(E, gramErr(aexprStr, followStr, "LEQ"), E, tokLEQ, symError)
	add(E, gramErr(aexprStr, followStr, "EQ"), E, tokEQ, symError)
	add(E, gramErr(aexprStr, followStr, "GEQ"), E, tokGEQ, symError)
	add(E, gramErr(aexprStr, followStr, "GT"), E, tokGT, symError)
	add(E, gramErr(aexprStr, followStr, "NEQ"), E, tokNEQ, symError)
	add(E, gramErr(bexprStr, followStr, "AND"), E, tokAnd, symError)
	add(E, gramErr(bexprStr, followStr, "OR"), E, tokOr, symError)
	add(E, gramErr(bexprStr, followStr, "NOT"), tokNot, symError)
	add(E, gramErr(aexprStr, followStr, "QUEST"), E, tokQuest, symError)
	add(E, gramErr(aexprStr, followStr, "COLON"), E, tokQuest, E, tokColon, symError)

	// regexpr, opt_bang
	add(ntRegexpr, func(p *parser, v []semval) (semval, actStatus) {
		re, err := regexp.CompilePOSIX(v[1].s)
		if err != nil {
			p.gramerr("bad regular expression:", "", regexErrText(err))
			return semval{}, actAbort
		}
		return semval{n: &Node{Op: OpPattern, Value: v[1].s, Regex: re, Invert: v[0].bang, depth: 1}}, actOK
	}, ntOptBang, tokPattern)
	add(ntOptBang, func(p *parser, v []semval) (semval, actStatus) { return semval{bang: true}, actOK }, tokNot)
	add(ntOptBang, func(p *parser, v []semval) (semval, actStatus) { return semval{}, actOK })

	// num
	add(ntNum, func(p *parser, v []semval) (semval, actStatus) {
		return semval{n: &Node{Op: OpInteger, Value: v[0].s, Desc: constDesc(semantics.TypeU32), depth: 1}}, actOK
	}, tokInteger)
	add(ntNum, func(p *parser, v []semval) (semval, actStatus) {
		return semval{n: &Node{Op: OpDouble, Value: v[0].s, Desc: constDesc(semantics.TypeDouble), depth: 1}}, actOK
	}, tokDouble)
	add(ntMid1, func(p *parser, v []semval) (semval, actStatus) {
		p.specdesc = constDesc(semantics.TypeU32)
		return semval{}, actOK
	})
	add(ntNum, func(p *parser, v []semval) (semval, actStatus) {
		return semval{n: &Node{Op: OpInteger, Value: v[2].s, Desc: p.specdesc, depth: 1}}, actOK
	}, tokMkconst, tokLParen, tokInteger, tokComma, ntMid1, ntSpeclist, tokRParen)
	add(ntMid2, func(p *parser, v []semval) (semval, actStatus) {
		p.specdesc = constDesc(semantics.TypeDouble)
		return semval{}, actOK
	})
	add(ntNum, func(p *parser, v []semval) (semval, actStatus) {
		if p.specdesc.Type != semantics.TypeDouble && p.specdesc.Type != semantics.TypeFloat {
			p.gramerr("Incompatible floating point constant and type", "", pmTypeStr(p.specdesc.Type))
			return semval{}, actAbort
		}
		return semval{n: &Node{Op: OpDouble, Value: v[2].s, Desc: p.specdesc, depth: 1}}, actOK
	}, tokMkconst, tokLParen, tokDouble, tokComma, ntMid2, ntSpeclist, tokRParen)

	// speclist, spec, specval
	add(ntSpeclist, pass(0), ntSpeclist, tokComma, ntSpec)
	add(ntSpeclist, pass(0), ntSpec)
	add(ntSpec, func(p *parser, v []semval) (semval, actStatus) {
		switch strings.ToUpper(v[2].s) {
		case "32":
			p.specdesc.Type = semantics.Type32
		case "U32":
			p.specdesc.Type = semantics.TypeU32
		case "64":
			p.specdesc.Type = semantics.Type64
		case "U64":
			p.specdesc.Type = semantics.TypeU64
		case "FLOAT":
			p.specdesc.Type = semantics.TypeFloat
		case "DOUBLE":
			p.specdesc.Type = semantics.TypeDouble
		default:
			p.gramerr("Unrecognized value for type", "", v[2].s)
			return semval{}, actAbort
		}
		return semval{}, actOK
	}, tokType, tokAssign, ntSpecval)
	add(ntSpec, func(p *parser, v []semval) (semval, actStatus) {
		switch strings.ToLower(v[2].s) {
		case "counter":
			p.specdesc.Sem = semantics.SemCounter
		case "instant":
			p.specdesc.Sem = semantics.SemInstant
		case "discrete":
			p.specdesc.Sem = semantics.SemDiscrete
		default:
			p.gramerr("Unrecognized value for semantics", "", v[2].s)
			return semval{}, actAbort
		}
		return semval{}, actOK
	}, tokSemantics, tokAssign, ntSpecval)
	add(ntSpec, func(p *parser, v []semval) (semval, actStatus) {
		u, err := ParseUnits(v[2].s)
		if err != nil {
			p.gramerr("Illegal units:", "", err.Error())
			return semval{}, actAbort
		}
		p.specdesc.Units = u
		return semval{}, actOK
	}, tokUnits, tokAssign, ntSpecval)
	add(ntSpecval, pass(0), tokString)
	add(ntSpecval, pass(0), tokName)
	add(ntSpecval, pass(0), tokInteger)

	// func
	add(ntFunc, func(p *parser, v []semval) (semval, actStatus) {
		t, ok := anonTypes[v[2].s]
		if !ok {
			p.gramerr("type not allowed for anon()", "", v[2].s)
			return semval{}, actAbort
		}
		arg := &Node{Op: OpInteger, Value: v[2].s, Desc: constDesc(t), depth: 1}
		return p.node(OpAnon, arg, nil)
	}, tokAnon, tokLParen, tokName, tokRParen)
	for _, f := range []struct {
		t    symbol
		op   Op
		save bool
	}{{tokAvg, OpAvg, false}, {tokCount, OpCount, false}, {tokDelta, OpDelta, true}, {tokMax, OpMax, false},
		{tokMin, OpMin, false}, {tokSum, OpSum, false}, {tokRate, OpRate, true}, {tokInstant, OpInstant, false},
		{tokDefined, OpDefined, false}} {
		add(ntFunc, funcOfName(f.op, f.save), f.t, tokLParen, tokName, tokRParen)
	}
	add(ntFunc, func(p *parser, v []semval) (semval, actStatus) {
		u, err := ParseUnits(v[4].s)
		if err != nil {
			p.gramerr("Illegal units:", "", err.Error())
			return semval{}, actAbort
		}
		scale := &Node{Op: OpScale, Value: v[4].s, Desc: semantics.Desc{Units: u}, depth: 1}
		return p.node(OpRescale, v[2].n, scale)
	}, tokRescale, tokLParen, E, tokComma, tokString, tokRParen)
	add(ntFunc, func(p *parser, v []semval) (semval, actStatus) {
		p.sess.inMatchinst = false
		return p.node(OpFilterInst, v[2].n, v[4].n)
	}, tokMatchinst, tokLParen, ntRegexpr, tokComma, E, tokRParen)
	add(ntFunc, func(p *parser, v []semval) (semval, actStatus) {
		return p.node(OpScalar, v[2].n, nil)
	}, tokScalar, tokLParen, E, tokRParen)
	for _, f := range []struct {
		t symbol
		s string
	}{{tokAnon, "anon("}, {tokAvg, "avg("}, {tokCount, "count("}, {tokDelta, "delta("}, {tokMax, "max("},
		{tokMin, "min("}, {tokSum, "sum("}, {tokRate, "rate("}, {tokInstant, "instant("}} {
		add(ntFunc, gramErr(nameStr, followStr, f.s), f.t, tokLParen, symError)
	}
	add(ntFunc, gramErr(opStr, followStr, "rescale("), tokRescale, tokLParen, symError)
	add(ntFunc, gramErr("Units string", followStr, "rescale(<expr>,"), tokRescale, tokLParen, E, tokComma, symError)
	add(ntFunc, gramErr("<filter>, <expr>)", followStr, "matchinst("), tokMatchinst, tokLParen, symError)
	add(ntFunc, gramErr(", <expr>)", followStr, "matchinst(<filter>"), tokMatchinst, tokLParen, ntRegexpr, symError)
	add(ntFunc, gramErr("<expr>)", followStr, "matchinst(<filter>,"), tokMatchinst, tokLParen, ntRegexpr, tokComma, symError)
	add(ntFunc, gramErr("<expr>", followStr, "scalar("), tokScalar, tokLParen, symError)
	return rules
}

var anonTypes = map[string]semantics.Type{
	"PM_TYPE_32": semantics.Type32, "PM_TYPE_U32": semantics.TypeU32, "PM_TYPE_64": semantics.Type64,
	"PM_TYPE_U64": semantics.TypeU64, "PM_TYPE_FLOAT": semantics.TypeFloat, "PM_TYPE_DOUBLE": semantics.TypeDouble,
}

// pmTypeStr returns libpcp's pmTypeStr() word for a type.
func pmTypeStr(t semantics.Type) string {
	switch t {
	case semantics.Type32:
		return "32"
	case semantics.TypeU32:
		return "U32"
	case semantics.Type64:
		return "64"
	case semantics.TypeU64:
		return "U64"
	case semantics.TypeFloat:
		return "FLOAT"
	case semantics.TypeDouble:
		return "DOUBLE"
	case semantics.TypeString:
		return "STRING"
	case semantics.TypeAggregate:
		return "AGGREGATE"
	case semantics.TypeAggregateStatic:
		return "AGGREGATE_STATIC"
	case semantics.TypeEvent:
		return "EVENT"
	case semantics.TypeHighresEvent:
		return "HIGHRES_EVENT"
	case semantics.TypeNoSupport:
		return "Not Supported"
	}
	return "Type " + itoa(int(t)) + "?"
}

func regexErrText(err error) string {
	s := err.Error()
	if i := strings.Index(s, ": "); i >= 0 && strings.HasPrefix(s, "error parsing regexp") {
		return s[i+2:]
	}
	return s
}
