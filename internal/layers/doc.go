// Package layers checks the import rules between this module's packages:
// its test reads the layer table of docs/layers.md and fails on an import
// that runs upward or that a row forbids, and on a type assertion to a
// concrete type of another package of the module (capabilities are asked
// through source's interfaces). It has no code of its own.
package layers
