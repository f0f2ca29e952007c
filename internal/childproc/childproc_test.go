package childproc

import (
	"errors"
	"testing"
)

// TestOnFreePort: a start that fails because its port was taken is tried
// again on a new port, up to the attempts; any other failure ends it at
// once.
func TestOnFreePort(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failures  []error // what the first starts answer; then success
		attempts  int
		wantCalls int
		wantErr   bool
	}{
		{"first start", nil, 3, 1, false},
		{"port taken once", []error{errors.New("bind: address already in use")}, 3, 2, false},
		{"port taken every time", []error{errors.New("already in use"), errors.New("already in use"), errors.New("already in use")}, 3, 3, true},
		{"other failure", []error{errors.New("no such file")}, 3, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			ports := map[int]bool{}
			got, err := OnFreePort(tc.attempts, []string{"already in use"}, func(port int) (int, error) {
				calls++
				ports[port] = true
				if calls <= len(tc.failures) {
					return 0, tc.failures[calls-1]
				}
				return port, nil
			})
			if calls != tc.wantCalls || (err != nil) != tc.wantErr {
				t.Fatalf("%d calls, err %v; want %d calls, error %v", calls, err, tc.wantCalls, tc.wantErr)
			}
			if err == nil && (got == 0 || !ports[got]) {
				t.Fatalf("answer %d; want the port of the start that succeeded", got)
			}
		})
	}
}
