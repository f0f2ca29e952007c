package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"fencegate/api"
	"fencegate/api/client"
)

// WithLock holds a lock for the length of a function and hands it the
// lock's fencing token, to send with every write the lock protects.
// (exampleURL is a gateway started for the examples; use your own, such
// as http://127.0.0.1:8080 for `make run`.)
func ExampleClient_WithLock() {
	c := &client.Client{BaseURL: exampleURL, SessionTTL: 10 * time.Second}
	err := c.WithLock(context.Background(), "nightly-report", func(ctx context.Context, token api.Token) error {
		// ctx is cancelled if the session behind the lock is lost.
		res, err := c.PutObject(ctx, exampleBucket, "nightly/report.csv", token, strings.NewReader("a,b\n1,2\n"))
		if err != nil {
			return err
		}
		fmt.Println("written with the lock's token:", res.Token == token)
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: written with the lock's token: true
}

// A writer whose token is older than one already accepted for the object
// is refused: errors.Is(err, api.ErrStaleToken), and *api.StaleTokenError
// says which token won.
func ExampleClient_PutObject_stale() {
	c := &client.Client{BaseURL: exampleURL}
	ctx := context.Background()
	if _, err := c.PutObject(ctx, exampleBucket, "stale/greeting", 34, strings.NewReader("from 34")); err != nil {
		fmt.Println(err)
		return
	}
	_, err := c.PutObject(ctx, exampleBucket, "stale/greeting", 33, strings.NewReader("from 33"))
	var stale *api.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Println("stale:", errors.Is(err, api.ErrStaleToken), "token", stale.Token, "lost to", stale.HighWaterMark)
	}

	obj, err := c.GetObject(ctx, exampleBucket, "stale/greeting")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer obj.Body.Close()
	body, _ := io.ReadAll(obj.Body)
	fmt.Printf("%s (token %d)\n", body, obj.Token)
	// Output:
	// stale: true token 33 lost to 34
	// from 34 (token 34)
}

// A session kept alive in the background can hold locks explicitly. Locks
// are served in the order they were asked for; TryLock does not wait.
func ExampleSession_Lock() {
	c := &client.Client{BaseURL: exampleURL}
	ctx := context.Background()
	first, err := c.NewSession(ctx, 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer first.Close(ctx)
	second, err := c.NewSession(ctx, 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer second.Close(ctx)

	held, err := first.Lock(ctx, "compaction")
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = second.TryLock(ctx, "compaction")
	fmt.Println("second waits:", errors.Is(err, api.ErrLockTimeout))

	if err := held.Unlock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	next, err := second.Lock(ctx, "compaction")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("next token is larger:", next.Token > held.Token)
	// Output:
	// second waits: true
	// next token is larger: true
}

// CallPartner sends a fenced call through a partner route of the gateway,
// with one idempotency key for all its attempts, so that the partner sees
// the call at most once. (No partner route is configured for the
// examples, so this one is compiled, not run.)
func ExampleClient_CallPartner() {
	c := &client.Client{BaseURL: "http://127.0.0.1:8080"}
	resp, err := c.CallPartner(context.Background(), "payments", client.PartnerRequest{
		Method:   http.MethodPost,
		Path:     "accounts/a1/charges",
		Token:    34,
		Resource: "partner/payments/a1",
		Header:   http.Header{"Content-Type": {"application/json"}},
		Body:     []byte(`{"amount": 500}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.Status)
}

// Above Client.TicketThreshold, PutObject sends the bytes straight to the
// store on a ticket: the gateway fences the write and signs it, and its
// own bandwidth is spared.
func ExampleClient_PutObject_ticket() {
	c := &client.Client{BaseURL: exampleURL, TicketThreshold: 1 << 10}
	big := strings.Repeat("row\n", 1<<10) // 4 KiB, over the threshold
	res, err := c.PutObject(context.Background(), exampleBucket, "ticket/rows.txt", 8, strings.NewReader(big))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("written on a ticket with token", res.Token, "created:", res.Created)
	// Output: written on a ticket with token 8 created: true
}

// A multipart ticket's parts go straight to the store, each on its own
// ticket, and the upload is completed through the gateway, whose fence
// check refuses it (api.ErrStaleToken) once a newer holder has come.
// Client.TicketPartSize makes PutObjectOnTicket do all of this.
func ExampleClient_CompleteUpload() {
	ctx := context.Background()
	c := &client.Client{BaseURL: exampleURL}
	data := bytes.Repeat([]byte("row\n"), (api.MinPartSize+1024)/4) // two parts
	t, err := c.MultipartTicket(ctx, exampleBucket, "ticket/parts.txt", 9, int64(len(data)), api.MinPartSize)
	if err != nil {
		fmt.Println(err)
		return
	}
	var parts []api.CompletedPart
	for i, pt := range t.Parts {
		chunk := data[i*api.MinPartSize : min((i+1)*api.MinPartSize, len(data))]
		req, err := http.NewRequestWithContext(ctx, pt.Method, pt.URL, bytes.NewReader(chunk))
		if err != nil {
			fmt.Println(err)
			return
		}
		for name, value := range pt.Headers {
			if name != "Content-Length" { // net/http sends the body's
				req.Header.Set(name, value)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		parts = append(parts, api.CompletedPart{Number: int32(i + 1), ETag: resp.Header.Get("ETag")})
	}
	res, err := c.CompleteUpload(ctx, exampleBucket, "ticket/parts.txt", 9, t.UploadID, parts)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(parts), "parts completed with token", res.Token, "created:", res.Created)
	// Output: 2 parts completed with token 9 created: true
}

// A multipart ticket's part tickets expire together, soon; its creator
// asks for fresh ones of the parts it is about to send, as
// PutObjectOnTicket does on its own.
func ExampleClient_PartTickets() {
	ctx := context.Background()
	c := &client.Client{BaseURL: exampleURL}
	size := int64(3 * api.MinPartSize) // three parts
	t, err := c.MultipartTicket(ctx, exampleBucket, "ticket/renewed.bin", 9, size, api.MinPartSize)
	if err != nil {
		fmt.Println(err)
		return
	}
	// ... part 1 sent on t.Parts[0]; the others' tickets expired meanwhile.
	fresh, err := c.PartTickets(ctx, exampleBucket, "ticket/renewed.bin", 9, t.UploadID, 2, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(fresh.Parts), "fresh tickets from part", fresh.FirstPart, "of the same upload:", fresh.UploadID == t.UploadID)
	if err := c.AbortUpload(ctx, exampleBucket, "ticket/renewed.bin", 9, t.UploadID); err != nil {
		fmt.Println(err)
	}
	// Output: 2 fresh tickets from part 2 of the same upload: true
}
