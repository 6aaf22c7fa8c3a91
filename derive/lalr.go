package derive

import "fmt"

// This file builds LALR(1) tables from a grammar the way bison does for a
// deterministic (yacc.c) parser, so that the parser detects errors, reads
// lookahead tokens and recovers from errors exactly as libpcp's generated
// parser does:
//
//   - shift/reduce conflicts are resolved by precedence and associativity
//     (a rule takes the precedence of its last terminal, or of %prec);
//   - reduce/reduce conflicts go to the rule declared first;
//   - in a state that can shift the error token there is no default
//     reduction, elsewhere the reduction with the most lookahead tokens is
//     the default one and is taken for any token without an action;
//   - a state whose only action is its default reduction reduces without
//     reading a lookahead token.

// symbol is a grammar symbol: terminals are 0..numTerminals-1, nonterminals
// follow.
type symbol int

// tokenSet is a set of terminals (there are fewer than 64).
type tokenSet uint64

func (s tokenSet) has(t symbol) bool { return s&(1<<uint(t)) != 0 }

type assoc uint8

const (
	assocNone assoc = iota
	assocLeft
	assocRight
	assocNonassoc
)

// grammarRule is one production with its semantic action.
type grammarRule struct {
	lhs    symbol
	rhs    []symbol
	prec   int // precedence level of the rule, 0 when it has none
	assoc  assoc
	action ruleAction
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
	goTo   map[symbol]int
}

// Action encoding in parseTables.action: 0 = no action, > 0 = shift to state
// n-1, < 0 = reduce by rule -n-1.
type parseTables struct {
	numTerminals int
	rules        []grammarRule
	action       [][]int // [state][terminal]
	defReduce    []int   // [state] rule of the default reduction, -1 if none
	needsToken   []bool  // [state] whether a lookahead token must be read
	goTo         []map[symbol]int
}

