// Package semantics holds the PCP data model shared by every source and output:
// metric identifiers (PMID, InDom) with PCP's 32-bit packing, value types,
// semantics, units (pmUnits) with PCP's string form and the factor to base units,
// typed values, descriptors, label sets and the label hierarchy, and the archive
// interpolation rules as pure functions.
//
// The package does no I/O.
package semantics
