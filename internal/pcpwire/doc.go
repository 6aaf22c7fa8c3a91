// Package pcpwire is PCP's binary encoding, shared by the pmcd client and
// the readers of PCP's files: a sticky-error decoder of fixed-size fields
// (big-endian as on pmcd's wire and in archives, or the host's order as in
// MMV files), an encoder of request PDUs, and the value-set codec of a
// pmResult (pmValueSet, pmValueBlock: numval, valfmt, values in place or
// in value blocks) decoding into the caller's buffers, so that a reader's
// steady state allocates nothing per value.
//
// Decoding errors are *Error: the byte offset and what is wrong. Each
// reader wraps one in its own FormatError naming the peer or the file;
// no decoder allocates more than the bytes it was given.
package pcpwire
