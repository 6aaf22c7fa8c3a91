/* prints ds dn and (double)(ds + (long double)dn/1e9) as __pmTimestampSub computes it */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
int main(void) {
    srand48(22);
    for (int i = 0; i < 4000; i++) {
        long long ds = (i % 4 == 0) ? (long long)(lrand48() % 100) : (long long)(lrand48() % 2000000000LL);
        if (i % 7 == 0) ds = -ds;
        long long dn = lrand48() % 1000000000LL;
        if (i % 3 == 0) dn = -dn;
        if (i % 11 == 0) dn = lrand48() % 1000;
        double r = (double)(ds + (long double)dn / (long double)1000000000);
        uint64_t b; memcpy(&b, &r, 8);
        printf("%lld %lld %016llx\n", ds, dn, (unsigned long long)b);
    }
    return 0;
}
