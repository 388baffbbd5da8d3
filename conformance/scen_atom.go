package conformance

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"time"
)

// ATOM management over plain HTTP: rest.md §0.3, §4.1.

// atomFeed is the part of an ATOM feed the scenarios read.
type atomFeed struct {
	XMLName xml.Name `xml:"http://www.w3.org/2005/Atom feed"`
	Title   string   `xml:"title"`
	Entries []struct {
		Title string `xml:"title"`
	} `xml:"entry"`
}

func (t *T) feed(resp *RESTResponse) atomFeed {
	var f atomFeed
	if err := xml.Unmarshal(resp.Body, &f); err != nil {
		t.Fatalf("%s is not an ATOM feed: %v (%s)", resp.Request.URL.Path, err, oneLine(string(resp.Body), 200))
	}
	return f
}

func init() {
	register(
		Scenario{Name: "atom-get-missing-empty-feed", Seed: "rest.md §0.3 GET of a missing queue answers 200 with the empty \"Publicly Listed Services\" feed", Protocol: REST, Run: func(t *T) {
			resp := t.REST(http.MethodGet, "cf-missing-"+suffix()+"?api-version=2021-05", nil, nil)
			t.expectStatus(resp, http.StatusOK, "GET of a missing queue")
			f := t.feed(resp)
			if f.Title != "Publicly Listed Services" || len(f.Entries) != 0 {
				t.Fatalf("feed title %q with %d entries, want the empty \"Publicly Listed Services\" feed", f.Title, len(f.Entries))
			}
		}},
		Scenario{Name: "atom-create-twice-409", Seed: "rest.md §4.1 creating an entity that exists answers 409 Conflict", Protocol: REST, Run: func(t *T) {
			if t.target.Predeclared {
				t.Skipf("needs runtime management")
			}
			name := "cf-atom-" + suffix()
			path := name + "?api-version=2021-05"
			t.expectStatus(t.REST(http.MethodPut, path, atomQueueEntry(), atomHeader()), http.StatusCreated, "first create")
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_, _ = t.target.admin.DeleteQueue(ctx, name, nil)
			})
			t.expectStatus(t.REST(http.MethodPut, path, atomQueueEntry(), atomHeader()), http.StatusConflict, "second create")
		}},
		Scenario{Name: "atom-list-queues", Seed: "rest.md §4.1 GET $Resources/Queues lists the namespace's queues as an ATOM feed", Protocol: REST, Run: func(t *T) {
			q := t.Queue("cf-basic")
			for skip := 0; ; skip += 100 {
				resp := t.REST(http.MethodGet, fmt.Sprintf("$Resources/Queues?api-version=2021-05&$skip=%d&$top=100", skip), nil, nil)
				t.expectStatus(resp, http.StatusOK, "list queues")
				f := t.feed(resp)
				for _, e := range f.Entries {
					if e.Title == q {
						return
					}
				}
				if len(f.Entries) < 100 {
					t.Fatalf("queue %s not in the $Resources/Queues feed", q)
				}
			}
		}},
	)
}
