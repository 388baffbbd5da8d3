package httpgw

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/omnibusmq/omnibus/httpgw/internal/atom"
)

// Shared plumbing of the management (ATOM) handlers: request bodies,
// entry and feed responses, URLs and paging.

// maxManagementBody bounds create/update request bodies: the largest
// description (a rule with a 1,024-character SQL filter and action,
// correlation properties, user metadata) is a few KiB.
const maxManagementBody = 64 << 10

// defaultAPIVersion is written into entry ids when the request names none.
const defaultAPIVersion = "2021-05"

// readDescription decodes a create/update body into an ATOM description.
func (g *Gateway) readDescription(w http.ResponseWriter, r *http.Request) (any, bool) {
	body, _, err := readBody(r, maxManagementBody, nil) // 64 KiB: not budgeted
	if errors.Is(err, errBodyTooLarge) {
		g.badRequest(w, r, "The request body is larger than %d bytes, the limit of a management request", maxManagementBody)
		return nil, false
	}
	if err != nil {
		g.badRequest(w, r, "Reading the request body failed: %v", err)
		return nil, false
	}
	desc, err := atom.DecodeEntry(bytes.NewReader(body))
	if err != nil {
		g.badRequest(w, r, "The request body is not a valid ATOM entry: %v", err)
		return nil, false
	}
	return desc, true
}

// isUpdate reports whether a PUT updates (If-Match present, normally "*")
// rather than creates (rest.md §4.1).
func isUpdate(r *http.Request) bool { return r.Header.Get("If-Match") != "" }

// createdOrOK is 201 for a create and 200 for an update (amqp.md §9.3).
func createdOrOK(r *http.Request) int {
	if isUpdate(r) {
		return http.StatusOK
	}
	return http.StatusCreated
}

// entityURL is the absolute URL of a management path, with the request's
// api-version, as entry ids and links carry it.
func entityURL(r *http.Request, path string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	v := r.URL.Query().Get("api-version")
	if v == "" {
		v = defaultAPIVersion
	}
	u := url.URL{Scheme: scheme, Host: r.Host, Path: "/" + strings.Trim(path, "/"), RawQuery: "api-version=" + url.QueryEscape(v)}
	return u.String()
}

// writeEntry answers with one entry document.
func (g *Gateway) writeEntry(w http.ResponseWriter, r *http.Request, status int, e atom.Entry) {
	var buf bytes.Buffer
	if err := atom.EncodeEntry(&buf, e); err != nil {
		g.writeError(w, r, http.StatusInternalServerError, "SubCode=50000. Encoding the entry failed: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", atom.ContentTypeEntry)
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// writeFeed answers with a feed document.
func (g *Gateway) writeFeed(w http.ResponseWriter, r *http.Request, f atom.Feed) {
	var buf bytes.Buffer
	if err := atom.EncodeFeed(&buf, f); err != nil {
		g.writeError(w, r, http.StatusInternalServerError, "SubCode=50000. Encoding the feed failed: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", atom.ContentTypeFeed)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// writeNotFoundFeed answers a GET of an unoccupied top-level path with the
// empty "Publicly Listed Services" feed and status 200 (rest.md §0.3),
// which the Go and .NET clients turn into "not found".
func (g *Gateway) writeNotFoundFeed(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	_ = atom.EncodeNotFoundFeed(&buf, "uuid:"+newMessageID()+";id=1", g.now())
	w.Header().Set("Content-Type", atom.ContentTypeFeed)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// now is the broker's time.
func (g *Gateway) now() time.Time { return time.Unix(0, g.reg.Default().Broker().Now()).UTC() }

// page is a $skip/$top window over a listing.
type page struct{ skip, top int }

// maxPageSize caps $top, as the service does (legacy Java validates
// 1–100; .NET pages with 100).
const maxPageSize = 100

// readPage reads $skip and $top (Go sends them escaped as %24skip, which
// url.Query decodes).
func readPage(q url.Values) (page, error) {
	p := page{top: maxPageSize}
	if s := q.Get("$skip"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return p, &paramError{"$skip", s, "a non-negative integer"}
		}
		p.skip = n
	}
	if s := q.Get("$top"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return p, &paramError{"$top", s, "a positive integer"}
		}
		p.top = min(n, maxPageSize)
	}
	return p, nil
}

// window returns the bounds [lo, hi) of the page within n items and
// whether more follow.
func (p page) window(n int) (lo, hi int, more bool) {
	lo = min(p.skip, n)
	hi = min(lo+p.top, n)
	return lo, hi, hi < n
}

// nextURL is the rel="next" link of a paged feed (the JS client pages
// only with it).
func nextURL(r *http.Request, path string, p page, hi int) string {
	u := entityURL(r, path)
	return u + "&%24skip=" + strconv.Itoa(hi) + "&%24top=" + strconv.Itoa(p.top)
}
