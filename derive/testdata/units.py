#!/usr/bin/python3
"""libpcp's units strings, for derive's TestParseUnitsMatchesLibpcp.

Writes units.tsv: for each units string (as rescale() and mkconst(...,
units=) take it), what libpcp's pmParseUnitsStr answers (python3-pcp).
Each string is parsed in a child process, since libpcp 6.0.3 aborts on an
assertion for some of them (a time-N scale above hours on both sides of
the '/').

Columns: the string (JSON), then "ok" with dimSpace, dimTime, dimCount,
scaleSpace, scaleTime, scaleCount and the multiplier (Python's repr of the
double), or "error" with libpcp's message, or "abort" with the signal.

usage: /usr/bin/python3 units.py > units.tsv
(go test ./derive -run TestParseUnitsMatchesLibpcp -update runs it; PCP
6.0.3 here)
"""
import json
import os
import sys

from pcp import pmapi  # noqa: E402

TIME = ["nanoseconds", "nanosecond", "nanosec", "ns", "microseconds",
        "microsecond", "microsec", "us", "milliseconds", "millisecond",
        "millisec", "ms", "seconds", "second", "sec", "s", "minutes", "minute",
        "min", "hours", "hour", "hr", "h"] + ["time-%d" % i for i in range(17)]
SPACE = ["bytes", "byte"]
for p, long in zip("KMGTPEZY", ["Kilo", "Mega", "Giga", "Tera", "Peta", "Exa",
                                 "Zetta", "Yotta"]):
    bi = {"K": "Kibi", "M": "Mebi", "G": "Gibi", "T": "Tebi", "P": "Pebi",
          "E": "Exbi", "Z": "Zebi", "Y": "Yobi"}[p]
    SPACE += [p + "B", p + "iB", p + "bytes", p + "byte", bi + "bytes",
              bi + "byte", long + "bytes", long + "byte"]
SPACE += ["space-%d" % i for i in range(17)]
COUNT = ["count", "counts", "count x 10"] + \
    ["count x 10^%d" % i for i in range(-9, 10)]
# words libpcp does not know, or spells otherwise
OTHER = ["none", "b", "kb", "Kbyte*sec", "usecs", "nsecs", "msec", "msecs",
         "secs", "mins", "hrs", "Kilobyte/s", "count x 10^3x", "count  x 10^3",
         "count x 1000", "x 10^3", "10^3", "*", "^", "^2", "sec^", "sec^x",
         "sec^16", "sec^+1", "sec^ 2", "sec ^2", "sec^2^3", "sec^0 sec",
         "sec sec", "sec Kbyte sec", "Kbyte sec count", "sec^-1 Kbyte^2",
         "Kbyte / sec / count", "/", "/ sec", "sec /", " / ", "Kbyte/", "/Kbyte",
         "count x 10^3^2", "Count X 10^3", "COUNT", "SEC", "Sec", "KBYTE",
         "kbyte", "kIb", "\tsec", "sec\n", "sec\t/\tmin", "  Kbyte   /  sec  ",
         "Kbyte/sec", "Kbyte /sec", "Kbyte/ sec", "Mbyte / hour", "1/sec",
         "1 / sec", "count / sec", "count x 10^6 / sec", "Kbyte^2 / Kbyte",
         "Kbyte / Mbyte", "sec / millisec", "millisec / sec", "count x 10^3 / count",
         "count x 10^3 / count x 10^6", "byte^7 / byte^-1", "byte^-8", "byte^-8 / byte",
         "sec^7 / sec^-8", "count^4 / count^-4", "count^7", "Kbyte^0",
         "Kbyte^0 / Kbyte^0", "sec^0 / min^0", "hour^2 / min", "min^-1 / hour^-2",
         "space-15 / byte", "byte / space-15", "space-9", "time-5", "time-6",
         "time-5 / sec", "sec / time-5", "time-9 / sec", "sec / time-9",
         "time-15 / time-15", "time-6 sec", ""]
NUMBERS = ["2", "0.5", "-1", "1e3", ".5", "5.", "1e", "1e+", "3.2.1", "-",
           ".", "-.", "1e999", "-1e999", "1e-999", "1e-320", "1e-310",
           "4.9406564584124654e-324", "2.2250738585072014e-308",
           "2.2250738585072011e-308", "0", "-0", "0.0", "0x10", "0x1p4", "0x.8",
           "-0x10", "0x", "0x1p", "0X1P-2", "-inf", "-INF", "-infinity",
           "-nan", "-NaN", "-nan(123)", "-nan()", "1/2", "2/4", "1e3/1e3",
           "12abc", "7sec", "2Kbyte", "1_000", "1,5", "+2", "--2", "-+2"]


def cases():
    seen = set()

    def add(s):
        if s not in seen:
            seen.add(s)
            out.append(s)
    out = []
    for w in TIME + SPACE + COUNT:
        for v in (w, w.upper(), w.lower()):
            add(v)
        for e in ["^-9", "^-8", "^-1", "^0", "^1", "^2", "^7", "^8", "^15", "^16"]:
            add(w + e)
            add("1 / " + w + e)
        add("2 " + w)
        add(w + " / sec")
        add("Kbyte / " + w)
    for w in OTHER:
        add(w)
    for n in NUMBERS:
        add(n)
        add(n + " sec")
        add("Kbyte / " + n + " sec")
        add(n + " Kbyte / " + n)
    return out


def parse(s):
    """pmParseUnitsStr(s) in a child: the row's columns after the string."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            u, m = pmapi.pmContext.pmParseUnitsStr(s)
            # the scales of space and time are unsigned bitfields in C,
            # signed in python3-pcp's pmUnits
            cols = ["ok", str(u.dimSpace), str(u.dimTime), str(u.dimCount),
                    str(u.scaleSpace & 15), str(u.scaleTime & 15),
                    str(u.scaleCount), repr(m)]
        except pmapi.pmErr as e:
            cols = ["error", e.args[1]]
        os.write(w, "\t".join(cols).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        b = os.read(r, 4096)
        if not b:
            break
        data += b
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "abort\t" + str(os.WTERMSIG(status))
    return data.decode()


def main():
    sys.stderr.flush()
    err = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)  # libpcp's assertion messages
    print("# pmParseUnitsStr of python3-pcp (units.py): string (JSON), then ok dimSpace dimTime dimCount scaleSpace scaleTime scaleCount multiplier, or error message, or abort signal")
    for s in cases():
        print(json.dumps(s) + "\t" + parse(s), flush=True)
    os.dup2(err, 2)


if __name__ == "__main__":
    main()
