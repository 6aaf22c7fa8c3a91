"""Write badblocks.{0,meta,index}: a copy of the corpus archive types
(testdata/pcp-corpus/archives/types/types) whose record at 00:00:01.5 has
five value blocks edited in their header word (type byte, length), the
values themselves left as they were.

usage: python3 badblocks.py  (run in this directory)"""
import shutil
import struct

SRC = '../pcp-corpus/archives/types/types'
DST = 'badblocks'
PMID = 0x3d400000  # 245.0.*


def records(b):
    """Yield (offset, sets) for each record of a version 2 volume, sets
    mapping a PMID to the offsets of its value blocks."""
    p = struct.unpack('>I', b[0:4])[0]  # the label record
    while p + 4 <= len(b):
        length = struct.unpack('>I', b[p:p + 4])[0]
        numpmid = struct.unpack('>I', b[p + 12:p + 16])[0]
        q, sets = p + 16, {}
        for _ in range(numpmid):
            pmid, numval = struct.unpack('>Ii', b[q:q + 8])
            q += 8
            if numval <= 0:
                continue
            valfmt = struct.unpack('>I', b[q:q + 4])[0]
            q += 4
            blocks = []
            for _ in range(numval):
                if valfmt != 0:
                    # an index in 32-bit words from the PDU's start, which
                    # has two words more than the record (type, from)
                    blocks.append(p + 4 * struct.unpack('>I', b[q + 4:q + 8])[0] - 8)
                q += 8
            sets[pmid] = blocks
        yield p, sets
        p += length


b = bytearray(open(SRC + '.0', 'rb').read())
_, sets = list(records(b))[1]  # 00:00:01.5
for item, vtype, vlen in [
        (3, 3, None),   # types.i64: type byte U64
        (4, 0, None),   # types.u64: type byte 0 (libpcp accepts it)
        (5, None, 12),  # types.float: length 12 where a float's is 8
        (6, None, 8),   # types.double: length 8 where a double's is 12
        (7, 1, None)]:  # types.string: type byte U32
    o = sets[PMID | item][0]
    hdr = struct.unpack('>I', b[o:o + 4])[0]
    t, n = hdr >> 24, hdr & 0xffffff
    b[o:o + 4] = struct.pack('>I', ((t if vtype is None else vtype) << 24) | (n if vlen is None else vlen))
open(DST + '.0', 'wb').write(b)
shutil.copy(SRC + '.meta', DST + '.meta')
shutil.copy(SRC + '.index', DST + '.index')
