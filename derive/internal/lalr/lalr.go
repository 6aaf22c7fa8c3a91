// Package lalr builds LALR(1) parse tables from a grammar the way bison does
// for a deterministic (yacc.c) parser, so that a parser driven by them
// detects errors, reads lookahead tokens and recovers from errors exactly as
// a bison-generated parser does:
//
//   - shift/reduce conflicts are resolved by precedence and associativity
//     (a rule takes the precedence of its last terminal, or of %prec);
//   - reduce/reduce conflicts go to the rule declared first;
//   - in a state that can shift the error token there is no default
//     reduction, elsewhere the reduction with the most lookahead tokens is
//     the default one and is taken for any token without an action;
//   - a state whose only action is its default reduction reduces without
//     reading a lookahead token.
//
// It runs at build time only: package derive's table generator (go
// generate ./derive) writes its result as Go source.
package lalr

import (
	"fmt"
	"slices"
)

// Symbol is a grammar symbol: terminals are 0..numTerminals-1, nonterminals
// follow.
type Symbol int

// tokenSet is a set of terminals (there are at most 64).
type tokenSet uint64

func (s tokenSet) has(t Symbol) bool { return s&(1<<uint(t)) != 0 }

// Assoc is the associativity of a precedence level.
type Assoc uint8

// Associativities, as bison's %left, %right and %nonassoc.
const (
	AssocNone Assoc = iota
	AssocLeft
	AssocRight
	AssocNonassoc
)

// Rule is one production. Prec is its precedence level (0 when it has none)
// and Assoc that level's associativity: the level of its last terminal, or
// of the token named by %prec.
type Rule struct {
	LHS   Symbol
	RHS   []Symbol
	Prec  int
	Assoc Assoc
}

// Grammar is what Build needs: the Symbols, the rules and each terminal's
// precedence level (0 = none) and associativity.
type Grammar struct {
	NumTerminals int
	NumSymbols   int
	Error        Symbol // the error token
	Rules        []Rule // rule 0 is the augmented "$accept: start $end"
	TokPrec      []int
	TokAssoc     []Assoc
}

// Tables are a deterministic parser's tables.
//
// Action[state][terminal] is 0 for no action, n > 0 to shift and go to state
// n-1, n < 0 to reduce by rule -n-1. DefReduce[state] is the rule of the
// state's default reduction, -1 if none. NeedsToken[state] says whether a
// lookahead token must be read. GoTo[state][nonterminal-NumTerminals] is the
// state after reducing to that nonterminal, -1 if none.
type Tables struct {
	Action     [][]int
	DefReduce  []int
	NeedsToken []bool
	GoTo       [][]int
}

// lrItem is a rule with a position in its right-hand side.
type lrItem struct {
	rule int
	dot  int
}

type lrState struct {
	kernel []lrItem
	items  []lrItem   // closure, kernel first
	la     []tokenSet // lookaheads, parallel to items
	goTo   map[Symbol]int
}

// builder holds the grammar and the automaton while Build makes it.
type builder struct {
	g        Grammar
	byLHS    [][]int    // the rules of each nonterminal
	nullable []bool     // per symbol
	first    []tokenSet // FIRST of each symbol
	states   []*lrState
}

// Build constructs the LALR(1) automaton of g.
func Build(g Grammar) (*Tables, error) {
	numTerminals, numSymbols, rules := g.NumTerminals, g.NumSymbols, g.Rules
	if numTerminals > 64 {
		return nil, fmt.Errorf("lalr: grammar has %d terminals, at most 64 supported", numTerminals)
	}
	if len(g.TokPrec) != numTerminals || len(g.TokAssoc) != numTerminals {
		return nil, fmt.Errorf("lalr: %d terminals but %d precedences and %d associativities", numTerminals, len(g.TokPrec), len(g.TokAssoc))
	}
	b := &builder{g: g, byLHS: make([][]int, numSymbols)}
	for i, r := range rules {
		b.byLHS[r.LHS] = append(b.byLHS[r.LHS], i)
	}
	b.firstSets()
	b.lr0States()
	b.lookaheads()
	return b.tables(), nil
}

