package pgrouter

import (
	"fmt"
	"regexp"
	"strings"
)

// endpointOption is the StartupMessage options entry that names a
// database when the client sends no SNI (as Neon's proxy takes it):
// options=endpoint%3D<id> in a connection URI.
const endpointOption = "endpoint="

// validID is what a database id looks like: one DNS label.
var validID = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// idFromSNI returns the database id an SNI name gives: the first label of
// <id>.<domain>. Any other name (another domain, deeper names, no name)
// gives "".
func idFromSNI(sni, domain string) string {
	sni = strings.ToLower(strings.TrimSuffix(sni, "."))
	label, ok := strings.CutSuffix(sni, "."+domain)
	if !ok || !validID.MatchString(label) {
		return ""
	}
	return label
}

// idFromOptions takes an endpoint=<id> entry out of a StartupMessage's
// options (command-line style, entries separated by spaces) and returns
// the id and the options without it, for the server behind to parse.
func idFromOptions(options string) (id, rest string, err error) {
	var kept []string
	for _, f := range strings.Fields(options) {
		v, ok := strings.CutPrefix(f, endpointOption)
		if !ok {
			kept = append(kept, f)
			continue
		}
		if id != "" {
			return "", "", fmt.Errorf("options name the endpoint twice")
		}
		if v = strings.ToLower(v); !validID.MatchString(v) {
			return "", "", fmt.Errorf("options name the endpoint %q, which is not a database id", v)
		}
		id = v
	}
	return id, strings.Join(kept, " "), nil
}

// resolve picks the database a connection names: the SNI name first,
// else options' endpoint=<id>; both naming different ones is an error. It
// returns the StartupMessage to send on (without the endpoint entry).
func resolve(sni, domain string, st startup) (string, startup, error) {
	fromSNI := idFromSNI(sni, domain)
	fromOpts, rest, err := idFromOptions(st.values["options"])
	if err != nil {
		return "", st, err
	}
	if fromOpts != "" {
		st.set("options", rest)
	}
	switch {
	case fromSNI != "" && fromOpts != "" && fromSNI != fromOpts:
		return "", st, fmt.Errorf("the host name names database %s but options name %s", fromSNI, fromOpts)
	case fromSNI != "":
		return fromSNI, st, nil
	case fromOpts != "":
		return fromOpts, st, nil
	}
	return "", st, fmt.Errorf("no database named: connect to <id>.%s with sslmode=require (TLS SNI), or add options=endpoint%%3D<id> to the connection string", domain)
}
