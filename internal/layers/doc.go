// Package layers checks the import rules between this module's packages:
// its test reads the layer table of docs/layers.md and fails on an import
// that runs upward or that a row forbids. It has no code of its own.
package layers
