package status

// Link is what teaming and the metrics need to know of a link right now.
type Link struct {
	Up      bool // administratively up with carrier: a cable that works
	TxBytes uint64
	RxBytes uint64
}
