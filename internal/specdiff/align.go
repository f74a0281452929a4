package specdiff

import "reflect"

// pair is a rule of the old list and its counterpart in the new one; -1
// stands for none (added, or removed).
type pair struct{ old, new int }

// index is where the rule is: in the new list unless it was removed.
func (p pair) index() int {
	if p.new < 0 {
		return p.old
	}
	return p.new
}

// maxAlignCells bounds the table of the longest common subsequence
// (4 bytes a cell): beyond it, what lies between the shared head and tail
// of two lists is compared position by position. A spec's lists of rules
// are bounded (spec.MaxACLRules), and an edit seldom leaves so long a
// middle.
const maxAlignCells = 1 << 22

// align pairs the items of two lists (slices, or invalid for none): items
// they share in a longest common subsequence pair with each other, and
// between two shared ones the items left pair up in order, the rest of
// the longer side standing alone. The pairs keep both lists' order.
func align(a, b reflect.Value) []pair {
	n, m := length(a), length(b)
	same := func(i, j int) bool { return reflect.DeepEqual(a.Index(i).Interface(), b.Index(j).Interface()) }
	head := 0
	for head < n && head < m && same(head, head) {
		head++
	}
	tail := 0
	for tail < n-head && tail < m-head && same(n-1-tail, m-1-tail) {
		tail++
	}
	var out []pair
	for i := 0; i < head; i++ {
		out = append(out, pair{i, i})
	}
	out = append(out, alignMiddle(head, n-tail, head, m-tail, same)...)
	for k := tail; k > 0; k-- {
		out = append(out, pair{n - k, m - k})
	}
	return out
}

// alignMiddle aligns a[i0:i1] with b[j0:j1].
func alignMiddle(i0, i1, j0, j1 int, same func(i, j int) bool) []pair {
	n, m := i1-i0, j1-j0
	if n == 0 || m == 0 || n*m > maxAlignCells {
		return gap(i0, i1, j0, j1)
	}
	// lcs[i][j]: the longest common subsequence of a[i0+i:] and b[j0+j:].
	lcs := make([]int32, (n+1)*(m+1))
	at := func(i, j int) *int32 { return &lcs[i*(m+1)+j] }
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if same(i0+i, j0+j) {
				*at(i, j) = *at(i+1, j+1) + 1
			} else {
				*at(i, j) = max(*at(i+1, j), *at(i, j+1))
			}
		}
	}
	var out []pair
	i, j, gi, gj := 0, 0, 0, 0 // gi, gj: where the current gap started
	for i < n && j < m {
		switch {
		case same(i0+i, j0+j) && *at(i, j) == *at(i+1, j+1)+1:
			out = append(out, gap(i0+gi, i0+i, j0+gj, j0+j)...)
			out = append(out, pair{i0 + i, j0 + j})
			i, j = i+1, j+1
			gi, gj = i, j
		case *at(i+1, j) >= *at(i, j+1):
			i++
		default:
			j++
		}
	}
	return append(out, gap(i0+gi, i1, j0+gj, j1)...)
}

// gap pairs a[i0:i1] with b[j0:j1] in order: changed rules, then the
// removed and the added ones left over.
func gap(i0, i1, j0, j1 int) []pair {
	var out []pair
	for i0 < i1 && j0 < j1 {
		out = append(out, pair{i0, j0})
		i0, j0 = i0+1, j0+1
	}
	for ; i0 < i1; i0++ {
		out = append(out, pair{i0, -1})
	}
	for ; j0 < j1; j0++ {
		out = append(out, pair{-1, j0})
	}
	return out
}
