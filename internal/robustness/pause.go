package robustness

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"fencegate/api"
)

// PauseController is the other end of a gateway's pause-after-fence test
// hook (FENCEGATE_UNSAFE_TEST_HOOKS=pause-after-fence=ADDR): after each
// accepted fence check the gateway tells it the resource and token, and
// waits for its answer. Unarmed, it answers at once. Armed, it holds the
// next write: it calls OnHold, which returns when the write may go on
// (bounded by the controller's MaxHold), then answers.
type PauseController struct {
	ln      net.Listener
	armed   atomic.Int32
	maxHold time.Duration
	wg      sync.WaitGroup

	mu     sync.Mutex
	onHold func(resource api.Resource, token api.Token, release <-chan struct{})
	// byResource holds the next write to each of its resources, whatever
	// Arm says (ArmResource).
	byResource map[api.Resource]func(resource api.Resource, token api.Token, release <-chan struct{})
	// release is closed by ReleaseAll, to end every hold at once.
	release chan struct{}
	held    int
}

// NewPauseController listens on a free port of 127.0.0.1.
func NewPauseController(maxHold time.Duration) (*PauseController, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &PauseController{ln: ln, maxHold: maxHold, release: make(chan struct{}),
		byResource: make(map[api.Resource]func(api.Resource, api.Token, <-chan struct{}))}
	c.wg.Add(1)
	go c.acceptLoop()
	return c, nil
}

// Addr is the controller's host:port, for the gateway's hook.
func (c *PauseController) Addr() string { return c.ln.Addr().String() }

// Arm makes the controller hold the next write that reaches it, calling
// onHold(resource, token, release) in the write's place: the write goes
// on when onHold returns, when release is closed, or after MaxHold.
func (c *PauseController) Arm(onHold func(resource api.Resource, token api.Token, release <-chan struct{})) {
	c.mu.Lock()
	c.onHold = onHold
	c.mu.Unlock()
	c.armed.Store(1)
}

// ArmResource makes the controller hold the next write to resource, as
// Arm does for the next write to any resource. It is independent of Arm:
// a write to resource is held by ArmResource's onHold, and does not use up
// Arm's.
func (c *PauseController) ArmResource(resource api.Resource, onHold func(resource api.Resource, token api.Token, release <-chan struct{})) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byResource[resource] = onHold
}

// DisarmResource undoes ArmResource if no write to resource was held yet.
func (c *PauseController) DisarmResource(resource api.Resource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byResource, resource)
}

// ReleaseAll disarms the controller and lets every held write go on.
func (c *PauseController) ReleaseAll() {
	c.armed.Store(0)
	c.mu.Lock()
	clear(c.byResource)
	close(c.release)
	c.release = make(chan struct{})
	c.mu.Unlock()
}

// Held returns how many writes the controller has held.
func (c *PauseController) Held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}

// Close stops the controller; held writes go on.
func (c *PauseController) Close() {
	_ = c.ln.Close()
	c.ReleaseAll()
	c.wg.Wait()
}

func (c *PauseController) acceptLoop() {
	defer c.wg.Done()
	for {
		conn, err := c.ln.Accept()
		if err != nil {
			return
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer conn.Close()
			c.serve(conn)
		}()
	}
}

// serve reads "after-fence TOKEN RESOURCE\n" and answers "go\n" when the
// write may go on.
func (c *PauseController) serve(conn net.Conn) {
	_ = conn.SetDeadline(time.Now().Add(c.maxHold + 5*time.Second))
	line, err := bufio.NewReader(io.LimitReader(conn, 4096)).ReadString('\n')
	if err != nil {
		return
	}
	resource, token, ok := parseAfterFence(line)
	c.mu.Lock()
	onHold, byResource := c.byResource[resource]
	if byResource {
		delete(c.byResource, resource)
	}
	c.mu.Unlock()
	if ok && (byResource || c.armed.CompareAndSwap(1, 0)) {
		c.mu.Lock()
		if !byResource {
			onHold = c.onHold
		}
		release := c.release
		c.held++
		c.mu.Unlock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			if onHold != nil {
				onHold(resource, token, release)
			}
		}()
		timer := time.NewTimer(c.maxHold)
		select {
		case <-done:
		case <-release:
		case <-timer.C:
		}
		timer.Stop()
	}
	_, _ = conn.Write([]byte("go\n"))
}

// parseAfterFence reads the hook's line.
func parseAfterFence(line string) (api.Resource, api.Token, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "after-fence ")
	if !ok {
		return "", 0, false
	}
	tokenText, resource, ok := strings.Cut(rest, " ")
	if !ok || resource == "" {
		return "", 0, false
	}
	n, err := strconv.ParseUint(tokenText, 10, 63)
	if err != nil || n == 0 {
		return "", 0, false
	}
	return api.Resource(resource), api.Token(n), true
}
