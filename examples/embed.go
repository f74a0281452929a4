// Package examples holds the study testbeds as YAML specs; the lab builds
// its S2 and S3 testbeds from these very files.
package examples

import "embed"

// FS holds every example spec.
//
//go:embed *.yaml
var FS embed.FS
