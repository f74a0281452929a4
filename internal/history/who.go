package history

import (
	"os"
	"os/user"
)

// LocalUser names who runs a command on this machine, for an entry made
// through the CLI: user@host, and the person behind sudo rather than root
// ("alice@hv1 (sudo)"), since the history is read to learn who did what.
func LocalUser() string {
	return localUser(os.Getenv, currentUser, os.Hostname)
}

func currentUser() (string, error) {
	u, err := user.Current()
	if err != nil {
		return "", err
	}
	return u.Username, nil
}

func localUser(getenv func(string) string, current func() (string, error), hostname func() (string, error)) string {
	name, err := current()
	if err != nil || name == "" {
		name = getenv("USER")
	}
	if name == "" {
		name = "unknown"
	}
	host, err := hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	if sudo := getenv("SUDO_USER"); sudo != "" && sudo != name {
		return sudo + "@" + host + " (sudo)"
	}
	return name + "@" + host
}