// firstSets computes nullable and FIRST of every symbol.
func (b *builder) firstSets() {
	numTerminals, rules := b.g.NumTerminals, b.g.Rules
	b.nullable = make([]bool, b.g.NumSymbols)
	b.first = make([]tokenSet, b.g.NumSymbols)
	for t := 0; t < numTerminals; t++ {
		b.first[t] = 1 << uint(t)
	}
	for changed := true; changed; {
		changed = false
		for _, r := range rules {
			allNull := true
			for _, s := range r.RHS {
				if f := b.first[r.LHS] | b.first[s]; f != b.first[r.LHS] {
					b.first[r.LHS] = f
					changed = true
				}
				if int(s) < numTerminals || !b.nullable[s] {
					allNull = false
					break
				}
			}
			if allNull && !b.nullable[r.LHS] {
				b.nullable[r.LHS] = true
				changed = true
			}
		}
	}
}

// firstOf returns FIRST of a symbol string and whether it is nullable.
func (b *builder) firstOf(seq []Symbol) (tokenSet, bool) {
	var f tokenSet
	for _, s := range seq {
		f |= b.first[s]
		if int(s) < b.g.NumTerminals || !b.nullable[s] {
			return f, false
		}
	}
	return f, true
}

// closure returns the items of a kernel's closure, the kernel first.
func (b *builder) closure(kernel []lrItem) []lrItem {
	items := append([]lrItem(nil), kernel...)
	seen := map[lrItem]bool{}
	for _, it := range items {
		seen[it] = true
	}
	for i := 0; i < len(items); i++ {
		r := b.g.Rules[items[i].rule]
		if items[i].dot >= len(r.RHS) {
			continue
		}
		next := r.RHS[items[i].dot]
		if int(next) < b.g.NumTerminals {
			continue
		}
		for _, ri := range b.byLHS[next] {
			it := lrItem{ri, 0}
			if !seen[it] {
				seen[it] = true
				items = append(items, it)
			}
		}
	}
	return items
}

// key identifies a kernel.
func key(k []lrItem) string {
	s := make([]byte, 0, len(k)*4)
	for _, it := range k {
		s = append(s, byte(it.rule), byte(it.rule>>8), byte(it.dot), ',')
	}
	return string(s)
}

// lr0States builds the LR(0) automaton from the start rule.
func (b *builder) lr0States() {
	b.states = []*lrState{{kernel: []lrItem{{0, 0}}}}
	index := map[string]int{key(b.states[0].kernel): 0}
	for i := 0; i < len(b.states); i++ {
		st := b.states[i]
		st.items = b.closure(st.kernel)
		st.la = make([]tokenSet, len(st.items))
		st.goTo = map[Symbol]int{}
		var order []Symbol
		next := map[Symbol][]lrItem{}
		for _, it := range st.items {
			r := b.g.Rules[it.rule]
			if it.dot >= len(r.RHS) {
				continue
			}
			x := r.RHS[it.dot]
			if _, ok := next[x]; !ok {
				order = append(order, x)
			}
			next[x] = append(next[x], lrItem{it.rule, it.dot + 1})
		}
		for _, x := range order {
			k := next[x]
			ks := key(k)
			j, ok := index[ks]
			if !ok {
				j = len(b.states)
				index[ks] = j
				b.states = append(b.states, &lrState{kernel: k})
			}
			st.goTo[x] = j
		}
	}
}

