package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// ruleNote is a rule as vnet reads it back without decoding all its
// expressions: its chain, handle, comment and what its counter counted.
type ruleNote struct {
	chain   string
	handle  uint64
	comment string
	packets uint64 // of its counters
	counted bool   // it has a counter
}

// chainNotes dumps the rules of a chain of the bridge table in ns and keeps
// of each only its handle and comment. A base chain holds a jump for every
// port with a policy; decoding each jump's expressions, as reading whole
// rules does, costs most of reading the chain.
// Equivalent to: nft -a -n NS list chain bridge vnet CHAIN (handles and comments)
func (f *Firewalls) chainNotes(ns string, table *nftables.Table, chain string) ([]ruleNote, error) {
	return f.ruleNotes(ns, table, chain)
}

// tableNotes dumps the rules of every chain of the bridge table in ns at
// once: one request, where a request per chain costs a round trip for each
// of a thousand ports' chains.
// Equivalent to: nft -n NS list table bridge vnet
func (f *Firewalls) tableNotes(ns string, table *nftables.Table) ([]ruleNote, error) {
	return f.ruleNotes(ns, table, "")
}

// ruleNotes dumps the rules of one chain of the bridge table, or of all of
// them for "".
func (f *Firewalls) ruleNotes(ns string, table *nftables.Table, chain string) ([]ruleNote, error) {
	conn, err := f.netfilterConn(ns)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return ruleNotesOn(conn, table, chain)
}

// ruleNotesOn is ruleNotes on a netfilter socket of the namespace.
func ruleNotesOn(conn *netlink.Conn, table *nftables.Table, chain string) ([]ruleNote, error) {
	filter := []netlink.Attribute{{Type: unix.NFTA_RULE_TABLE, Data: []byte(table.Name + "\x00")}}
	if chain != "" {
		filter = append(filter, netlink.Attribute{Type: unix.NFTA_RULE_CHAIN, Data: []byte(chain + "\x00")})
	}
	msgs, err := nftDump(conn, table.Family, unix.NFT_MSG_GETRULE, filter)
	if err != nil {
		return nil, err
	}
	return parseRuleNotes(msgs)
}

// nftDump asks for a dump of one kind of nftables object (msgType) of a
// family, filtered by attrs, and returns the kernel's answers undecoded.
func nftDump(conn *netlink.Conn, family nftables.TableFamily, msgType int, attrs []netlink.Attribute) ([]netlink.Message, error) {
	return nftRequest(conn, family, msgType, netlink.Request|netlink.Dump, attrs)
}

func nftRequest(conn *netlink.Conn, family nftables.TableFamily, msgType int, flags netlink.HeaderFlags, attrs []netlink.Attribute) ([]netlink.Message, error) {
	data, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		return nil, err
	}
	return conn.Execute(netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | msgType),
			Flags: flags,
		},
		// nfgenmsg: family, version, resource id
		Data: append([]byte{byte(family), unix.NFNETLINK_V0, 0, 0}, data...),
	})
}

// nftGet asks for one nftables object (msgType) of a family, named by
// attrs, and returns the kernel's answer undecoded.
func nftGet(conn *netlink.Conn, family nftables.TableFamily, msgType int, attrs []netlink.Attribute) ([]netlink.Message, error) {
	return nftRequest(conn, family, msgType, netlink.Request, attrs)
}

// eachNFMessage runs read on the attributes of each nftables message after
// its nfgenmsg header (netfilter's byte order, big-endian), skipping a
// message too short to have one, and stops at the first that does not
// decode.
func eachNFMessage(msgs []netlink.Message, read func(ad *netlink.AttributeDecoder)) error {
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return err
		}
		ad.ByteOrder = binary.BigEndian
		read(ad)
		if err := ad.Err(); err != nil {
			return err
		}
	}
	return nil
}

