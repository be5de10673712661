package nwb

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"testing"
)

// One Decompressor shared by many goroutines (as the client's verifier
// shares one per relay) gives every goroutine the records it would get
// alone. go/ci.sh runs this test under the race detector too: klauspost's
// decoder shares a dictionary's tables between concurrent DecodeAll calls.
func TestDecompressorSharedByGoroutines(t *testing.T) {
	set := loadSet(t)
	stream, err := os.ReadFile("testdata/rust-stored.nwb")
	if err != nil {
		t.Fatal(err)
	}
	stored := readStream(t, stream)
	d, err := NewDecompressor(DefaultLimits, set)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	want := make([][]byte, len(stored))
	for i, s := range stored {
		if want[i], err = d.Record(s, nil); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	const goroutines, rounds = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			var buf []byte
			for r := 0; r < rounds; r++ {
				for k := range stored {
					i := (k + g*7 + r) % len(stored)
					rec, err := d.Record(stored[i], buf[:0])
					if err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(rec, want[i]) {
						errs <- fmt.Errorf("record %d decompressed differently", i)
						return
					}
					buf = rec
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
