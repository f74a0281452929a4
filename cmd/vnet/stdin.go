package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
)

// stdinArg is the file argument that means standard input, and
// stdinFile the name its errors and the record give it.
const (
	stdinArg  = "-"
	stdinFile = "<stdin>"
)

// maxStdinSpec bounds a spec read from standard input, as the API bounds
// a request's.
const maxStdinSpec = 64 << 20

// readStdin reads a spec from the command's standard input.
func readStdin(cmd *cobra.Command) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxStdinSpec+1))
	if err != nil {
		return nil, fmt.Errorf("read the spec from standard input: %w", err)
	}
	if len(data) > maxStdinSpec {
		return nil, usageError{fmt.Errorf("the spec on standard input is larger than %d MiB", maxStdinSpec>>20)}
	}
	return data, nil
}

// validateArg loads validate's argument: a file, or - for standard input.
func validateArg(cmd *cobra.Command, arg string) (*spec.Document, error) {
	if arg != stdinArg {
		return service.Validate(arg)
	}
	data, err := readStdin(cmd)
	if err != nil {
		return nil, err
	}
	return spec.Decode(stdinFile, data)
}

// sourceArg is apply's argument as the service takes it: a file, or the
// spec read from standard input for -.
func sourceArg(cmd *cobra.Command, svc service.Service, arg string) (service.Source, error) {
	if arg != stdinArg {
		return service.Source{File: arg}, nil
	}
	data, err := readStdin(cmd)
	if err != nil {
		return service.Source{}, err
	}
	doc, err := svc.Load(stdinFile, data)
	if err != nil {
		return service.Source{}, err
	}
	return service.Source{Doc: doc}, nil
}