// parseRuleNotes reads handles and comments from rule messages.
func parseRuleNotes(msgs []netlink.Message) ([]ruleNote, error) {
	out := make([]ruleNote, 0, len(msgs))
	err := eachNFMessage(msgs, func(ad *netlink.AttributeDecoder) {
		var n ruleNote
		for ad.Next() {
			switch ad.Type() {
			case unix.NFTA_RULE_CHAIN:
				n.chain = ad.String()
			case unix.NFTA_RULE_HANDLE:
				n.handle = ad.Uint64()
			case unix.NFTA_RULE_USERDATA:
				n.comment = commentIn(ad.Bytes())
			case unix.NFTA_RULE_EXPRESSIONS:
				ad.Nested(func(nad *netlink.AttributeDecoder) error {
					n.packets, n.counted = counterPackets(nad)
					return nil
				})
			}
		}
		out = append(out, n)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// counterPackets sums the packets of the counters in a rule's list of
// expressions; other expressions are skipped undecoded.
func counterPackets(list *netlink.AttributeDecoder) (packets uint64, counted bool) {
	for list.Next() {
		if list.Type() != unix.NFTA_LIST_ELEM {
			continue
		}
		list.Nested(func(e *netlink.AttributeDecoder) error {
			var name string
			var data []byte
			for e.Next() {
				switch e.Type() {
				case unix.NFTA_EXPR_NAME:
					name = e.String()
				case unix.NFTA_EXPR_DATA:
					data = e.Bytes()
				}
			}
			if name != "counter" {
				return nil
			}
			counted = true
			d, err := netlink.NewAttributeDecoder(data)
			if err != nil {
				return nil
			}
			d.ByteOrder = binary.BigEndian
			for d.Next() {
				if d.Type() == unix.NFTA_COUNTER_PACKETS {
					packets += d.Uint64()
				}
			}
			return nil
		})
	}
	return packets, counted
}

// chainsIn returns which of the chains named exist in a table of ns, with
// one request each: listing every chain of a table that holds a thousand
// ports' chains costs more than asking for the few a change touches. A
// table that does not exist holds none.
// Equivalent to: nft -n NS list chain FAMILY vnet NAME, for each
func (f *Firewalls) chainsIn(ns string, table *nftables.Table, names []string) (map[string]bool, error) {
	conn, err := f.netfilterConn(ns)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	out := map[string]bool{}
	for _, name := range names {
		attrs, err := netlink.MarshalAttributes([]netlink.Attribute{
			{Type: unix.NFTA_CHAIN_TABLE, Data: []byte(table.Name + "\x00")},
			{Type: unix.NFTA_CHAIN_NAME, Data: []byte(name + "\x00")},
		})
		if err != nil {
			return nil, err
		}
		_, err = conn.Execute(netlink.Message{
			Header: netlink.Header{
				Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETCHAIN),
				Flags: netlink.Request,
			},
			Data: append([]byte{byte(table.Family), unix.NFNETLINK_V0, 0, 0}, attrs...),
		})
		switch {
		case errors.Is(err, unix.ENOENT) || noNFTables(err):
		case err != nil:
			return nil, err
		default:
			out[name] = true
		}
	}
	return out, nil
}

// netfilterConn is a netfilter socket in ns, for requests the nftables
// library has no call for.
func (f *Firewalls) netfilterConn(ns string) (*netlink.Conn, error) {
	h, err := f.open(ns)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", ns, err)
	}
	defer h.Close() // the socket keeps the namespace
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: int(h)})
	if err != nil {
		return nil, fmt.Errorf("nftables in %s: %w", ns, err)
	}
	return conn, nil
}

// elemNote is an element of a port map as vnet reads it back: its key, a
// port's name, and its comment.
type elemNote struct {
	port    string
	comment string
}

// elementNotesOn dumps the elements of a named set of the bridge table,
// keeping of each its key, read as an interface name, and its comment.
// Equivalent to: nft -n NS list map bridge vnet NAME
func elementNotesOn(conn *netlink.Conn, table *nftables.Table, set string) ([]elemNote, error) {
	msgs, err := nftDump(conn, table.Family, unix.NFT_MSG_GETSETELEM, []netlink.Attribute{
		{Type: unix.NFTA_SET_ELEM_LIST_TABLE, Data: []byte(table.Name + "\x00")},
		{Type: unix.NFTA_SET_ELEM_LIST_SET, Data: []byte(set + "\x00")},
	})
	if err != nil {
		return nil, err
	}
	return parseElementNotes(msgs)
}

