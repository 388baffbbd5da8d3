package storagetest

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
)

var concurrencyTests = []test{
	{"ConcurrentApply", testConcurrentApply},
	{"BatchesAppearWhole", testBatchesAppearWhole},
	{"CloseDuringUse", testCloseDuringUse},
}

func testConcurrentApply(t *testing.T, s storage.Store) {
	const writers, batches = 16, 50
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range batches {
				b := &storage.Batch{Sync: true}
				k := fmt.Sprintf("w%02d/%03d/", w, i)
				b.Set([]byte(k+"msg"), []byte(k))
				b.Set([]byte(k+"idx"), []byte(k))
				if err := s.Apply(b); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Apply: %v", err)
	}
	n := 0
	err := s.Scan(nil, nil, func(k, v []byte) (bool, error) {
		n++
		if want := string(k[:len("w00/000/")]); string(v) != want {
			return false, fmt.Errorf("key %q holds %q, want %q", k, v, want)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := writers * batches * 2; n != want {
		t.Fatalf("store holds %d keys, want %d", n, want)
	}
}

func testBatchesAppearWhole(t *testing.T, s storage.Store) {
	// A writer rewrites ten keys per batch, each to the batch's
	// generation, and deletes and re-creates a prefix; readers scanning at
	// the same time must never see a mix of generations or a partial set.
	const keys, generations, readers = 10, 200, 2
	write := func(gen int) error {
		b := &storage.Batch{}
		b.DeletePrefix([]byte("atom/"))
		for i := range keys {
			b.Set(fmt.Appendf(nil, "atom/%d", i), strconv.AppendInt(nil, int64(gen), 10))
		}
		return s.Apply(b)
	}
	if err := write(0); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, readers+1)
	wg.Go(func() {
		defer close(done)
		for gen := 1; gen <= generations; gen++ {
			if err := write(gen); err != nil {
				errs <- err
				return
			}
		}
	})
	for range readers {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				var first string
				n := 0
				err := s.Scan([]byte("atom/"), nil, func(_, v []byte) (bool, error) {
					if n == 0 {
						first = string(v)
					} else if string(v) != first {
						return false, fmt.Errorf("scan saw generations %s and %s together", first, v)
					}
					n++
					return true, nil
				})
				if err == nil && n != keys {
					err = fmt.Errorf("scan saw %d keys, want %d", n, keys)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func testCloseDuringUse(t *testing.T, s storage.Store) {
	// Close may race with every other method: each must then either
	// succeed or return ErrClosed, never panic or fail otherwise.
	const workers = 4
	var started, wg sync.WaitGroup
	started.Add(workers)
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			once := false
			for i := 0; ; i++ {
				b := &storage.Batch{Sync: i%2 == 0}
				if i%3 == 0 {
					b.DeletePrefix(fmt.Appendf(nil, "w%d/", w))
				}
				b.Set(fmt.Appendf(nil, "w%d/%d", w, i), []byte("v"))
				err := s.Apply(b)
				if err == nil {
					_, err = s.Get(fmt.Appendf(nil, "w%d/%d", w, i))
				}
				if err == nil {
					err = s.Scan(fmt.Appendf(nil, "w%d/", w), nil, func(_, _ []byte) (bool, error) { return true, nil })
				}
				if !once {
					once = true
					started.Done()
				}
				if err != nil {
					if !errors.Is(err, storage.ErrClosed) {
						errs <- err
					}
					return
				}
			}
		})
	}
	started.Wait()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("method racing with Close: %v, want nil or ErrClosed", err)
	}
}
