package capacity

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Path is one delivery path's estimate, for printing paths side by side.
type Path struct {
	Name     string
	Estimate Estimate
}

// PrintKeysBeside writes the peak units per key of each path's estimate
// side by side, a row per kind of key (index and pattern), the first
// path's order first: the one-bot load test's AWS and local figures
// (scripts/capacity -onebot). A key a path does not touch reads "-".
func PrintKeysBeside(w io.Writer, paths []Path) {
	type row struct{ index, pattern string }
	var rows []row
	seen := map[row]bool{}
	at := make([]map[row]KeyAt, len(paths))
	for i, p := range paths {
		at[i] = map[row]KeyAt{}
		for _, k := range p.Estimate.Keys {
			r := row{k.Index, k.Pattern}
			at[i][r] = k
			if !seen[r] {
				seen[r] = true
				rows = append(rows, r)
			}
		}
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprint(tw, "KEY (index, pattern)")
	for _, p := range paths {
		fmt.Fprintf(tw, "\t%s KEYS\t%s WCU/KEY\t%s RCU/KEY", p.Name, p.Name, p.Name)
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		ix := r.index
		if ix == "" {
			ix = "table"
		}
		fmt.Fprintf(tw, "%s %s", ix, r.pattern)
		for i := range paths {
			k, ok := at[i][r]
			if !ok {
				fmt.Fprint(tw, "\t-\t-\t-")
				continue
			}
			fmt.Fprintf(tw, "\t%d\t%.1f\t%.1f", k.Keys, k.PeakWCU, k.PeakRCU)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for _, p := range paths {
		e := p.Estimate
		fmt.Fprintf(w, "%s: write ceiling %.0f messages/s (%s), read ceiling %.0f (%s)\n", p.Name, e.Ceiling, e.Hottest, e.ReadCeiling, e.HottestRead)
	}
}
