# prints the instance order of libpcp's interpolated pmFetch result
import sys
from pcp import pmapi
import cpmapi as c
arch, metric, offset = sys.argv[1], sys.argv[2], float(sys.argv[3])
ctx = pmapi.pmContext(c.PM_CONTEXT_ARCHIVE, arch)
pmids = ctx.pmLookupName(metric)
start = ctx.pmGetArchiveLabel().start
t = pmapi.timeval(start.tv_sec + int(offset), start.tv_usec + int((offset % 1) * 1e6))
ctx.pmSetMode(c.PM_MODE_INTERP, t, 1000)
r = ctx.pmFetch(pmids)
vs = r.contents.get_vset(0)
print(" ".join(str(r.contents.get_inst(0, i)) for i in range(r.contents.get_numval(0))))
