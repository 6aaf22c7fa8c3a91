// Package mmvwrite writes PCP Memory Mapped Value (MMV) files the way
// libpcp_mmv does: the instrumentation library for Go applications whose
// metrics pmdammv, and this project's reader (package mmv), export.
//
// New lays out a file from a Config (metrics, instance domains, labels)
// byte for byte as mmv_stats_start would, choosing version 1, 2 or 3 as
// libpcp_mmv does, and publishes it; the Handles of its value slots then
// update values in place in the mapped file (numbers with atomic stores;
// strings; ELAPSED intervals; SENTINEL "no value" marks), with no system
// call.
package mmvwrite
