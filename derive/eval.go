package derive

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// ival is one instance-value pair of a node (libpcp's val_t): a holds the
// bits of the pmAtomValue union in the node's type (32-bit types in the low
// word, FLOAT as its float32 bits, DOUBLE as its float64 bits); buf holds
// STRING and AGGREGATE payloads.
type ival struct {
	inst int32
	a    uint64
	buf  []byte
}

func atomL(a uint64) int32   { return int32(uint32(a)) }
func atomUL(a uint64) uint32 { return uint32(a) }
func atomLL(a uint64) int64  { return int64(a) }
func atomF(a uint64) float32 { return math.Float32frombits(uint32(a)) }
func atomD(a uint64) float64 { return math.Float64frombits(a) }
func fromL(v int32) uint64   { return uint64(uint32(v)) }
func fromUL(v uint32) uint64 { return uint64(v) }
func fromLL(v int64) uint64  { return uint64(v) }
func fromF(v float32) uint64 { return uint64(math.Float32bits(v)) }
func fromD(v float64) uint64 { return math.Float64bits(v) }
func fromBool(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// atomOf converts a source value to the atom of a node of type t.
func atomOf(v semantics.Value, t semantics.Type) uint64 {
	if v.Type() == t {
		switch t {
		case semantics.Type32, semantics.TypeU32:
			return uint64(uint32(v.Bits()))
		}
		return v.Bits()
	}
	switch t {
	case semantics.Type32:
		return fromL(int32(v.Int64()))
	case semantics.TypeU32:
		return fromUL(uint32(v.Uint64()))
	case semantics.Type64:
		return fromLL(v.Int64())
	case semantics.TypeU64:
		return v.Uint64()
	case semantics.TypeFloat:
		return fromF(float32(v.Float64()))
	case semantics.TypeDouble:
		return fromD(v.Float64())
	}
	return 0
}

// valueOf converts an atom of type t to a value.
func valueOf(iv *ival, t semantics.Type) semantics.Value {
	switch t {
	case semantics.Type32:
		return semantics.Int32Value(atomL(iv.a))
	case semantics.TypeU32:
		return semantics.Uint32Value(atomUL(iv.a))
	case semantics.Type64:
		return semantics.Int64Value(atomLL(iv.a))
	case semantics.TypeU64:
		return semantics.Uint64Value(iv.a)
	case semantics.TypeFloat:
		return semantics.FloatValue(atomF(iv.a))
	case semantics.TypeDouble:
		return semantics.DoubleValue(atomD(iv.a))
	}
	return semantics.BytesValue(t, iv.buf)
}

// isZero reports whether an atom of type t is zero (the guard of ?: and !).
func isZero(a uint64, t semantics.Type) bool {
	switch t {
	case semantics.Type32:
		return atomL(a) == 0
	case semantics.TypeU32:
		return atomUL(a) == 0
	case semantics.Type64, semantics.TypeU64:
		return a == 0
	case semantics.TypeFloat:
		return atomF(a) == 0
	case semantics.TypeDouble:
		return atomD(a) == 0
	}
	return true
}

// promoteTo converts an operand atom of type from to the computation type
// to as libpcp's bin_op does (32-bit result types take the bits as they are).
func promoteTo(a uint64, from, to semantics.Type) uint64 {
	switch to {
	case semantics.Type64:
		switch from {
		case semantics.Type32:
			return fromLL(int64(atomL(a)))
		case semantics.TypeU32:
			return fromLL(int64(atomUL(a)))
		}
	case semantics.TypeU64:
		switch from {
		case semantics.Type32:
			return uint64(int64(atomL(a)))
		case semantics.TypeU32:
			return uint64(atomUL(a))
		}
	case semantics.TypeFloat:
		switch from {
		case semantics.Type32:
			return fromF(float32(atomL(a)))
		case semantics.TypeU32:
			return fromF(float32(atomUL(a)))
		case semantics.Type64:
			return fromF(float32(atomLL(a)))
		case semantics.TypeU64:
			return fromF(float32(a))
		}
	case semantics.TypeDouble:
		switch from {
		case semantics.Type32:
			return fromD(float64(atomL(a)))
		case semantics.TypeU32:
			return fromD(float64(atomUL(a)))
		case semantics.Type64:
			return fromD(float64(atomLL(a)))
		case semantics.TypeU64:
			return fromD(float64(a))
		case semantics.TypeFloat:
			return fromD(float64(atomF(a)))
		}
	}
	return a
}

// binOp is libpcp's bin_op: result = l op r computed in type t, with the
// scale factors applied to DOUBLE computations.
func binOp(t semantics.Type, op Op, a uint64, lt semantics.Type, lmul, ldiv int32, b uint64, rt semantics.Type, rmul, rdiv int32) uint64 {
	l := promoteTo(a, lt, t)
	r := promoteTo(b, rt, t)
	switch t {
	case semantics.Type32:
		x, y := atomL(l), atomL(r)
		switch op {
		case OpPlus:
			return fromL(x + y)
		case OpMinus:
			return fromL(x - y)
		case OpStar:
			return fromL(x * y)
		}
		return fromBool(compare(op, x < y, x == y, x != 0, y != 0))
	case semantics.TypeU32:
		x, y := atomUL(l), atomUL(r)
		switch op {
		case OpPlus:
			return fromUL(x + y)
		case OpMinus:
			return fromUL(x - y)
		case OpStar:
			return fromUL(x * y)
		}
		return fromBool(compare(op, x < y, x == y, x != 0, y != 0))
	case semantics.Type64:
		x, y := atomLL(l), atomLL(r)
		switch op {
		case OpPlus:
			return fromLL(x + y)
		case OpMinus:
			return fromLL(x - y)
		case OpStar:
			return fromLL(x * y)
		}
		return fromBool(compare(op, x < y, x == y, x != 0, y != 0))
	case semantics.TypeU64:
		x, y := l, r
		switch op {
		case OpPlus:
			return x + y
		case OpMinus:
			return x - y
		case OpStar:
			return x * y
		}
		return fromBool(compare(op, x < y, x == y, x != 0, y != 0))
	case semantics.TypeFloat:
		x, y := atomF(l), atomF(r)
		switch op {
		case OpPlus:
			return fromF(x + y)
		case OpMinus:
			return fromF(x - y)
		case OpStar:
			return fromF(x * y)
		}
		return fromBool(compare(op, x < y, x == y, x != 0, y != 0))
	case semantics.TypeDouble:
		x := (atomD(l) / float64(ldiv)) * float64(lmul)
		y := (atomD(r) / float64(rdiv)) * float64(rmul)
		switch op {
		case OpPlus:
			return fromD(x + y)
		case OpMinus:
			return fromD(x - y)
		case OpStar:
			return fromD(x * y)
		case OpSlash:
			if x == 0 {
				return fromD(0)
			}
			return fromD(x / y)
		}
		return fromBool(compare(op, x < y, x == y, x != 0, y != 0))
	}
	return 0
}

// compare evaluates a relational or boolean operator from lt = l < r,
// eq = l == r and the truth of each operand.
func compare(op Op, lt, eq, lTrue, rTrue bool) bool {
	switch op {
	case OpLT:
		return lt
	case OpLEQ:
		return lt || eq
	case OpEQ:
		return eq
	case OpGEQ:
		return !lt
	case OpGT:
		return !lt && !eq
	case OpNEQ:
		return !eq
	case OpAnd:
		return lTrue && rTrue
	case OpOr:
		return lTrue || rTrue
	}
	return false
}

// evalCtx is what one evaluation needs from the fetch.
type evalCtx struct {
	t     time.Time
	sets  map[semantics.PMID]*source.ValueSet
	insts func(semantics.InDom) []source.Instance
}

// eval is libpcp's eval_expr: it evaluates the operands, then the node, and
// leaves the node's values in b.vals; a fetch error of an operand is
// returned (and makes the derived metric's value set an error).
func (b *bnode) eval(c *evalCtx) error {
	if b.left != nil {
		if err := b.left.eval(c); err != nil {
			if b.op == OpCount {
				b.vals = append(b.vals[:0], ival{inst: semantics.InNull, a: 0})
				return nil
			}
			return err
		}
	}
	if b.right != nil {
		if err := b.right.eval(c); err != nil {
			return err
		}
	}
	switch b.op {
	case OpInteger, OpDouble:
		if len(b.vals) == 0 {
			b.vals = append(b.vals, ival{inst: semantics.InNull, a: constAtom(b.value, b.desc.Type)})
		}
		return nil
	case OpName:
		return b.evalName(c)
	case OpDelta, OpRate:
		return b.evalDelta(c)
	case OpNot:
		b.vals = b.vals[:0]
		for _, v := range b.left.vals {
			b.vals = append(b.vals, ival{inst: v.inst, a: fromBool(isZero(v.a, b.left.desc.Type))})
		}
		return nil
	case OpNeg:
		b.vals = b.vals[:0]
		for _, v := range b.left.vals {
			var a uint64
			switch b.left.desc.Type {
			case semantics.Type32:
				a = fromL(-atomL(v.a))
			case semantics.TypeU32:
				a = fromL(int32(-atomUL(v.a)))
			case semantics.Type64:
				a = fromLL(-atomLL(v.a))
			case semantics.TypeU64:
				a = -v.a
			case semantics.TypeFloat:
				a = fromF(-atomF(v.a))
			case semantics.TypeDouble:
				a = fromD(-atomD(v.a))
			}
			b.vals = append(b.vals, ival{inst: v.inst, a: a})
		}
		return nil
	case OpColon, OpPattern, OpScale, OpAnon:
		b.vals = b.vals[:0]
		return nil
	case OpQuest:
		return b.evalQuest()
	case OpRescale:
		// libpcp's pmConvScale in the operand's type (the node's type)
		b.vals = b.vals[:0]
		for _, v := range b.left.vals {
			x, err := b.rescale.Convert(valueOf(&v, b.desc.Type))
			if err != nil {
				continue
			}
			b.vals = append(b.vals, ival{inst: v.inst, a: atomOf(x, b.desc.Type)})
		}
		return nil
	case OpInstant:
		b.lastStamp, b.stamp = b.stamp, c.t
		b.vals = append(b.vals[:0], b.left.vals...)
		return nil
	case OpDefined:
		return nil
	case OpAvg, OpCount, OpSum, OpMax, OpMin, OpScalar:
		b.evalAggregate()
		return nil
	case OpFilterInst:
		b.evalFilter(c)
		return nil
	}
	b.evalBinary()
	return nil
}

func constAtom(text string, t semantics.Type) uint64 {
	switch t {
	case semantics.Type32:
		return fromL(int32(atoi(text)))
	case semantics.TypeU32:
		return fromUL(uint32(atoi(text)))
	case semantics.Type64:
		return fromLL(atoi(text))
	case semantics.TypeU64:
		return uint64(atoi(text))
	case semantics.TypeFloat:
		return fromF(float32(atof(text)))
	case semantics.TypeDouble:
		return fromD(atof(text))
	}
	return 0
}

// atoi parses the leading decimal digits as C's strtoll does.
func atoi(s string) int64 {
	var v int64
	for i := 0; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		v = v*10 + int64(s[i]-'0')
	}
	return v
}

