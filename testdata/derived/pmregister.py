#!/usr/bin/python3
"""Register derived metric expressions with libpcp and report what it says.

Reads one JSON string (an expression) per line on stdin, registers each in
turn in this one process with pmRegisterDerived("t.n<i>", expr) through
ctypes, and prints one JSON line per expression:
  {"pos": <offset of the returned pointer, or null when accepted>,
   "msg": <pmDerivedErrStr() or "">}
Used by derive's differential test against the real libpcp.
"""
import ctypes
import json
import sys

lib = ctypes.CDLL("libpcp.so.3")
lib.pmRegisterDerived.restype = ctypes.c_void_p
lib.pmRegisterDerived.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
lib.pmDerivedErrStr.restype = ctypes.c_char_p

for i, line in enumerate(sys.stdin):
    expr = json.loads(line)
    buf = ctypes.create_string_buffer(expr.encode("latin-1"))
    ret = lib.pmRegisterDerived(("t.n%d" % i).encode(), buf)
    if ret is None:
        out = {"pos": None, "msg": ""}
    else:
        msg = lib.pmDerivedErrStr()
        out = {"pos": ret - ctypes.addressof(buf),
               "msg": msg.decode("latin-1") if msg else ""}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
