package config

import (
	"slices"
	"strings"
	"testing"
)

// TestPartnerForwardHeadersConfig: forward_headers lists the routing
// headers a route forwards; a name the gateway would refuse is an error
// that names its line.
func TestPartnerForwardHeadersConfig(t *testing.T) {
	route := `partners:
  - name: pay
    upstream: https://api.example.com/v1
    methods: [POST]
    resource: accounts/{account}
    forward_headers: [%s]
`
	for _, tc := range []struct {
		list string
		want []string // the route's ForwardHeaders
		err  string   // the error; "" means valid
	}{
		{"X-Forwarded-For, X-Real-IP", []string{"X-Forwarded-For", "X-Real-IP"}, ""},
		{"", []string{}, ""},
		{"X-Forwarded-For, Authorization", nil, "f.yaml:6: partners[0].forward_headers[1]: Authorization is never forwarded"},
		{"X_Forwarded_For", nil, "f.yaml:6: partners[0].forward_headers[0]: X_Forwarded_For: a name with an underscore is never forwarded"},
		{"X-Debug", nil, "f.yaml:6: partners[0].forward_headers[0]: X-Debug is not stripped"},
	} {
		cfg, err := parseConfig("f.yaml", t.TempDir(), []byte(strings.Replace(route, "%s", tc.list, 1)), envMap(nil))
		switch {
		case tc.err != "":
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("forward_headers [%s]: %v; want an error starting %q", tc.list, err, tc.err)
			}
		case err != nil:
			t.Errorf("forward_headers [%s]: %v; want valid", tc.list, err)
		case len(cfg.partners) != 1 || !slices.Equal(cfg.partners[0].ForwardHeaders, tc.want):
			t.Errorf("forward_headers [%s]: routes %+v; want ForwardHeaders %q", tc.list, cfg.partners, tc.want)
		}
	}
}