// atof converts a constant's text as C's atof does ("." is 0).
func atof(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	return f
}

func (b *bnode) evalName(c *evalCtx) error {
	set := c.sets[b.pmid]
	if b.saveLast {
		b.last, b.vals = b.vals, b.last[:0]
		b.lastErr = b.err
	} else {
		b.vals = b.vals[:0]
	}
	b.err = nil
	if set == nil {
		b.err = semantics.ErrPMID
		return b.err
	}
	if set.Err != nil {
		b.err = set.Err
		return b.err
	}
	for _, v := range set.Values {
		iv := ival{inst: v.Inst}
		if isArithType(b.desc.Type) {
			iv.a = atomOf(v.Value, b.desc.Type)
		} else {
			iv.buf = append(iv.buf, v.Value.Bytes()...)
		}
		b.vals = append(b.vals, iv)
	}
	return nil
}

// evalDelta computes delta() and rate(): one value per instance present in
// the current and the previous sample of the operand.
func (b *bnode) evalDelta(c *evalCtx) error {
	b.lastStamp, b.stamp = b.stamp, c.t
	b.vals = b.vals[:0]
	l := b.left
	if l.err != nil {
		return l.err
	}
	if l.lastErr != nil {
		return l.lastErr
	}
	if len(l.vals) == 0 || len(l.last) == 0 {
		return nil
	}
	lt := l.desc.Type
	for i := range l.vals {
		j := i
		if j >= len(l.last) {
			j = 0
		}
		if l.vals[i].inst != l.last[j].inst {
			for j = 0; j < len(l.last); j++ {
				if l.vals[i].inst == l.last[j].inst {
					break
				}
			}
			if j == len(l.last) {
				continue
			}
		}
		cur, prev := l.vals[i].a, l.last[j].a
		if b.op == OpDelta {
			var a uint64
			switch lt {
			case semantics.Type32:
				a = fromL(atomL(cur) - atomL(prev))
			case semantics.TypeU32:
				a = fromLL(int64(atomUL(cur)) - int64(atomUL(prev)))
			case semantics.Type64:
				a = fromLL(atomLL(cur) - atomLL(prev))
			case semantics.TypeU64:
				a = fromD(float64(cur) - float64(prev))
			case semantics.TypeFloat:
				a = fromF(atomF(cur) - atomF(prev))
			case semantics.TypeDouble:
				a = fromD(atomD(cur) - atomD(prev))
			}
			b.vals = append(b.vals, ival{inst: l.vals[i].inst, a: a})
			continue
		}
		// rate(): a counter that went backwards gives no value
		if l.desc.Sem == semantics.SemCounter && less(cur, prev, lt) {
			continue
		}
		var d float64
		switch lt {
		case semantics.Type32:
			d = float64(atomL(cur) - atomL(prev))
		case semantics.TypeU32:
			d = float64(atomUL(cur) - atomUL(prev))
		case semantics.Type64:
			d = float64(atomLL(cur) - atomLL(prev))
		case semantics.TypeU64:
			d = float64(cur - prev)
		case semantics.TypeFloat:
			d = float64(atomF(cur) - atomF(prev))
		case semantics.TypeDouble:
			d = atomD(cur) - atomD(prev)
		}
		d /= b.stamp.Sub(b.lastStamp).Seconds()
		if l.desc.Units.DimTime == 1 {
			if b.timeScale < 0 {
				b.timeScale = 1
				if st := l.desc.Units.ScaleTime; st > semantics.TimeSec {
					for k := semantics.TimeSec; k < st; k++ {
						b.timeScale *= 60
					}
				} else {
					for k := st; k < semantics.TimeSec; k++ {
						b.timeScale /= 1000
					}
				}
			}
			d *= b.timeScale
		}
		b.vals = append(b.vals, ival{inst: l.vals[i].inst, a: fromD(d)})
	}
	return nil
}

