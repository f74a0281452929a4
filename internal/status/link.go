package status

// Link is what teaming and the metrics need to know of a link right now.
type Link struct {
	Up      bool // administratively up with carrier: a cable that works
	TxBytes uint64
	RxBytes uint64
	// TxDropped and RxDropped are the packets the link's driver dropped
	// (a full queue, a peer that is down, no room to receive).
	TxDropped uint64
	RxDropped uint64
}
