#!/usr/bin/python3
"""libpcp's pmConvScale, for semantics' TestScaleOf.

Writes convscale.tsv: for pairs of units (same dimensions at other scales,
scales libpcp does not know, dimensionless against count, other
dimensions, powers whose factors overflow int64) and values of every
numeric type, what pmConvScale(type, value, from, to) answers (python3-pcp,
ctypes). A pair for which libpcp divides by zero (its divisor overflows to
0: it dies of SIGFPE) is found in a child process and written as "crash".

Columns: type, from units, to units (dimSpace,dimTime,dimCount,scaleSpace,
scaleTime,scaleCount), value (integers in decimal, FLOAT and DOUBLE in
Python's repr), answer (the same, "error" and the PM_ERR_* code, which
depends on the units alone and is written once per pair, or "crash").

usage: /usr/bin/python3 convscale.py > convscale.tsv (PCP 6.0.3 here)
"""
import ctypes
import os
import struct

os.environ["PCP_DERIVED_CONFIG"] = ""
from pcp import pmapi  # noqa: E402
import cpmapi as c  # noqa: E402

L = pmapi.LIBPCP
TYPES = [(c.PM_TYPE_32, "32", "l"), (c.PM_TYPE_U32, "u32", "ul"), (c.PM_TYPE_64, "64", "ll"),
         (c.PM_TYPE_U64, "u64", "ull"), (c.PM_TYPE_FLOAT, "float", "f"), (c.PM_TYPE_DOUBLE, "double", "d")]
VALUES = {
    "32": [1500, -1500, 1499, -1499, 7, 2147483647, -2147483648],
    "u32": [1500, 1499, 7, 4294967295],
    "64": [1500, -1500, 1499, 9223372036854775807, -9223372036854775808],
    "u64": [1500, 1499, 18446744073709551615],
    "float": [1500.0, 743.132, 0.1, 3.4028234663852886e+38],
    "double": [1500.0, 743132.0, 0.1, 1.7976931348623157e+308],
}
# dimSpace, dimTime, dimCount, scaleSpace, scaleTime, scaleCount
UNITS = [
    (1, 0, 0, 0, 0, 0), (1, 0, 0, 1, 0, 0), (1, 0, 0, 2, 0, 0), (1, 0, 0, 6, 0, 0), (1, 0, 0, 7, 0, 0),
    (0, 1, 0, 0, 0, 0), (0, 1, 0, 0, 2, 0), (0, 1, 0, 0, 3, 0), (0, 1, 0, 0, 5, 0), (0, 1, 0, 0, 6, 0),
    (0, 0, 1, 0, 0, 0), (0, 0, 1, 0, 0, 3), (0, 0, 1, 0, 0, -2), (0, 0, 0, 0, 0, 0), (0, 0, 0, 0, 0, 3),
    (1, -1, 0, 1, 3, 0), (1, -1, 0, 0, 2, 0), (1, -1, 0, 2, 5, 0), (0, -1, 1, 0, 1, 0), (0, -1, 1, 0, 3, 3),
    (2, 0, 0, 0, 0, 0), (2, 0, 0, 6, 0, 0), (0, 2, 0, 0, 0, 0), (0, 2, 0, 0, 5, 0), (0, 0, 2, 0, 0, 0),
    (-1, 0, 0, 1, 0, 0), (-1, 0, 0, 0, 0, 0), (1, 0, -1, 1, 0, 3), (1, 0, -1, 0, 0, 0),
]


def units(t):
    u = pmapi.pmUnits()
    u.dimSpace, u.dimTime, u.dimCount, u.scaleSpace, u.scaleTime, u.scaleCount = t
    return u


def conv(typ, field, v, frm, to):
    a, o = pmapi.pmAtomValue(), pmapi.pmAtomValue()
    setattr(a, field, v)
    sts = L.pmConvScale(typ, ctypes.byref(a), ctypes.byref(units(frm)), ctypes.byref(o), ctypes.byref(units(to)))
    return sts, getattr(o, field)


def crashes(frm, to):
    pid = os.fork()
    if pid == 0:
        conv(c.PM_TYPE_DOUBLE, "d", 1.0, frm, to)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return status != 0


def text(name, v):
    return repr(float(v)) if name in ("float", "double") else str(int(v))


def main():
    print("# libpcp %s: pmConvScale (convscale.py)" % pmapi.pmContext.pmGetConfig("PCP_VERSION"))
    print("# type\tfrom\tto\tvalue\tanswer")
    for frm in UNITS:
        for to in UNITS:
            f, t = ",".join(map(str, frm)), ",".join(map(str, to))
            if crashes(frm, to):
                print("double\t%s\t%s\t1.0\tcrash" % (f, t))
                continue
            sts, _ = conv(c.PM_TYPE_DOUBLE, "d", 1.0, frm, to)
            if sts < 0:
                # the units alone decide: one row
                print("double\t%s\t%s\t1.0\terror %d" % (f, t, sts))
                continue
            for typ, name, field in TYPES:
                for v in VALUES[name]:
                    if name == "float":
                        v = struct.unpack("<f", struct.pack("<f", v))[0]
                    sts, r = conv(typ, field, v, frm, to)
                    ans = "error %d" % sts if sts < 0 else text(name, r)
                    print("%s\t%s\t%s\t%s\t%s" % (name, f, t, text(name, v), ans))


if __name__ == "__main__":
    main()