func less(x, y uint64, t semantics.Type) bool {
	switch t {
	case semantics.Type32:
		return atomL(x) < atomL(y)
	case semantics.TypeU32:
		return atomUL(x) < atomUL(y)
	case semantics.Type64:
		return atomLL(x) < atomLL(y)
	case semantics.TypeU64:
		return x < y
	case semantics.TypeFloat:
		return atomF(x) < atomF(y)
	case semantics.TypeDouble:
		return atomD(x) < atomD(y)
	}
	return false
}

func (b *bnode) evalQuest() error {
	b.vals = b.vals[:0]
	guard, yes, no := b.left, b.right.left, b.right.right
	if len(guard.vals) == 0 || len(yes.vals) == 0 || len(no.vals) == 0 {
		return nil
	}
	n := len(yes.vals)
	if len(no.vals) > n {
		n = len(no.vals)
	}
	pickInst := yes
	if yes.desc.InDom == semantics.InDomNull && no.desc.InDom != semantics.InDomNull {
		pickInst = no
	}
	var pick *bnode
	for i := 0; i < n; i++ {
		if i < len(guard.vals) {
			if !isZero(guard.vals[i].a, guard.desc.Type) {
				pick = yes
			} else {
				pick = no
			}
		}
		v := pick.vals[0]
		if i < len(pick.vals) {
			v = pick.vals[i]
		}
		v.inst = semantics.InNull
		if i < len(pickInst.vals) {
			v.inst = pickInst.vals[i].inst
		}
		b.vals = append(b.vals, v)
	}
	return nil
}

