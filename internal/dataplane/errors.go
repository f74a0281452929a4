package dataplane

import (
	"errors"

	"github.com/vnet-project/vnet/internal/dataplane/feature"
)

// ErrNotSupported is wrapped by every error about a kernel feature that is
// missing on this machine, whichever part of the dataplane found it.
var ErrNotSupported = feature.ErrNotSupported

// ErrNotRoot is returned when vnet lacks the privileges to change the network.
var ErrNotRoot = errors.New("vnet needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to change the network; run it with sudo")

// FeatureError names a missing kernel feature and how to get it.
type FeatureError = feature.Error

// ErrLinkNotOurs is returned when a link of the name vnet would make
// already exists and nothing marks it as the infrastructure's own: vnet
// neither takes it over nor, on rollback, deletes it.
var ErrLinkNotOurs = errors.New("a link of that name exists that this infrastructure did not make")
