package main

import (
	"runtime/debug"
	"testing"
)

func TestSetGCPercent(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	tests := []struct {
		name string
		env  map[string]string
		set  bool
		want int
	}{
		{"GOGC unset", nil, true, gcPercent},
		{"GOGC set", map[string]string{"GOGC": "50"}, false, 100},
		{"GOGC=off", map[string]string{"GOGC": "off"}, false, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			set := setGCPercent(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if got := debug.SetGCPercent(100); set != tt.set || got != tt.want {
				t.Errorf("setGCPercent = %v, GC percent %d; want %v, %d", set, got, tt.set, tt.want)
			}
		})
	}
}
