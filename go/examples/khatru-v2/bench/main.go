// Command bench measures a khatru relay's CPU per REQ and the bytes on
// the socket for the same REQ over NIP-01 JSON and over nostrwire.v2
// (scripts/bench-khatru.sh runs it). The relay's CPU comes from
// /proc/PID/stat (user + system time of the whole process); bytes are
// what the client reads from the TCP socket (WebSocket framing included).
//
//	bench -relay ws://127.0.0.1:PORT -pid PID [-load events.jsonl] -sizes 1000,10000 -rounds 5 -reqs 40
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
)

// Filter is the benchmark's REQ, as in the project's other relay benchmarks.
var kinds = []int{1, 6, 7}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

type client struct {
	ws   *websocket.Conn
	read atomic.Int64
}

func dial(url string, v2 bool) (*client, error) {
	c := &client{}
	d := websocket.Dialer{
		ReadBufferSize: 64 << 10,
		NetDial: func(network, addr string) (net.Conn, error) {
			conn, err := net.Dial(network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{conn, &c.read}, nil
		},
	}
	if v2 {
		d.Subprotocols = []string{"nostrwire.v2"}
	}
	ws, resp, err := d.Dial(url, nil)
	if err != nil {
		return nil, err
	}
	c.ws = ws
	if got := resp.Header.Get("Sec-WebSocket-Protocol"); v2 != (got == "nostrwire.v2") {
		return nil, fmt.Errorf("negotiated %q", got)
	}
	if v2 {
		// The relay's set: fetched once, named with 0x08 (the client holds it).
		_, f, err := ws.ReadMessage()
		if err != nil || len(f) != 33 || f[0] != 0x07 {
			return nil, fmt.Errorf("first frame %x: %v", f, err)
		}
		httpURL := "http" + strings.TrimPrefix(url, "ws")
		res, err := http.Get(httpURL + "/dictionaries/" + hex.EncodeToString(f[1:]))
		if err != nil {
			return nil, err
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			return nil, fmt.Errorf("set: HTTP %d", res.StatusCode)
		}
		if err := ws.WriteMessage(websocket.BinaryMessage, append([]byte{0x08}, f[1:]...)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// req sends one REQ and reads to its EOSE, returning the events received.
func (c *client) req(sub string, limit int, v2 bool) (int, error) {
	return c.reqFilter(sub, map[string]any{"kinds": kinds, "limit": limit}, v2)
}

// window is a filter over the benchmark's kinds whose events no other
// window holds: [since, until] in created_at.
type window struct{ since, until int64 }

func (w window) filter(limit int) map[string]any {
	return map[string]any{"kinds": kinds, "since": w.since, "until": w.until, "limit": limit}
}

// windows cuts the relay's events of the benchmark's kinds, newest first,
// into disjoint windows of about size events each: count windows per size,
// in the order of sizes. It reads created_at over JSON, which builds no
// v2 record.
func windows(url string, sizes, counts []int) ([][]window, error) {
	c, err := dial(url, false)
	if err != nil {
		return nil, err
	}
	defer c.ws.Close()
	filter, _ := json.Marshal(map[string]any{"kinds": kinds, "limit": 1 << 30})
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(`["REQ","t",`+string(filter)+`]`)); err != nil {
		return nil, err
	}
	var ts []int64
	for {
		_, f, err := c.ws.ReadMessage()
		if err != nil {
			return nil, err
		}
		var msg []json.RawMessage
		if err := json.Unmarshal(f, &msg); err != nil || len(msg) < 2 {
			return nil, fmt.Errorf("unexpected message %.80s", f)
		}
		if string(msg[0]) != `"EVENT"` {
			break
		}
		var evt struct {
			CreatedAt int64 `json:"created_at"`
		}
		json.Unmarshal(msg[2], &evt)
		ts = append(ts, evt.CreatedAt)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] > ts[j] })
	out := make([][]window, len(sizes))
	pos := 0
	for si, size := range sizes {
		for k := 0; k < counts[si]; k++ {
			end := pos + size - 1
			if end >= len(ts) {
				return nil, fmt.Errorf("%d events of kinds %v: too few for %d windows of %d", len(ts), kinds, counts[si], size)
			}
			out[si] = append(out[si], window{since: ts[end], until: ts[pos]})
			for pos <= end || (pos < len(ts) && ts[pos] == ts[end]) {
				pos++
			}
		}
	}
	return out, nil
}

func (c *client) reqFilter(sub string, f map[string]any, v2 bool) (int, error) {
	filter, _ := json.Marshal(f)
	msg := []byte(`["REQ","` + sub + `",` + string(filter) + `]`)
	typ := websocket.TextMessage
	if v2 {
		msg = append([]byte{0x00}, msg...)
		typ = websocket.BinaryMessage
	}
	if err := c.ws.WriteMessage(typ, msg); err != nil {
		return 0, err
	}
	events := 0
	eoseJSON := `["EOSE","` + sub + `"]`
	for {
		_, f, err := c.ws.ReadMessage()
		if err != nil {
			return events, err
		}
		if v2 {
			switch f[0] {
			case 0x06:
				n := int(f[1])
				count, _ := binary.Uvarint(f[2+n:])
				events += int(count)
			case 0x05:
				if string(f[1:]) == sub {
					return events, nil
				}
			default:
				return events, fmt.Errorf("unexpected frame %x", f[:min(len(f), 40)])
			}
			continue
		}
		if strings.HasPrefix(string(f), `["EVENT"`) {
			events++
		} else if strings.TrimSpace(string(f)) == eoseJSON {
			return events, nil
		} else {
			return events, fmt.Errorf("unexpected message %.80s", f)
		}
	}
}

// cpuTicks is the relay process's user + system time, in clock ticks.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which is in parentheses).
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return utime + stime, nil
}

