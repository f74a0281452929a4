package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
)

// Output formats of -o: every command that prints JSON prints YAML too.
const (
	outText = "text"
	outJSON = "json"
	outYAML = "yaml"
)

// outputFormat is the value of a command's -o: one of its formats, an
// unknown one refused when the flags are read (exit 2), not printed as
// text.
type outputFormat struct {
	value   string
	formats []string
	bound   *string // also set to the value, for a command that keeps it as a string
}

func (o *outputFormat) String() string { return o.value }
func (o *outputFormat) Type() string   { return "format" }

func (o *outputFormat) Set(v string) error {
	if !slices.Contains(o.formats, v) {
		return fmt.Errorf("%q: want %s", v, orList(o.formats))
	}
	o.value = v
	if o.bound != nil {
		*o.bound = v
	}
	return nil
}

// orList says "text, json or yaml".
func orList(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// addOutputFlag gives a command -o/--output with the formats it prints,
// the first being the default, and what each format prints.
func addOutputFlag(c *cobra.Command, usage string, formats ...string) *outputFormat {
	o := &outputFormat{value: formats[0], formats: formats}
	c.Flags().VarP(o, "output", "o", orList(formats)+usage)
	_ = c.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return formats, cobra.ShellCompDirectiveNoFileComp
	})
	return o
}

// structured reports whether the format is one printStructured prints.
func (o *outputFormat) structured() bool { return o.value == outJSON || o.value == outYAML }

// print writes v as JSON or YAML; one document a call, so that a command
// that prints several (ioc stats --watch) prints a YAML stream.
func (o *outputFormat) print(out io.Writer, v any) error {
	if o.value == outYAML {
		return printYAML(out, v)
	}
	return printJSON(out, v)
}

// printYAML writes v as YAML with the names and order its JSON has: the
// JSON is read as YAML (JSON is YAML) and written again in block style, so
// both formats say the same thing in the same words.
func printYAML(out io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return err
	}
	blockStyle(&doc)
	var buf bytes.Buffer
	buf.WriteString("---\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err = out.Write(buf.Bytes())
	return err
}

// blockStyle drops the flow style JSON's brackets gave every mapping and
// list, and the quotes of strings YAML reads the same without them.
func blockStyle(n *yaml.Node) {
	n.Style &^= yaml.FlowStyle
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		n.Style &^= yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}
