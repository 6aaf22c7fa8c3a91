"""libpcp's own client for bench/pmcd/run.sh: the floor of a scrape.

Connects to the local pmcd over TCP (127.0.0.1) and over its unix socket
(local:) through libpcp (python3-pcp), resolves the metrics a scrape of
`pcp-exporter serve --pmcd.metrics=-mmv --naming=pmproxy` fetches (every
numeric metric but the mmv subtree: pmproxy's naming skips strings; with
LIBPCP_STRINGS=1 the string metrics too, as the other namings export them,
less the names listed in LIBPCP_SKIP, space-separated), then,
for each line read on stdin, times one pmFetch and prints the seconds:

  tcp | unix              every one of those PMIDs in one pmFetch
  tcp:DOMAIN | unix:DOMAIN  only the PMIDs of that PMDA

At start it prints one line per PMDA: "agent DOMAIN NAME NPMIDS", then
"pmids N", then "ready". Derived metrics are off (PCP_DERIVED_CONFIG is
emptied), as they are not pmcd's.
"""
import os
import sys
import time

os.environ["PCP_DERIVED_CONFIG"] = ""
from pcp import pmapi  # noqa: E402
import cpmapi as c  # noqa: E402

NUMERIC = {c.PM_TYPE_32, c.PM_TYPE_U32, c.PM_TYPE_64, c.PM_TYPE_U64, c.PM_TYPE_FLOAT, c.PM_TYPE_DOUBLE}


def main():
    ctxs = {"tcp": pmapi.pmContext(c.PM_CONTEXT_HOST, "127.0.0.1"),
            "unix": pmapi.pmContext(c.PM_CONTEXT_HOST, "local:")}
    ctx = ctxs["tcp"]
    names = []
    ctx.pmTraversePMNS("", names.append)
    skip = set(os.environ.get("LIBPCP_SKIP", "").split())
    names = sorted(n for n in names if n.split(".")[0] not in ("mmv", "event") and n not in skip)
    types = NUMERIC | ({c.PM_TYPE_STRING} if os.environ.get("LIBPCP_STRINGS") == "1" else set())
    pmids, seen = [], set()
    for i in range(0, len(names), 500):
        for d in ctx.pmLookupDescs(ctx.pmLookupName(names[i:i + 500])):
            d = d.contents
            if d.type in types and d.pmid not in seen:
                seen.add(d.pmid)
                pmids.append(d.pmid)
    ids, agents = ctx.pmGetInDom(ctx.pmLookupDesc(ctx.pmLookupName(["pmcd.agent.type"])[0]))
    agent = dict(zip(ids, agents))
    bydom = {}
    for p in pmids:
        bydom.setdefault(pmapi.pmContext.pmID_domain(p), []).append(p)
    arrays = {}
    for how in ctxs:
        arrays[how] = (c_array(pmids), ctxs[how])
        for dom, l in bydom.items():
            arrays["%s:%d" % (how, dom)] = (c_array(l), ctxs[how])
    for dom in sorted(bydom):
        print("agent %d %s %d" % (dom, agent.get(dom, "?"), len(bydom[dom])))
    print("pmids %d" % len(pmids))
    print("ready", flush=True)
    for line in sys.stdin:
        arr, cx = arrays[line.strip()]
        a = time.perf_counter()
        r = cx.pmFetch(arr)
        b = time.perf_counter()
        cx.pmFreeResult(r)
        print("%.6f" % (b - a), flush=True)


def c_array(l):
    import ctypes
    return (ctypes.c_uint * len(l))(*l)


if __name__ == "__main__":
    main()
