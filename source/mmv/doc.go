// Package mmv reads PCP Memory Mapped Value (MMV) files, the
// files that libpcp_mmv instrumented applications publish in
// $PCP_TMP_DIR/mmv and that pmdammv (PMDA domain 70) exports.
//
// It owns:
//   - the on-disk layouts of MMV versions 1, 2 and 3 (header, TOC, indoms,
//     instances, metrics, values, strings, labels), decoded from a read-only
//     mmap in the host byte order, with every offset and count checked
//     against the file size (FormatError names the file and byte offset);
//   - the generation protocol (g1 == g2, both non-zero, re-checked after the
//     values are read, retried when the file is rewritten), SENTINEL values,
//     ELAPSED counters and the PROCESS flag, as pmdammv applies them;
//   - pmdammv's naming and numbering: mmv.<file>.<metric> (mmv.<metric> with
//     NOPREFIX), PMIDs 70.<cluster>.<item>, instance domains
//     70.(cluster<<11 | serial), cluster assignment in a directory;
//   - File (one MMV file) and Dir (a directory whose files come, go and are
//     replaced), both implementing source.Source.
//
// Applications write MMV files with package mmvwrite; the layout both
// share is in internal/layout.
package mmv
