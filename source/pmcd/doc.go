// Package pmcd is a source.Source over a running pmcd, speaking PCP's
// client protocol in pure Go (no libpcp): the handshake over pmcd's unix
// socket or TCP (with TLS and SASL authentication when configured,
// secure.go), the namespace traversal, descriptors, instance domains,
// help text and labels (read once, cached, and read again only when pmcd
// flags a change in a fetch reply: after a namespace change alone, only
// what is new to the selection, load.go), and the fetch of every selected metric
// in as few HIGHRES_FETCH PDUs as pmcd's request size limit allows.
//
// The requests are a client layer over the connection (client.go, fetch.go:
// each encodes, exchanges and decodes one kind of request with
// internal/pcpwire); Source keeps only the caching, the reconnection and
// the background loading above it.
//
// Reading the metadata happens off the scrape path, on a new connection
// that replaces the current one once read (lifecycle.go): a scrape meanwhile
// answers with the previous metadata, or reports the source down, and
// waits at most the fetch deadline (Options.Timeout). A lost connection
// makes the source report itself down (source.Monitored) and reconnect in
// the background after a backoff; every exchange has a deadline, so a hung
// PMDA or peer cannot hang a scrape. Counters' starts (source.Generations)
// are known for the linux agent (the host's boot) and pmcd's own counters
// (pmcd's start). Replies are
// decoded defensively: a truncated, oversized or malformed PDU gives a
// FormatError naming the peer, the PDU and the byte offset, never a panic
// or an allocation larger than the bytes received (or than the PDU's
// length once 1 MiB of it arrived). Memory follows what is served: a
// reply buffer over 4 MiB is not kept, and a source serves at most
// Options.SeriesLimit values and instances, cutting the rest (logged once).
//
// pmcd itself is never asked what crashes it: an agent's instance labels
// only right after a fetch from the agent on the same connection
// (profile.go), connections closed without a reset, reconnections and
// metadata reads backed off.
//
// The wire protocol is described in docs/pcp-protocol.md of the project's
// shared documentation (verified against PCP 6.0.3's pmcd).
package pmcd
