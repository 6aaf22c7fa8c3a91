#!/usr/bin/python3
"""libpcp's answers for the follow-mode end-to-end test (PCP 6 python3-pcp).

usage: libpcp_at.py ARCHIVE_OR_DIR METRIC... < TIMES

For each time on stdin (epoch seconds, one per line) prints
  at TIME METRIC VALUE        libpcp's interpolation (PM_MODE_INTERP) at TIME,
                              the times asked in turn in one context
                              (pmSetMode positions anew each time; the
                              context keeps its read cache)
  at TIME METRIC none REASON  when it gives no value (REASON: numval or error)
  fresh TIME METRIC ...       where it gave none, the answer of a new context
                              asked only at TIME (as pmval -S TIME -s 1)
then the archive's label start and every record of it (pmFetchArchive,
forward):
  start TIME
  rec TIME                  each record, whatever metrics it holds
  mark TIME                 each <mark> (pmlogger lost pmcd: a discontinuity)
  raw TIME METRIC VALUE     each value of METRIC it holds
Singular metrics only. Nothing is computed here: the values are pmFetch's.
"""
import sys
from pcp import pmapi
import cpmapi as c

path, names = sys.argv[1], sys.argv[2:]
ctx = pmapi.pmContext(c.PM_CONTEXT_ARCHIVE, path)
pmids = ctx.pmLookupName(names)
descs = ctx.pmLookupDescs(pmids)



def interp(ctx, t):
    """libpcp's interpolation at t in ctx: (metric, value or none REASON)."""
    sec = int(t)
    usec = int(round((t - sec) * 1e6))
    if usec == 1000000:
        sec, usec = sec + 1, 0
    ctx.pmSetMode(c.PM_MODE_INTERP, pmapi.timeval(sec, usec), 0)
    try:
        res = ctx.pmFetch(pmids)
    except pmapi.pmErr as e:
        return [(n, "none " + str(e).replace(" ", "_")) for n in names]
    out = []
    for i, name in enumerate(names):
        if res.contents.get_numval(i) <= 0:
            out.append((name, "none numval=%d" % res.contents.get_numval(i)))
            continue
        v = ctx.pmExtractValue(res.contents.get_valfmt(i), res.contents.get_vlist(i, 0), descs[i].type, descs[i].type)
        out.append((name, repr(v.dref(descs[i].type))))
    ctx.pmFreeResult(res)
    return out


for line in sys.stdin:
    t = float(line)
    answer = interp(ctx, t)
    for n, v in answer:
        print("at", line.strip(), n, v)
    if any(v.startswith("none") for _, v in answer):
        # the same question to a context of its own, as pmval -S asks it
        for n, v in interp(pmapi.pmContext(c.PM_CONTEXT_ARCHIVE, path), t):
            print("fresh", line.strip(), n, v)

start = ctx.pmGetArchiveLabel().start
print("start %d.%06d" % (start.tv_sec, start.tv_usec))
ctx.pmSetMode(c.PM_MODE_FORW, start, 0)
while True:
    try:
        res = ctx.pmFetchArchive()
    except pmapi.pmErr:
        break
    ts = res.contents.timestamp
    stamp = "%d.%06d" % (ts.tv_sec, ts.tv_usec)
    if res.contents.numpmid == 0:
        print("mark", stamp)
    if res.contents.numpmid > 0:
        print("rec", stamp)
        # a record holds the metrics it logged, in its own order
        for i in range(res.contents.numpmid):
            pmid = res.contents.get_pmid(i)
            if pmid not in pmids or res.contents.get_numval(i) <= 0:
                continue
            k = list(pmids).index(pmid)
            v = ctx.pmExtractValue(res.contents.get_valfmt(i), res.contents.get_vlist(i, 0), descs[k].type, descs[k].type)
            print("raw", stamp, names[k], repr(v.dref(descs[k].type)))
    ctx.pmFreeResult(res)
