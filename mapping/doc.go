// Package mapping owns the translation of PCP metadata into Prometheus and
// OpenTelemetry terms: a PCP descriptor, its instances and labels become a
// Prometheus family (name, type, HELP, unit, value scale, label set) or an
// OpenTelemetry instrument (name, UCUM unit, kind) with its resource and
// data-point attributes.
//
// Three namings exist. The default one follows Prometheus conventions: values
// are scaled to base units (bytes, seconds, plain counts), the unit suffix and
// _total are appended, strings become <name>_info{value="..."} 1, instances
// become an instname label. Labels are lean: a series carries its instance,
// the instance's own PCP labels and the target labels that tell an output's
// sources apart; the labels the same on every series of a source
// (TargetLabels: PCP context labels, single-valued domain labels) go once
// into target_info and the OpenTelemetry resource (Resource); full_labels
// puts every PCP label on every series instead. Label names are sanitized
// (reserved names get the prefix pcp_). The pmproxy naming reproduces what pmproxy's
// /metrics gives (no unit conversion, no _total, strings omitted, instname and
// instid labels) so that existing grafana-pcp dashboards keep working.
// The node naming is the default one with the linux agent's host metrics
// under node_exporter's names, types and labels: NodeSource (made by
// Mapper.Wrap, which every output applies to its sources) computes those
// families from one fetch of their PCP sources (the table in node.go).
// The hostmetrics naming is the same machinery with another table
// (hostmetrics.go): the host metrics as the OpenTelemetry Collector's
// hostmetrics receiver gives them (system.cpu.time{cpu,state}, ...), with
// its units, kinds, monotonicity and value types on the OpenTelemetry side
// (Instrument) and the collector's Prometheus names on the other.
//
// A Mapper applies one naming plus an optional mapping configuration file
// (include/exclude patterns, renames, label drop/keep). MapAll resolves name
// clashes deterministically (PCP name order: the first metric keeps the name,
// the others are skipped and reported) and never fails.
//
// Two rules of Map decide what no output exports unless asked (lean.go):
// secret metrics (a process's environment, command line, paths, memory
// map) only when named whole, and the lean default's families (per process,
// hardware-sized, non-DISCRETE strings) only when turned on or selected.
//
// Describe tells how a source's metrics map (family, type, unit, scale and
// labels; instrument, kind, unit and attributes), for the mapping command's
// JSON and table (Description.WriteTable).
//
// The package does no I/O beyond reading its configuration file (and
// asking a source for its metrics and instances, in Describe; and the
// fetches a NodeSource passes on).
package mapping
