package spec

import "gopkg.in/yaml.v3"

// WithoutFastYAML runs f with every spec parsed by yaml.v3's parser alone,
// so that a test can compare what both parsers make of the same input.
// Tests that call it do not run in parallel.
func WithoutFastYAML(f func()) {
	defer func(saved func([]byte) (*yaml.Node, bool)) { fastParse = saved }(fastParse)
	fastParse = func([]byte) (*yaml.Node, bool) { return nil, false }
	f()
}
