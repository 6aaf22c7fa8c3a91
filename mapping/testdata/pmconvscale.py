#!/usr/bin/python3
"""libpcp's unit conversion of PCP values to the mapping's base units.

Writes pmconvscale.tsv: for each PCP type, units and value, what libpcp
answers when a value is converted as its own clients do (pmfetchgroup's
pmfg_convert_double, pmcc, pmval): pmExtractValue to PM_TYPE_DOUBLE, then
pmConvScale(PM_TYPE_DOUBLE) to the same dimensions in bytes, seconds and
counts of 10^0 (the base units of mapping.BaseUnit). The values are real
ones, fetched from the local pmcd for every numeric metric whose units
scale, and edge values (extremes, the issue's 743132 ms) for a fixed list
of units. Both go through libpcp's own calls (python3-pcp, ctypes).

Columns: type, units (dimSpace,dimTime,dimCount,scaleSpace,scaleTime,
scaleCount), input value (integers in decimal, FLOAT and DOUBLE in Python's
repr, which round-trips), libpcp's answer (repr), origin (metric or "edge").

usage: /usr/bin/python3 pmconvscale.py [HOST] > pmconvscale.tsv
(needs python3-pcp and, for the live rows, a pmcd; PCP 6.0.3 here)
"""
import ctypes
import os
import struct
import sys

os.environ["PCP_DERIVED_CONFIG"] = ""
from pcp import pmapi  # noqa: E402
import cpmapi as c  # noqa: E402

L = pmapi.LIBPCP
TYPES = {c.PM_TYPE_32: "32", c.PM_TYPE_U32: "u32", c.PM_TYPE_64: "64", c.PM_TYPE_U64: "u64",
         c.PM_TYPE_FLOAT: "float", c.PM_TYPE_DOUBLE: "double"}
PACK = {c.PM_TYPE_64: "<q", c.PM_TYPE_U64: "<Q", c.PM_TYPE_FLOAT: "<f", c.PM_TYPE_DOUBLE: "<d"}


def units(ds, dt, dc, ss, st, sc):
    u = pmapi.pmUnits()
    u.dimSpace, u.dimTime, u.dimCount = ds, dt, dc
    u.scaleSpace, u.scaleTime, u.scaleCount = ss, st, sc
    return u


def key(u):
    return (u.dimSpace, u.dimTime, u.dimCount, u.scaleSpace, u.scaleTime, u.scaleCount)


def base(u):
    """The same dimensions in bytes, seconds and counts of 10^0."""
    return units(u.dimSpace, u.dimTime, u.dimCount, c.PM_SPACE_BYTE, c.PM_TIME_SEC, 0)


def factor(u):
    """libpcp's answer for 1.0: whether the units scale at all."""
    a, o = pmapi.pmAtomValue(), pmapi.pmAtomValue()
    a.d = 1.0
    if L.pmConvScale(c.PM_TYPE_DOUBLE, ctypes.byref(a), ctypes.byref(u), ctypes.byref(o), ctypes.byref(base(u))) < 0:
        return None
    return o.d


def convert(valfmt, pmvalue, typ, u):
    """pmExtractValue to DOUBLE, then pmConvScale(DOUBLE) to the base units."""
    a, o = pmapi.pmAtomValue(), pmapi.pmAtomValue()
    sts = L.pmExtractValue(valfmt, ctypes.byref(pmvalue), typ, ctypes.byref(a), c.PM_TYPE_DOUBLE)
    if sts < 0:
        raise pmapi.pmErr(sts)
    sts = L.pmConvScale(c.PM_TYPE_DOUBLE, ctypes.byref(a), ctypes.byref(u), ctypes.byref(o), ctypes.byref(base(u)))
    if sts < 0:
        raise pmapi.pmErr(sts)
    return o.d


def stuffed(typ, v):
    """A pmValue holding v as pmcd would send it; the buffer is kept alive with it."""
    pv = pmapi.pmValue()
    if typ in (c.PM_TYPE_32, c.PM_TYPE_U32):
        pv.value.lval = struct.unpack("<i", struct.pack("<i" if typ == c.PM_TYPE_32 else "<I", v))[0]
        return c.PM_VAL_INSITU, pv, None
    payload = struct.pack(PACK[typ], v)
    hdr = (4 + len(payload)) | (typ << 24)  # vlen:24, vtype:8 (little-endian bit fields)
    buf = ctypes.create_string_buffer(struct.pack("<I", hdr) + payload)
    pv.value.pval = ctypes.cast(buf, ctypes.POINTER(pmapi.pmValueBlock))
    return c.PM_VAL_DPTR, pv, buf


def text(typ, v):
    return repr(float(v)) if typ in (c.PM_TYPE_FLOAT, c.PM_TYPE_DOUBLE) else str(int(v))


def row(typ, u, v, answer, origin):
    print("%s\t%s\t%s\t%r\t%s" % (TYPES[typ], ",".join(str(x) for x in key(u)), text(typ, v), answer, origin))


