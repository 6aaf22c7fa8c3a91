package derive

import (
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// SemanticError is a derived metric that parsed but cannot be bound to the
// metrics of a source (libpcp's check_expr). Error returns the line libpcp
// prints with pmprintf, e.g. "Semantic error: derived metric x: a + b:
// Dimensions are not the same".
type SemanticError struct {
	Metric string // the derived metric
	Where  string // the offending node, e.g. "a + b" or "RATE(m)"
	Msg    string // e.g. "Dimensions are not the same"
}

// Error returns the message libpcp prints for the error.
func (e *SemanticError) Error() string {
	return "Semantic error: derived metric " + e.Metric + ": " + e.Where + ": " + e.Msg
}

// bnode is an expression node bound to the metadata of a source, with its
// descriptor, scale factors and evaluation state (libpcp's node_t with its
// info_t).
type bnode struct {
	op          Op
	n           *Node
	left, right *bnode
	value       string // NAME, constant text, pattern (for reports)
	desc        semantics.Desc
	pmid        semantics.PMID // operand PMID of an OpName, PMIDNull if undefined
	mulScale    int32
	divScale    int32
	rescale     semantics.Scale // rescale(): pmConvScale's factors
	saveLast    bool

	// evaluation state
	vals      []ival
	err       error // the operand's fetch error (numval < 0)
	last      []ival
	lastErr   error
	stamp     time.Time
	lastStamp time.Time
	timeScale float64 // for rate() of a time counter, -1 until computed
	exactInst int32   // for an exact instance filter, once resolved
	exactOK   bool
	matches   map[int32]bool // regex instance filter: instance -> match
}

// lookupFunc returns the descriptor of a metric of the source.
type lookupFunc func(name string) (semantics.Desc, bool)

// bind copies the parsed tree into a bound tree, looking up the descriptors
// of the operand metrics (bind_expr). It reports false when an operand is
// not a metric of the source: the derived metric is then silently absent.
func bind(n *Node, lookup lookupFunc, lookupErrOK bool) (*bnode, bool) {
	b := &bnode{op: n.Op, n: n, value: n.Value, mulScale: 1, divScale: 1, saveLast: n.saveLast, timeScale: -1, pmid: semantics.PMIDNull}
	if n.Left != nil {
		l, ok := bind(n.Left, lookup, n.Op == OpDefined)
		if !ok {
			return nil, false
		}
		b.left = l
	}
	if n.Right != nil {
		r, ok := bind(n.Right, lookup, false)
		if !ok {
			return nil, false
		}
		b.right = r
	}
	switch n.Op {
	case OpName:
		d, ok := lookup(n.Value)
		if !ok {
			if lookupErrOK {
				return b, true // defined(x) is false
			}
			return nil, false
		}
		b.desc = d
		b.pmid = d.PMID
	case OpInteger, OpDouble, OpScale:
		b.desc = n.Desc
	}
	return b, true
}

func isArithType(t semantics.Type) bool { return t >= semantics.Type32 && t <= semantics.TypeDouble }

// operandText returns how libpcp's report_sem_error names a node.
func (b *bnode) operandText() string {
	if b.op == OpInteger || b.op == OpDouble || b.op == OpName {
		return b.value
	}
	return "<expr>"
}

func (b *bnode) where() string {
	switch b.op {
	case OpPlus, OpMinus, OpStar, OpSlash, OpLT, OpLEQ, OpEQ, OpGEQ, OpGT, OpNEQ, OpAnd, OpOr:
		return b.left.operandText() + " " + b.op.symbol() + " " + b.right.operandText()
	case OpNot, OpNeg:
		return b.op.symbol() + " " + b.left.operandText()
	case OpAvg, OpCount, OpDelta, OpRate, OpInstant, OpMax, OpMin, OpSum, OpAnon, OpDefined, OpScalar:
		v := "(null)"
		if b.left != nil && (b.left.op == OpName || b.left.op == OpInteger || b.left.op == OpDouble) {
			v = b.left.value
		}
		return b.op.String() + "(" + v + ")"
	case OpQuest:
		return b.left.operandText() + " ? " + b.right.left.operandText() + " : " + b.right.right.operandText()
	case OpColon:
		return b.left.operandText() + " : " + b.right.operandText()
	case OpRescale:
		u := b.right.desc.Units.StringPCP6()
		if u == "" {
			u = "none"
		}
		return b.left.operandText() + " " + b.op.String() + " " + u
	case OpFilterInst:
		return b.op.String() + " "
	}
	return "botch @ node type #" + itoa(int(b.op)) + "?"
}

// check is libpcp's check_expr: it computes the descriptor of every node
// bottom up and reports the first semantic error.
func check(metric string, b *bnode) *SemanticError {
	fail := func(n *bnode, msg string) *SemanticError {
		return &SemanticError{Metric: metric, Where: n.where(), Msg: msg}
	}
	switch b.op {
	case OpInteger, OpDouble, OpName, OpScale, OpPattern:
		return nil
	case OpDefined:
		b.desc = semantics.Desc{PMID: semantics.PMIDNull, Type: semantics.TypeU32, InDom: semantics.InDomNull, Sem: semantics.SemDiscrete}
		v := uint64(0)
		if b.left.pmid != semantics.PMIDNull {
			v = 1
		}
		b.vals = []ival{{inst: semantics.InNull, a: v}}
		b.value = b.left.value
		b.left = nil
		return nil
	}
	if e := check(metric, b.left); e != nil {
		return e
	}
	if b.right != nil {
		if e := check(metric, b.right); e != nil {
			return e
		}
		switch b.op {
		case OpColon:
			l, r := &b.left.desc, &b.right.desc
			b.desc = *l
			switch {
			case l.Type != r.Type:
				return fail(b, "Different types for ternary operands")
			case l.InDom != r.InDom && l.InDom != semantics.InDomNull && r.InDom != semantics.InDomNull:
				return fail(b, "Different instance domains for ternary operands")
			}
			if l.InDom == semantics.InDomNull {
				b.desc.InDom = r.InDom
			}
			switch {
			case l.Sem != r.Sem:
				return fail(b, "Different semantics for ternary operands")
			case l.Units.DimSpace != r.Units.DimSpace || l.Units.ScaleSpace != r.Units.ScaleSpace:
				return fail(b, "Different units or scale (space) for ternary operands")
			case l.Units.DimTime != r.Units.DimTime || l.Units.ScaleTime != r.Units.ScaleTime:
				return fail(b, "Different units or scale (time) for ternary operands")
			case l.Units.DimCount != r.Units.DimCount || l.Units.ScaleCount != r.Units.ScaleCount:
				return fail(b, "Different units or scale (count) for ternary operands")
			}
			return nil
		case OpQuest:
			if !isArithType(b.left.desc.Type) {
				return fail(b, "Non-arithmetic operand for ternary guard")
			}
			if b.right.left.desc.InDom == semantics.InDomNull && b.right.right.desc.InDom == semantics.InDomNull &&
				b.left.desc.InDom != semantics.InDomNull {
				return fail(b, "Non-scalar ternary guard with scalar expressions")
			}
			b.desc = b.right.desc
			return nil
		case OpFilterInst:
			b.desc = b.right.desc
			return nil
		}
		return mapDesc(b, fail)
	}
	b.desc = b.left.desc
	switch b.op {
	case OpCount:
		b.desc.Type = semantics.TypeU32
		b.desc.Units = semantics.Units{DimCount: 1}
		b.desc.Sem = semantics.SemInstant
		b.desc.InDom = semantics.InDomNull
	case OpInstant:
		if b.left.desc.Sem == semantics.SemCounter {
			b.desc.Sem = semantics.SemInstant
		}
	case OpScalar:
		b.desc.InDom = semantics.InDomNull
	case OpAvg, OpSum, OpMax, OpMin, OpDelta, OpRate, OpNeg:
		if !isArithType(b.left.desc.Type) {
			if b.op == OpNeg {
				return fail(b, "Non-arithmetic operand for unary negation")
			}
			return fail(b, "Non-arithmetic operand for function")
		}
		if b.op != OpSum {
			b.desc.Sem = semantics.SemInstant
		}
		switch b.op {
		case OpRate:
			if t := b.left.desc.Units.DimTime; t != 0 && t != 1 {
				return fail(b, "Incorrect time dimension for operand")
			}
		case OpDelta, OpNeg:
		default:
			b.desc.InDom = semantics.InDomNull
		}
		switch b.op {
		case OpAvg:
			b.desc.Type = semantics.TypeFloat
		case OpRate:
			b.desc.Type = semantics.TypeDouble
			b.desc.Units.DimTime--
			if b.desc.Units.DimTime == 0 {
				b.desc.Units.ScaleTime = 0
			} else {
				b.desc.Units.ScaleTime = semantics.TimeSec
			}
		case OpNeg:
			switch b.left.desc.Type {
			case semantics.TypeU32:
				b.desc.Type = semantics.Type32
			case semantics.TypeU64:
				b.desc.Type = semantics.Type64
			}
		case OpDelta:
			switch b.left.desc.Type {
			case semantics.TypeU32:
				b.desc.Type = semantics.Type64
			case semantics.TypeU64:
				b.desc.Type = semantics.TypeDouble
			}
		}
	case OpNot:
		// libpcp has no case for "!": the node keeps its operand's
		// descriptor (type included), while evaluation stores 0 or 1 in
		// the low 32 bits of the value.
	}
	return nil
}

var promote = [6][6]semantics.Type{
	{semantics.Type32, semantics.TypeU32, semantics.Type64, semantics.TypeU64, semantics.TypeFloat, semantics.TypeDouble},
	{semantics.TypeU32, semantics.TypeU32, semantics.Type64, semantics.TypeU64, semantics.TypeFloat, semantics.TypeDouble},
	{semantics.Type64, semantics.Type64, semantics.Type64, semantics.TypeU64, semantics.TypeFloat, semantics.TypeDouble},
	{semantics.TypeU64, semantics.TypeU64, semantics.TypeU64, semantics.TypeU64, semantics.TypeFloat, semantics.TypeDouble},
	{semantics.TypeFloat, semantics.TypeFloat, semantics.TypeFloat, semantics.TypeFloat, semantics.TypeFloat, semantics.TypeDouble},
	{semantics.TypeDouble, semantics.TypeDouble, semantics.TypeDouble, semantics.TypeDouble, semantics.TypeDouble, semantics.TypeDouble},
}

func sameDims(l, r semantics.Units) bool {
	return l.DimCount == r.DimCount && l.DimTime == r.DimTime && l.DimSpace == r.DimSpace &&
		l.ExtraUnit == r.ExtraUnit
}

// noneVersusCount is libpcp's exception to equal dimensions: one operand may
// be dimensionless when the other is a plain count.
func noneVersusCount(l, r semantics.Units) bool {
	return l.DimTime == 0 && r.DimTime == 0 && l.DimSpace == 0 && r.DimSpace == 0 &&
		((l.DimCount == 0 && r.DimCount == 1) || (l.DimCount == 1 && r.DimCount == 0))
}

func dimensionless(u semantics.Units) bool {
	return u.DimCount == 0 && u.DimTime == 0 && u.DimSpace == 0
}

// mapDesc is libpcp's map_desc for binary operators.
func mapDesc(b *bnode, fail func(*bnode, string) *SemanticError) *SemanticError {
	l, r := &b.left.desc, &b.right.desc
	op := b.op
	relational := op.isRelational()
	boolean := op.isBoolean()
	switch {
	case relational || boolean:
	case op == OpRescale:
		b.desc = *l
		if !isArithType(b.desc.Type) {
			return fail(b, "Non-arithmetic operand for function")
		}
		// libpcp converts 1 with pmConvScale to check the units
		sc, err := semantics.ScaleOf(l.Units, r.Units)
		if err != nil {
			return fail(b, "Incompatible dimensions")
		}
		b.rescale = sc
		b.desc.Units = r.Units
		return nil
	default:
		switch {
		case l.Sem == semantics.SemCounter && r.Sem == semantics.SemCounter:
			if op != OpPlus && op != OpMinus {
				return fail(b, "Illegal operator for counters")
			}
		case l.Sem == semantics.SemCounter:
			if op != OpStar && op != OpSlash {
				return fail(b, "Illegal operator for counter and non-counter")
			}
		case r.Sem == semantics.SemCounter:
			if op != OpStar {
				return fail(b, "Illegal operator for non-counter and counter")
			}
		}
	}
	// prefer a metric or expression over a constant
	if b.left.op != OpInteger && b.left.op != OpDouble {
		b.desc = *l
	} else {
		b.desc = *r
	}
	if l.Sem != semantics.SemCounter && r.Sem != semantics.SemCounter {
		if l.Sem == semantics.SemDiscrete && r.Sem == semantics.SemDiscrete {
			b.desc.Sem = semantics.SemDiscrete
		} else {
			b.desc.Sem = semantics.SemInstant
		}
	}
	if !isArithType(l.Type) {
		return fail(b, "Non-arithmetic type for left operand")
	}
	if !isArithType(r.Type) {
		return fail(b, "Non-arithmetic type for right operand")
	}
	switch {
	case op == OpSlash:
		b.desc.Type = semantics.TypeDouble
	case relational || boolean:
		b.desc.Type = semantics.TypeU32
	default:
		b.desc.Type = promote[l.Type][r.Type]
	}
	if (op == OpPlus || op == OpMinus) && !sameDims(l.Units, r.Units) && !noneVersusCount(l.Units, r.Units) {
		return fail(b, "Dimensions are not the same")
	}
	if relational {
		// libpcp means to exempt comparisons with a constant, but tests the
		// operands' PM_TYPE against its node types N_INTEGER and N_DOUBLE:
		// what is exempt is an operand of type U32 (N_INTEGER == 1).
		exempt := l.Type == semantics.TypeU32 || r.Type == semantics.TypeU32
		if !exempt && !sameDims(l.Units, r.Units) && !noneVersusCount(l.Units, r.Units) {
			return fail(b, "Dimensions are not the same")
		}
	}
	if boolean && (!dimensionless(l.Units) || !dimensionless(r.Units)) {
		return fail(b, "Dimensions are not the same")
	}
	if op == OpStar || op == OpSlash || relational {
		if l.Sem == semantics.SemCounter && r.Sem != semantics.SemCounter && !dimensionless(r.Units) {
			return fail(b, "Non-counter and not dimensionless for right operand")
		}
		if l.Sem != semantics.SemCounter && r.Sem == semantics.SemCounter && !dimensionless(l.Units) {
			return fail(b, "Non-counter and not dimensionless for left operand")
		}
	}
	// extra units of PCP 7.2 (temperature, voltage, ...) are never scaled
	if op == OpStar && l.Units.ExtraUnit != 0 && r.Units.ExtraUnit != 0 {
		return fail(b, "Extra units not allowed for both operands of *")
	}
	if op == OpSlash && l.Units.ExtraUnit != 0 && r.Units.ExtraUnit != 0 &&
		(l.Units.ExtraUnit != r.Units.ExtraUnit || l.Units.ExtraScale != r.Units.ExtraScale) {
		return fail(b, "Different extra units not allowed for both operands of /")
	}
	if op.isArith() {
		mapUnits(b)
		u := &b.desc.Units
		switch {
		case op == OpSlash && l.Units.ExtraUnit != 0 && r.Units.ExtraUnit != 0:
			u.ExtraUnit, u.ExtraScale = 0, 0
		case (op == OpStar || op == OpSlash) && l.Units.ExtraUnit != 0:
			u.ExtraUnit, u.ExtraScale = l.Units.ExtraUnit, l.Units.ExtraScale
		case op == OpStar && r.Units.ExtraUnit != 0:
			u.ExtraUnit, u.ExtraScale = r.Units.ExtraUnit, r.Units.ExtraScale
		case op == OpSlash && r.Units.ExtraUnit != 0:
			u.ExtraUnit, u.ExtraScale = -r.Units.ExtraUnit, r.Units.ExtraScale
		}
	} else {
		b.desc.Units = semantics.Units{}
	}
	switch {
	case l.InDom != semantics.InDomNull && r.InDom != semantics.InDomNull && l.InDom != r.InDom:
		return fail(b, "Operands should have the same instance domain")
	case l.InDom != semantics.InDomNull && r.InDom == semantics.InDomNull:
		b.desc.InDom = l.InDom
	case r.InDom != semantics.InDomNull && l.InDom == semantics.InDomNull:
		b.desc.InDom = r.InDom
	}
	return nil
}

var timeFactor = [...]int32{1000, 1000, 1000, 60, 60}

// mapUnits is libpcp's map_units: scale conversion to the larger scale of
// each dimension both operands have (which makes the result DOUBLE), then
// the dimensions of the result. The quirks of libpcp (the direction of the
// conversion of the left operand's time and space scales follows the right
// operand's dimension) are kept.
func mapUnits(b *bnode) {
	l, r := &b.left.desc, &b.right.desc
	u := &b.desc.Units
	if l.Units.DimCount != 0 && r.Units.DimCount != 0 {
		diff := int(l.Units.ScaleCount) - int(r.Units.ScaleCount)
		if diff > 0 {
			for i := 0; i < diff; i++ {
				if r.Units.DimCount > 0 {
					b.right.divScale *= 10
				} else {
					b.right.mulScale *= 10
				}
			}
			b.desc.Type = semantics.TypeDouble
		} else if diff < 0 {
			u.ScaleCount = r.Units.ScaleCount
			for i := diff; i < 0; i++ {
				if l.Units.DimCount > 0 {
					b.left.divScale *= 10
				} else {
					b.left.mulScale *= 10
				}
			}
			b.desc.Type = semantics.TypeDouble
		}
	}
	if l.Units.DimTime != 0 && r.Units.DimTime != 0 {
		if l.Units.ScaleTime > r.Units.ScaleTime {
			for i := int(r.Units.ScaleTime); i < int(l.Units.ScaleTime); i++ {
				f := int32(1)
				if i < len(timeFactor) {
					f = timeFactor[i]
				}
				if r.Units.DimTime > 0 {
					b.right.divScale *= f
				} else {
					b.right.mulScale *= f
				}
			}
			b.desc.Type = semantics.TypeDouble
		} else if l.Units.ScaleTime < r.Units.ScaleTime {
			u.ScaleTime = r.Units.ScaleTime
			for i := int(l.Units.ScaleTime); i < int(r.Units.ScaleTime); i++ {
				f := int32(1)
				if i < len(timeFactor) {
					f = timeFactor[i]
				}
				if r.Units.DimTime > 0 {
					b.left.divScale *= f
				} else {
					b.left.mulScale *= f
				}
			}
			b.desc.Type = semantics.TypeDouble
		}
	}
	if l.Units.DimSpace != 0 && r.Units.DimSpace != 0 {
		diff := int(l.Units.ScaleSpace) - int(r.Units.ScaleSpace)
		if diff > 0 {
			for i := 0; i < diff; i++ {
				if r.Units.DimSpace > 0 {
					b.right.divScale *= 1024
				} else {
					b.right.mulScale *= 1024
				}
			}
			b.desc.Type = semantics.TypeDouble
		} else if diff < 0 {
			u.ScaleSpace = r.Units.ScaleSpace
			for i := diff; i < 0; i++ {
				if r.Units.DimSpace > 0 {
					b.left.divScale *= 1024
				} else {
					b.left.mulScale *= 1024
				}
			}
			b.desc.Type = semantics.TypeDouble
		}
	}
	switch b.op {
	case OpStar:
		u.DimCount = l.Units.DimCount + r.Units.DimCount
		u.DimTime = l.Units.DimTime + r.Units.DimTime
		u.DimSpace = l.Units.DimSpace + r.Units.DimSpace
	case OpSlash:
		u.DimCount = l.Units.DimCount - r.Units.DimCount
		u.DimTime = l.Units.DimTime - r.Units.DimTime
		u.DimSpace = l.Units.DimSpace - r.Units.DimSpace
	}
	if u.DimCount != 0 && l.Units.DimCount == 0 {
		u.ScaleCount = r.Units.ScaleCount
	}
	if u.DimTime != 0 && l.Units.DimTime == 0 {
		u.ScaleTime = r.Units.ScaleTime
	}
	if u.DimSpace != 0 && l.Units.DimSpace == 0 {
		u.ScaleSpace = r.Units.ScaleSpace
	}
	if u.DimCount == 0 {
		u.ScaleCount = 0
	}
	if u.DimTime == 0 {
		u.ScaleTime = 0
	}
	if u.DimSpace == 0 {
		u.ScaleSpace = 0
	}
}
