package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func execCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "exec [INFRA/]VM|HOST -- CMD [ARGS...]",
		ValidArgsFunction: completeNodes,
		Short:             "Run a command inside a VM's or host's namespace and cgroup",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || cmd.ArgsLenAtDash() != 1 {
				return usageError{fmt.Errorf("exec: want [INFRA/]NODE -- CMD [ARGS...]")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return local().Exec(args[0], args[1:])
		},
	}
}
