/*
 * Copied verbatim from ../shared/bench/m3-fetcharchive.c (the libpcp decode loop the
 * project compares with); built by run.sh.
 *
 * M3 detail: libpcp raw archive decode without text formatting: pmFetchArchive() over every
 * record of an archive, counting records and values and touching each value (pmExtractValue
 * to double for numeric types, as an exporter would).
 * build: gcc -O2 -o fetcharchive m3-fetcharchive.c -lpcp
 * usage: fetcharchive ARCHIVE [extract=1]
 */
#include <pcp/pmapi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int ctx, sts, extract = argc > 2 ? atoi(argv[2]) : 1;
    long recs = 0, vals = 0; double sum = 0;
    if (argc < 2) { fprintf(stderr, "usage: %s ARCHIVE [extract]\n", argv[0]); return 1; }
    if ((ctx = pmNewContext(PM_CONTEXT_ARCHIVE, argv[1])) < 0) { fprintf(stderr, "%s\n", pmErrStr(ctx)); return 1; }
    for (;;) {
        pmResult *r;
        if ((sts = pmFetchArchive(&r)) < 0) break;
        recs++;
        for (int i = 0; i < r->numpmid; i++) {
            pmValueSet *vs = r->vset[i];
            if (vs->numval <= 0) continue;
            vals += vs->numval;
            if (!extract) continue;
            pmDesc d;
            if (pmLookupDesc(vs->pmid, &d) < 0) continue;
            if (d.type == PM_TYPE_STRING || d.type == PM_TYPE_AGGREGATE || d.type == PM_TYPE_EVENT) continue;
            for (int j = 0; j < vs->numval; j++) {
                pmAtomValue a;
                if (pmExtractValue(vs->valfmt, &vs->vlist[j], d.type, &a, PM_TYPE_DOUBLE) >= 0) sum += a.d;
            }
        }
        pmFreeResult(r);
    }
    if (sts != PM_ERR_EOL) fprintf(stderr, "pmFetchArchive: %s\n", pmErrStr(sts));
    printf("records %ld values %ld (sum %g)\n", recs, vals, sum);
    return 0;
}
