package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// uploadResult is the large upload through a fresh gateway process.
type uploadResult struct {
	Gateway      string  `json:"gateway"`
	Bytes        int64   `json:"bytes"`
	Status       int     `json:"status"`
	Seconds      float64 `json:"seconds"`
	MiBPerSecond float64 `json:"mib_per_second"`
	RSSBeforeMiB float64 `json:"rss_before_mib"`
	RSSPeakMiB   float64 `json:"rss_peak_mib"`
	RSSGrowthMiB float64 `json:"rss_growth_mib"`
	// Samples is how many times RSS was read during the upload, besides
	// the kernel's own peak (VmHWM).
	Samples int `json:"rss_samples"`
}

// upload sends n bytes from a generator through a fresh gateway process
// (so that no heap left by earlier cells hides its growth) and measures
// the growth of its resident set: the larger of the kernel's peak (VmHWM,
// reset just before) and the RSS sampled every 10 ms, minus the RSS after
// a small warm-up write.
func (b *bench) upload(ctx context.Context, name, bin string, n int64) (uploadResult, error) {
	return b.uploadOn(ctx, b.st, name, bin, n)
}

// uploadOn is upload through a gateway in front of st's S3 server.
func (b *bench) uploadOn(ctx context.Context, st *stack, name, bin string, n int64) (uploadResult, error) {
	g, err := startMeasuredGateway(ctx, st, "upload-"+name, bin, st.s3Endpoint, b.cfg.gatewayLogLevel)
	if err != nil {
		return uploadResult{}, err
	}
	defer g.stop()
	client := &http.Client{Transport: &http.Transport{Proxy: nil, WriteBufferSize: 256 << 10}}
	defer client.CloseIdleConnections()
	url := g.url + "/v1/objects/" + st.bucket + "/" + b.runID + "/upload-" + name
	// Warm up the write path (etcd and S3 connections, the SDK) with a
	// small body, so that the baseline is a gateway that has served.
	if status, body, err := put(ctx, client, url+"-warm", benchToken.String(), strings.NewReader("warm"), 4); err != nil || status >= 300 {
		return uploadResult{}, fmt.Errorf("warm-up write: %d %s %v", status, body, err)
	}
	time.Sleep(200 * time.Millisecond)
	before, _, err := memoryKiB(g.pid)
	if err != nil {
		return uploadResult{}, err
	}
	if err := resetPeakRSS(g.pid); err != nil {
		return uploadResult{}, fmt.Errorf("reset peak RSS: %w", err)
	}
	res := uploadResult{Gateway: name, Bytes: n, RSSBeforeMiB: kibToMiB(before)}

	stop := make(chan struct{})
	var (
		wg      sync.WaitGroup
		sampled int64
	)
	wg.Go(func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if rss, _, err := memoryKiB(g.pid); err == nil {
				sampled = max(sampled, rss)
				res.Samples++
			}
		}
	})
	began := time.Now()
	status, body, err := put(ctx, client, url, benchToken.String(), newGenerator(n), n)
	elapsed := time.Since(began)
	close(stop)
	wg.Wait()
	if err != nil {
		return uploadResult{}, err
	}
	if status != http.StatusCreated && status != http.StatusOK {
		return uploadResult{}, &errStatus{status, string(body)}
	}
	_, peak, err := memoryKiB(g.pid)
	if err != nil {
		return uploadResult{}, err
	}
	peak = max(peak, sampled)
	res.Status = status
	res.Seconds = elapsed.Seconds()
	res.MiBPerSecond = float64(n) / (1 << 20) / elapsed.Seconds()
	res.RSSPeakMiB = kibToMiB(peak)
	res.RSSGrowthMiB = kibToMiB(peak - before)

	// Free the space: a fenced delete through the same gateway.
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
	req.Header.Set("X-Fence-Token", benchToken.String())
	if resp, err := client.Do(req); err == nil {
		_ = resp.Body.Close()
	}
	return res, nil
}

func kibToMiB(kib int64) float64 { return float64(kib) / 1024 }