// lookaheads computes the LALR(1) lookaheads by propagation to a fixed
// point.
func (b *builder) lookaheads() {
	itemIndex := make([]map[lrItem]int, len(b.states))
	for i, st := range b.states {
		itemIndex[i] = make(map[lrItem]int, len(st.items))
		for j, it := range st.items {
			itemIndex[i][it] = j
		}
	}
	for changed := true; changed; {
		changed = false
		for si, st := range b.states {
			// closure lookaheads within the state
			for inner := true; inner; {
				inner = false
				for j, it := range st.items {
					r := b.g.Rules[it.rule]
					if it.dot >= len(r.RHS) || int(r.RHS[it.dot]) < b.g.NumTerminals {
						continue
					}
					f, null := b.firstOf(r.RHS[it.dot+1:])
					if null {
						f |= st.la[j]
					}
					for _, ri := range b.byLHS[r.RHS[it.dot]] {
						k := itemIndex[si][lrItem{ri, 0}]
						if st.la[k]|f != st.la[k] {
							st.la[k] |= f
							inner = true
							changed = true
						}
					}
				}
			}
			// propagate to successor kernels
			for j, it := range st.items {
				r := b.g.Rules[it.rule]
				if it.dot >= len(r.RHS) {
					continue
				}
				tj := st.goTo[r.RHS[it.dot]]
				k := itemIndex[tj][lrItem{it.rule, it.dot + 1}]
				t := b.states[tj]
				if t.la[k]|st.la[j] != t.la[k] {
					t.la[k] |= st.la[j]
					changed = true
				}
			}
		}
	}
}

// tables makes the parser tables: actions, conflicts resolved as bison
// resolves them, default reductions and gotos.
func (b *builder) tables() *Tables {
	numTerminals, g := b.g.NumTerminals, b.g
	pt := &Tables{
		Action:     make([][]int, len(b.states)),
		DefReduce:  make([]int, len(b.states)),
		NeedsToken: make([]bool, len(b.states)),
		GoTo:       make([][]int, len(b.states)),
	}
	for si, st := range b.states {
		row := make([]int, numTerminals)
		gt := make([]int, b.g.NumSymbols-numTerminals)
		for i := range gt {
			gt[i] = -1
		}
		for x, to := range st.goTo {
			if int(x) >= numTerminals {
				gt[int(x)-numTerminals] = to
			}
		}
		pt.GoTo[si] = gt
		// reductions, the rule declared first wins a reduce/reduce conflict
		reduceRules := []int{}
		for j, it := range st.items {
			if it.dot < len(b.g.Rules[it.rule].RHS) {
				continue
			}
			reduceRules = append(reduceRules, it.rule)
			for t := 0; t < numTerminals; t++ {
				if !st.la[j].has(Symbol(t)) {
					continue
				}
				if row[t] < 0 && -row[t]-1 < it.rule {
					continue
				}
				row[t] = -it.rule - 1
			}
		}
		// shifts, resolving shift/reduce conflicts by precedence
		nodefault := false
		for x, to := range st.goTo {
			if int(x) >= numTerminals {
				continue
			}
			if x == g.Error {
				nodefault = true
			}
			if row[x] < 0 {
				r := b.g.Rules[-row[x]-1]
				tp := g.TokPrec[x]
				if r.Prec != 0 && tp != 0 {
					switch {
					case tp < r.Prec:
						continue // reduce
					case tp == r.Prec:
						switch g.TokAssoc[x] {
						case AssocLeft:
							continue // reduce
						case AssocNonassoc:
							row[x] = 0 // explicit error; not used by this grammar
							continue
						}
					}
				}
			}
			row[x] = to + 1
		}
		// default reduction
		pt.DefReduce[si] = -1
		if len(reduceRules) > 0 && !nodefault {
			best, max := -1, 0
			slices.Sort(reduceRules)
			for _, r := range reduceRules {
				n := 0
				for t := 0; t < numTerminals; t++ {
					if row[t] == -r-1 {
						n++
					}
				}
				if n > max {
					best, max = r, n
				}
			}
			if best >= 0 {
				pt.DefReduce[si] = best
				for t := 0; t < numTerminals; t++ {
					if row[t] == -best-1 {
						row[t] = 0
					}
				}
			} else if len(reduceRules) == 1 {
				// a reduction with no lookahead at all (only possible for
				// the rules reduced after an error token)
				pt.DefReduce[si] = reduceRules[0]
			}
		}
		for t := 0; t < numTerminals; t++ {
			if row[t] != 0 {
				pt.NeedsToken[si] = true
			}
		}
		pt.Action[si] = row
	}
	return pt
}
