"""Print, for every value of every metric of a PCP archive read as is
(PM_MODE_FORW), the values libpcp's pmExtractValue refuses with
PM_ERR_CONV when asked for the metric's own type: one line per record
time and metric, with the number of values refused.

usage: /usr/bin/python3 extract_conv.py ARCHIVE  (python3-pcp)"""
import sys
from pcp import pmapi
import cpmapi as c

ctx = pmapi.pmContext(c.PM_CONTEXT_ARCHIVE, sys.argv[1])
names = []
ctx.pmTraversePMNS("", names.append)
pmids = ctx.pmLookupName(names)
descs = ctx.pmLookupDescs(pmids)
byid = {pmids[i]: (names[i], descs[i].contents.type) for i in range(len(names))}
ctx.pmSetMode(c.PM_MODE_FORW, ctx.pmGetArchiveLabel().start, 0)
total = refused = 0
while True:
    try:
        r = ctx.pmFetch(pmids)
    except pmapi.pmErr as e:
        if e.args[0] != c.PM_ERR_EOL:
            raise
        break
    t = r.contents.timestamp
    for i in range(r.contents.numpmid):
        n = r.contents.get_numval(i)
        if n <= 0:
            continue
        vs = r.contents.get_vset(i)
        name, typ = byid[vs.contents.pmid]
        bad = 0
        for j in range(n):
            total += 1
            try:
                ctx.pmExtractValue(r.contents.get_valfmt(i), r.contents.get_vlist(i, j), typ, typ)
            except pmapi.pmErr as e:
                if e.args[0] != c.PM_ERR_CONV:
                    raise
                bad += 1
        if bad:
            refused += bad
            print("%d.%06d %s %d" % (t.tv_sec, t.tv_usec, name, bad))
    ctx.pmFreeResult(r)
print("# %d values, %d refused" % (total, refused))
