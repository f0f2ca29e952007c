package api

// Fence is the answer of GET /v1/fences/{resource}: a resource's current
// high-water mark. A zero HighWaterMark means no token was ever accepted.
type Fence struct {
	Resource      Resource `json:"resource"`
	HighWaterMark Token    `json:"high_water_mark"`
}