EDGE_UNITS = [
    # dimSpace, dimTime, dimCount, scaleSpace, scaleTime, scaleCount
    (0, 1, 0, 0, c.PM_TIME_MSEC, 0), (0, 1, 0, 0, c.PM_TIME_USEC, 0), (0, 1, 0, 0, c.PM_TIME_NSEC, 0),
    (0, 1, 0, 0, c.PM_TIME_MIN, 0), (0, 1, 0, 0, c.PM_TIME_HOUR, 0), (0, 2, 0, 0, c.PM_TIME_MSEC, 0),
    (1, 0, 0, c.PM_SPACE_KBYTE, 0, 0), (1, 0, 0, c.PM_SPACE_MBYTE, 0, 0), (1, 0, 0, c.PM_SPACE_GBYTE, 0, 0),
    (1, 0, 0, c.PM_SPACE_TBYTE, 0, 0), (1, 0, 0, c.PM_SPACE_PBYTE, 0, 0), (1, 0, 0, c.PM_SPACE_EBYTE, 0, 0),
    (1, -1, 0, c.PM_SPACE_KBYTE, c.PM_TIME_SEC, 0), (1, -1, 0, c.PM_SPACE_MBYTE, c.PM_TIME_HOUR, 0),
    (1, -1, 0, c.PM_SPACE_BYTE, c.PM_TIME_MSEC, 0), (-1, 0, 0, c.PM_SPACE_KBYTE, 0, 0),
    (1, 0, -1, c.PM_SPACE_KBYTE, 0, 0), (0, -1, 1, 0, c.PM_TIME_USEC, 0), (0, -1, 1, 0, c.PM_TIME_NSEC, 0),
    (0, 1, -1, 0, c.PM_TIME_USEC, 0), (0, 0, 1, 0, 0, 3), (0, 0, 1, 0, 0, -2), (0, 0, 1, 0, 0, -6),
    (0, 0, -1, 0, 0, 3), (0, 0, 0, 0, 0, 3), (0, 0, 1, 0, 0, 0), (0, 1, 0, 0, c.PM_TIME_SEC, 0),
]
EDGE_VALUES = {
    c.PM_TYPE_32: [743132, 1, 3, 7, -25, -1, 2147483647, -2147483648],
    c.PM_TYPE_U32: [743132, 1, 3, 7, 999, 4294967295],
    c.PM_TYPE_64: [743132, 987751, 1, 3, -3, 9007199254740993, 9007199254740003, 9223372036854775807, -9223372036854775808],
    c.PM_TYPE_U64: [743132, 987751, 1, 3, 123456789012, 9007199254740993, 18446744073709551615],
    c.PM_TYPE_FLOAT: [743.132, 0.1, 1024.5, 3.4028234663852886e+38, 1e-45],
    c.PM_TYPE_DOUBLE: [743132.0, 0.1, 0.3, 1e9, 9.094947017729282e-13, 1.7976931348623157e+308, 5e-324],
}


def live(host):
    ctx = pmapi.pmContext(c.PM_CONTEXT_HOST, host)
    names = []
    ctx.pmTraversePMNS("", names.append)
    names = sorted(n for n in names if n.split(".")[0] not in ("mmv", "event"))
    picked = []
    for i in range(0, len(names), 500):
        chunk = names[i:i + 500]
        for n, d in zip(chunk, ctx.pmLookupDescs(ctx.pmLookupName(chunk))):
            d = d.contents
            f = factor(d.units) if d.type in TYPES else None
            if f is not None and f != 1.0:
                picked.append((n, d))
    per_units = {}
    for n, d in picked:
        per_units.setdefault((d.type, key(d.units)), []).append((n, d))
    for (typ, _), ms in sorted(per_units.items()):
        kept = 0
        for n, d in ms:
            pmids = (ctypes.c_uint * 1)(d.pmid)
            r = ctx.pmFetch(pmids)
            try:
                vs = r.contents.get_vset(0)
                vlist = ctypes.cast(vs.contents.vlist, ctypes.POINTER(pmapi.pmValue))
                for j in range(min(vs.contents.numval, 3)):
                    fmt, pv = vs.contents.valfmt, vlist[j]
                    a = pmapi.pmAtomValue()
                    if L.pmExtractValue(fmt, ctypes.byref(pv), typ, ctypes.byref(a), typ) < 0:
                        continue
                    v = {c.PM_TYPE_32: a.l, c.PM_TYPE_U32: a.ul, c.PM_TYPE_64: a.ll, c.PM_TYPE_U64: a.ull,
                         c.PM_TYPE_FLOAT: a.f, c.PM_TYPE_DOUBLE: a.d}[typ]
                    row(typ, d.units, v, convert(fmt, pv, typ, d.units), n)
                    kept += 1
            finally:
                ctx.pmFreeResult(r)
            if kept >= 20:
                break


def main():
    print("# libpcp %s: pmExtractValue(DOUBLE) then pmConvScale(DOUBLE) to bytes, seconds, counts (pmconvscale.py)"
          % pmapi.pmContext.pmGetConfig("PCP_VERSION"))
    print("# type\tunits\tvalue\tlibpcp\torigin")
    for ut in EDGE_UNITS:
        u = units(*ut)
        for typ, vals in EDGE_VALUES.items():
            for v in vals:
                fmt, pv, keep = stuffed(typ, v)
                row(typ, u, struct.unpack("<f", struct.pack("<f", v))[0] if typ == c.PM_TYPE_FLOAT else v,
                    convert(fmt, pv, typ, u), "edge")
                del keep
    live(sys.argv[1] if len(sys.argv) > 1 else "local:")


if __name__ == "__main__":
    main()
