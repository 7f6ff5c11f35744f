package nftgen

import "context"

// ReadLeaving implements Dataplane: Read with the Services' chains moved
// to Unread, each named with its table, their rules given back by the
// ChainRules as they were at the read.
func (f *Fake) ReadLeaving(ctx context.Context, fam Family) (*TableState, ChainRules, error) {
	st, err := f.ReadCompact(ctx, fam, KeepRules)
	if st == nil || err != nil {
		return nil, nil, err
	}
	rest := LeaveUnread(st)
	return st.Merged(), rest, nil
}