// elementNotesOf reads the elements of a named set of the bridge table
// whose keys are the ports given, asking for each alone: a dump of a
// host's port map answers with thousands. A port the set does not hold is
// left out; a set that does not exist is an error isNotFound reports. A
// kernel that cannot answer for one element is read whole.
// Equivalent to: nft -n NS get element bridge vnet NAME { PORT }, for each port
func elementNotesOf(conn *netlink.Conn, table *nftables.Table, set string, ports []string) ([]elemNote, error) {
	if _, err := nftGet(conn, table.Family, unix.NFT_MSG_GETSET, []netlink.Attribute{
		{Type: unix.NFTA_SET_TABLE, Data: []byte(table.Name + "\x00")},
		{Type: unix.NFTA_SET_NAME, Data: []byte(set + "\x00")},
	}); err != nil {
		return nil, err
	}
	var out []elemNote
	for _, port := range ports {
		msgs, err := nftGet(conn, table.Family, unix.NFT_MSG_GETSETELEM, elementKeyAttrs(table.Name, set, port))
		switch {
		case isNotFound(err):
			continue
		case err != nil:
			return wholeSetOf(conn, table, set, ports)
		}
		elems, err := parseElementNotes(msgs)
		if err != nil {
			return nil, err
		}
		out = append(out, elems...)
	}
	return out, nil
}

// wholeSetOf is elementNotesOf by a dump of the set.
func wholeSetOf(conn *netlink.Conn, table *nftables.Table, set string, ports []string) ([]elemNote, error) {
	all, err := elementNotesOn(conn, table, set)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(e elemNote) bool { return !slices.Contains(ports, e.port) }), nil
}

// elementKeyAttrs ask for a port's element of a set whose keys are
// interface names.
func elementKeyAttrs(table, set, port string) []netlink.Attribute {
	key, _ := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NFTA_DATA_VALUE, Data: ifname(port)}})
	elem, _ := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NLA_F_NESTED | unix.NFTA_SET_ELEM_KEY, Data: key}})
	list, _ := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: elem}})
	return []netlink.Attribute{
		{Type: unix.NFTA_SET_ELEM_LIST_TABLE, Data: []byte(table + "\x00")},
		{Type: unix.NFTA_SET_ELEM_LIST_SET, Data: []byte(set + "\x00")},
		{Type: unix.NLA_F_NESTED | unix.NFTA_SET_ELEM_LIST_ELEMENTS, Data: list},
	}
}

// parseElementNotes reads keys and comments from set element messages.
func parseElementNotes(msgs []netlink.Message) ([]elemNote, error) {
	var out []elemNote
	err := eachNFMessage(msgs, func(ad *netlink.AttributeDecoder) {
		for ad.Next() {
			if ad.Type() != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
				continue
			}
			ad.Nested(func(list *netlink.AttributeDecoder) error {
				for list.Next() {
					list.Nested(func(e *netlink.AttributeDecoder) error {
						out = append(out, elementNote(e))
						return nil
					})
				}
				return nil
			})
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// elementNote reads one element's key and comment.
func elementNote(e *netlink.AttributeDecoder) elemNote {
	var n elemNote
	for e.Next() {
		switch e.Type() {
		case unix.NFTA_SET_ELEM_KEY:
			e.Nested(func(k *netlink.AttributeDecoder) error {
				for k.Next() {
					if k.Type() == unix.NFTA_DATA_VALUE {
						n.port = strings.TrimRight(string(k.Bytes()), "\x00")
					}
				}
				return nil
			})
		case unix.NFTA_SET_ELEM_USERDATA:
			n.comment = commentIn(e.Bytes())
		}
	}
	return n
}