func (b *bnode) evalAggregate() {
	l := b.left
	n := len(l.vals)
	b.vals = b.vals[:0]
	lt := l.desc.Type
	switch b.op {
	case OpCount:
		b.vals = append(b.vals, ival{inst: semantics.InNull, a: fromL(int32(n))})
		return
	case OpScalar:
		if n > 0 {
			v := l.vals[0]
			v.inst = semantics.InNull
			b.vals = append(b.vals, v)
		}
		return
	case OpMax, OpMin:
		// libpcp returns one uninitialised value when there are none
		if n == 0 {
			return
		}
	}
	var acc uint64
	switch b.op {
	case OpAvg:
		// libpcp accumulates (float)v / numval in single precision, in the
		// order of the operand's instances (so the last bits depend on it)
		var f float32
		for _, v := range l.vals {
			var x float32
			switch lt {
			case semantics.Type32:
				x = float32(atomL(v.a))
			case semantics.TypeU32:
				x = float32(atomUL(v.a))
			case semantics.Type64:
				x = float32(atomLL(v.a))
			case semantics.TypeU64:
				x = float32(v.a)
			case semantics.TypeFloat:
				x = atomF(v.a)
			case semantics.TypeDouble:
				x = float32(atomD(v.a))
			}
			f = float32(f + float32(x/float32(n)))
		}
		acc = fromF(f)
	case OpSum:
		t := b.desc.Type
		for _, v := range l.vals {
			acc = binOp(t, OpPlus, acc, t, 1, 1, v.a, t, 1, 1)
		}
	case OpMax, OpMin:
		acc = l.vals[0].a
		for _, v := range l.vals[1:] {
			if (b.op == OpMax && less(acc, v.a, lt)) || (b.op == OpMin && less(v.a, acc, lt)) {
				acc = v.a
			}
		}
	}
	b.vals = append(b.vals, ival{inst: semantics.InNull, a: acc})
}