// buildTables constructs the LALR(1) automaton. Rule 0 must be the augmented
// start rule "$accept: start $end". tokPrec and tokAssoc give each terminal's
// precedence level (0 = none) and associativity.
func buildTables(numTerminals, numSymbols int, rules []grammarRule, tokPrec []int, tokAssoc []assoc) (*parseTables, error) {
	if numTerminals > 64 {
		return nil, fmt.Errorf("derive: grammar has %d terminals, at most 64 supported", numTerminals)
	}
	byLHS := make([][]int, numSymbols)
	for i, r := range rules {
		byLHS[r.lhs] = append(byLHS[r.lhs], i)
	}
	// nullable and FIRST sets of the nonterminals
	nullable := make([]bool, numSymbols)
	first := make([]tokenSet, numSymbols)
	for t := 0; t < numTerminals; t++ {
		first[t] = 1 << uint(t)
	}
	for changed := true; changed; {
		changed = false
		for _, r := range rules {
			allNull := true
			for _, s := range r.rhs {
				if f := first[r.lhs] | first[s]; f != first[r.lhs] {
					first[r.lhs] = f
					changed = true
				}
				if int(s) < numTerminals || !nullable[s] {
					allNull = false
					break
				}
			}
			if allNull && !nullable[r.lhs] {
				nullable[r.lhs] = true
				changed = true
			}
		}
	}
	// firstOf returns FIRST of a symbol string and whether it is nullable.
	firstOf := func(seq []symbol) (tokenSet, bool) {
		var f tokenSet
		for _, s := range seq {
			f |= first[s]
			if int(s) < numTerminals || !nullable[s] {
				return f, false
			}
		}
		return f, true
	}

	// LR(0) states
	closure := func(kernel []lrItem) []lrItem {
		items := append([]lrItem(nil), kernel...)
		seen := map[lrItem]bool{}
		for _, it := range items {
			seen[it] = true
		}
		for i := 0; i < len(items); i++ {
			r := rules[items[i].rule]
			if items[i].dot >= len(r.rhs) {
				continue
			}
			next := r.rhs[items[i].dot]
			if int(next) < numTerminals {
				continue
			}
			for _, ri := range byLHS[next] {
				it := lrItem{ri, 0}
				if !seen[it] {
					seen[it] = true
					items = append(items, it)
				}
			}
		}
		return items
	}
	key := func(k []lrItem) string {
		b := make([]byte, 0, len(k)*4)
		for _, it := range k {
			b = append(b, byte(it.rule), byte(it.rule>>8), byte(it.dot), ',')
		}
		return string(b)
	}
	states := []*lrState{{kernel: []lrItem{{0, 0}}}}
	index := map[string]int{key(states[0].kernel): 0}
	for i := 0; i < len(states); i++ {
		st := states[i]
		st.items = closure(st.kernel)
		st.la = make([]tokenSet, len(st.items))
		st.goTo = map[symbol]int{}
		var order []symbol
		next := map[symbol][]lrItem{}
		for _, it := range st.items {
			r := rules[it.rule]
			if it.dot >= len(r.rhs) {
				continue
			}
			x := r.rhs[it.dot]
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
				j = len(states)
				index[ks] = j
				states = append(states, &lrState{kernel: k})
			}
			st.goTo[x] = j
		}
	}

	// LALR(1) lookaheads by propagation to a fixed point.
	itemIndex := make([]map[lrItem]int, len(states))
	for i, st := range states {
		itemIndex[i] = make(map[lrItem]int, len(st.items))
		for j, it := range st.items {
			itemIndex[i][it] = j
		}
	}
	for changed := true; changed; {
		changed = false
		for si, st := range states {
			// closure lookaheads within the state
			for inner := true; inner; {
				inner = false
				for j, it := range st.items {
					r := rules[it.rule]
					if it.dot >= len(r.rhs) || int(r.rhs[it.dot]) < numTerminals {
						continue
					}
					f, null := firstOf(r.rhs[it.dot+1:])
					if null {
						f |= st.la[j]
					}
					for _, ri := range byLHS[r.rhs[it.dot]] {
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
				r := rules[it.rule]
				if it.dot >= len(r.rhs) {
					continue
				}
				tj := st.goTo[r.rhs[it.dot]]
				k := itemIndex[tj][lrItem{it.rule, it.dot + 1}]
				t := states[tj]
				if t.la[k]|st.la[j] != t.la[k] {
					t.la[k] |= st.la[j]
					changed = true
				}
			}
		}
	}

	// action tables
	pt := &parseTables{
		numTerminals: numTerminals,
		rules:        rules,
		action:       make([][]int, len(states)),
		defReduce:    make([]int, len(states)),
		needsToken:   make([]bool, len(states)),
		goTo:         make([]map[symbol]int, len(states)),
	}
	for si, st := range states {
		row := make([]int, numTerminals)
		pt.goTo[si] = st.goTo
		// reductions, the rule declared first wins a reduce/reduce conflict
		reduceRules := []int{}
		for j, it := range st.items {
			if it.dot < len(rules[it.rule].rhs) {
				continue
			}
			reduceRules = append(reduceRules, it.rule)
			for t := 0; t < numTerminals; t++ {
				if !st.la[j].has(symbol(t)) {
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
			if x == symError {
				nodefault = true
			}
			if row[x] < 0 {
				r := rules[-row[x]-1]
				tp := tokPrec[x]
				if r.prec != 0 && tp != 0 {
					switch {
					case tp < r.prec:
						continue // reduce
					case tp == r.prec:
						switch tokAssoc[x] {
						case assocLeft:
							continue // reduce
						case assocNonassoc:
							row[x] = 0 // explicit error; not used by this grammar
							continue
						}
					}
				}
			}
			row[x] = to + 1
		}
		// default reduction
		pt.defReduce[si] = -1
		if len(reduceRules) > 0 && !nodefault {
			best, max := -1, 0
			for _, r := range sortedInts(reduceRules) {
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
				pt.defReduce[si] = best
				for t := 0; t < numTerminals; t++ {
					if row[t] == -best-1 {
						row[t] = 0
					}
				}
			} else if len(reduceRules) == 1 {
				// a reduction with no lookahead at all (only possible for
				// the rules reduced after an error token)
				pt.defReduce[si] = reduceRules[0]
			}
		}
		for t := 0; t < numTerminals; t++ {
			if row[t] != 0 {
				pt.needsToken[si] = true
			}
		}
		pt.action[si] = row
	}
	return pt, nil
}

func sortedInts(a []int) []int {
	b := append([]int(nil), a...)
	for i := 1; i < len(b); i++ {
		for j := i; j > 0 && b[j] < b[j-1]; j-- {
			b[j], b[j-1] = b[j-1], b[j]
		}
	}
	return b
}
