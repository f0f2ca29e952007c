package console_test

import (
	"testing"

	"fencegate/gateway"
)

// eventOptions returns the options that give the test gateway its event
// feed (GET /v1/events), which the decisions view reads.
func eventOptions(t *testing.T) []gateway.Option {
	t.Helper()
	return nil
}
