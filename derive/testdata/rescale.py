#!/usr/bin/python3
"""libpcp's unit scaling in derived metrics, for derive's TestUnitScaling.

Writes rescale.tsv: derived metrics over mkconst() constants of every PCP
numeric type, evaluated by libpcp (python3-pcp: pmRegisterDerived, then
pmLookupDesc and pmFetch in an archive context; the constants need no
metric of the archive). They cover rescale() (pmConvScale in the operand's
type: integer rounding, overflow, float precision) and the operators whose
operands libpcp scales to a common scale (+, -, *, /) or compares without
scaling (<, ==, >).

Columns: name, expression, type (pmTypeStr, or "error" when libpcp refuses
the definition), units (pmUnitsStr), value (integers in decimal, FLOAT and
DOUBLE in Python's repr of the double, "no values" when numval <= 0).

usage: /usr/bin/python3 rescale.py ARCHIVE > rescale.tsv
(go test ./derive -run TestUnitScaling -update runs it; PCP 6.0.3 here)
"""
import os
import sys

os.environ["PCP_DERIVED_CONFIG"] = ""
from pcp import pmapi  # noqa: E402
import cpmapi as c  # noqa: E402

TYPES = ["32", "u32", "64", "u64", "float", "double"]
# a value "A*B" is the product mkconst(A) * mkconst(B, units=...): libpcp's
# constants are at most 32 bits and its doubles have no exponent
VALUES = {
    "32": ["1500", "-1500", "1499", "-1499", "500", "-500", "7", "-7", "0", "999", "743132",
           "2147483647", "2147483648", "-2147483647"],
    "u32": ["1500", "1499", "500", "7", "999", "743132", "3000000000", "4294967295"],
    "64": ["1500", "-1500", "1499", "-500", "7", "743132", "4294967295*2147483647", "-4294967295*2147483647",
           "3037000499*3037000499", "123456789*1000003"],
    "u64": ["1500", "1499", "7", "743132", "4294967295*4294967295", "4294967295*2147483648", "123456789*1000003"],
    "float": ["1500", "7", "-7", "0.1", "743.132", "1500.5", "16777217", "4294967295*4294967295"],
    "double": ["1500", "-1500", "0.1", "0.3", "743132.0", "743.132", "1500.5", "4294967295*4294967295"],
}
RESCALES = [
    ("millisec", "sec"), ("sec", "millisec"), ("microsec", "millisec"), ("nanosec", "sec"), ("hour", "nanosec"),
    ("min", "sec"), ("sec", "min"), ("millisec", "hour"), ("byte", "Kbyte"), ("Kbyte", "byte"),
    ("Kbyte", "Mbyte"), ("Mbyte", "Kbyte"), ("byte", "Ebyte"), ("Ebyte", "byte"), ("Gbyte", "Tbyte"),
    ("Kbyte/sec", "Mbyte/hour"), ("byte/millisec", "Kbyte/sec"), ("count/sec", "count/millisec"),
    ("count x 10^3", "count"), ("count", "count x 10^3"), ("count x 10^-2", "count x 10^3"),
    ("Kbyte/count", "byte/count x 10^3"), ("Kbyte", "sec"), ("count", "Kbyte"),
]
BINARY = [
    ("Kbyte", "3", "byte", "1000"), ("byte", "1000", "Kbyte", "3"), ("millisec", "1500", "sec", "1"),
    ("sec", "2", "microsec", "1500"), ("count x 10^3", "5", "count", "7"), ("Kbyte/sec", "10", "byte/sec", "100"),
    ("Kbyte/sec", "3", "min", "2"), ("byte/millisec", "7", "Mbyte/hour", "5"), ("count", "4", "count x 10^-2", "9"),
]
TYPE_PAIRS = [("32", "32"), ("u32", "u64"), ("64", "double"), ("float", "32"), ("double", "float"), ("u64", "u64"),
              ("u32", "32")]


def const(v, typ, units):
    neg = v.startswith("-")
    v = v.lstrip("-")
    if "*" in v:
        a, b = v.split("*")
        s = "(mkconst(%s, type=%s) * mkconst(%s, type=%s, units=\"%s\"))" % (a, typ, b, typ, units)
    else:
        s = "mkconst(%s, type=%s, units=\"%s\")" % (v, typ, units)
    return "-" + s if neg else s


def defs():
    out = []
    for frm, to in RESCALES:
        for typ in TYPES:
            for v in VALUES[typ]:
                out.append('rescale(%s, "%s")' % (const(v, typ, frm), to))
    for lu, lv, ru, rv in BINARY:
        for lt, rt in TYPE_PAIRS:
            for op in ("+", "-", "*", "/", "<", "==", ">"):
                out.append("%s %s %s" % (const(lv, lt, lu), op, const(rv, rt, ru)))
    # the ternary operator's operands must have the same units (no scaling)
    for lu, lv, ru, rv in BINARY[:5]:
        for lt, rt in TYPE_PAIRS[:1] + TYPE_PAIRS[5:6]:
            for g in ("1", "0"):
                out.append("mkconst(%s, type=u32) ? %s : %s" % (g, const(lv, lt, lu), const(rv, rt, ru)))
                out.append("mkconst(%s, type=u32) ? %s : %s" % (g, const(lv, lt, lu), const(rv, rt, lu)))
    # dimensionless and count, and rescale() of expressions
    for typ in TYPES:
        out.append('rescale(%s, "")' % const("1500", typ, "count x 10^3"))
        out.append('rescale(%s, "count x 10^-3")' % const("1500", typ, ""))
        out.append('rescale(%s + %s, "Mbyte")' % (const("3", typ, "Kbyte"), const("1000", typ, "byte")))
        out.append('rescale(%s * %s, "Kbyte")' % (const("3", typ, "Kbyte/sec"), const("2", typ, "min")))
        out.append('rescale(rescale(%s, "sec"), "millisec")' % const("1499", typ, "millisec"))
    return out


def main():
    ctx = pmapi.pmContext(c.PM_CONTEXT_ARCHIVE, sys.argv[1])
    start = ctx.pmGetArchiveLabel().start
    print("# libpcp %s: derived metrics evaluated by libpcp (rescale.py)" % ctx.pmGetConfig("PCP_VERSION"))
    print("# name\texpression\ttype\tunits\tvalue")
    for i, e in enumerate(defs()):
        name = "r.m%04d" % i
        try:
            ctx.pmRegisterDerived(name, e)
            pmid = ctx.pmLookupName(name)
            d = ctx.pmLookupDescs(pmid)[0].contents
        except pmapi.pmErr:
            print("%s\t%s\terror\t\t" % (name, e))
            continue
        ctx.pmSetMode(c.PM_MODE_INTERP, start, 0)  # every fetch at the archive's start
        r = ctx.pmFetch(pmid)
        try:
            vs = r.contents.get_vset(0).contents
            if vs.numval <= 0:
                val = "no values"
            else:
                a = ctx.pmExtractValue(vs.valfmt, vs.vlist[0], d.type, d.type)
                val = {c.PM_TYPE_32: str(a.l), c.PM_TYPE_U32: str(a.ul), c.PM_TYPE_64: str(a.ll),
                       c.PM_TYPE_U64: str(a.ull), c.PM_TYPE_FLOAT: repr(a.f), c.PM_TYPE_DOUBLE: repr(a.d)}[d.type]
        finally:
            ctx.pmFreeResult(r)
        print("%s\t%s\t%s\t%s\t%s" % (name, e, ctx.pmTypeStr(d.type), pmapi.pmContext.pmUnitsStr(d.units), val))


if __name__ == "__main__":
    main()