func (b *bnode) evalFilter(c *evalCtx) {
	pat, r := b.left, b.right
	b.vals = b.vals[:0]
	if pat.n.Exact {
		if !b.exactOK {
			for _, in := range c.insts(r.desc.InDom) {
				if in.Name == pat.value {
					b.exactInst, b.exactOK = in.ID, true
					break
				}
			}
			if !b.exactOK {
				return
			}
		}
		for _, v := range r.vals {
			if v.inst == b.exactInst {
				b.vals = append(b.vals, v)
				break
			}
		}
		return
	}
	if b.matches == nil {
		b.matches = map[int32]bool{}
	}
	var insts []source.Instance
	for _, v := range r.vals {
		m, ok := b.matches[v.inst]
		if !ok {
			if insts == nil {
				insts = c.insts(r.desc.InDom)
			}
			for _, in := range insts {
				if in.ID == v.inst {
					name := in.Name
					if i := strings.IndexByte(name, ' '); i >= 0 {
						name = name[:i]
					}
					m = pat.n.Regex.MatchString(name) != pat.n.Invert
					break
				}
			}
			if len(b.matches) > 4096 {
				clear(b.matches)
			}
			b.matches[v.inst] = m
		}
		if m {
			b.vals = append(b.vals, v)
		}
	}
}

// evalBinary computes an arithmetic, relational or boolean operator over the
// instances of its operands, matching instances as libpcp does.
func (b *bnode) evalBinary() {
	l, r := b.left, b.right
	b.vals = b.vals[:0]
	if len(l.vals) == 0 || len(r.vals) == 0 {
		return
	}
	lSet, rSet := l.desc.InDom != semantics.InDomNull, r.desc.InDom != semantics.InDomNull
	var n int
	switch {
	case !lSet:
		n = len(r.vals)
	case !rSet:
		n = len(l.vals)
	default:
		n = min(len(l.vals), len(r.vals))
	}
	relational := b.op.isRelational() || b.op.isBoolean()
	i, j := 0, 0
	for len(b.vals) < n {
		if i >= len(l.vals) || j >= len(r.vals) {
			break
		}
		if lSet && rSet && l.vals[i].inst != r.vals[j].inst {
			for j = 0; j < len(r.vals); j++ {
				if l.vals[i].inst == r.vals[j].inst {
					break
				}
			}
			if j == len(r.vals) {
				i++
				j = 0
				continue
			}
		}
		var a uint64
		if relational {
			t := promote[l.desc.Type][r.desc.Type]
			a = binOp(t, b.op, l.vals[i].a, l.desc.Type, l.mulScale, l.divScale, r.vals[j].a, r.desc.Type, r.mulScale, r.divScale)
		} else {
			a = binOp(b.desc.Type, b.op, l.vals[i].a, l.desc.Type, l.mulScale, l.divScale, r.vals[j].a, r.desc.Type, r.mulScale, r.divScale)
		}
		inst := r.vals[j].inst
		if lSet {
			inst = l.vals[i].inst
		}
		b.vals = append(b.vals, ival{inst: inst, a: a})
		if lSet {
			i++
			if rSet {
				j++
				if j >= len(r.vals) {
					j = 0
				}
			}
		} else if rSet {
			j++
		}
	}
}
