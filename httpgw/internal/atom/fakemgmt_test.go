package atom

import (
	"bytes"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// fakeMgmt is a minimal management endpoint built on this package, for
// driving real admin clients in tests. It stores what clients PUT, fills
// the read-only fields and serves entries, feeds and the not-found feed.
type fakeMgmt struct {
	base string // "https://host:port/"

	mu       sync.Mutex
	entities map[string]any    // lower-cased path → description
	names    map[string]string // lower-cased path → path as created
	bodies   map[string][]byte // lower-cased path → last PUT body
}

func newFakeMgmt() *fakeMgmt {
	return &fakeMgmt{entities: map[string]any{}, names: map[string]string{}, bodies: map[string][]byte{}}
}

// runtime counts the fake reports for every entity.
var fakeCounts = CountDetails{ActiveMessageCount: 5, DeadLetterMessageCount: 2, ScheduledMessageCount: 1, TransferMessageCount: 0, TransferDeadLetterMessageCount: 3}

func (f *fakeMgmt) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	path := strings.Trim(r.URL.Path, "/")
	key := strings.ToLower(path)
	switch r.Method {
	case http.MethodPut:
		body, _ := io.ReadAll(r.Body)
		f.bodies[key] = body
		d, err := DecodeEntry(bytes.NewReader(body))
		if err != nil {
			f.fail(w, http.StatusBadRequest, err.Error())
			return
		}
		if _, exists := f.entities[key]; exists && r.Header.Get("If-Match") == "" {
			f.fail(w, http.StatusConflict, "SubCode=40900. Conflict.")
			return
		}
		fillReadOnly(d)
		f.entities[key], f.names[key] = d, path
		w.Header().Set("Content-Type", ContentTypeEntry)
		w.WriteHeader(http.StatusCreated)
		_ = EncodeEntry(w, f.entry(key))
	case http.MethodDelete:
		if _, ok := f.entities[key]; !ok {
			f.fail(w, http.StatusNotFound, "not found")
			return
		}
		delete(f.entities, key)
	case http.MethodGet:
		f.get(w, r, key)
	default:
		f.fail(w, http.StatusMethodNotAllowed, "method")
	}
}

func (f *fakeMgmt) get(w http.ResponseWriter, r *http.Request, key string) {
	switch {
	case key == "$namespaceinfo":
		w.Header().Set("Content-Type", ContentTypeEntry)
		_ = EncodeEntry(w, Entry{ID: f.base + "$namespaceinfo", Title: "sbemulatorns", Updated: updated, Content: namespaceInfo()})
	case key == "$resources/queues" || key == "$resources/topics":
		want := "queue"
		if key == "$resources/topics" {
			want = "topic"
		}
		f.feed(w, r, key, func(k string, d any) bool { return kind(d) == want && !strings.Contains(k, "/") })
	case strings.HasSuffix(key, "/subscriptions") || strings.HasSuffix(key, "/rules"):
		prefix := key + "/"
		f.feed(w, r, key, func(k string, d any) bool {
			return strings.HasPrefix(k, prefix) && !strings.Contains(k[len(prefix):], "/")
		})
	case f.entities[key] != nil:
		w.Header().Set("Content-Type", ContentTypeEntry)
		_ = EncodeEntry(w, f.entry(key))
	case !strings.Contains(key, "/"):
		w.Header().Set("Content-Type", ContentTypeFeed)
		_ = EncodeNotFoundFeed(w, "", updated)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func (f *fakeMgmt) feed(w http.ResponseWriter, r *http.Request, key string, match func(string, any) bool) {
	var keys []string
	for k, d := range f.entities {
		if match(k, d) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	skip, _ := strconv.Atoi(r.URL.Query().Get("$skip"))
	top, err := strconv.Atoi(r.URL.Query().Get("$top"))
	if err != nil || top <= 0 {
		top = 100
	}
	keys = keys[min(skip, len(keys)):]
	keys = keys[:min(top, len(keys))]
	feed := Feed{ID: f.base + key, Title: "Feed", Updated: updated}
	for _, k := range keys {
		feed.Entries = append(feed.Entries, f.entry(k))
	}
	w.Header().Set("Content-Type", ContentTypeFeed)
	_ = EncodeFeed(w, feed)
}

func (f *fakeMgmt) entry(key string) Entry {
	path := f.names[key]
	return Entry{
		ID:        f.base + path + "?api-version=2021-05",
		Title:     path[strings.LastIndexByte(path, '/')+1:],
		Published: created,
		Updated:   updated,
		Author:    "sbemulatorns",
		Content:   f.entities[key],
	}
}

func (f *fakeMgmt) fail(w http.ResponseWriter, code int, detail string) {
	w.Header().Set("Content-Type", ContentTypeError)
	w.WriteHeader(code)
	_ = EncodeError(w, code, detail)
}

func kind(d any) string {
	switch d.(type) {
	case *QueueDescription:
		return "queue"
	case *TopicDescription:
		return "topic"
	case *SubscriptionDescription:
		return "subscription"
	default:
		return "rule"
	}
}

// fillReadOnly sets what a broker reports on top of what the client sent.
func fillReadOnly(d any) {
	switch d := d.(type) {
	case *QueueDescription:
		d.CreatedAt, d.UpdatedAt, d.AccessedAt = created, updated, time.Time{}
		d.SizeInBytes, d.MessageCount, d.CountDetails = 1234, 11, fakeCounts
	case *TopicDescription:
		d.CreatedAt, d.UpdatedAt, d.AccessedAt = created, updated, accessed
		d.SizeInBytes, d.SubscriptionCount, d.CountDetails = 99, 1, fakeCounts
		d.SqlFilterCount, d.CorrelationFilterCount = 4, 2
	case *SubscriptionDescription:
		d.CreatedAt, d.UpdatedAt, d.AccessedAt = created, updated, accessed
		d.MessageCount, d.CountDetails = 11, fakeCounts
		d.DefaultRuleDescription = nil
	case *RuleDescription:
		d.CreatedAt = created
	}
}
