package gateway_test

import (
	"bytes"
	"net/http"
	"testing"

	"fencegate/api"
	"fencegate/gateway"
)

// TestRESTIgnoresClientConditions: the REST API's PUT does not evaluate a
// client's If-Match or If-None-Match (the token is the precondition, as
// api/openapi.yaml says); only the S3 door honours them. A condition that
// would fail on S3 still writes here.
func TestRESTIgnoresClientConditions(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	if r := e.put(t, "k", 5, "v5"); r.status != http.StatusCreated {
		t.Fatalf("seed: %s", r)
	}
	for i, header := range []map[string]string{
		{"If-None-Match": "*"},
		{"If-Match": `"not-the-etag"`},
		{"If-Match": "unquoted"},
	} {
		token := api.Token(6 + i)
		req, err := http.NewRequest(http.MethodPut, e.objectURL("k"), bytes.NewReader([]byte("v"+token.String())))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(api.HeaderFenceToken, token.String())
		for name, value := range header {
			req.Header.Set(name, value)
		}
		if r := send(t, req); r.status != http.StatusOK {
			t.Fatalf("PUT with %v = %s; want 200 (conditions not evaluated)", header, r)
		}
		if body, stored, _ := e.stored(t, "k"); body != "v"+token.String() || stored != token.String() {
			t.Fatalf("after PUT with %v S3 holds %q with token %q; want token %d's", header, body, stored, token)
		}
	}
}
