package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/atomicfile"
	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/topology"
)

// The formats vnet graph writes.
const (
	outDOT = "dot"
	outSVG = "svg"
)

func graphCmd() *cobra.Command {
	var output *outputFormat
	var file string
	c := &cobra.Command{
		Use:   "graph NAME|FILE",
		Short: "Draw the topology: hosts, VMs, port groups, networks, routers, switches, uplinks and NICs, as Graphviz dot or SVG",
		Long: `Draw an infrastructure from its VMs down to the wire: VMs (a cell per vNIC) and host
ports boxed by host, then port groups and virtual networks, switches and routers, the
hosts' NICs, and the physical network. An applied infrastructure (NAME) is drawn as
applied, with the state of each port and NIC (paused, down and failed ports stand
out); a spec file is drawn as it would be made, without states.

The SVG is laid out by vnet itself, the same bytes for the same topology on any
machine, with no program needed beside it (the dashboard shows the same picture).
The dot text is for Graphviz's own layout or its other formats.

With --out the format follows the file's extension (.dot, .gv, .svg, .json) unless
-o says otherwise.`,
		Example: `  vnet graph demo > demo.dot && dot -Tpng demo.dot > demo.png
  vnet graph demo -o svg > demo.svg
  vnet graph demo --out demo.svg          # the format from the extension
  vnet graph examples/demo.yaml -o svg    # a spec not applied yet
  vnet graph tenants --etcd http://10.0.0.1:2379 -o json`,
		Args:              exactArgs(1, "an infrastructure name or spec file"),
		ValidArgsFunction: completeInfras,
		RunE: func(cmd *cobra.Command, args []string) error {
			format := output.value
			if file != "" && !cmd.Flags().Changed("output") {
				var err error
				if format, err = formatOfFile(file); err != nil {
					return err
				}
			}
			g, err := graphOf(cmd, args[0])
			if err != nil {
				return err
			}
			if file == "" {
				return writeGraph(cmd.OutOrStdout(), g, format)
			}
			var buf bytes.Buffer
			if err := writeGraph(&buf, g, format); err != nil {
				return err
			}
			return atomicfile.Write(file, buf.Bytes(), 0o644)
		},
	}
	output = addOutputFlag(c, "", outDOT, outSVG, outJSON, outYAML)
	c.Flags().StringVar(&file, "out", "", "write to this file (replaced whole) instead of standard output")
	addEtcdFlag(c)
	return c
}

// graphOf draws a spec file as it would be made, or an applied
// infrastructure as it is.
func graphOf(cmd *cobra.Command, arg string) (*topology.Graph, error) {
	svc, err := backend(infraCmds)
	if err != nil {
		return nil, err
	}
	defer svc.Close()
	if _, err := os.Stat(arg); err == nil {
		doc, err := svc.LoadFile(arg)
		if err != nil {
			return nil, err
		}
		return service.SpecTopology(doc.Spec), nil
	}
	name, err := infraName(svc, arg)
	if err != nil {
		return nil, err
	}
	return service.Topology(cmd.Context(), svc, name)
}

func writeGraph(out io.Writer, g *topology.Graph, format string) error {
	switch format {
	case outSVG:
		return g.WriteSVG(out)
	case outJSON:
		return printJSON(out, g)
	case outYAML:
		return printYAML(out, g)
	}
	return g.WriteDOT(out)
}

// formatOfFile is the format a file's extension names.
func formatOfFile(path string) (string, error) {
	switch filepath.Ext(path) {
	case ".dot", ".gv":
		return outDOT, nil
	case ".svg":
		return outSVG, nil
	case ".json":
		return outJSON, nil
	case ".yaml", ".yml":
		return outYAML, nil
	}
	return "", usageError{fmt.Errorf("--out %s: which format? name it .dot, .svg, .json or .yaml, or say -o", path)}
}
