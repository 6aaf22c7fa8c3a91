// Package derive owns PCP's derived metrics: the expression language of
// pmRegisterDerived(3) and pmLoadDerivedConfig(3), evaluated over any
// source.Source.
//
// It holds a lexer and an LALR(1) parser built from libpcp's yacc grammar
// (precedence, associativity and bison's error recovery, so a syntax error
// reports the position and the pmDerivedErrStr text libpcp reports), the
// semantic checks and descriptor propagation of libpcp's bind step
// (type promotion, scale conversion, semantics, units and instance domains,
// with PCP's "Semantic error: ..." messages), the evaluation of derived
// metrics over instance sets (delta and rate keep one sample of history and
// give no value on the first fetch), the config file format of
// pmLoadDerivedConfig, and Wrap, which adds derived metrics to a source.
//
// The grammar is the one of PCP 6.0.x (the version the conformance corpus
// was made with): delta(), rate(), instant() and the aggregates take a
// metric name only; novalue(), mkconst(..., meta=) and #control lines of
// later versions are not supported.
package derive
