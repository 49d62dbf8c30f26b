package pandastack

// OnExpiry is what happens to a sandbox when its TTL runs out.
type OnExpiry string

const (
	// OnExpiryKill ends the sandbox (state expired): the default, "" in
	// records.
	OnExpiryKill OnExpiry = "kill"
	// OnExpiryHibernate hibernates it instead (E2B's autoPause): its whole
	// state is kept, with no deadline, until it is woken — its TTL then
	// starts again — or killed. A hibernated sandbox still counts against
	// its team's sandbox and disk quotas.
	OnExpiryHibernate OnExpiry = "hibernate"
)

// ParseOnExpiry reads on_expiry as the API takes it: "" or "kill" (the
// default, recorded as "") or "hibernate".
func ParseOnExpiry(s string) (OnExpiry, error) {
	switch OnExpiry(s) {
	case "", OnExpiryKill:
		return "", nil
	case OnExpiryHibernate:
		return OnExpiryHibernate, nil
	}
	return "", Errorf(EInvalid, "on_expiry must be %q or %q, got %q", OnExpiryKill, OnExpiryHibernate, s)
}

// Hibernates reports whether the sandbox is hibernated, not ended, when
// its TTL runs out.
func (o OnExpiry) Hibernates() bool { return o == OnExpiryHibernate }
