package retention

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaultsAndValidation(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // empty: valid
	}{
		{"zero", Config{}, ""},
		{"eviction off", Config{Retention: -1}, ""},
		{"negative tombstone retention", Config{TombstoneRetention: -time.Second}, "tombstone retention"},
		{"tombstone retention below the minimum", Config{TombstoneRetention: MinTombstoneRetention - time.Second}, "tombstone retention 59m59s is below 1h0m0s"},
		{"tombstone retention at the minimum", Config{TombstoneRetention: MinTombstoneRetention}, ""},
		{"negative interval", Config{Interval: -time.Second}, "interval"},
		{"negative HEAD rate", Config{HeadsPerSecond: -1}, "HEAD rate"},
		{"negative page size", Config{PageSize: -1}, "page size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate(%+v) = %v; want error containing %q", tt.cfg, err, tt.wantErr)
			}
		})
	}
	c, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Retention != DefaultRetention || c.TombstoneRetention != 0 || c.Interval != DefaultInterval ||
		c.HeadsPerSecond != DefaultHeadsPerSecond || c.PageSize != DefaultPageSize {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestConfigETagCacheMaxAge(t *testing.T) {
	for _, tt := range []struct {
		retention, want time.Duration
	}{
		{0, 12 * time.Hour},
		{time.Hour, 30 * time.Minute},
		{-1, 0}, // eviction off: the gateway's default
		{1, 1},  // never zero while marks are evicted
	} {
		if got := (Config{Retention: tt.retention}).ETagCacheMaxAge(); got != tt.want {
			t.Errorf("Config{Retention: %v}.ETagCacheMaxAge() = %v; want %v", tt.retention, got, tt.want)
		}
	}
}
