package files

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// UploadWatcher is file storage whose uploads complete without an
// object-created notification: the local platform over an external S3
// (S3_ENDPOINT: MinIO, moto), which calls no hook of this process. Each
// upload URL it presigns is watched — one HEAD every Interval until the
// object appears or the URL has expired — and the object, once there, is
// completed like an S3 event would (Complete, i.e. Completer.ObjectCreated).
// getFile completes a pending upload as well (httpapi's CompleteOnRead):
// that covers uploads outliving their watch (a restart, a long PUT).
type UploadWatcher struct {
	platform.FileStorage
	Complete func(ctx context.Context, key string) error
	Interval time.Duration // default 500 ms
	// MaxWatched bounds the uploads watched at once (default 256); past
	// it, uploads complete on getFile only.
	MaxWatched int
	Log        *slog.Logger

	once    sync.Once
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	watched int
}

func (w *UploadWatcher) init() {
	w.once.Do(func() {
		w.ctx, w.cancel = context.WithCancel(context.Background())
		if w.Interval <= 0 {
			w.Interval = 500 * time.Millisecond
		}
		if w.MaxWatched <= 0 {
			w.MaxWatched = 256
		}
		if w.Log == nil {
			w.Log = slog.Default()
		}
	})
}

// PresignPut presigns the upload and starts watching its object.
func (w *UploadWatcher) PresignPut(ctx context.Context, key, contentType string, size int64, ttl time.Duration) (string, error) {
	w.init()
	u, err := w.FileStorage.PresignPut(ctx, key, contentType, size, ttl)
	if err != nil {
		return u, err
	}
	w.mu.Lock()
	start := w.ctx.Err() == nil && w.watched < w.MaxWatched
	if start {
		w.watched++
		w.wg.Add(1)
	}
	w.mu.Unlock()
	if start {
		// A PUT started just before the URL expires may end a little later.
		go w.watch(key, time.Now().Add(ttl+time.Minute))
	}
	return u, nil
}

func (w *UploadWatcher) watch(key string, until time.Time) {
	defer func() {
		w.mu.Lock()
		w.watched--
		w.mu.Unlock()
		w.wg.Done()
	}()
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	for time.Now().Before(until) {
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
		_, err := w.FileStorage.Head(w.ctx, key)
		if errors.Is(err, platform.ErrNoObject) {
			continue
		}
		if err != nil {
			w.Log.Warn("upload watch: HEAD failed", "key", key, "err", err)
			continue
		}
		if err := w.Complete(w.ctx, key); err != nil {
			w.Log.Warn("upload watch: completion failed (getFile retries it)", "key", key, "err", err)
		}
		return
	}
}

// Close stops watching and waits for the watches to end.
func (w *UploadWatcher) Close() error {
	w.init()
	w.mu.Lock() // no watch starts after this
	w.cancel()
	w.mu.Unlock()
	w.wg.Wait()
	return nil
}
