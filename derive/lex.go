package derive

import "strconv"

// lexEOF is C's EOF as returned by libpcp's get(): the end of the expression
// (or a NUL byte). A 0xff byte reads as EOF too, as it does through C's
// signed char.
const lexEOF = -1

// lexer is libpcp's derive_lex(): one character of lookahead pushed back with
// unget(), and lexicon, the offset where the current token starts, which is
// the error position pmRegisterDerived returns.
type lexer struct {
	s       string
	pos     int // next character to read (libpcp's string pointer)
	peek    int // character pushed back by unget, 0 if none
	lexicon int // start of the current token; pos-1 when the token is EOS
	sess    *Session
	errmsg  *string
	hasErr  *bool
}

func (l *lexer) get() int {
	if l.peek != 0 {
		c := l.peek
		l.peek = 0
		return c
	}
	if l.pos >= len(l.s) || l.s[l.pos] == 0 {
		return lexEOF
	}
	c := int(int8(l.s[l.pos]))
	l.pos++
	return c
}

func (l *lexer) unget(c int) { l.peek = c }

func isSpace(c int) bool { return c == ' ' || (c >= '\t' && c <= '\r') }
func isDigit(c int) bool { return c >= '0' && c <= '9' }
func isAlpha(c int) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

var funcTokens = map[string]symbol{
	"avg": tokAvg, "count": tokCount, "delta": tokDelta, "max": tokMax, "min": tokMin,
	"sum": tokSum, "anon": tokAnon, "rate": tokRate, "instant": tokInstant, "mkconst": tokMkconst,
	"rescale": tokRescale, "defined": tokDefined, "matchinst": tokMatchinst, "scalar": tokScalar,
}

func (l *lexer) setErr(msg string) {
	if !*l.hasErr {
		*l.errmsg = msg
		*l.hasErr = true
	}
}

// next returns the next token and its text.
func (l *lexer) next() (symbol, string) {
	var buf []byte
	var ltype symbol = -1
	first := true
	escape := false
	for {
		c := l.get()
		if first {
			if isSpace(c) {
				continue
			}
			l.lexicon = l.pos - 1
			first = false
		}
		if c == lexEOF {
			if ltype >= 0 {
				c = 0 // force the end of the last token
			} else {
				return tokEOS, ""
			}
		}
		buf = append(buf, byte(c))
		if ltype < 0 {
			switch {
			case isDigit(c):
				ltype = tokInteger
			case c == '.':
				ltype = tokDouble
			case isAlpha(c):
				ltype = tokName
			default:
				switch c {
				case '+':
					return tokPlus, "+"
				case '-':
					return tokMinus, "-"
				case '*':
					return tokStar, "*"
				case '/':
					if !l.sess.inMatchinst {
						return tokSlash, "/"
					}
					ltype = tokPattern
				case '(':
					return tokLParen, "("
				case ')':
					return tokRParen, ")"
				case '<':
					ltype = tokLT
				case '=':
					ltype = tokEQ
				case '>':
					ltype = tokGT
				case '!':
					ltype = tokNEQ
				case '&':
					ltype = tokAnd
				case '|':
					ltype = tokOr
				case '?':
					return tokQuest, "?"
				case ':':
					return tokColon, ":"
				case ',':
					return tokComma, ","
				case '"':
					ltype = tokString
				case '[':
					ltype = tokInstname
				default:
					l.setErr("Illegal character")
					return tokLexError, ""
				}
			}
			continue
		}
		switch ltype {
		case tokInteger:
			if c == '.' {
				ltype = tokDouble
			} else if !isDigit(c) {
				l.unget(c)
				text := string(buf[:len(buf)-1])
				if v, err := strconv.ParseUint(text, 10, 64); err != nil || v > 0xffffffff {
					l.setErr("Constant value too large")
					return tokLexError, ""
				}
				return tokInteger, text
			}
		case tokDouble:
			if !isDigit(c) {
				l.unget(c)
				return tokDouble, string(buf[:len(buf)-1])
			}
		case tokName:
			if isAlpha(c) || isDigit(c) || c == '_' || c == '.' {
				continue
			}
			name := string(buf[:len(buf)-1])
			if c == '(' {
				if t, ok := funcTokens[name]; ok {
					l.unget(c)
					if t == tokMatchinst {
						l.sess.inMatchinst = true
					}
					return t, name
				}
			}
			l.unget(c)
			switch name {
			case "type":
				return tokType, name
			case "semantics":
				return tokSemantics, name
			case "units":
				return tokUnits, name
			}
			return tokName, name
		case tokString:
			if c != '"' {
				if c == 0 {
					l.setErr("unterminated STRING")
					return tokLexError, ""
				}
				continue
			}
			return tokString, string(buf[1 : len(buf)-1])
		case tokInstname, tokPattern:
			if escape && c != 0 {
				escape = false
				continue
			}
			if !escape && c == '\\' {
				buf = buf[:len(buf)-1]
				escape = true
				continue
			}
			end := byte(']')
			if ltype == tokPattern {
				end = '/'
			}
			if c != int(end) {
				if c == 0 {
					if ltype == tokPattern {
						l.setErr("unterminated pattern")
					} else {
						l.setErr("unterminated instance name")
					}
					return tokLexError, ""
				}
				continue
			}
			return ltype, string(buf[1 : len(buf)-1])
		case tokLT, tokGT, tokEQ, tokNEQ:
			if c == '=' {
				switch ltype {
				case tokLT:
					return tokLEQ, "<="
				case tokGT:
					return tokGEQ, ">="
				case tokEQ:
					return tokEQ, "=="
				}
				return tokNEQ, "!="
			}
			l.unget(c)
			switch ltype {
			case tokLT:
				return tokLT, "<"
			case tokGT:
				return tokGT, ">"
			case tokEQ:
				return tokAssign, "="
			}
			return tokNot, "!"
		case tokAnd, tokOr:
			if ltype == tokAnd && c == '&' {
				return tokAnd, "&&"
			}
			if ltype == tokOr && c == '|' {
				return tokOr, "||"
			}
			l.unget(c)
			l.setErr("Illegal character")
			return tokLexError, ""
		}
	}
}