const ticksPerSecond = 100 // USER_HZ on Linux

// load publishes every event of a JSON Lines file over JSON, 256 in flight.
func load(url, path string) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		return err
	}
	defer ws.Close()
	sent := make(chan struct{}, 256)
	done := make(chan error, 1)
	total := 0
	var refused atomic.Int64
	go func() {
		for {
			_, m, err := ws.ReadMessage()
			if err != nil {
				done <- err
				return
			}
			if strings.HasPrefix(string(m), `["OK"`) {
				if !strings.Contains(string(m), `,true,`) {
					if refused.Add(1) <= 3 {
						fmt.Fprintf(os.Stderr, "refused: %.300s\n", m)
					}
				}
				<-sent
			}
		}
	}()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		sent <- struct{}{}
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`["EVENT",`+string(line)+`]`)); err != nil {
			return err
		}
		total++
	}
	for len(sent) > 0 {
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
	fmt.Fprintf(os.Stderr, "published %d events, %d refused\n", total, refused.Load())
	return sc.Err()
}

type cell struct {
	Transport   string  `json:"transport"`
	Size        int     `json:"size"`
	Round       int     `json:"round"`
	Reqs        int     `json:"reqs"`
	Events      int     `json:"events_per_req"`
	BytesPerReq float64 `json:"socket_bytes_per_req"`
	CPUPerReqMs float64 `json:"relay_cpu_ms_per_req"`
	WallPerReq  float64 `json:"wall_ms_per_req"`
}

func main() {
	url := flag.String("relay", "", "relay WebSocket URL")
	pid := flag.Int("pid", 0, "relay process id (for /proc)")
	loadPath := flag.String("load", "", "JSON Lines to publish first")
	sizes := flag.String("sizes", "1000,10000", "REQ limits")
	rounds := flag.Int("rounds", 5, "interleaved rounds")
	reqs := flag.String("reqs", "100,20", "REQs per cell, per size")
	only := flag.String("only", "json,v2", "transports")
	cold := flag.Bool("cold", false, "each REQ a distinct window of events, served by no REQ before (one round: run it on a fresh relay)")
	flag.Parse()
	if *loadPath != "" {
		if err := load(*url, *loadPath); err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
			os.Exit(1)
		}
		if *sizes == "" {
			return
		}
	}
	var sizeList, reqList []int
	for _, s := range strings.Split(*sizes, ",") {
		n, _ := strconv.Atoi(s)
		sizeList = append(sizeList, n)
	}
	for _, s := range strings.Split(*reqs, ",") {
		n, _ := strconv.Atoi(s)
		reqList = append(reqList, n)
	}
	transports := strings.Split(*only, ",")
	var wins [][]window
	if *cold {
		counts := make([]int, len(sizeList))
		for si := range sizeList {
			counts[si] = reqList[min(si, len(reqList)-1)]
		}
		var err error
		if wins, err = windows(*url, sizeList, counts); err != nil {
			fmt.Fprintln(os.Stderr, "windows:", err)
			os.Exit(1)
		}
	}
	enc := json.NewEncoder(os.Stdout)
	for round := 1; round <= *rounds; round++ {
		for si, size := range sizeList {
			for _, tr := range transports {
				v2 := tr != "json"
				c, err := dial(*url, v2)
				if err != nil {
					fmt.Fprintln(os.Stderr, tr, err)
					os.Exit(1)
				}
				// One REQ untimed, so both transports start warm (when cold, one
				// for no event, so that none of the measured ones is served).
				warm := map[string]any{"kinds": kinds, "limit": size}
				if *cold {
					warm["limit"] = 0
				}
				if _, err := c.reqFilter("warm", warm, v2); err != nil {
					fmt.Fprintln(os.Stderr, tr, err)
					os.Exit(1)
				}
				n := reqList[min(si, len(reqList)-1)]
				before, _ := cpuTicks(*pid)
				bytesBefore := c.read.Load()
				start := time.Now()
				events := 0
				for i := 0; i < n; i++ {
					f := map[string]any{"kinds": kinds, "limit": size}
					if *cold {
						f = wins[si][i].filter(size)
					}
					got, err := c.reqFilter("s"+strconv.Itoa(i), f, v2)
					if err != nil {
						fmt.Fprintln(os.Stderr, tr, err)
						os.Exit(1)
					}
					events = got
				}
				wall := time.Since(start)
				after, _ := cpuTicks(*pid)
				bytes := c.read.Load() - bytesBefore
				c.ws.Close()
				x := cell{Transport: tr, Size: size, Round: round, Reqs: n, Events: events,
					BytesPerReq: float64(bytes) / float64(n),
					CPUPerReqMs: float64(after-before) * 1000 / ticksPerSecond / float64(n),
					WallPerReq:  float64(wall.Microseconds()) / 1000 / float64(n)}
				enc.Encode(x)
				fmt.Fprintf(os.Stderr, "round %d size %d %-4s %5d events %9.0f B/REQ %7.2f ms CPU/REQ %7.2f ms wall/REQ\n",
					round, size, tr, events, x.BytesPerReq, x.CPUPerReqMs, x.WallPerReq)
			}
		}
	}
}
